"""Live sessions: one game, its agent, its frame loop (real-time or simulated clock) and stats."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import hmac
import json
import logging
import secrets
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from games.render import render
from rtplan import wire
from rtplan.v1 import env_pb2
from server._rules import (
    MAX_ACTIONS_PER_FRAME,
    MAX_FRAMES_AHEAD,
    Arrival,
    FrameDecision,
    Provenance,
    check_action,
    decide_action,
    wall_ticks,
)
from server._runtime import AGENT_PLAYER, GameRuntime, HostInfo, state_digest
from server._ticker import Ticker
from server._viewers import ViewerHub
from server.replay import Recorder

log = logging.getLogger("rtplan.server")

AGENT_KINDS = ("grpc", "reflex", "planner")
FALLBACKS = ("game", "reflex")
CLOCKS = ("real_time", "simulated")
OPPONENTS = ("reflex", "random")
#: Session statuses; the last three are final.
STATUSES = ("waiting", "running", "finished", "stopped", "failed")
LIVE = ("waiting", "running")

_HTTP = {
    grpc.StatusCode.INVALID_ARGUMENT: 422,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
}


class SessionError(Exception):
    """A refused request, with the gRPC code and HTTP status that say why."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return _HTTP.get(self.code, 400)

    def status(self) -> env_pb2.Status:
        """The protocol's `Status` (code is the google.rpc.Code number)."""
        return env_pb2.Status(code=self.code.value[0], message=self.message)


@dataclasses.dataclass(frozen=True)
class SessionConfig:
    """What a session plays and how (validated by the manager)."""

    #: Registered game id.
    game_id: str
    #: Init seed (0 <= seed < 2**63): the session's first state is `game.init(PRNGKey(seed))`.
    seed: int = 0
    #: Frames per second (real-time clock); in simulated mode only the clock games' tick size.
    fps: float = 9.0
    #: "grpc" (an external agent over the Env API), "reflex" or "planner" (built in).
    agent: str = "grpc"
    #: Planner agent: budgets of successive decisions, cycled (one value: a fixed k).
    ks: tuple[int, ...] = ()
    #: "game" (the game's fallback action) or "reflex" (the network's masked argmax).
    fallback: str = "game"
    #: "real_time" (fixed-FPS deadlines) or "simulated" (a frame waits for its answer).
    clock: str = "real_time"
    #: Write a replay file.
    record: bool = False
    #: Clock games: the built-in opponent (player 1), "reflex" or "random".
    opponent: str = "reflex"
    #: Stop after this many frames (0: play until the game ends).
    max_frames: int = 0

    @property
    def period(self) -> float:
        """Seconds per frame."""
        return 1.0 / self.fps

    @property
    def simulated(self) -> bool:
        return self.clock == "simulated"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["ks"] = list(self.ks)
        return d


def _quantiles(values) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "p95": None, "max": None}
    a = np.asarray(values, np.float64)
    return {
        "mean": round(float(a.mean()), 3),
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "max": round(float(a.max()), 3),
    }


