"""Service subprocesses: `Child` echoes and waits on a child's output, `stop_all` stops several."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from rtplan.processes._signals import EXIT_WITH_PARENT_ENV, Stopping

#: The checkout (or install) root: the folder that holds the packages.
ROOT = Path(__file__).resolve().parents[2]


def service_cwd() -> Path | None:
    """Where the services run: the checkout's root when the code runs from a checkout (its
    pyproject.toml beside the packages), so that `python -m rtplan` imports its packages and
    relative folders (replays/, results/) are the checkout's; None (the caller's directory) for
    an installed package, whose root is site-packages."""
    return ROOT if (ROOT / "pyproject.toml").is_file() else None


def niced(argv: Sequence[str], nice: int) -> list[str]:
    """`argv` (`PYTHON -m MODULE ARGS...`) as a program that lowers its own priority to nice
    value `nice` before it imports anything, then runs MODULE as `-m` would: every thread it
    ever starts (JAX's, gRPC's, XLA's compile pools) inherits that priority, which a
    `setpriority` from here after the start could not promise.

    Raises:
        ValueError: `argv` does not run a module.
    """
    if len(argv) < 3 or argv[1] != "-m":
        raise ValueError(f"a niced child runs a module (python -m MODULE ...), not {argv[:3]}")
    exe, _, module, *rest = argv
    boot = (
        f"import os, runpy; os.nice(max(0, {int(nice)} - os.nice(0))); "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    return [exe, "-c", boot, *rest]


class Child:
    """A service subprocess whose output lines are echoed with a prefix and can be waited on.
    It exits when this process dies, however (its stdin: `exit_with_parent`).

    `echo`: True prints each line as `[name] line`; a function gets each line instead.
    `cpus`: the cores it may run on (empty: any), set right after it starts, before it starts
    any thread of its own, so every thread inherits them. `env`: variables added to ours.
    `nice`: its CPU priority (`argv` then `python -m MODULE ...`; see `niced`).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        echo: bool | Callable[[str], None] = True,
        cpus: Sequence[int] = (),
        env: Mapping[str, str] | None = None,
        nice: int = 0,
    ) -> None:
        self.name = name
        if nice:
            argv = niced(argv, nice)
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,  # never written: it closes when this process ends
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            cwd=service_cwd(),
            env={
                **os.environ,
                **(env or {}),
                "PYTHONUNBUFFERED": "1",
                EXIT_WITH_PARENT_ENV: "1",
            },
        )
        if cpus:
            # Not a `preexec_fn` (unsafe in a parent with threads): the interpreter is still
            # starting, and the threads it starts later inherit the mask.
            os.sched_setaffinity(self.proc.pid, set(cpus))
        self._echo = echo
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            line = line.rstrip()
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
            if callable(self._echo):
                self._echo(line)
            elif self._echo:
                # One write: a line of text and its newline never parted by another thread's.
                sys.stdout.write(f"[{self.name}] {line}\n")
                sys.stdout.flush()

    def wait_for(self, text: str, timeout: float, stopping: Stopping | None = None) -> str:
        """Blocks until an output line contains `text`; RuntimeError if the child exits first,
        KeyboardInterrupt once `stopping` has a stop signal (`Stopping.check`)."""
        end = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                if stopping is not None:
                    stopping.check()
                for line in self.lines[seen:]:
                    if text in line:
                        return line
                seen = len(self.lines)
                if self.proc.poll() is not None:
                    tail = "\n".join(self.lines[-15:])
                    raise RuntimeError(f"{self.name} exited ({self.proc.returncode}):\n{tail}")
                if time.monotonic() > end:
                    raise RuntimeError(f"{self.name}: no '{text}' after {timeout:.0f} s")
                self._cond.wait(0.5)

    #: Seconds a service gets to stop on SIGTERM before it is killed.
    GRACE_S = 10.0

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def terminate(self) -> None:
        """Asks the child to stop (SIGTERM), if it still runs."""
        if self.running:
            self.proc.terminate()

    def kill(self) -> None:
        """Kills the child if it still runs, and reaps it."""
        if self.running:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()

    def stop(self, timeout: float = GRACE_S) -> None:
        """Stops the child: SIGTERM, then SIGKILL after `timeout` seconds."""
        stop_all([self], timeout)


def stop_all(
    children: Sequence[Child], timeout: float = Child.GRACE_S, hurry: threading.Event | None = None
) -> None:
    """Stops the children together: SIGTERM to each, one shared `timeout` for all of them to
    exit, then SIGKILL to the rest (at once when `hurry` is set: a second Ctrl-C)."""
    for child in children:
        child.terminate()
    end = time.monotonic() + timeout
    while any(c.running for c in children):
        if time.monotonic() > end or (hurry is not None and hurry.is_set()):
            break
        time.sleep(0.05)
    for child in children:
        child.kill()
