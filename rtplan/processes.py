"""Service processes: the planner service and the env server started as subprocesses, and REST.

One file past ~450 lines because its parts share one life cycle: the stop signals
(`stop_on_signals`, `Stopping`), the children they stop (`Child`, `stop_all`) and `services`,
which starts the children and waits on them with the same `Stopping`; split, each piece would
import the others' internals.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

__all__ = [
    "ROOT",
    "Child",
    "HTTPStatusError",
    "Place",
    "Placement",
    "exit_with_parent",
    "http_json",
    "place_services",
    "service_cwd",
    "services",
    "STOP_DEADLINE_S",
    "Stopping",
    "stop_all",
    "stop_on_signals",
    "visible_gpus",
]

#: The checkout (or install) root: the folder that holds the packages.
ROOT = Path(__file__).resolve().parents[1]


def service_cwd() -> Path | None:
    """Where the services run: the checkout's root when the code runs from a checkout (its
    pyproject.toml beside the packages), so that `python -m rtplan` imports its packages and
    relative folders (replays/, results/) are the checkout's; None (the caller's directory) for
    an installed package, whose root is site-packages."""
    return ROOT if (ROOT / "pyproject.toml").is_file() else None


#: What the services print once they have bound their ports (`python -m server`,
#: `python -m planner_service`): the ports are read from these lines, never guessed beforehand.
_ENV_BOUND = re.compile(r"rtplan env server: http on \S+:(\d+) .*gRPC Env API on \S+:(\d+)")
_PLANNER_BOUND = re.compile(r"planner service bound to \S+:(\d+)")


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
            raise KeyboardInterrupt

    def check(self) -> None:
        """Raises KeyboardInterrupt once a stop signal has arrived (outside a held step).

        The signal handler raises it wherever the main thread happens to be, and Python drops
        an exception raised inside a garbage-collection callback or a finalizer ("Exception
        ignored in ..."). JAX registers such a callback, so a stop can be lost that way: the
        headless demo once played its game to the end after SIGHUP. The loops that wait (for a
        service, a frame, the example agent, the next poll) call this between their waits.
        """
        if self.requested.is_set() and not self._holding:
            raise KeyboardInterrupt

    def sleep(self, seconds: float) -> None:
        """Sleeps `seconds`, or less when a stop signal arrives; then `check`."""
        self.requested.wait(seconds)
        self.check()


@contextlib.contextmanager
def stop_on_signals(*, deadline_s: float = STOP_DEADLINE_S) -> Iterator[Stopping]:
    """Within the block SIGINT, SIGTERM and SIGHUP (where the OS has it) stop the main thread:
    the first one raises KeyboardInterrupt there, so that Ctrl-C, `kill <pid>` or a closed
    terminal all run the same clean-up (`services` stops its children). Later signals raise
    nothing, so they cannot break the clean-up half way: they set `Stopping.hurry` (the children
    are killed at once).

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
        raise KeyboardInterrupt

    names = ("SIGINT", "SIGTERM", "SIGHUP")
    signals = [getattr(signal, n) for n in names if hasattr(signal, n)]
    before = {sig: signal.signal(sig, on_signal) for sig in signals}
    try:
        yield stopping
    finally:
        if not stopping.requested.is_set():
            for sig, handler in before.items():
                signal.signal(sig, handler)


class Child:
    """A service subprocess whose output lines are echoed with a prefix and can be waited on.
    It exits when this process dies, however (its stdin: `exit_with_parent`).

    `cpus`: the cores it may run on (empty: any), set right after it starts, before it starts
    any thread of its own, so every thread inherits them. `env`: variables added to ours.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        echo: bool = True,
        cpus: Sequence[int] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
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
            if self._echo:
                print(f"[{self.name}] {line}", flush=True)

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


class HTTPStatusError(RuntimeError):
    """An error status from a REST call (`http_json`): `status` is the HTTP code."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def http_json(
    method: str,
    url: str,
    body: dict | None = None,
    token: str | None = None,
    *,
    timeout: float = 30.0,
) -> dict:
    """One REST call; raises RuntimeError with the server's message on an error status."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise HTTPStatusError(f"{method} {url}: {e.code} {e.read().decode()[:500]}", e.code) from e


@dataclasses.dataclass(frozen=True)
class Place:
    """Where one service runs: its cores (empty: any), added variables and added flags."""

    cpus: tuple[int, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    args: tuple[str, ...] = ()

    def describe(self) -> dict:
        return {"cpus": list(self.cpus), "env": dict(self.env), "args": list(self.args)}


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the planner service and the env server run (`services(placement=...)`)."""

    planner: Place = Place()
    env_server: Place = Place()

    def describe(self) -> dict:
        return {"planner": self.planner.describe(), "env_server": self.env_server.describe()}


def visible_gpus() -> list[str]:
    """The NVIDIA GPUs a service could use, by id: CUDA_VISIBLE_DEVICES when set, else those
    `nvidia-smi -L` lists; none without a CUDA build of JAX to use them. Asks no JAX (which
    would take GPU memory in this process)."""
    import importlib.util

    if not any(importlib.util.find_spec(p) for p in ("jax_cuda12_plugin", "jax_cuda13_plugin")):
        return []
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [g.strip() for g in given.split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]


