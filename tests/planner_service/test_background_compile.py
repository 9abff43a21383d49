"""The games after a planner service's first compile behind it: the first one first, at full
priority; the others on threads of nice 19, after a child process at nice 19 (every thread of
it) has compiled them into the compile cache."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from rtplan.planner_service import Engine, PlannerServiceSettings
from rtplan.planner_service._cache_fill import FILLED, CacheFiller
from support import write_planner

SNAKE, HEX = "snake-rt-v0", "speed-hex-v0"
FAST = {"xla_backend_optimization_level": 0}

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's"
)


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def _one_budget(root: Path, *game_ids: str) -> Path:
    for game_id in game_ids:  # one executable per kind: the fewest compiles
        write_planner(root, game_id, budgets=(2,), simulations=(2,))
    return root


def test_the_first_game_compiles_first_and_the_others_behind_it_at_nice_19(tmp_path):
    root = _one_budget(tmp_path, SNAKE, HEX)
    engine = Engine.from_dir(root, game_ids=[HEX, SNAKE], compiler_options=FAST)
    events: list[tuple] = []
    on_start = lambda g, n: events.append(("start", g, n, _nice()))  # noqa: E731
    behind = lambda g: events.append(("behind", g, engine.ready_games, _nice()))  # noqa: E731
    on_ready = lambda g: events.append(("ready", g, engine.ready_games))  # noqa: E731
    # A thread of its own: `compile` lowers its caller's priority for the later games.
    kwargs = dict(on_start=on_start, behind=behind, on_ready=on_ready)
    compiling = threading.Thread(target=engine.compile, kwargs=kwargs)
    start = _nice()
    compiling.start()
    compiling.join(600)
    assert engine.ready
    assert events == [
        ("start", HEX, engine.executables(HEX), start),  # the showcase: full priority
        ("ready", HEX, (HEX,)),
        ("start", SNAKE, engine.executables(SNAKE), 19),
        ("behind", SNAKE, (HEX,), 19),  # asked only once the first game plans
        ("ready", SNAKE, (HEX, SNAKE)),
    ]
    assert _nice() == start  # the caller's thread kept its own
    assert engine.progress == (sum(map(engine.executables, (HEX, SNAKE))),) * 2


def _thread_nices(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # a thread that just ended
        found.append(int(stat[stat.rindex(")") + 2 :].split()[16]))  # field 19: nice
    return found


def test_the_cache_filler_compiles_in_a_child_whose_every_thread_is_at_nice_19(tmp_path):
    root = _one_budget(tmp_path, HEX)
    settings = PlannerServiceSettings(checkpoint_dir=root, port=50999)
    filler = CacheFiller(settings, [HEX], nice=19)
    try:
        seen: set[int] = set()
        deadline = time.monotonic() + 300
        while not any(FILLED in line for line in filler.child.lines):
            assert filler.child.running, filler.child.lines
            assert time.monotonic() < deadline, filler.child.lines
            nices = _thread_nices(filler.child.proc.pid)
            if len(nices) > 1:  # past the interpreter's start (one thread: the nice comes first)
                seen.update(nices)
            time.sleep(0.1)
        assert seen == {19}  # the threads JAX, XLA and gRPC start included
        assert filler.wait(HEX)
        # A game it does not compile: it ends without, and the service compiles it itself.
        assert not filler.wait(SNAKE)
        assert filler.child.proc.returncode == 0
    finally:
        filler.stop()
