"""Python client of the Env API: join a live game, read frames, send actions; and of the
arena's ranked runs (`ranked_run`), whose episodes are played through the same API."""

from __future__ import annotations

import dataclasses
import json
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import numpy as np

from rtplan import wire
from rtplan.v1 import env_pb2, env_pb2_grpc

_FALLBACKS = {"game": env_pb2.FALLBACK_GAME, "reflex": env_pb2.FALLBACK_REFLEX}
# The words of the server's JSON and the proto's enums, in snake_case ("real_time", "on_time").
_CLOCKS = {"real_time": env_pb2.CLOCK_MODE_REAL_TIME, "simulated": env_pb2.CLOCK_MODE_SIMULATED}
#: `join(clock=...)` is public API: the older spelling still works.
_CLOCK_ALIASES = {"real-time": "real_time"}
PROVENANCE = {
    env_pb2.PROVENANCE_UNSPECIFIED: "none",
    env_pb2.PROVENANCE_ON_TIME: "on_time",
    env_pb2.PROVENANCE_LATE: "late",
    env_pb2.PROVENANCE_FALLBACK: "fallback",
    env_pb2.PROVENANCE_INVALID: "invalid",
}


class EnvError(RuntimeError):
    """The server refused or ended the stream (gRPC status), with its message."""


@dataclasses.dataclass(frozen=True)
class Report:
    """How the server chose a frame's action."""

    frame: int
    action: int
    provenance: str  # "on_time" | "late" | "fallback" | "invalid" | "none"
    slack_ms: float  # deadline - arrival of the agent's action (negative: late)
    received_action: int  # what the agent sent, -1: nothing


@dataclasses.dataclass(frozen=True)
class Frame:
    """One frame as the agent sees it (arrays decoded to numpy)."""

    frame: int
    legal_action_mask: np.ndarray  # [A] bool
    reward: float
    terminated: bool
    truncated: bool
    episode_return: float
    current_player: int
    clocks: tuple[int, ...]
    deadline_ns: int  # server wall clock; 0 in simulated-clock mode
    period_ms: float
    previous: Report | None  # the frame before: "fallback" if no action had come by then
    #: Earlier frames reported "fallback" whose action has come since (after their deadline):
    #: their final reports, "late".
    late: tuple[Report, ...]
    observation: np.ndarray | None  # only when joined with send_observation=True
    state: object  # rtplan.v1.GameState: decode with `decode_state`

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


def decode_state(game_id: str, msg):
    """The game state of a frame as a `games.State`, for agents that search or simulate."""
    from rtplan import games

    return wire.state_from_proto(games.make(game_id), msg)


