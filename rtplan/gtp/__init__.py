"""`rtplan gtp`: Speed Go's planner as a GTP v2 engine on stdin/stdout (Sabaki, GoGui, GNU Go)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from rtplan.games.go import vertex_name
from rtplan.gtp._engine import GtpEngine
from rtplan.gtp._game import GAME_ID, TimeChoice
from rtplan.gtp._gate import TIME_MANAGERS, GateManager
from rtplan.gtp._protocol import COMMANDS, GtpError, parse_colour, parse_vertex, score_text
from rtplan.gtp._time import (
    LAG_S,
    MAX_PLIES,
    MIN_MOVES_LEFT,
    SAFETY,
    Clock,
    TimeSettings,
    capped_budget,
    choose_budget,
    gate_initial_seconds,
    gate_seconds,
    ladder,
    move_allowance,
    to_ticks,
    told_clock,
)

__all__ = [
    "COMMANDS",
    "GAME_ID",
    "LAG_S",
    "MAX_PLIES",
    "MIN_MOVES_LEFT",
    "SAFETY",
    "TIME_MANAGERS",
    "Clock",
    "GateManager",
    "GtpEngine",
    "GtpError",
    "TimeChoice",
    "TimeSettings",
    "capped_budget",
    "choose_budget",
    "gate_initial_seconds",
    "gate_seconds",
    "ladder",
    "move_allowance",
    "parse_colour",
    "parse_vertex",
    "run",
    "score_text",
    "to_ticks",
    "told_clock",
    "vertex_name",
]


def run(
    planner_file: str | Path,
    *,
    seed: int = 0,
    resign_below: float | None = None,
    budget: int | None = None,
    time_manager: str = "proportional",
    clock_gate: str | Path | None = None,
    max_simulations: int | None = None,
) -> int:
    """Runs the engine on stdin/stdout; logs go to stderr (so does anything else printed).

    `budget`: play this option on every move (None: the time manager picks per move).
    `time_manager`: "proportional" or "gate" (the clock gate at `clock_gate`, default the one
    beside the planner: `harness.checkpoint.gate_file`).
    `max_simulations`: the anytime ladder's largest search (None: 16 times the planner's).
    """
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        engine = GtpEngine(
            planner_file,
            seed=seed,
            resign_below=resign_below,
            budget=budget,
            time_manager=time_manager,
            clock_gate=clock_gate,
            max_simulations=max_simulations,
            log=sys.stderr,
        )
        engine.start()  # compiles in the background: the first commands answer at once
        code = engine.serve(sys.stdin, out)
    if not engine.stop(timeout=10.0):
        # A compile still running on a background thread would abort the interpreter's exit.
        out.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
