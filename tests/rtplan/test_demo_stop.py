"""`rtplan demo --headless` leaves nothing behind: SIGTERM stops its services as Ctrl-C does, and
after SIGKILL its services notice their parent is gone and exit; either way no child process is
left and the ports are free."""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rtplan.processes import Child, stop_all, stop_on_signals
from support import free_port, write_planner

ROOT = Path(__file__).resolve().parents[2]
PROC = Path("/proc")

pytestmark = pytest.mark.skipif(not (PROC / "self" / "stat").exists(), reason="reads /proc")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process, None once it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return fields[0], int(fields[1]), int(fields[19])


def descendants(pid: int) -> dict[int, int]:
    """Every live descendant of `pid`: pid -> start time (which tells a reused pid apart)."""
    children: dict[int, list[int]] = {}
    starts = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            children.setdefault(st[1], []).append(int(entry.name))
            starts[int(entry.name)] = st[2]
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def alive(pid: int, start: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z" and st[2] == start  # a zombie has exited


def port_free(port: int) -> bool:
    """The port can be bound as a server binds it (SO_REUSEADDR: only a listener blocks it)."""
    try:
        socket.create_server(("127.0.0.1", port)).close()
    except OSError:
        return False
    return True


@pytest.fixture
def own_handlers():
    """Puts back this process's handlers and disarms faulthandler after a test that signals
    itself (`stop_on_signals` keeps its handlers, and its deadline armed, after a signal)."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {sig: signal.getsignal(sig) for sig in sigs}
    yield
    faulthandler.cancel_dump_traceback_later()
    for sig, handler in before.items():
        signal.signal(sig, handler)


def test_the_first_signal_interrupts_and_later_ones_only_hurry_the_clean_up(own_handlers):
    cleaned_up = False
    with stop_on_signals(deadline_s=300) as stopping:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs in this thread, before the sleep ends
        assert stopping.requested.is_set() and not stopping.hurry.is_set()
        # A second signal (a second Ctrl-C) in the clean-up raises nothing: it asks to hurry.
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        cleaned_up = True
    assert cleaned_up and stopping.hurry.is_set()
    # The process is on its way out: a late signal still raises nothing.
    os.kill(os.getpid(), signal.SIGHUP)
    time.sleep(0.05)


def test_a_held_step_is_not_cut_in_half_and_the_stop_follows_it(own_handlers):
    finished = False
    with stop_on_signals(deadline_s=300) as stopping:
        held = stopping.held()
        with pytest.raises(KeyboardInterrupt), held:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the handler has run: it only noted the stop
            assert stopping.requested.is_set()
            finished = True
    assert finished


# The swallowed interrupt is what pytest reports as unraisable: expected here.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_stop_that_a_gc_callback_swallowed_is_raised_at_the_next_check(own_handlers):
    """The handler's KeyboardInterrupt, raised inside a garbage-collection callback (JAX has
    one), is dropped by Python ("Exception ignored in"); the waiting loops' check raises it."""

    def on_gc(phase, info):
        if phase == "start" and not stopping.requested.is_set():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between these bytecodes, in here
                pass

    with stop_on_signals(deadline_s=300) as stopping:
        gc.callbacks.append(on_gc)
        try:
            gc.collect()  # returns normally: the interrupt was swallowed
        finally:
            gc.callbacks.remove(on_gc)
        assert stopping.requested.is_set()
        with pytest.raises(KeyboardInterrupt):
            stopping.check()
        with pytest.raises(KeyboardInterrupt):
            stopping.sleep(60)  # at once, not after a minute


