"""A service child at a lower priority (`Child(nice=...)`, the demo's planner service for the
games besides the showcase): niced before it imports anything, so every thread it starts is
too, and it runs its module with the arguments given."""

from __future__ import annotations

import os
import sys

import pytest

from rtplan.processes import Child

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's"
)

#: A module that starts a thread at import, as JAX and gRPC do, then reports both priorities.
PROBE = """
import os, sys, threading
seen = {}
def nice():
    seen["t"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
t = threading.Thread(target=nice)
t.start(); t.join()
print("probe", __name__, os.nice(0), seen["t"], " ".join(sys.argv[1:]), flush=True)
"""


def test_a_niced_child_runs_its_module_with_every_thread_at_that_priority(tmp_path):
    (tmp_path / "probe_nice.py").write_text(PROBE)
    argv = [sys.executable, "-m", "probe_nice", "--games", "a,b"]
    child = Child("probe", argv, echo=False, env={"PYTHONPATH": str(tmp_path)}, nice=19)
    try:
        line = child.wait_for("probe", timeout=60)
    finally:
        child.stop()
    start = os.nice(0)
    assert line == f"probe __main__ {max(start, 19)} {max(start, 19)} --games a,b"


def test_only_a_module_can_be_niced():
    with pytest.raises(ValueError, match="runs a module"):
        Child("x", [sys.executable, "script.py"], nice=19)