class Episode:
    """One joined game: iterate its frames and answer them with `act`.

    The stream stays open until the game ends, `close()` is called, or the server ends it.
    Server-side complaints about a message (bad action, wrong frame, ...) do not end the game;
    they are collected in `errors` as (code, message).
    """

    def __init__(self, stub: env_pb2_grpc.EnvStub, join: env_pb2.Join, timeout: float | None):
        self._outbox: queue.Queue = queue.Queue()
        self._outbox.put(env_pb2.AgentMessage(join=join))
        self._closed = threading.Event()
        self._call = stub.Play(self._requests(), timeout=timeout)
        self.errors: list[tuple[int, str]] = []
        # Before the handshake an error means the join was refused: the server keeps the
        # stream open for another Join, but this Episode is for the one it sent.
        try:
            first = next(self._call, None)
        except grpc.RpcError as e:
            raise EnvError(f"{e.code().name}: {e.details()}") from e
        if first is None or first.WhichOneof("message") != "handshake":
            self.close()
            if first is not None and first.WhichOneof("message") == "error":
                raise EnvError(f"join refused: {first.error.message}")
            raise EnvError(f"expected a handshake, got {first}")
        self.handshake = first.handshake
        self.session_id = self.handshake.session_id
        self.spec = self.handshake.spec

    def _requests(self) -> Iterator[env_pb2.AgentMessage]:
        while True:
            msg = self._outbox.get()
            if msg is None:
                return
            yield msg

    def _next(self) -> env_pb2.ServerMessage | None:
        try:
            while True:
                msg = next(self._call)
                if msg.WhichOneof("message") == "error":
                    self.errors.append((msg.error.code, msg.error.message))
                    continue
                return msg
        except StopIteration:
            return None
        except grpc.RpcError as e:
            if self._closed.is_set() and e.code() == grpc.StatusCode.CANCELLED:
                return None
            raise EnvError(f"{e.code().name}: {e.details()}") from e

    def __iter__(self) -> Iterator[Frame]:
        while True:
            msg = self._next()
            if msg is None:
                return
            frame = _frame(msg.frame)
            yield frame
            if frame.done:
                return

    def act(self, frame: int, action: int) -> None:
        """Sends `action` for frame `frame` (the index of the Frame it answers)."""
        self._outbox.put(
            env_pb2.AgentMessage(action=env_pb2.Action(frame=int(frame), action=int(action)))
        )

    def close(self) -> None:
        """Leaves the game and ends the stream."""
        if not self._closed.is_set():
            self._closed.set()
            self._outbox.put(env_pb2.AgentMessage(leave=env_pb2.Leave()))
            self._outbox.put(None)
            self._call.cancel()

    def __enter__(self) -> Episode:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _report(p: env_pb2.ActionReport) -> Report:
    return Report(p.frame, p.action, PROVENANCE[p.provenance], p.slack_ms, p.received_action)


def _frame(f: env_pb2.Frame) -> Frame:
    return Frame(
        frame=f.frame,
        legal_action_mask=wire.from_tensor(f.legal_action_mask, name="legal_action_mask"),
        reward=f.reward,
        terminated=f.terminated,
        truncated=f.truncated,
        episode_return=f.episode_return,
        current_player=f.current_player,
        clocks=tuple(f.clocks),
        deadline_ns=f.deadline_ns,
        period_ms=f.period_ms,
        previous=_report(f.previous) if f.HasField("previous") else None,
        late=tuple(_report(p) for p in f.late),
        observation=(
            wire.from_tensor(f.observation, name="observation")
            if f.HasField("observation")
            else None
        ),
        state=f.state,
    )