@dataclasses.dataclass
class SessionStats:
    """Counters of one session (real-time quality, provenance, planner health)."""

    frames: int = 0
    on_time: int = 0
    late: int = 0  # answers after their deadline (judged, or refused as already past)
    fallback: int = 0
    invalid: int = 0
    ticks: int = 0
    late_ticks: int = 0
    max_tick_lag_ms: float = 0.0
    total_tick_lag_ms: float = 0.0
    decisions: int = 0
    planned: int = 0  # planned actions applied on their landing frame
    planner_misses: int = 0  # no planned action by the landing frame's deadline
    planner_errors: int = 0  # Plan failed (planner down, refused, bad answer)
    planner_late_answers: int = 0  # planned actions that came after their frame: discarded
    last_planner_error: str = ""
    k_histogram: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    viewer_drops: int = 0
    agent_drops: int = 0
    errors_sent: int = 0
    latency_ms: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=4096)
    )
    search_ms: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=4096)
    )
    slack_ms: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=4096)
    )

    def count(self, decision: FrameDecision) -> None:
        self.frames += 1
        p = decision.provenance
        if p is Provenance.ON_TIME:
            self.on_time += 1
        elif p is Provenance.LATE:
            self.late += 1
        elif p is Provenance.FALLBACK:
            self.fallback += 1
        else:
            self.invalid += 1
        if decision.arrived_at is not None:
            self.slack_ms.append(decision.slack_ms)

    def tick(self, ticker: Ticker) -> None:
        self.ticks = ticker.ticks
        self.late_ticks = ticker.late_ticks
        self.max_tick_lag_ms = ticker.max_lag * 1e3
        self.total_tick_lag_ms = ticker.total_lag * 1e3

    def to_dict(self) -> dict[str, Any]:
        return {
            "frames": self.frames,
            "on_time": self.on_time,
            "late": self.late,
            "fallback": self.fallback,
            "invalid": self.invalid,
            "ticks": self.ticks,
            "late_ticks": self.late_ticks,
            "max_tick_lag_ms": round(self.max_tick_lag_ms, 3),
            "mean_tick_lag_ms": round(self.total_tick_lag_ms / max(self.ticks, 1), 3),
            "decisions": self.decisions,
            "planned": self.planned,
            "planner_misses": self.planner_misses,
            "planner_errors": self.planner_errors,
            "planner_late_answers": self.planner_late_answers,
            "last_planner_error": self.last_planner_error,
            "k_histogram": {str(k): v for k, v in sorted(self.k_histogram.items())},
            "latency_ms": _quantiles(self.latency_ms),
            "search_ms": _quantiles(self.search_ms),
            "slack_ms": _quantiles(self.slack_ms),
            "viewer_drops": self.viewer_drops,
            "agent_drops": self.agent_drops,
            "errors_sent": self.errors_sent,
        }

    def brief(self) -> dict[str, Any]:
        """The few counters a viewer shows each frame."""
        return {
            "on_time": self.on_time,
            "late": self.late,
            "fallback": self.fallback,
            "invalid": self.invalid,
            "planner_misses": self.planner_misses,
            "planner_errors": self.planner_errors,
            "late_ticks": self.late_ticks,
            "max_tick_lag_ms": round(self.max_tick_lag_ms, 3),
        }


@dataclasses.dataclass(frozen=True)
class Answer:
    """What an agent gave for one frame, before the frame rule judges it."""

    arrivals: tuple[Arrival, ...]
    source: str  # "agent" | "reflex" | "planned" | "opponent"
    k: int | None = None
    cost: int | None = None  # clock ticks the answer declares (planner, simulated clock)
    latency_ms: float | None = None
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class Report:
    """How a frame's action was chosen (the `ActionReport`, plus the built-in agents' detail)."""

    frame: int
    action: int
    provenance: Provenance
    slack_ms: float
    received_action: int
    source: str
    k: int | None
    cost: int
    latency_ms: float | None

    def proto(self) -> env_pb2.ActionReport:
        return env_pb2.ActionReport(
            frame=self.frame,
            action=self.action,
            provenance=int(self.provenance),
            slack_ms=self.slack_ms,
            received_action=self.received_action,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "frame": self.frame,
            "action": self.action,
            "provenance": self.provenance.label,
            "source": self.source if self.provenance is Provenance.ON_TIME else "fallback",
            "answer_source": self.source,
            "slack_ms": round(self.slack_ms, 3),
            "received_action": self.received_action,
            "k": self.k,
            "cost": self.cost,
            "latency_ms": None if self.latency_ms is None else round(self.latency_ms, 3),
        }


class AgentLink:
    """One connected agent stream: a bounded outbox the frame loop never waits on."""

    def __init__(self, *, maxsize: int = 256, send_observation: bool = False) -> None:
        self.queue: asyncio.Queue[env_pb2.ServerMessage | None] = asyncio.Queue(maxsize)
        self.send_observation = send_observation
        self.dropped = 0
        self.closed = False

    def send(self, msg: env_pb2.ServerMessage) -> bool:
        """Enqueues `msg`; a full queue loses its oldest message. True if one was lost."""
        if self.closed:
            return False
        lost = self.queue.full()
        if lost:
            self.queue.get_nowait()
            self.dropped += 1
        self.queue.put_nowait(msg)
        return lost

    def error(self, code: grpc.StatusCode, message: str) -> None:
        self.send(env_pb2.ServerMessage(error=env_pb2.Status(code=code.value[0], message=message)))

    def close(self) -> None:
        """Ends the stream after what is queued (the end marker is never dropped)."""
        if self.closed:
            return
        if self.queue.full():
            self.queue.get_nowait()
            self.dropped += 1
        self.queue.put_nowait(None)
        self.closed = True


