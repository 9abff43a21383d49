"""`rtplan deploy`: the shipped agent played live at each FPS against its simulated-clock return."""

from rtplan.deploy._experiment import Experiment, fps_ladder
from rtplan.deploy._play import run, served_game
from rtplan.deploy._summary import censored_percentile, frame_rows, summarize

__all__ = [
    "Experiment",
    "censored_percentile",
    "fps_ladder",
    "frame_rows",
    "run",
    "served_game",
    "summarize",
]
