"""`rtplan gtp`: Speed Go's planner as a GTP v2 engine on stdin/stdout (Sabaki, GoGui, GNU Go)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from games.go import vertex_name
from rtplan.gtp._engine import GtpEngine
from rtplan.gtp._game import GAME_ID
from rtplan.gtp._protocol import COMMANDS, GtpError, parse_colour, parse_vertex, score_text
from rtplan.gtp._time import (
    LAG_S,
    MAX_PLIES,
    MIN_MOVES_LEFT,
    SAFETY,
    Clock,
    TimeSettings,
    choose_budget,
    move_allowance,
)

__all__ = [
    "COMMANDS",
    "GAME_ID",
    "LAG_S",
    "MAX_PLIES",
    "MIN_MOVES_LEFT",
    "SAFETY",
    "Clock",
    "GtpEngine",
    "GtpError",
    "TimeSettings",
    "choose_budget",
    "move_allowance",
    "parse_colour",
    "parse_vertex",
    "run",
    "score_text",
    "vertex_name",
]


def run(
    planner_file: str | Path,
    *,
    seed: int = 0,
    resign_below: float | None = None,
    budget: int | None = None,
) -> int:
    """Runs the engine on stdin/stdout; logs go to stderr (so does anything else printed).

    `budget`: play this option on every move (None: the time manager picks per move).
    """
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        engine = GtpEngine(
            planner_file, seed=seed, resign_below=resign_below, budget=budget, log=sys.stderr
        )
        engine.warm_up()
        return engine.serve(sys.stdin, out)
