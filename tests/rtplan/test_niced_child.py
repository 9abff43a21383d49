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


def test_the_niced_services_port_is_one_no_port_0_bind_can_be_given(monkeypatch, tmp_path):
    """The niced planner service's port is picked before it starts and bound only once it has
    imported everything; meanwhile the env server and the first planner service bind port 0.
    Picked below the kernel's ephemeral range, it is never one of theirs."""
    import random
    import socket

    from rtplan.processes import _services

    low, high = _services._ephemeral_range()
    ports = {_services._free_port(random.Random(seed)) for seed in range(20)}
    assert all(max(1024, low // 2) <= p < low for p in ports), ports
    for port in ports:  # each free when picked: bindable now (nothing here binds them)
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        assert low <= s.getsockname()[1] <= high
    # A kernel whose range is unreadable: Linux's default range is assumed.
    monkeypatch.setattr(_services, "_EPHEMERAL", tmp_path / "missing")
    assert _services._ephemeral_range() == (32768, 60999)