def test_a_stop_that_lands_in_code_run_from_source_text_still_exits_0():
    """The signal lands inside `exec` of a string (what a dataclass or namedtuple definition
    runs, as a late import may when the stop comes): the process catches the interrupt, stops
    and exits 0. With a plain KeyboardInterrupt CPython would end it by SIGINT at exit (-2),
    as the headless demo once did after printing that it had stopped."""
    code = (
        "import os, signal, time\n"
        "from rtplan.processes import stop_on_signals\n"
        "with stop_on_signals(deadline_s=60):\n"
        "    try:\n"
        "        exec('os.kill(os.getpid(), signal.SIGTERM); time.sleep(30)')\n"
        "    except KeyboardInterrupt:\n"
        "        print('stopped', flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "stopped\n"), done.stderr


def test_without_a_signal_the_handlers_are_restored(own_handlers):
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals() as stopping:
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before
    assert not stopping.requested.is_set()


def _child(name: str, ignore_sigterm: bool) -> Child:
    code = "import signal, time\n"
    if ignore_sigterm:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "print('ready', flush=True)\ntime.sleep(120)\n"
    child = Child(name, [sys.executable, "-c", code], echo=False)
    child.wait_for("ready", timeout=60)
    return child


def test_stop_all_stops_the_children_together_and_kills_the_stubborn():
    polite = [_child(f"polite{i}", False) for i in range(2)]
    stubborn = _child("stubborn", True)
    start = time.monotonic()
    stop_all([*polite, stubborn], timeout=2.0)
    took = time.monotonic() - start
    assert [c.proc.returncode for c in polite] == [-signal.SIGTERM] * 2
    assert stubborn.proc.returncode == -signal.SIGKILL
    assert 2.0 <= took < 10.0  # one shared grace, not one per child


def test_stop_all_kills_at_once_when_told_to_hurry():
    stubborn = _child("stubborn", True)
    hurry = threading.Event()
    hurry.set()
    start = time.monotonic()
    stop_all([stubborn], timeout=60.0, hurry=hurry)
    assert stubborn.proc.returncode == -signal.SIGKILL
    assert time.monotonic() - start < 10.0


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    # One budget (the demo plays it, --k 1): its planner service compiles every budget before
    # the game starts, and what is tested here is how the processes stop, not what they plan.
    # The same planner as tests/bench/test_gpu_run.py's: its programs compile once in a run.
    root = tmp_path_factory.mktemp("ckpt")
    return write_planner(root, "snake-rt-v0", budgets=(1,), simulations=(2,))


def start_demo(checkpoints: Path, tmp_path: Path):
    """The headless demo at 2 FPS (its game outlives the test), once its session plays and its
    example agent runs: the process, its output, its descendants, and its HTTP and gRPC ports
    (the HTTP one is the --port it was given)."""
    port = free_port()
    cmd = [sys.executable, "-m", "rtplan", "demo", "--headless", "--game", "snake-rt-v0"]
    cmd += ["--fps", "2", "--frames", "0", "--every", "1000", "--port", str(port), "--k", "1"]
    cmd += ["--checkpoint-dir", str(checkpoints), "--record-dir", str(tmp_path)]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the test can clean up after a failure
    )
    lines: list[str] = []
    proc.reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    proc.reader.start()
    deadline = time.monotonic() + 300  # a cold compile cache: the tiny planner compiles first
    while not any(line.startswith("your agent:") for line in lines):
        assert proc.poll() is None, "".join(lines)
        assert time.monotonic() < deadline, "".join(lines)
        time.sleep(0.1)
    out = "".join(lines)
    http = int(re.search(r"browse it:  http://127\.0\.0\.1:(\d+)/", out).group(1))
    assert http == port, out  # --headless honours --port
    grpc = int(re.search(r"--address 127\.0\.0\.1:(\d+)", out).group(1))
    # The planner service, the env server and the example agent (started just after the line;
    # a loaded box can show it forked and not yet running the agent's program).
    until = time.monotonic() + 30
    while time.monotonic() < until:
        kids = descendants(proc.pid)
        if all(any(name in c for c in commands(kids)) for name in SERVICES):
            break
        time.sleep(0.1)
    return proc, lines, kids, (http, grpc)


#: What the demo starts: its two services and the example agent.
SERVICES = ("planner-service", "env-server", "rtplan.examples.random_agent")


def assert_nothing_left(kids: dict[int, int], ports: tuple[int, int], lines, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [pid for pid, start in kids.items() if alive(pid, start)]
        busy = [port for port in ports if not port_free(port)]
        if not left and not busy:
            return
        time.sleep(0.2)
    for pid in left:  # clean up before failing
        os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"processes {left} still run, ports {busy} still bound:\n{''.join(lines)}")


def commands(kids: dict[int, int]) -> list[str]:
    out = []
    for pid in kids:
        with contextlib.suppress(OSError):
            out.append((PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    return out


@pytest.mark.timeout(400)
# SIGHUP's run (~16 s) is slow: both signals take the same handler (the unit tests above).
@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, pytest.param(signal.SIGHUP, marks=pytest.mark.slow)]
)
def test_sigterm_and_sighup_stop_the_demo_and_its_services(checkpoints, tmp_path, sig):
    proc, lines, kids, ports = start_demo(checkpoints, tmp_path)
    try:
        cmdlines = commands(kids)
        for name in SERVICES:
            assert any(name in c for c in cmdlines), f"{cmdlines}\n{''.join(lines)[-3000:]}"
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 0, "".join(lines)  # stopped as Ctrl-C stops it
        proc.reader.join(timeout=10)
        # On failure the end of the output says how it ended (a session summary: the games had
        # ended by themselves before the signal).
        assert "rtplan demo: stopped" in "".join(lines), "".join(lines)[-4000:]
        assert_nothing_left(kids, ports, lines, timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.timeout(400)
def test_after_sigkill_the_services_notice_and_exit(checkpoints, tmp_path):
    proc, lines, kids, ports = start_demo(checkpoints, tmp_path)
    try:
        assert len(kids) >= 3, commands(kids)
        proc.kill()  # no clean-up runs in the demo: its services see their stdin close
        proc.wait(timeout=30)
        assert_nothing_left(kids, ports, lines, timeout=30)
    finally:
        for pid, start in descendants(os.getpid()).items():
            if pid in kids and alive(pid, start):
                os.kill(pid, signal.SIGKILL)
