"""Test support shared by the test files: tiny planner checkpoints, services, a raw Env stream."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import itertools
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import jax
import yaml

from rtplan import wire
from rtplan.harness.checkpoint import planner_path
from rtplan.harness.config import settings_overrides
from rtplan.planner import Planner, PlannerConfig, default_config
from rtplan.planner.configs import with_rules
from rtplan.planner.network import NetworkConfig
from rtplan.planner.store import load_planner, save_planner
from rtplan.planner_service import BackgroundService, Engine
from rtplan.v1 import env_pb2, env_pb2_grpc

#: A 9x9 Go game (random play, black first) whose next move, white B3, recreates an earlier
#: whole-board position without being a simple ko: open_spiel's `go` ends the game there as a
#: draw, pgx's positional superko ends it with a loss for the mover.
_SUPERKO_GAME = (
    "j6 d8 c5 b6 a4 b5 d2 h4 e9 b3 a2 f6 f2 e6 e4 d9 g5 b1 g8 f8 b7 pass c9 j7 g9 d6 a9 b9 g1 j3 "
    "j5 a7 b2 c7 h7 h3 b8 d4 b4 j2 j9 f1 g2 d1 h8 e8 f4 d7 g7 f5 c6 e5 d5 e2 a8 f7 h9 c4 h1 e7 "
    "a6 h5 e1 pass h6 j1 g4 c2 a1 d3 j8 f1 c1 a3 c3"
)
SUPERKO_MOVES = tuple(_SUPERKO_GAME.split())
SUPERKO_REPEAT = "b3"

#: The checkout (the tests run from it).
ROOT = Path(__file__).resolve().parents[1]


#: A tiny GTP engine (a script for `python -c` or a file) for bench.match's referee: it plays
#: the first empty point (A9, B9, ... J1) and passes when there is none; no captures.
#: `--resign-after N`: resigns at its N+1-th genmove. `--sleep S`: each genmove takes S
#: seconds. It takes `time_settings` and `time_left` with integer arguments only, as GNU Go
#: does, and `fake-timed` answers the time commands received since `clear_board` (" | "-joined).
FAKE_GTP_ENGINE = textwrap.dedent(
    """
    import sys, time
    def flag(name, kind):
        return kind(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else None
    resign_after, sleep = flag("--resign-after", int), flag("--sleep", float) or 0.0
    cols = "abcdefghj"
    order = [f"{c}{r}" for r in range(9, 0, -1) for c in cols]
    stones, komi, genmoves, timed = {}, 7.5, 0, []
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        cmd, args = words[0], [w.lower() for w in words[1:]]
        answer = ""
        if cmd == "quit":
            print("=\\n", flush=True)
            break
        elif cmd in ("boardsize", "name"):
            answer = "fake"
        elif cmd == "clear_board":
            stones, genmoves, timed = {}, 0, []
        elif cmd == "komi":
            komi = float(args[0])
        elif cmd in ("time_settings", "time_left"):
            if not all(a.isdigit() for a in args[-2:]):
                print("? syntax error: not integers\\n", flush=True)
                continue
            timed.append(" ".join(words))
        elif cmd == "fake-timed":
            answer = " | ".join(timed)
        elif cmd == "play":
            if args[1] != "pass":
                if args[1] in stones or args[1] not in order:
                    print("? illegal move\\n", flush=True)
                    continue
                stones[args[1]] = args[0][0]
        elif cmd == "genmove":
            time.sleep(sleep)
            genmoves += 1
            if resign_after is not None and genmoves > resign_after:
                answer = "resign"
            else:
                answer = next((v for v in order if v not in stones), "pass")
                if answer != "pass":
                    stones[answer] = args[0][0]
            answer = answer.upper()
        elif cmd == "final_score":
            margin = sum(s == "b" for s in stones.values()) - sum(
                s == "w" for s in stones.values()) - komi
            answer = "0" if margin == 0 else f"{'B' if margin > 0 else 'W'}+{abs(margin):g}"
        else:
            print("? unknown command\\n", flush=True)
            continue
        print(f"= {answer}\\n", flush=True)
    """
)

#: The tiny network of the tests: cheap to compile and run.
TINY_NET = NetworkConfig(torso="mlp", channels=16, blocks=1, features=8, value_hidden=8)


def free_port() -> int:
    """A local TCP port that was free a moment ago (bound, then closed: nothing listens there);
    for a server that cannot take port 0, such as a `jax.distributed` coordinator."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_config(game_id: str) -> PlannerConfig:
    """A tiny, deterministic planner config on a small board (cheap to compile and run)."""
    if game_id == "snake-rt-v0":
        return dataclasses.replace(
            default_config(game_id),
            network=dataclasses.replace(TINY_NET, value_bins=11, value_max=20.0, time_input=True),
            simulations=(2, 4, 6, 8),
            game_params=(("horizon", 200), ("num_cols", 5), ("num_rows", 5)),
            gumbel_scale=0.0,
        )
    if game_id == "speed-hex-v0":
        return dataclasses.replace(
            default_config(game_id),
            network=TINY_NET,
            budgets=(2, 4),
            simulations=(2, 4),
            game_params=(("initial_time", 12),),
            gumbel_scale=0.0,
        )
    if game_id in ("pacman-rt-v0", "tetris-rt-v0"):  # the real boards: the browser tests
        return dataclasses.replace(
            default_config(game_id),
            network=dataclasses.replace(TINY_NET, value_bins=11, value_max=20.0, time_input=True),
            budgets=(1, 2),
            simulations=(2, 4),
            gumbel_scale=0.0,
        )
    if game_id == "speed-go-v0":
        return dataclasses.replace(
            default_config(game_id),
            network=TINY_NET,
            budgets=(2, 4),
            simulations=(2, 4),
            gumbel_scale=0.0,
        )
    raise ValueError(f"no tiny config for {game_id}")


def write_gate(
    root: Path, game_id: str = "snake-rt-v0", seed: int = 0, *, rules=None, **gate_config
) -> Path:
    """Writes `gate_path(root, game)`: a fresh gate over the planner `write_checkpoints` wrote
    there (tied to that file's sha256, as `train-gate` exports), trained as if under `rules`
    (`planner.configs.with_rules`'s `committed`, `tree_k`; None: the planner's own); returns
    the gate file."""
    from rtplan.gate.committed.config import GateConfig
    from rtplan.gate.committed.policy import Gate
    from rtplan.gate.files import file_sha256
    from rtplan.harness import checkpoint as ckpt
    from rtplan.harness.checkpoint import gate_path

    planner_file = planner_path(root, game_id)
    cfg, _, _ = load_planner(game_id, str(planner_file))
    cfg = with_rules(cfg, **(rules or {}))
    gate = Gate(Planner(cfg), GateConfig(**gate_config))
    params = gate.init_params(jax.random.PRNGKey(seed))
    path = gate_path(root, game_id)
    meta = {**gate.metadata(), "kind": "gate", "planner_sha256": file_sha256(planner_file)}
    ckpt.save(path, {"params": params}, meta)
    return path


def write_clock_gate(root: Path, game_id: str = "speed-hex-v0", seed: int = 0, **config) -> Path:
    """Writes `gate_path(root, game)`: a fresh clock gate (`ClockGateConfig(**config)`, tiny by
    default) over the planner written there, tied to its sha256 as `train-gate` exports;
    returns the gate file."""
    from rtplan.gate.clock.config import ClockGateConfig
    from rtplan.gate.clock.gate import CLOCK_GATE_KIND, ClockGate
    from rtplan.gate.files import file_sha256
    from rtplan.harness import checkpoint as ckpt
    from rtplan.harness.checkpoint import gate_path

    planner_file = planner_path(root, game_id)
    cfg, _, _ = load_planner(game_id, str(planner_file))
    sizes = dict(encoder=8, time_hidden=8, hidden=6, head_hidden=8)
    gate = ClockGate(Planner(cfg), ClockGateConfig(**{**sizes, **config}))
    params = gate.init_params(jax.random.PRNGKey(seed))
    path = gate_path(root, game_id)
    meta = {**gate.metadata(), "kind": CLOCK_GATE_KIND, "planner_sha256": file_sha256(planner_file)}
    ckpt.save(path, {"params": params}, meta)
    return path


def write_checkpoints(root: Path, game_ids=("snake-rt-v0",), seed: int = 0) -> Path:
    """Writes `planner_path(root, game)` with fresh tiny networks; returns `root`."""
    root = Path(root)
    for game_id in game_ids:
        cfg = tiny_config(game_id)
        params = Planner(cfg).init_params(jax.random.PRNGKey(seed))
        save_planner(planner_path(root, game_id), cfg, params)
    return root


def write_planner(root: Path, game_id: str, seed: int = 0, **config) -> Path:
    """Writes `planner_path(root, game)`: a fresh tiny network whose config has the `config`
    fields changed (e.g. fewer budgets); returns `root`."""
    cfg = dataclasses.replace(tiny_config(game_id), **config)
    save_planner(
        planner_path(root, game_id), cfg, Planner(cfg).init_params(jax.random.PRNGKey(seed))
    )
    return Path(root)


@functools.lru_cache(maxsize=8)
def planner_fns(cfg: PlannerConfig):
    """(planner, jitted option with static k) of a config, shared by every user in a process."""
    planner = Planner(cfg)
    return planner, jax.jit(planner.option, static_argnums=3)


class SlowEngine:
    """The real planner engine, except that `plan` first sleeps `delay_s` (settable while the
    service runs): a slow planner on cue, for the env server's missed-deadline tests. With
    `delays` set, the n-th `plan` call sleeps `delays[n % len(delays)]` instead (a planner
    whose searches are late now and then). The sleep is part of the search: the real `plan`
    after it drops a search whose caller gave up or whose deadline passed meanwhile."""

    def __init__(self, engine: Engine, delay_s: float = 0.0) -> None:
        self._engine = engine
        self.delay_s = delay_s
        self.delays: tuple[float, ...] = ()
        self._calls = itertools.count()

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def plan(self, *args, **kwargs):
        delays = self.delays
        delay = delays[next(self._calls) % len(delays)] if delays else self.delay_s
        if delay:
            time.sleep(delay)
        return self._engine.plan(*args, **kwargs)


def start_planner(
    checkpoint_dir: Path | None = None, game_ids=None, *, port: int = 0, engine=None
) -> BackgroundService:
    """The real Planner service (`planner_service`) for the checkpoints under `checkpoint_dir`,
    on a background thread, compiled and SERVING; its `engine` is a `SlowEngine`. Pass the
    `engine` of a stopped service to restart it on the same port without compiling again."""
    if engine is None:
        engine = SlowEngine(Engine.from_dir(checkpoint_dir, game_ids=game_ids))
    return BackgroundService(engine, port=port).start()


class HeldCompile:
    """Compiles a started planner service's engine (`BackgroundService.start(compile=False)`)
    on a thread, held after a game's gate until `release()`: a service whose gate becomes
    ready after it started, then its forced budgets, when the test says. `at` holds when each
    became ready (time.monotonic(): "gate", "ready")."""

    def __init__(self, engine: Engine) -> None:
        self.gate_ready, self.ready, self._go = (threading.Event() for _ in range(3))
        self.at: dict[str, float] = {}

        def gate(game_id: str) -> None:
            self.at["gate"] = time.monotonic()
            self.gate_ready.set()
            self._go.wait(600)

        def ready(game_id: str) -> None:
            self.at["ready"] = time.monotonic()
            self.ready.set()

        self.thread = threading.Thread(
            target=lambda: engine.compile(on_gate_ready=gate, on_ready=ready), daemon=True
        )

    def start(self) -> HeldCompile:
        self.thread.start()
        return self

    def release(self) -> None:
        """Lets the forced budgets compile."""
        self._go.set()


class AgentStream:
    """A raw Env API stream for tests: send any `AgentMessage`, read `ServerMessage`s with a
    timeout (a reader thread queues them; None marks the end of the stream)."""

    def __init__(self, address: str, *, timeout: float = 120.0) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = env_pb2_grpc.EnvStub(self.channel)
        self._outbox: queue.Queue = queue.Queue()
        self._inbox: queue.Queue = queue.Queue()
        self.call = self.stub.Play(iter(self._outbox.get, None), timeout=timeout)
        self.status: grpc.StatusCode | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for msg in self.call:
                self._inbox.put((time.monotonic(), msg))
            self.status = grpc.StatusCode.OK
        except grpc.RpcError as e:
            self.status = e.code()
        self._inbox.put((time.monotonic(), None))

    def send(self, msg: env_pb2.AgentMessage) -> None:
        self._outbox.put(msg)

    def join(self, **fields) -> None:
        fields.setdefault("protocol_version", wire.PROTOCOL_VERSION)
        self.send(env_pb2.AgentMessage(join=env_pb2.Join(**fields)))

    def act(self, frame: int, action: int) -> None:
        self.send(env_pb2.AgentMessage(action=env_pb2.Action(frame=frame, action=action)))

    def next(self, timeout: float = 30.0) -> env_pb2.ServerMessage | None:
        """The next message (None at the end of the stream); raises on timeout."""
        return self._inbox.get(timeout=timeout)[1]

    def next_timed(self, timeout: float = 30.0):
        """(monotonic receive time, message)."""
        return self._inbox.get(timeout=timeout)

    def expect(self, kind: str, timeout: float = 30.0):
        """Skips to the next message of `kind` ("handshake", "frame", "error"); returns its
        payload and the messages of other kinds skipped on the way."""
        skipped = []
        while True:
            msg = self.next(timeout)
            if msg is None:
                raise AssertionError(f"stream ended ({self.status}) while waiting for {kind}")
            if msg.WhichOneof("message") == kind:
                return getattr(msg, kind), skipped
            skipped.append(msg)

    def close(self) -> None:
        self._outbox.put(None)
        self.call.cancel()
        self.channel.close()


def post_session(base: str, **body) -> dict:
    """Starts a session on the env server at `base` (POST /v1/sessions); its JSON answer."""
    req = urllib.request.Request(
        f"{base}/v1/sessions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    return json.load(urllib.request.urlopen(req, timeout=180))


def get_json(base: str, path: str) -> dict:
    """The JSON answer of GET `path` on the env server at `base`."""
    return json.load(urllib.request.urlopen(f"{base}{path}", timeout=30))


def session_ended(server, sid: str, *, timeout: float = 120.0, poll_s: float = 0.05) -> dict:
    """Polls `GET /v1/sessions/SID` until the session is neither waiting nor running; its last
    answer. `server` is a FastAPI TestClient or a live env server's base URL. Fails after
    `timeout` seconds with the session's last state."""
    if isinstance(server, str):
        get = functools.partial(get_json, server)
    else:
        get = lambda path: server.get(path).json()  # noqa: E731
    end = time.monotonic() + timeout
    while (info := get(f"/v1/sessions/{sid}"))["status"] in ("waiting", "running"):
        assert time.monotonic() < end, f"session {sid} did not end in {timeout:g} s: {info}"
        time.sleep(poll_s)
    return info


#: A recorded Snake replay (format version 1: 10 frames, 11 frame messages with the first state).
REPLAY_V1 = Path(__file__).resolve().parent / "data" / "replay_v1.jsonl"


def gated_replay(folder: Path, name: str = "gated.jsonl") -> Path:
    """`REPLAY_V1` copied to `folder/name` as if a gated planner had played it (the header's
    agent, ks and gated: what the pages label a session by)."""
    lines = REPLAY_V1.read_text().splitlines()
    header = json.loads(lines[0])
    header["settings"] = {**header["settings"], "agent": "planner", "ks": []}
    header["gated"] = True
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return path


# ---- docker-compose.yml (tests/packaging: the compose file and the Kubernetes manifests) ----


def compose_file() -> dict:
    """docker-compose.yml, parsed."""
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def compose_services(name: str) -> dict[str, dict]:
    """A profile's services by the command they run ("planner-service", "env-server",
    "arena"): exactly one of each."""
    services = [s for s in compose_file()["services"].values() if name in s.get("profiles", ())]
    kinds = {s["command"][1]: s for s in services}
    assert len(services) == 3 and set(kinds) == {"planner-service", "env-server", "arena"}, name
    return kinds


def compose_profile(name: str) -> tuple[dict, dict]:
    """The (planner, env server) services of a profile."""
    kinds = compose_services(name)
    return kinds["planner-service"], kinds["env-server"]


def service_settings(cls, parser, service: dict, monkeypatch):
    """The settings a service's container builds: its environment, then its command's flags
    (after `rtplan` and its subcommand's words: `env-server`, `arena serve`)."""
    for key, value in service.get("environment", {}).items():
        monkeypatch.setenv(key, str(value))
    assert service["command"][0] == "rtplan"
    argv = service["command"][1:]
    while argv and not argv[0].startswith("-"):
        argv = argv[1:]
    args = parser().parse_args(argv)
    return cls(**settings_overrides(cls, args))


def gpu_ids(service: dict) -> list[str]:
    """The GPU ids a compose service reserves."""
    devices = service.get("deploy", {}).get("resources", {}).get("reservations", {})
    return [
        i
        for d in devices.get("devices", ())
        if "gpu" in d.get("capabilities", ())
        for i in d["device_ids"]
    ]


def compose_seconds(duration: str) -> float:
    """A compose duration ("1h30m", "10s") in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    unit = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(n) * unit[u] for n, u in parts)


# ---- the env server as a subprocess (tests/web) ----

#: A tick this late counts as late here: on a 2-core box running training beside the (niced)
#: tests, ticks lag up to ~0.5 s with no page at all (the stall tests use 1.5 s too).
LATE_TICK_MS = 1500


@contextlib.contextmanager
def env_server(tmp: Path, root: Path, game_ids, *flags: str) -> Iterator[str]:
    """`python -m server` on free ports over the checkpoints in `root`, with `game_ids` compiled
    (one short session per game, all at once: the compiles overlap); yields its base URL."""
    cmd = [sys.executable, "-m", "rtplan.server", "--http-port", "0", "--grpc-port", "0"]
    cmd += ["--checkpoint-dir", str(root), "--record-dir", str(tmp / "replays")]
    cmd += ["--log-level", "warning", *flags]
    env = {
        **os.environ,
        "RTPLAN_SERVER_RESULTS_DIR": str(tmp / "results"),
        "RTPLAN_SERVER_LATE_TICK_MS": str(LATE_TICK_MS),
    }
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert "rtplan env server" in line, line
        base = f"http://127.0.0.1:{int(line.split('http on 127.0.0.1:')[1].split()[0])}"
        with concurrent.futures.ThreadPoolExecutor(len(game_ids)) as pool:
            warm = [
                pool.submit(post_session, base, game=g, agent="reflex", fps=50.0, max_frames=1)
                for g in game_ids
            ]
            for future in warm:
                future.result()
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


@contextlib.contextmanager
def uvicorn_app(app, port: int = 0) -> Iterator[str]:
    """Serves ASGI `app` with uvicorn on `port` (0: a free one), on a thread of this process
    (where a test's registrations hold); yields its base URL and stops it after."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


# ---- the browser (tests/web and the toy game's page) ----

CHROMIUM = os.environ.get("RTPLAN_CHROMIUM", "/usr/bin/chromium")
#: A channel may differ this much from the palette colour (anti-aliasing, blending).
TOLERANCE = 24


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


PROBE = """(probes) => {
    const v = window.rtplanViewer, canvas = document.getElementById('board');
    const ctx = canvas.getContext('2d'), dpr = canvas.width / v.layout.width;
    const half = Math.max(1, Math.floor(0.2 * v.layout.cell * dpr));
    return probes.map(([r, c, rgb, tol]) => {
        const [x, y] = v.center(r, c);
        const d = ctx.getImageData(Math.round(x * dpr) - half, Math.round(y * dpr) - half,
                                   2 * half + 1, 2 * half + 1).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4)
            if (Math.abs(d[i] - rgb[0]) <= tol && Math.abs(d[i + 1] - rgb[1]) <= tol &&
                Math.abs(d[i + 2] - rgb[2]) <= tol) n++;
        return n / (d.length / 4);
    });
}"""


#: The board canvas's colour at each point [x, y] of the page's layout (CSS pixels of the board
#: as drawn, before a phone shrinks it): [[r, g, b], ...].
PIXELS = """(points) => {
    const v = window.rtplanViewer, canvas = document.getElementById('board');
    const ctx = canvas.getContext('2d'), dpr = canvas.width / v.layout.width;
    return points.map(([x, y]) =>
        [...ctx.getImageData(Math.round(x * dpr), Math.round(y * dpr), 1, 1).data.slice(0, 3)]);
}"""


def near(rgb, colour: str, tol: int = TOLERANCE) -> bool:
    """Whether pixel `rgb` is palette colour `colour` ("#rrggbb") within `tol` per channel."""
    return all(abs(a - b) <= tol for a, b in zip(rgb, hex_rgb(colour)))


def release_compiled_programs(*, everything: bool = True) -> None:
    """Clears the `functools` caches of every loaded module of this checkout (its packages and
    tests, classes included) and, if `everything`, JAX's, then collects the cycles that held
    their executables."""
    import gc

    import jax

    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None) or ""
        if not path.startswith(str(ROOT)) or "/.venv/" in path:
            continue
        for value in list(vars(module).values()):
            holders = [value, *vars(value).values()] if isinstance(value, type) else [value]
            for holder in holders:
                if callable(getattr(holder, "cache_clear", None)) and hasattr(holder, "cache_info"):
                    holder.cache_clear()
    if everything:
        jax.clear_caches()
    gc.collect()
