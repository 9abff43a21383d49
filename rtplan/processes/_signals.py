"""Stop signals: one clean-up for Ctrl-C, kill and hang-up; a child that exits with its parent."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

#: Set by `Child` in its process's environment: the child exits when its stdin (a pipe whose
#: only writer is the parent) reaches end of file, as it does when the parent dies, SIGKILL
#: included (`exit_with_parent`).
EXIT_WITH_PARENT_ENV = "RTPLAN_EXIT_WITH_PARENT"
#: Seconds a child whose parent died gets to stop on SIGTERM before it exits outright.
_ORPHAN_GRACE_S = 5.0


def exit_with_parent() -> None:
    """In a process `Child` started: watches stdin on a daemon thread and, once the parent is
    gone (end of file), stops this process as the parent would (SIGTERM), or outright after
    `_ORPHAN_GRACE_S` (a start-up that is not listening for signals yet). Does nothing in a
    process `Child` did not start. The variable is consumed: this process's own children do
    not inherit it.

    Why a pipe: the kernel closes it however the parent ends, on every OS, at once, and it needs
    neither polling nor Linux's PR_SET_PDEATHSIG (which fires when the forking *thread* ends and
    needs a `preexec_fn`, unsafe in a parent with threads, as the demo's output pumps are).
    """
    if os.environ.pop(EXIT_WITH_PARENT_ENV, "") != "1":
        return

    def watch() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            return  # no readable stdin: nothing to watch
        with contextlib.suppress(OSError):  # the parent read our output: a broken pipe now
            print("parent process gone: stopping", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(_ORPHAN_GRACE_S)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


#: Seconds a process has, from its first stop signal, to finish its clean-up and exit; past
#: that it prints every thread's stack on stderr and exits with code 1 (`stop_on_signals`). The
#: services get `Child.GRACE_S` to stop and are then killed, so only a bug reaches it.
STOP_DEADLINE_S = 60.0


class StopSignal(KeyboardInterrupt):
    """What a stop signal raises in the main thread: a KeyboardInterrupt, so every
    `except KeyboardInterrupt` clean-up runs as for Ctrl-C, but a subclass, for one CPython
    quirk. CPython remembers a KeyboardInterrupt of exactly that class that leaves code run
    from source text (`exec`/`eval` of a string, which every dataclass and namedtuple
    definition does, so a late import can be running it when the signal lands) as unhandled,
    even when an outer `except` catches it, and then ends the process by SIGINT at exit (exit
    code -2 after a clean stop). It checks the exact class, so a subclass is not remembered.
    """


class Stopping:
    """The state `stop_on_signals` shares with the clean-up: whether a stop signal arrived, and
    whether a second one asks to hurry (kill the services instead of waiting for them)."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.hurry = threading.Event()
        self._holding = False
        self._pending = False

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Within the block a first stop signal waits, and interrupts when the block ends: for
        a step that must not be cut in half (starting a child and keeping its handle, so the
        clean-up can stop it). Unlike blocking the signal in the OS, the child started here does
        not inherit a blocked signal mask."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if self._pending:
            self._pending = False
            raise StopSignal

    def check(self) -> None:
        """Raises `StopSignal` (a KeyboardInterrupt) once a stop signal has arrived (outside a
        held step).

        The signal handler raises it wherever the main thread happens to be, and Python drops
        an exception raised inside a garbage-collection callback or a finalizer ("Exception
        ignored in ..."). JAX registers such a callback, so a stop can be lost that way: the
        headless demo once played its game to the end after SIGHUP. The loops that wait (for a
        service, a frame, the example agent, the next poll) call this between their waits.
        """
        if self.requested.is_set() and not self._holding:
            raise StopSignal

    def sleep(self, seconds: float) -> None:
        """Sleeps `seconds`, or less when a stop signal arrives; then `check`."""
        self.requested.wait(seconds)
        self.check()


@contextlib.contextmanager
def stop_on_signals(*, deadline_s: float = STOP_DEADLINE_S) -> Iterator[Stopping]:
    """Within the block SIGINT, SIGTERM and SIGHUP (where the OS has it) stop the main thread:
    the first one raises `StopSignal` (a KeyboardInterrupt) there, so that Ctrl-C, `kill <pid>`
    or a closed terminal all run the same clean-up (`services` stops its children). Later
    signals raise nothing, so they cannot break the clean-up half way: they set
    `Stopping.hurry` (the children are killed at once).

    The first signal means the process is on its way out, and two things hold from then on,
    after the block too: the handlers stay (a late signal cannot turn a clean exit into a death
    by signal), and if the process has not exited `deadline_s` later, faulthandler prints where
    every thread is and exits with code 1 (a hang becomes a diagnosis). Without a signal the
    handlers are restored when the block is left. Only the main thread can take signals:
    elsewhere the block just yields a `Stopping` that no signal sets.
    """
    stopping = Stopping()
    if threading.current_thread() is not threading.main_thread():
        yield stopping
        return

    def on_signal(signum: int, frame) -> None:
        if stopping.requested.is_set():
            stopping.hurry.set()
            return
        stopping.requested.set()
        faulthandler.dump_traceback_later(deadline_s, exit=True)
        if stopping._holding:
            stopping._pending = True  # raised when the held step ends
            return
        raise StopSignal

    names = ("SIGINT", "SIGTERM", "SIGHUP")
    signals = [getattr(signal, n) for n in names if hasattr(signal, n)]
    before = {sig: signal.signal(sig, on_signal) for sig in signals}
    try:
        yield stopping
    finally:
        if not stopping.requested.is_set():
            for sig, handler in before.items():
                signal.signal(sig, handler)
