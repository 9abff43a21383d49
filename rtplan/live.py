"""The live demo: planner service + env server + a game played by the planner agent, watched."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


#: What the services print once they have bound their ports (`python -m server`,
#: `python -m planner_service`): the ports are read from these lines, never guessed beforehand.
_ENV_BOUND = re.compile(r"rtplan env server: http on \S+:(\d+) .*gRPC Env API on \S+:(\d+)")
_PLANNER_BOUND = re.compile(r"planner service bound to \S+:(\d+)")


class Child:
    """A service subprocess whose output lines are echoed with a prefix and can be waited on."""

    def __init__(self, name: str, argv: Sequence[str], *, echo: bool = True) -> None:
        self.name = name
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
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

    def wait_for(self, text: str, timeout: float) -> str:
        """Blocks until an output line contains `text`; RuntimeError if the child exits first."""
        end = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
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

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def http_json(method: str, url: str, body: dict | None = None, token: str | None = None) -> dict:
    """One REST call; raises RuntimeError with the server's message on an error status."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{method} {url}: {e.code} {e.read().decode()[:500]}") from e


@contextlib.contextmanager
def services(
    game_ids: str | Sequence[str],
    *,
    planner: bool = True,
    echo: bool = True,
    http_port: int = 0,
    checkpoint_dir: Path | None = None,
    record_dir: Path | None = None,
) -> Iterator[dict]:
    """Starts the planner service (for the games) and the env server; yields their addresses.

    Each service binds its own ports (`http_port` 0: any free one; the others always) and
    prints them; the addresses yielded are read from those lines. `checkpoint_dir` and
    `record_dir` default to the services' own defaults (checkpoints/ and replays/).
    """
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
            "--preload",
            *game_ids,
        ]
        planner_port = None
        if planner:
            argv = [*py, "planner-service", "--port", "0", "--games", ",".join(game_ids), *ckpt]
            plan = Child("planner", argv, echo=echo)
            children.append(plan)
            # It binds before it compiles: the env server starts (and compiles) meanwhile.
            line = plan.wait_for("planner service bound to", timeout=600)
            planner_port = int(_PLANNER_BOUND.search(line).group(1))
            env_argv += ["--planner-address", f"127.0.0.1:{planner_port}"]
        env = Child("env-server", env_argv, echo=echo)
        children.append(env)
        http, grpc_port = map(
            int, _ENV_BOUND.search(env.wait_for("rtplan env server:", 600)).groups()
        )
        if planner:
            plan.wait_for("planner service listening on", timeout=900)
        yield {
            "http": f"http://127.0.0.1:{http}",
            "ws": f"ws://127.0.0.1:{http}",
            "grpc": f"127.0.0.1:{grpc_port}",
            "planner": None if planner_port is None else f"127.0.0.1:{planner_port}",
        }
    finally:
        for child in reversed(children):
            child.stop()


def watch(ws_url: str, *, every: int = 1, max_frames: int = 0) -> dict | None:
    """Prints the frames of a session's websocket stream; returns the last frame message."""
    from websockets.sync.client import connect

    last = None
    with connect(ws_url, max_size=2**22) as ws:
        for raw in ws:
            msg = json.loads(raw)
            if msg.get("type") != "frame":
                continue
            last = msg
            prev = msg.get("previous") or {}
            if msg["frame"] % every == 0 or msg["done"]:
                stats = msg.get("stats", {})
                print(
                    f"frame {msg['frame']:5d}  action {prev.get('action', '-'):>2}  "
                    f"{prev.get('provenance', '-'):>8} via {prev.get('answer_source', '-'):>7}"
                    f"  k={prev.get('k') or '-'}  search {prev.get('latency_ms') or 0:6.1f} ms"
                    f"  return {msg['episode_return']:7.1f}  misses {stats.get('planner_misses')}"
                    f"  late ticks {stats.get('late_ticks')}",
                    flush=True,
                )
            if msg["done"] or (max_frames and msg["frame"] >= max_frames):
                break
    return last