def _now_ns_at(mono: float) -> int:
    """Unix time (ns) of a monotonic instant."""
    return time.time_ns() + int((mono - time.monotonic()) * 1e9)


class Session:
    """One live game: its state, frame loop, agent, viewers, recording and statistics."""

    def __init__(
        self,
        config: SessionConfig,
        runtime: GameRuntime,
        *,
        planner_stub=None,
        record_dir: Path | None = None,
        viewer_queue: int = 32,
        late_tick_ms: float = 5.0,
        plan_timeout_s: float = 30.0,
        clock_ticks_per_frame: int = 32,
        owned_by_stream: bool = False,
    ) -> None:
        from server import _agents  # the agents use Session; import here to avoid a cycle

        self.id = secrets.token_hex(8)
        self._token = secrets.token_urlsafe(32)
        self.config = config
        self.runtime = runtime
        self.clock_game = runtime.clock_game
        self.created = time.time()
        self.status = "waiting"
        self.reason = ""
        self.stats = SessionStats()
        self.viewers = ViewerHub(viewer_queue)
        self.late_tick_ms = late_tick_ms
        self.plan_timeout_s = plan_timeout_s
        self.tick_s = config.period / clock_ticks_per_frame
        #: Join-created sessions end with their agent's stream.
        self.owned_by_stream = owned_by_stream
        self.state, self.info = runtime.init(config.seed)
        self.frame = 0
        self.episode_return = 0.0
        self.published_at = time.monotonic()
        self.deadline: float | None = None
        self.last_report: Report | None = None
        self._deadlines: dict[int, float | None] = {}
        self._opponent_frames: set[int] = set()  # recent frames the clock opponent moved in
        self.link: AgentLink | None = None
        self.agent = _agents.make_agent(self, planner_stub)
        self.opponent = _agents.Opponent(self) if self.clock_game else None
        self.recorder: Recorder | None = None
        self.replay_path: Path | None = None
        if config.record:
            if record_dir is None:
                raise ValueError("recording needs a record_dir")
            self.replay_path = Path(record_dir) / f"{config.game_id}_{self.id}.jsonl"
            self.recorder = Recorder(self.replay_path, self._header())
        self._task: asyncio.Task | None = None
        self.ended = asyncio.Event()

    # Identity and access ----------------------------------------------------------------------

    @property
    def token(self) -> str:
        """The session's secret (only the creator is told; never logged)."""
        return self._token

    def check_token(self, token: str) -> bool:
        """Constant-time comparison with the session token."""
        return hmac.compare_digest(token.encode(), self._token.encode())

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, game={self.config.game_id!r}, status={self.status!r})"

    @property
    def live(self) -> bool:
        return self.status in LIVE

    @property
    def viewer_path(self) -> str:
        return f"/v1/sessions/{self.id}/ws"

    def summary(self) -> dict[str, Any]:
        """JSON view without the token (GET /v1/sessions)."""
        return {
            "id": self.id,
            "game": self.config.game_id,
            "agent": self.config.agent,
            "status": self.status,
            "reason": self.reason,
            "frame": self.frame,
            "episode_return": self.episode_return,
            "created": self.created,
            "agent_connected": self.link is not None,
            "viewers": len(self.viewers),
            "viewer_path": self.viewer_path,
        }

    def details(self) -> dict[str, Any]:
        """JSON view with settings and statistics (GET /v1/sessions/{id})."""
        stats = self.stats.to_dict()
        stats["viewer_drops"] = self.viewers.dropped
        return {
            **self.summary(),
            "config": self.config.to_dict(),
            "clocks": list(self.info.clocks),
            "done": self.info.done,
            "stats": stats,
            "replay": str(self.replay_path) if self.replay_path else None,
        }

    # Agent streams ----------------------------------------------------------------------------

    def attach(self, link: AgentLink) -> None:
        """Connects an agent stream (the caller sent the handshake); it gets the current frame
        at once when the game is already running."""
        if self.link is not None:
            raise SessionError(
                grpc.StatusCode.FAILED_PRECONDITION, f"session {self.id} already has an agent"
            )
        self.link = link
        self.agent.attached()
        if self.status == "running":
            link.send(env_pb2.ServerMessage(frame=self._frame_proto(link)))

    def detach(self, link: AgentLink) -> None:
        if self.link is link:
            self.link = None
            self.stats.agent_drops += link.dropped
            if self.owned_by_stream and self.live:
                self.stop("agent stream ended")

    def submit(self, frame: int, action: int, at: float) -> SessionError | None:
        """An `Action{frame, action}` from the agent stream; returns what was wrong with it.

        Past frames are refused (and counted late), as are frames too far ahead. An action out
        of range or illegal at the current frame gets an error *and* is kept: its frame then
        reports INVALID and plays the fallback.
        """
        if not self.live:
            return SessionError(
                grpc.StatusCode.FAILED_PRECONDITION, f"session {self.id} is {self.status}"
            )
        check = check_action(
            frame,
            action,
            current=self.frame,
            num_actions=self.runtime.game.num_actions,
            legal=self.info.legal,
        )
        opponents = frame in self._opponent_frames or (
            frame == self.frame and self._actor() is self.opponent
        )
        if self.clock_game and opponents:
            return SessionError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"frame {frame} is the opponent's move (your agent is player {AGENT_PLAYER})",
            )
        if not check.keep:
            message = check.error
            if frame < self.frame:
                self.stats.late += 1
                deadline = self._deadlines.get(frame)
                if deadline is not None:
                    message += f"; it arrived {(at - deadline) * 1e3:.1f} ms after its deadline"
            return SessionError(grpc.StatusCode.INVALID_ARGUMENT, message)
        if not self.agent.receive(frame, Arrival(action, at)):
            return SessionError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"more than {MAX_ACTIONS_PER_FRAME} actions for frame {frame}",
            )
        if check.error is not None:
            return SessionError(
                grpc.StatusCode.INVALID_ARGUMENT, check.error + "; the frame will play the fallback"
            )
        return None

    # Lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Starts the frame loop (a task on the running event loop)."""
        if self._task is None:
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self.run(), name=f"session {self.id}")
            # A task cancelled before it ran never enters `run`: end the session here too.
            self._task.add_done_callback(lambda _: self._finish("stopped", self.reason))

    def stop(self, reason: str) -> None:
        """Ends the session now (the frame loop is cancelled)."""
        if not self.live:
            return
        self.reason = reason
        if self._task is not None and not self._task.done():
            self._task.cancel()
        else:
            self._finish("stopped", reason)

    async def wait(self) -> None:
        """Returns when the session has ended."""
        await self.ended.wait()

    async def run(self) -> None:
        """The frame loop: waits for an agent (grpc), then plays until the game ends."""
        try:
            await self.agent.ready()
            self.status = "running"
            if self.config.simulated:
                await self._run_simulated()
            elif self.clock_game:
                await self._run_chess_clock()
            else:
                await self._run_real_time()
        except asyncio.CancelledError:
            self._finish("stopped", self.reason)
            raise
        except Exception as e:  # a bug must end this session, never the server
            log.exception("session %s failed", self.id)
            self._finish("failed", f"{type(e).__name__}: {e}")
        else:
            self._finish("finished", self.reason)

    def _over(self) -> bool:
        if self.info.done:
            self.reason = "terminated" if self.info.terminated else "truncated"
            return True
        if self.config.max_frames and self.frame >= self.config.max_frames:
            self.reason = "max_frames"
            return True
        return False

    def _finish(self, status: str, reason: str) -> None:
        if self.ended.is_set():
            return
        reason = reason or status
        self.status = status
        self.reason = reason
        self.agent.close()
        if self.recorder is not None:
            end = {"frames": self.frame, "return": self.episode_return, "reason": reason}
            self.recorder.close(end)
        if self.link is not None:
            if status != "finished":
                self.link.error(grpc.StatusCode.ABORTED, f"session {self.id} {status}: {reason}")
            self.link.close()
        end_msg = {"type": "end", "session": self.id, "status": status, "reason": reason}
        end_msg["stats"] = self.stats.to_dict()
        end_msg["episode_return"] = self.episode_return
        self.viewers.close(json.dumps(end_msg))
        self.ended.set()

    # Frame loops ------------------------------------------------------------------------------

    def _actor(self):
        """Who moves at the current frame: the agent, or the clock games' built-in opponent."""
        if self.clock_game and self.info.current_player != AGENT_PLAYER:
            return self.opponent
        return self.agent

    async def _run_real_time(self) -> None:
        ticker = Ticker(self.config.period, late_after=self.late_tick_ms / 1e3)
        self._publish(ticker.scheduled(1))
        while not self._over():
            n = self.frame
            await ticker.wait(n + 1)  # tick n+1 is frame n's deadline
            self.stats.tick(ticker)
            actor = self._actor()
            answer = actor.answer(n)
            decision = decide_action(
                answer.arrivals,
                deadline=ticker.scheduled(n + 1),
                legal=self.info.legal,
                fallback=self._fallback(),
            )
            self._apply(actor, decision, answer, cost=0)
            self._publish(ticker.scheduled(n + 2))

    async def _run_simulated(self) -> None:
        self._publish(None)
        while not self._over():
            n = self.frame
            actor = self._actor()
            await actor.wait(n)
            answer = actor.answer(n)
            decision = decide_action(
                answer.arrivals, deadline=None, legal=self.info.legal, fallback=self._fallback()
            )
            self._apply(actor, decision, answer, cost=self._cost(actor, decision, answer))
            self._publish(None)
            await asyncio.sleep(0)  # let the other sessions and the servers run

    def _chess_deadline(self, now: float) -> float:
        """Deadline of the current ply: the opponent moves after one frame period (paced for
        viewers); the agent has what is left on its clock (one period once it is empty)."""
        if self._actor() is self.opponent:
            return now + self.config.period
        left = self.info.clocks[AGENT_PLAYER]
        return now + (left * self.tick_s if left > 0 else self.config.period)

    async def _run_chess_clock(self) -> None:
        """Clock games in real time: a ply per frame; the agent's clock runs in wall time."""
        now = time.monotonic()
        self._publish(self._chess_deadline(now), now=now)
        while not self._over():
            n = self.frame
            actor = self._actor()
            deadline = self.deadline
            if actor is self.opponent:
                await _sleep_until(deadline)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(actor.wait(n), max(0.0, deadline - time.monotonic()))
            answer = actor.answer(n)
            decision = decide_action(
                answer.arrivals, deadline=deadline, legal=self.info.legal, fallback=self._fallback()
            )
            self._apply(actor, decision, answer, cost=self._cost(actor, decision, answer))
            now = time.monotonic()
            self._publish(self._chess_deadline(now), now=now)

    def _fallback(self) -> int:
        if self.config.fallback == "reflex" and self.info.reflex >= 0:
            return self.info.reflex
        return self.info.fallback

    def _cost(self, actor, decision: FrameDecision, answer: Answer) -> int:
        """Clock ticks the move of this frame charges its mover (clock games only).

        The opponent's moves are free. In simulated mode the planner agent pays what its
        option costs (sims(k) ticks) and other agents their thinking time in ticks; in real
        time every agent pays its thinking time, and a move that missed the clock pays all
        that was left (in strict mode the flag falls).
        """
        if not self.clock_game or actor is self.opponent:
            return 0
        left = self.info.clocks[AGENT_PLAYER]
        if left <= 0:
            return 0
        if self.config.simulated and answer.cost is not None:
            return int(answer.cost)
        if decision.arrived_at is None or decision.provenance is Provenance.LATE:
            return left
        return min(left, wall_ticks(decision.arrived_at - self.published_at, self.tick_s))

    def _apply(self, actor, decision: FrameDecision, answer: Answer, *, cost: int) -> None:
        """Plays the decided action: steps the game, books the statistics, records the frame."""
        n = self.frame
        self.state, info = self.runtime.step(self.state, decision.action, cost)
        gain = info.rewards[AGENT_PLAYER] if self.clock_game else info.reward
        self.episode_return += gain
        self.stats.count(decision)
        actor.settle(n, decision, answer)
        report = Report(
            frame=n,
            action=decision.action,
            provenance=decision.provenance,
            slack_ms=decision.slack_ms,
            received_action=decision.received_action,
            source=answer.source,
            k=answer.k,
            cost=cost,
            latency_ms=answer.latency_ms,
        )
        if self.recorder is not None:
            self.recorder.frame(self._record_line(report, info))
        self.info = info
        self.frame = n + 1
        self.last_report = report

    def _record_line(self, report: Report, info: HostInfo) -> dict[str, Any]:
        return {
            "frame": report.frame,
            "action": report.action,
            "cost": report.cost,
            "provenance": report.provenance.label,
            "source": report.source,
            "k": report.k,
            "latency_ms": report.latency_ms,
            "slack_ms": round(report.slack_ms, 3),
            "reward": info.reward,
            "done": info.done,
            "state": {
                "frame": info.frame,
                "digest": state_digest(self.state),
                "current_player": info.current_player,
                "clocks": list(info.clocks),
            },
        }

    def _header(self) -> dict[str, Any]:
        return {
            "game": self.config.game_id,
            "game_params": self.runtime.game_params,
            "seed": self.config.seed,
            "initial": state_digest(self.state),
            "session": self.id,
            "settings": self.config.to_dict(),
            "checkpoint": str(self.runtime.checkpoint) if self.runtime.checkpoint else None,
        }

    # Publishing -------------------------------------------------------------------------------

    def _publish(self, deadline: float | None, *, now: float | None = None) -> None:
        """Frame `self.frame` is out: the mover starts on it, the agent and viewers get it."""
        self.published_at = time.monotonic() if now is None else now
        self.deadline = deadline
        self._deadlines[self.frame] = deadline
        self._deadlines.pop(self.frame - 2 * MAX_FRAMES_AHEAD, None)
        self._opponent_frames.discard(self.frame - 2 * MAX_FRAMES_AHEAD)
        if not self._over():
            actor = self._actor()
            if actor is self.opponent:
                self._opponent_frames.add(self.frame)
            actor.begin(self.frame)
        if self.link is not None:
            self.stats.agent_drops += self.link.send(
                env_pb2.ServerMessage(frame=self._frame_proto(self.link))
            )
        self.viewers.publish(self.viewer_frame_text)

    def state_proto(self):
        return self.runtime.state_proto(self.state)

    def _frame_proto(self, link: AgentLink) -> env_pb2.Frame:
        info = self.info
        reward = info.rewards[AGENT_PLAYER] if self.clock_game else info.reward
        simulated = self.config.simulated
        msg = env_pb2.Frame(
            frame=self.frame,
            server_time_ns=time.time_ns(),
            deadline_ns=0 if self.deadline is None else _now_ns_at(self.deadline),
            period_ms=0.0 if simulated else self.config.period * 1e3,
            legal_action_mask=wire.to_tensor(info.legal),
            reward=reward,
            terminated=info.terminated,
            truncated=info.truncated,
            clocks=list(info.clocks),
            current_player=info.current_player,
            state=self.state_proto(),
            episode_return=self.episode_return,
        )
        if self.last_report is not None:
            msg.previous.CopyFrom(self.last_report.proto())
        if link.send_observation:
            msg.observation.CopyFrom(wire.to_tensor(self.runtime.observe(self.state)))
        return msg

    def viewer_frame_text(self) -> str:
        """`viewer_frame` as the JSON text the websockets send."""
        return json.dumps(self.viewer_frame())

    def viewer_frame(self) -> dict[str, Any]:
        """The websocket JSON of the current frame."""
        stats = self.stats.brief()
        stats["viewer_drops"] = self.viewers.dropped
        return {
            "type": "frame",
            "session": self.id,
            "frame": self.frame,
            "state": render(self.runtime.game, self.state),
            "previous": None if self.last_report is None else self.last_report.to_dict(),
            "episode_return": self.episode_return,
            "done": self.info.done,
            "clocks": list(self.info.clocks),
            "period_ms": 0.0 if self.config.simulated else self.config.period * 1e3,
            "stats": stats,
        }

    def viewer_hello(self) -> dict[str, Any]:
        return {
            "type": "hello",
            "session": self.summary(),
            "config": self.config.to_dict(),
            "spec": self.runtime.describe(),
        }


async def _sleep_until(t: float) -> None:
    while (remaining := t - time.monotonic()) > 0:
        await asyncio.sleep(remaining)