def place_services(cpus: Sequence[int], gpus: Sequence[str]) -> Placement:
    """The paper's split of the two services (reference notes section 9), on this machine.

    Cores: with two or more, the env server gets the first and the planner service the rest,
    so a search never takes the ticker's core. GPUs: with two, the env server sees the first
    and the planner the second (the compose file's gpu profile); with one, the planner has it
    and the env server runs on the CPU (two processes' JAX on one GPU would each reserve most
    of its memory); with none, both run on the CPU.
    """
    cpus = sorted(cpus)
    env_cpus, plan_cpus = ((cpus[0],), tuple(cpus[1:])) if len(cpus) >= 2 else ((), ())
    cuda = ("--device", "cuda:0")
    if len(gpus) >= 2:
        env = (("CUDA_VISIBLE_DEVICES", gpus[0]),)
        plan, args = (("CUDA_VISIBLE_DEVICES", gpus[1]),), cuda
    elif len(gpus) == 1:
        env = (("JAX_PLATFORMS", "cpu"),)
        plan, args = (("CUDA_VISIBLE_DEVICES", gpus[0]),), cuda
    else:
        env, plan, args = (), (), ()
    return Placement(
        planner=Place(cpus=plan_cpus, env=plan, args=args),
        env_server=Place(cpus=env_cpus, env=env),
    )


@contextlib.contextmanager
def services(
    game_ids: str | Sequence[str],
    *,
    planner: bool = True,
    planner_games: Sequence[str] | None = None,
    echo: bool = True,
    http_port: int = 0,
    checkpoint_dir: Path | None = None,
    record_dir: Path | None = None,
    web_dir: Path | None = None,
    stopping: Stopping | None = None,
    placement: Placement | None = None,
) -> Iterator[dict]:
    """Starts the planner service (for `planner_games`, default `game_ids`) and the env server
    (`game_ids` compiled at start-up, the others on first use); yields their addresses once the
    planner service plans every one of `game_ids`. It compiles those first and the rest of
    `planner_games` after, one by one (its ListGames says which are ready).

    Each service binds its own ports (`http_port` 0: any free one; the others always) and
    prints them; the addresses yielded are read from those lines. `checkpoint_dir`,
    `record_dir` and `web_dir` default to the services' own defaults (`harness.checkpoint_root()`,
    replays/ and the shipped pages). On the way out both services are stopped together
    (`stop_all`), and killed at once once `stopping.hurry` is set (`stop_on_signals`).
    `placement`: the cores, devices and flags of each (`place_services`; None: anywhere).
    """
    placement = placement or Placement()
    game_ids = [game_ids] if isinstance(game_ids, str) else list(game_ids)
    py = [sys.executable, "-m", "rtplan"]
    ckpt = [] if checkpoint_dir is None else ["--checkpoint-dir", str(checkpoint_dir)]
    children: list[Child] = []
    try:
        env_argv = [
            *py,
            "env-server",
            "--http-port",
            str(http_port),
            "--grpc-port",
            "0",
            *ckpt,
            *([] if record_dir is None else ["--record-dir", str(record_dir)]),
            *([] if web_dir is None else ["--web-dir", str(web_dir)]),
            "--preload",
            *game_ids,
        ]
        planner_port = None
        if planner:
            others = [] if planner_games is None else planner_games
            first = [g for g in game_ids if planner_games is None or g in planner_games]
            served = list(dict.fromkeys([*first, *others]))
            argv = [*py, "planner-service", "--port", "0", "--games", ",".join(served), *ckpt]
            where = placement.planner
            argv += list(where.args)
            plan = Child("planner", argv, echo=echo, cpus=where.cpus, env=dict(where.env))
            children.append(plan)
            # It binds before it compiles: the env server starts (and compiles) meanwhile.
            line = plan.wait_for("planner service bound to", timeout=600, stopping=stopping)
            planner_port = int(_PLANNER_BOUND.search(line).group(1))
            env_argv += ["--planner-address", f"127.0.0.1:{planner_port}"]
        where = placement.env_server
        env_argv += list(where.args)
        env = Child("env-server", env_argv, echo=echo, cpus=where.cpus, env=dict(where.env))
        children.append(env)
        http, grpc_port = map(
            int, _ENV_BOUND.search(env.wait_for("rtplan env server:", 600, stopping)).groups()
        )
        for game_id in first if planner else ():
            plan.wait_for(f"planner service: {game_id} ready", timeout=900, stopping=stopping)
        yield {
            "http": f"http://127.0.0.1:{http}",
            "ws": f"ws://127.0.0.1:{http}",
            "grpc": f"127.0.0.1:{grpc_port}",
            "planner": None if planner_port is None else f"127.0.0.1:{planner_port}",
        }
    finally:
        stop_all(children[::-1], hurry=None if stopping is None else stopping.hurry)