class EnvClient:
    """Connection to an rtplan env server's gRPC Env API (e.g. `EnvClient("localhost:50052")`)."""

    def __init__(self, address: str) -> None:
        options = [
            ("grpc.max_receive_message_length", wire.MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", wire.MAX_MESSAGE_BYTES),
        ]
        self._channel = grpc.insecure_channel(address, options=options)
        self._stub = env_pb2_grpc.EnvStub(self._channel)

    def games(self, *, timeout: float = 10.0) -> list[env_pb2.GameSpec]:
        """The games the server runs (a server's first listing builds every game: seconds)."""
        return list(self._stub.ListGames(env_pb2.ListGamesRequest(), timeout=timeout).games)

    def play(
        self,
        game_id: str = "",
        *,
        session_id: str = "",
        token: str = "",
        seed: int = 0,
        fps: float = 0.0,
        fallback: str = "game",
        clock: str = "real_time",
        record: bool = False,
        send_observation: bool = False,
        timeout: float | None = None,
    ) -> Episode:
        """Joins a game: a new one (`game_id`) or a REST-created session (`session_id` + token).

        Args:
            game_id: registered game id of a new session, e.g. "snake-rt-v0".
            session_id: an existing session to act in (created with agent "grpc").
            token: that session's token, or the server's agent token for a new session.
            seed: PRNG seed of a new session.
            fps: frames per second of a new session (0: the server's default).
            fallback: "game" (keep direction / no-op) or "reflex" (the planner's reflex).
            clock: "real_time" (deadlines) or "simulated" (a frame waits for your action);
                "real-time", the older spelling, is accepted.
            record: write a replay file on the server.
            send_observation: frames also carry the observation planes.
            timeout: overall stream deadline in seconds.
        """
        if fallback not in _FALLBACKS:
            raise ValueError(f"fallback must be one of {sorted(_FALLBACKS)}, got {fallback!r}")
        clock = _CLOCK_ALIASES.get(clock, clock)
        if clock not in _CLOCKS:
            raise ValueError(f"clock must be one of {sorted(_CLOCKS)}, got {clock!r}")
        join = env_pb2.Join(
            protocol_version=wire.PROTOCOL_VERSION,
            session_id=session_id,
            token=token,
            game_id=game_id,
            seed=seed,
            fps=fps,
            fallback=_FALLBACKS[fallback],
            clock=_CLOCKS[clock],
            record=record,
            send_observation=send_observation,
        )
        return Episode(self._stub, join, timeout)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> EnvClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---- the arena's ranked runs ----


class ArenaError(RuntimeError):
    """The arena refused a call: `kind` is its error's kind (e.g. "run_finished"), `status` its
    HTTP status."""

    def __init__(self, status: int, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.status = status
        self.kind = kind
        self.detail = detail


def _arena_call(
    arena: str, method: str, path: str, token: str, body: dict | None = None
) -> dict[str, Any]:
    request = urllib.request.Request(
        arena.rstrip("/") + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as e:
        try:
            error = json.loads(e.read())
            kind, detail = error["error"], error["detail"]
        except (ValueError, KeyError, TypeError):
            kind, detail = "http_error", f"{e.code} {e.reason}"
        raise ArenaError(e.code, kind, detail) from None


def ranked_run(
    arena: str,
    token: str,
    game: str,
    play: Callable[[Episode, dict[str, Any]], None],
    *,
    tier: str = "standard",
    on_episode: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Plays the token's ranked run of `game` at `tier` to its end (docs/arena.md): enters it
    (or goes on with the version's unfinished one), then asks for each episode and plays it
    through the Env API with `play(episode, assignment)`, which answers the episode's frames
    (iterate `episode`, `episode.act(...)`) until they stop.

    Args:
        arena: the arena's URL, e.g. "http://127.0.0.1:8100".
        token: the agent version's token (`rtplan arena register`).
        game: a ranked game, e.g. "tetris-rt-v0".
        play: plays one episode; returning early leaves it (the fallback plays it out: the
            return still counts).
        tier: "standard" (9 FPS) or "fast" (30 FPS).
        on_episode: called after each episode with (its assignment, the run as the arena
            has it then).

    Returns:
        The finished run (GET /v1/runs/{id}): its episodes, mean return and standard error.

    Raises:
        ArenaError: the arena refused (e.g. `run_finished`: the version has played this run).
        EnvError: an env server refused the episode's stream.
    """
    run = _arena_call(arena, "POST", "/v1/runs", token, {"game": game, "tier": tier})
    path = f"/v1/runs/{run['id']}"
    waits = 0
    while True:
        try:
            assignment = _arena_call(arena, "POST", f"{path}/episodes", token)
        except ArenaError as e:
            if e.kind == "run_finished":
                break
            # The one just played is still being read (another client of the token would
            # hold it longer: then this one gives up after 10 s).
            if e.kind == "episode_in_progress" and waits < 50:
                waits += 1
                time.sleep(0.2)
                continue
            raise
        waits = 0
        with EnvClient(assignment["env"]["grpc"]) as client:
            joined = client.play(
                session_id=assignment["session_id"], token=assignment["session_token"]
            )
            with joined as episode:
                play(episode, assignment)
        if on_episode is not None:
            on_episode(assignment, _arena_call(arena, "GET", path, token))
    # The last episode is committed once the arena has read its end (within a poll).
    for _ in range(100):
        run = _arena_call(arena, "GET", path, token)
        if run["status"] != "running":
            break
        time.sleep(0.1)
    return run
