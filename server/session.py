"""Live sessions: one game, its agent and its frame loop (real-time or simulated clock).

A little past ~450 lines: a session is the one owner of its state, frames, agents' answers,
viewers and statistics in every clock mode (the batched ticks call its `tick_*` steps), and
splitting it would spread that ownership across files."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import secrets
import time
from pathlib import Path
from typing import Any

import grpc

from rtplan import games
from rtplan.server import _messages as messages
from rtplan.server._agent_api import Agent
from rtplan.server._config import LIVE, SessionConfig, SessionError
from rtplan.server._frame_info import HostInfo
from rtplan.server._frames import FrameWindow
from rtplan.server._messages import WallClock
from rtplan.server._moves import Move, decide_move, move_report
from rtplan.server._queue import AgentLink
from rtplan.server._records import PlayedLog, Report
from rtplan.server._rules import (
    MAX_ACTIONS_PER_FRAME,
    Arrival,
    clock_ticks,
    countdown_start,
    initial_ticks,
)
from rtplan.server._runtime import AGENT_PLAYER, GameRuntime
from rtplan.server._stats import SessionStats
from rtplan.server._tick_group import TickGroups
from rtplan.server._ticker import Tick, Ticker, sleep_until
from rtplan.server._viewers import ViewerHub
from rtplan.server.replay import Recorder
from rtplan.v1 import env_pb2, tensor_pb2

log = logging.getLogger("rtplan.server")
_INVALID = grpc.StatusCode.INVALID_ARGUMENT


class Session:
    """One live game: its state, frame loop, agent, viewers, recording and statistics.

    It is the `AgentHost` of its agents: they read the current frame through it and report
    their planner events to it; it alone updates `stats`.
    """

    def __init__(
        self,
        config: SessionConfig,
        runtime: GameRuntime,
        *,
        agent: Agent,
        opponent: Agent | None = None,
        record_dir: Path | None = None,
        viewer_queue: int = 32,
        late_tick_ms: float = 5.0,
        clock_ticks_per_frame: int = 32,
        owned_by_stream: bool = False,
        countdown_s: float = 0.0,
        ticks: TickGroups | None = None,
        first: tuple[games.State, HostInfo] | None = None,
    ) -> None:
        """
        Args:
            config: what to play (validated).
            runtime: the game as this server runs it.
            agent: who answers the frames (`server._agents.make_agent`).
            opponent: clock games: who plays player 1.
            record_dir: where the replay file goes when `config.record`.
            viewer_queue: frames a viewer's queue holds before it drops the oldest.
            late_tick_ms: a tick later than this counts as late.
            clock_ticks_per_frame: clock games in real time: clock ticks per frame period.
            owned_by_stream: the session ends with its agent's stream (Join-created).
            countdown_s: real time: seconds between the agent's being ready and frame 0's
                clock (a person's countdown; frame 0 is shown meanwhile, nothing ticks).
            ticks: the server's tick groups: a real-time single-player session ticks in the
                group of its (game, FPS), stepped in one batch with the others; None: it
                ticks alone (`_run_real_time`).
            first: frame 0's state and info when already computed (`first_frame`: the
                manager computes them off the event loop); None: computed here.
        """
        if runtime.kind is games.Kind.CLOCK and opponent is None:
            raise ValueError(f"{config.game_id} is a clock game: the session needs an opponent")
        self.id = secrets.token_hex(8)
        self._token = secrets.token_urlsafe(32)
        self.config = config
        self.runtime = runtime
        #: The game's kind (`games.kind_of`): a clock game's session plays an opponent.
        self.kind = runtime.kind
        clock = self.kind is games.Kind.CLOCK
        self.created = time.time()
        self.status = "waiting"
        self.reason = ""
        # The share of a frame an answer used is counted where frames have a fixed period.
        fixed = not config.simulated and self.kind is not games.Kind.CLOCK
        self.stats = SessionStats(config.period * 1e3 if fixed else None)
        self.viewers = ViewerHub(viewer_queue)
        self.late_tick_ms = late_tick_ms
        self.tick_s = config.period / clock_ticks_per_frame
        self.owned_by_stream = owned_by_stream
        # A time control in seconds (real-time clock games): each side's clock and increment
        # in this session's ticks; None / 0: the game's initial_time and no increment.
        timed = clock and not config.simulated
        self.initial_time = initial_ticks(config, self.kind, clock_ticks_per_frame)
        self.increment = clock_ticks(config.increment_s, self.tick_s) if timed else 0
        self.countdown_s = 0.0 if config.simulated else countdown_s
        #: Monotonic time frame 0's clock starts (after the countdown); None before the agent
        #: is ready.
        self.starts_at: float | None = None
        self._state, self.info = first or runtime.init(config.seed, initial_time=self.initial_time)
        self._fetch = None
        self.frame = 0
        self.episode_return = 0.0
        self.published_at = time.monotonic()
        self.deadline: float | None = None
        self.last_report: Report | None = None
        self.late_reports: tuple[Report, ...] = ()
        #: What was played so far, for a viewer that joins late (its hello's `past`).
        self.played = PlayedLog(moves=clock)
        self.wall = WallClock()
        self._window = FrameWindow()
        self.link: AgentLink | None = None
        self.agent = agent
        self.opponent = opponent if clock else None
        self.recorder: Recorder | None = None
        self.replay_path: Path | None = None
        if config.record:
            if record_dir is None:
                raise ValueError("recording needs a record_dir")
            self.replay_path = Path(record_dir) / f"{config.game_id}_{self.id}.jsonl"
            self.recorder = Recorder(self.replay_path, self)
        self._ticks = ticks
        self._task: asyncio.Task | None = None
        self.ended = asyncio.Event()

    @staticmethod
    def first_frame(
        config: SessionConfig, runtime: GameRuntime, clock_ticks_per_frame: int = 32
    ) -> tuple[games.State, HostInfo]:
        """Frame 0's state and info of a session of `config` (its seed, and its time control in
        real time): the `first` argument. Safe in a worker thread (the network's forward for
        the reflex releases the GIL; the event loop ticks on meanwhile)."""
        initial_time = initial_ticks(config, runtime.kind, clock_ticks_per_frame)
        return runtime.init(config.seed, initial_time=initial_time)

    # Identity and views -----------------------------------------------------------------------

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

    def summary(self) -> messages.SessionSummary:
        """JSON view without the token (GET /v1/sessions)."""
        return messages.summary(self)

    def details(self) -> dict[str, Any]:
        """JSON view with settings and statistics (GET /v1/sessions/{id})."""
        return messages.details(self)

    def viewer_hello(self) -> messages.HelloMessage:
        return messages.viewer_hello(self)

    def viewer_frame_text(self) -> str:
        """The websocket JSON text of the current frame."""
        return json.dumps(messages.viewer_frame(self))

    # What agents may read and report (AgentHost) ----------------------------------------------

    def state_proto(self) -> tensor_pb2.GameState:
        """The current state on the wire, as its mover decides from it: in real time the served
        state (`Game.served_state`: the planner's root and policy-only move choose among the
        served moves), with the simulated clock the state itself."""
        state = self.runtime.served_state(self.state) if self.config.served else self.state
        return self.runtime.state_proto(state)

    def plan_sent(self, k: int) -> None:
        self.stats.plan_sent(k)

    def plan_replied(self, latency_ms: float, search_ms: float, *, discarded: bool) -> None:
        self.stats.plan_replied(latency_ms, search_ms, discarded=discarded)

    def plan_cancelled(self) -> None:
        self.stats.plan_cancelled()

    def plan_failed(self, message: str) -> None:
        self.stats.plan_failed(message)

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
            frame = messages.frame_proto(self, late=(), observation=link.send_observation)
            link.put(env_pb2.ServerMessage(frame=frame))

    def detach(self, link: AgentLink) -> None:
        if self.link is link:
            self.link = None
            self.stats.link_ended(link.dropped)
            if self.owned_by_stream and self.live:
                self.stop("agent stream ended")

    def error_sent(self) -> None:
        """The agent stream was told what was wrong with one of its messages."""
        self.stats.error_sent()

    @property
    def starts_in_s(self) -> float:
        """Seconds until frame 0's clock starts (the countdown); 0 once it has."""
        if self.starts_at is None:
            return 0.0
        return max(0.0, self.starts_at - time.monotonic())

    @property
    def pending_turn(self) -> int | None:
        """A person's buffered turn, waiting for a frame where it is legal (Pac-Man)."""
        return getattr(self.agent, "pending", None)

    def submit(self, frame: int, action: int, at: float) -> SessionError | None:
        """An `Action{frame, action}` from the agent stream; returns what was wrong with it
        (`FrameWindow.admit` says which frames take an action, and what it means)."""
        if not self.live:
            return SessionError(
                grpc.StatusCode.FAILED_PRECONDITION, f"session {self.id} is {self.status}"
            )
        arrival = Arrival(action, at)
        legal, num_actions = self.info.legal, self.runtime.game.num_actions
        if getattr(self.agent, "buffers_turns", False):
            legal = None  # an illegal turn waits for its frame (`buffered_turn`): no error
        verdict = self._window.admit(
            frame, arrival, current=self.frame, num_actions=num_actions, legal=legal
        )
        if verdict.late is not None:
            self.stats.came_late(verdict.late.slack_ms)
            self.agent.came_late(frame, arrival)
            if self.recorder is not None:
                self.recorder.late(verdict.late)
        elif verdict.keep and not self.agent.receive(frame, arrival):
            too_many = f"more than {MAX_ACTIONS_PER_FRAME} actions for frame {frame}"
            return SessionError(_INVALID, too_many)
        return None if verdict.error is None else SessionError(_INVALID, verdict.error)

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
            if not await self._joined():
                self._finish("stopped", self.reason)
                return
            self.starts_at = countdown_start(time.monotonic(), self.countdown_s)
            self.status = "running"
            if self.config.simulated:
                await self._run_simulated()
            elif self.kind is games.Kind.CLOCK:
                await self._run_chess_clock()
            elif self._ticks is not None:
                await self._ticks.play(self)
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

    async def _joined(self) -> bool:
        """Waits for the agent to be ready; False when none joined within the session's
        `join_within_s`."""
        limit = self.config.join_within_s
        try:
            await asyncio.wait_for(self.agent.ready(), limit or None)
        except TimeoutError:
            self.reason = f"no agent joined within {limit:g} s"
            return False
        return True

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
        if self.link is not None:
            if status != "finished":
                self.link.error(grpc.StatusCode.ABORTED, f"session {self.id} {status}: {reason}")
            self.link.close()
        end = messages.viewer_end(self)  # after the link's close: its end marker may drop one
        if self.recorder is not None:
            self.recorder.close(end, frames=self.frame)
        self.viewers.close(json.dumps(end))
        self.ended.set()

    # Frame loops ------------------------------------------------------------------------------

    def _actor(self) -> Agent:
        """Who moves at the current frame: the agent, or the clock games' built-in opponent."""
        if self.opponent is not None and self.info.current_player != AGENT_PLAYER:
            return self.opponent
        return self.agent

    async def _run_real_time(self) -> None:
        """Real time, ticking alone (no tick groups): the group's steps (`tick_decide`,
        `tick_played`) around a batch-1 step."""
        # Tick 0 is the countdown's end: frame 0 is shown at once, its deadline a period later.
        ticker = Ticker(
            self.config.period, start=self.starts_at, late_after=self.late_tick_ms / 1e3
        )
        self._publish(ticker.scheduled(1))
        while not self._over():
            tick = await ticker.wait(self.frame + 1)  # tick n+1 is frame n's deadline
            move = self.tick_decide(tick, ticker.late_after)
            state, info = self.runtime.step(self.state, move.action)
            self.tick_played(move, info, ticker.scheduled(self.frame + 2), state=state)

    async def _run_simulated(self) -> None:
        self._publish(None)
        while not self._over():
            actor = self._actor()
            await actor.wait(self.frame)
            self._step(actor)
            self._publish(None)
            await asyncio.sleep(0)  # let the other sessions and the servers run

    def _on_clock(self, actor: Agent) -> bool:
        """The actor thinks on its clock: the agent, and the planner opponent (the reflex and
        random opponents answer at once and move for free)."""
        return actor is not self.opponent or self.config.opponent_plans

    def _person(self, actor: Agent) -> bool:
        """The actor is a person on the watch page (their click applies at once)."""
        return actor is self.agent and self.config.agent == "human"

    def _chess_deadline(self, now: float) -> float:
        """Deadline of the current ply: a mover on its clock has what is left on it (one frame
        period once it is empty); the reflex or random opponent moves after one frame period
        (paced for viewers)."""
        if not self._on_clock(self._actor()):
            return now + self.config.period
        left = self.info.clocks[self.info.current_player]
        return now + (left * self.tick_s if left > 0 else self.config.period)

    async def _run_chess_clock(self) -> None:
        """Clock games in real time: a ply per frame; the clock of a mover on its clock runs in
        wall time, and its move applies as soon as it arrives (a person's), or once it has
        shown for a frame period (an agent's or the planner opponent's)."""
        start = max(time.monotonic(), self.starts_at)
        self._publish(self._chess_deadline(start), now=start)
        await sleep_until(start)  # the countdown: no move applies, no clock runs before it
        while not self._over():
            actor = self._actor()
            if not self._on_clock(actor):
                await sleep_until(self.deadline)
            else:
                with contextlib.suppress(TimeoutError):
                    left = max(0.0, self.deadline - time.monotonic())
                    await asyncio.wait_for(actor.wait(self.frame), left)
                if not self._person(actor):
                    # Paced for viewers as the free opponents are: a move shows for a frame
                    # period at least (its clock was charged up to its answer only).
                    await sleep_until(self.published_at + self.config.period)
            self._step(actor)
            now = time.monotonic()
            self._publish(self._chess_deadline(now), now=now)

    def _decide(self, actor: Agent) -> Move:
        """Decides the current frame from the actor's answer by its deadline."""
        on_clock = self.kind is games.Kind.CLOCK and self._on_clock(actor)
        return decide_move(actor.answer(self.frame, self), self, actor is self.agent, on_clock)

    def _step(self, actor: Agent) -> None:
        """Decides the current frame and plays it alone (one batch-1 step)."""
        move = self._decide(actor)
        state, info = self.runtime.step(self.state, move.action, move.cost, move.credit)
        self._played(move, info, state, None)

    def _played(self, move: Move, info: HostInfo, state, fetch) -> None:
        """Frame `move.frame` was played and led to `state`, or to what `fetch()` returns (read
        on first use): books the statistics and records the frame."""
        self._state, self._fetch = state, fetch
        clock = self.kind is games.Kind.CLOCK
        self.episode_return += info.rewards[AGENT_PLAYER] if clock else info.reward
        decision = move.decision
        self.stats.frame(
            decision.provenance, None if decision.arrived_at is None else decision.slack_ms
        )
        if move.answer.landing:
            self.stats.landed(decision.provenance, failed=move.answer.error is not None)
        report = move_report(move, info, kind=self.kind)
        self._window.decided(report, agents=move.by_agent)
        if self.recorder is not None:
            self.recorder.frame(report, self.state, info)
        self.info = info
        self.frame = move.frame + 1
        self.last_report = report
        self.played.add(report)

    @property
    def state(self) -> games.State:
        """The current game state (batched ticks: its row of the group's batch, fetched to the
        host on first read)."""
        if self._fetch is not None:
            self._state, self._fetch = self._fetch(), None
        return self._state

    # Real-time ticks, alone or in a group (`server._tick_group.TickGroup`) --------------------

    def tick_started(self, start: float, deadline: float, *, shown: bool = False) -> bool:
        """A group's tick at `start` is this session's tick 0: frame 0 is out now, due at
        `deadline` (its next tick); `shown`: the viewers have it already (they were shown it
        as they joined, `ViewerHub.publish`). Returns True when the game is already over."""
        self.starts_at = start
        self._publish(deadline, shown=shown)
        return self._over()

    def tick_decide(self, tick: Tick, late_after: float) -> Move:
        """The tick that is the current frame's deadline fired: decides the frame."""
        self.stats.ticked(tick, late_after)
        return self._decide(self._actor())

    def tick_played(self, move: Move, info: HostInfo, deadline: float, *, state=None, fetch=None):
        """`move` was played and led to `state` (a group: to `fetch()`'s, read only if needed);
        publishes the next frame, due at `deadline`. Returns True when the game is over."""
        self._played(move, info, state, fetch)
        self._publish(deadline)
        return self._over()

    # Publishing -------------------------------------------------------------------------------

    def _publish(
        self, deadline: float | None, *, now: float | None = None, shown: bool = False
    ) -> None:
        """Frame `self.frame` is out: the mover starts on it, the agent and viewers get it
        (`shown`: the viewers have it already, `ViewerHub.publish`)."""
        self.published_at = time.monotonic() if now is None else now
        self.deadline = deadline
        over = self._over()
        opponents = not over and self._actor() is self.opponent
        self._window.published(self.frame, deadline, opponents=opponents)
        if not over:
            self._actor().begin(self.frame, self)
        self.late_reports = tuple(self._window.take_late())
        if self.link is not None:
            obs = self.link.send_observation
            frame = messages.frame_proto(self, late=self.late_reports, observation=obs)
            self.link.put(env_pb2.ServerMessage(frame=frame))
        self.viewers.publish(self.viewer_frame_text, shown=shown)