def run_demo(
    game: str = "snake-rt-v0",
    *,
    k: int = 2,
    fps: float = 9.0,
    frames: int = 300,
    seed: int = 0,
    every: int = 10,
    example_agent: bool = True,
) -> int:
    """Runs the live demo; returns an exit code."""
    from planner.store import planner_path  # JAX: only once the demo runs

    if not planner_path(ROOT / "checkpoints", game).exists():
        print(f"rtplan demo: no shipped checkpoint for {game}", file=sys.stderr)
        return 2
    print(f"starting the planner service and the env server for {game} (compiling takes a while)")
    with services(game) as addr:
        created = http_json(
            "POST",
            f"{addr['http']}/v1/sessions",
            {"game": game, "agent": "planner", "k": k, "fps": fps, "seed": seed, "record": True},
        )
        sid = created["id"]
        print(f"\nlive session {sid}: {game} played by the planner agent (k={k}) at {fps} FPS")
        print(f"watch it:   websocket {addr['ws']}{created['viewer_path']}")
        print(f"inspect it: curl {addr['http']}/v1/sessions/{sid}")
        print(f"your agent: python examples/random_agent.py --address {addr['grpc']}\n")
        agent = None
        if example_agent:
            agent = subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "examples" / "random_agent.py"),
                    "--address",
                    addr["grpc"],
                    "--game",
                    game,
                    "--fps",
                    str(fps),
                    "--max-frames",
                    str(min(frames or 100, 100)),
                ],
                cwd=ROOT,
            )
        watch(f"{addr['ws']}{created['viewer_path']}", every=every, max_frames=frames)
        details = http_json("GET", f"{addr['http']}/v1/sessions/{sid}")
        with contextlib.suppress(RuntimeError):
            http_json("DELETE", f"{addr['http']}/v1/sessions/{sid}", token=created["token"])
        if agent is not None:
            try:
                agent.wait(timeout=120)
            except subprocess.TimeoutExpired:
                agent.kill()
        stats = details.get("stats", {})
        print(f"\nsession {sid}: frame {details['frame']}, return {details['episode_return']:.1f}")
        print("stats: " + json.dumps(stats, sort_keys=True))
        if details.get("replay"):
            print(f"replay file: {details['replay']}")
    return 0


#: The web demo's lobby port when none is given (the env server's default).
DEMO_HTTP_PORT = 8000


def demo_game(checkpoint_dir: Path) -> str:
    """The game the web demo plays by default: the best-ranked demo game that ships a gate in
    `checkpoint_dir` (so `make demo` shows gated MCTS), by the game records (`rtplan.demo`)."""
    from gate.policy import gate_path  # JAX: only once the demo runs
    from rtplan.demo import demo_game as choose

    return choose(lambda g: gate_path(checkpoint_dir, g).is_file())


def run_web_demo(
    game: str | None = None,
    *,
    k: int = 2,
    fps: float = 9.0,
    frames: int = 0,
    seed: int = 0,
    port: int = DEMO_HTTP_PORT,
    checkpoint_dir: Path | None = None,
    record_dir: Path | None = None,
) -> int:
    """The live web demo: the planner service and the env server, a game played by the planner
    agent (the gate's budgets where the game has a gate, else the forced `k`) and recorded,
    started again when it ends; serves the lobby until Ctrl-C. `game` None: `demo_game`.
    Returns an exit code."""
    from gate.policy import gate_path  # JAX: only once the demo runs
    from planner.store import planner_path

    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else ROOT / "checkpoints"
    game = game or demo_game(ckpt)
    if not planner_path(ckpt, game).exists():
        print(f"rtplan demo: no planner checkpoint for {game} in {ckpt}", file=sys.stderr)
        return 2
    gated = gate_path(ckpt, game).exists()
    body = {"game": game, "agent": "planner", "fps": fps, "record": True, "max_frames": frames}
    if not gated:
        body["k"] = k
    played_by = "its gate's budgets" if gated else f"forced k={k} (no gate for {game} yet)"
    print(f"starting the planner service and the env server for {game} (compiling takes a while)")
    try:
        with services(game, http_port=port, checkpoint_dir=ckpt, record_dir=record_dir) as addr:
            print(f"\nrtplan demo: lobby at {addr['http']}/  (Ctrl-C stops)", flush=True)
            print(f"the planner agent plays {game} at {fps:g} FPS with {played_by}", flush=True)
            while True:
                created = http_json("POST", f"{addr['http']}/v1/sessions", {**body, "seed": seed})
                sid = created["id"]
                print(f"game {seed}: {addr['http']}/watch?session={sid}", flush=True)
                while True:
                    info = http_json("GET", f"{addr['http']}/v1/sessions/{sid}")
                    if info["status"] not in ("waiting", "running"):
                        break
                    time.sleep(0.5)
                print(
                    f"game {seed} {info['status']} ({info['reason']}) at frame {info['frame']}, "
                    f"return {info['episode_return']:.1f}; starting the next",
                    flush=True,
                )
                seed += 1
    except KeyboardInterrupt:
        print("\nrtplan demo: stopped", flush=True)
    return 0
