"""Test doubles for the env server: tiny planner checkpoints and an in-process Planner servicer.

`FakePlanner` implements the Planner API's `Plan` with the in-process option
(`Planner.option`), so contract tests can run the env server against a real gRPC Planner
without the planner service package. Never used by the server itself.
"""

from __future__ import annotations

import dataclasses
import functools
import queue
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import jax

from planner import Planner, PlannerConfig, default_config
from planner.network import NetworkConfig
from planner.store import load_planner, save_planner
from rtplan import wire
from rtplan.v1 import env_pb2, env_pb2_grpc, planner_pb2, planner_pb2_grpc

#: The tiny network of the tests (see tests/test_evaluate.py).
TINY_NET = NetworkConfig(torso="mlp", channels=16, blocks=1, features=8, value_hidden=8)


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
    raise ValueError(f"no tiny config for {game_id}")


def write_checkpoints(root: Path, game_ids=("snake-rt-v0",), seed: int = 0) -> Path:
    """Writes `root/<game>/planner.msgpack` with fresh tiny networks; returns `root`."""
    root = Path(root)
    for game_id in game_ids:
        cfg = tiny_config(game_id)
        params = Planner(cfg).init_params(jax.random.PRNGKey(seed))
        save_planner(root / game_id / "planner.msgpack", cfg, params)
    return root


@functools.lru_cache(maxsize=8)
def planner_fns(cfg: PlannerConfig):
    """(planner, jitted option with static k) of a config, shared by every user in a process."""
    planner = Planner(cfg)
    return planner, jax.jit(planner.option, static_argnums=3)


class FakePlanner(planner_pb2_grpc.PlannerServicer):
    """`Plan` over the in-process option: the Decision, then the PlannedAction.

    Like the real service, a request superseded by a newer one of its stream_id ends with
    ABORTED instead of an action (unless `supersede` is False: then late answers do come
    back). `delay_s` (settable while running) holds every answer back, to play a slow
    planner.
    """

    def __init__(
        self, checkpoint_dir: Path, *, delay_s: float = 0.0, supersede: bool = True
    ) -> None:
        self._dir = Path(checkpoint_dir)
        self.delay_s = delay_s
        self.supersede = supersede
        self._loaded: dict[str, tuple] = {}
        self._latest: dict[str, int] = {}
        self._lock = threading.Lock()
        self.requests: list[planner_pb2.PlanRequest] = []

    def _load(self, game_id: str):
        with self._lock:
            if game_id not in self._loaded:
                path = self._dir / game_id / "planner.msgpack"
                cfg, params, _ = load_planner(game_id, str(path))
                self._loaded[game_id] = (cfg, params, *planner_fns(cfg))
            return self._loaded[game_id]

    def warm(self, game_id: str, ks) -> None:
        """Compiles the options of budgets `ks` now (else the first request of each pays)."""
        cfg, params, planner, option = self._load(game_id)
        state = jax.tree.map(lambda x: x[None], planner.game.init(jax.random.PRNGKey(0)))
        for k in ks:
            jax.block_until_ready(
                option(params, jax.random.split(jax.random.PRNGKey(0), 1), state, k)
            )

    def Plan(self, request, context):
        self.requests.append(request)
        try:
            cfg, params, planner, option = self._load(request.game_id)
        except (OSError, ValueError) as e:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no planner for {request.game_id}: {e}")
        if request.budget.WhichOneof("budget") != "k":
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no gate checkpoint loaded")
        k = request.budget.k
        if k not in cfg.budgets:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"k={k} not in {cfg.budgets}")
        try:
            state = wire.state_from_proto(planner.game, request.state)
        except wire.WireError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        with self._lock:
            self._latest[request.stream_id] = max(
                self._latest.get(request.stream_id, 0), request.request_id
            )
        start = time.perf_counter()
        batch = jax.tree.map(lambda x: x[None], state)
        out = jax.device_get(
            option(params, jax.random.split(jax.random.PRNGKey(request.seed), 1), batch, k)
        )
        search_ms = (time.perf_counter() - start) * 1e3
        frame = int(state.frame)
        landing = frame + (k - 1 if planner.game.num_players == 1 else 0)
        yield planner_pb2.PlanResponse(
            decision=planner_pb2.Decision(
                k=k,
                value=float(out.root_value[0]),
                landing_frame=landing,
                request_id=request.request_id,
            )
        )
        if self.delay_s:
            time.sleep(self.delay_s)
        with self._lock:
            newest = self._latest.get(request.stream_id, 0)
            if self.supersede and newest > request.request_id:
                context.abort(grpc.StatusCode.ABORTED, "superseded by a newer request")
        yield planner_pb2.PlanResponse(
            action=planner_pb2.PlannedAction(
                action=int(out.actions[0, -1]),
                frame_actions=[int(a) for a in out.actions[0]],
                planned=[bool(p) for p in out.planned[0]],
                visit_counts=[int(v) for v in out.visit_counts[0]],
                search_value=float(out.search_value[0]),
                cost=int(out.cost[0]),
                search_ms=search_ms,
                request_id=request.request_id,
            )
        )

    def Health(self, request, context):
        return planner_pb2.HealthResponse(status=planner_pb2.HealthResponse.SERVING, device="cpu")


def start_fake_planner(
    servicer: FakePlanner, port: int = 0, host: str = "127.0.0.1"
) -> tuple[grpc.Server, int]:
    """Serves `servicer` on a thread-pool gRPC server; returns it and its port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    planner_pb2_grpc.add_PlannerServicer_to_server(servicer, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise RuntimeError(f"cannot bind the fake planner to {host}:{port}")
    server.start()
    return server, bound


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
