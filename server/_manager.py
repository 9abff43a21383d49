"""The sessions of one server: validated creation, lookup, limits, deletion and shutdown."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math

import grpc

from rtplan import games
from rtplan.harness.checkpoint import missing_checkpoint, planner_path
from rtplan.planner.options import COMMITMENTS
from rtplan.server._agents import make_agent, make_opponent
from rtplan.server._config import (
    AGENT_KINDS,
    CLOCKS,
    FALLBACKS,
    OPPONENTS,
    PLAYED,
    WATCHED,
    SessionConfig,
    SessionError,
)
from rtplan.server._human import HumanAgent
from rtplan.server._planner_caps import PlannerCapabilities, check_session
from rtplan.server._replay_folder import Retention, prune_replays
from rtplan.server._runtime import Runtimes
from rtplan.server._tick_group import TickGroups
from rtplan.server._tv import TvRotation
from rtplan.server.session import Session
from rtplan.server.settings import Settings

log = logging.getLogger(__name__)

_INVALID = grpc.StatusCode.INVALID_ARGUMENT
_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
#: The longest time control a session may ask for, in seconds (3 hours a side).
MAX_CLOCK_S = 10_800
#: What names another checkpoints folder, for a missing planner's message.
_CHECKPOINT_DIR = "--checkpoint-dir (RTPLAN_SERVER_CHECKPOINT_DIR)"


def _check_basic(cfg: SessionConfig, settings: Settings) -> None:
    """Checks what needs no game runtime; raises SessionError naming the first problem."""
    try:
        games.game_class(cfg.game_id)
    except games.UnknownGameError as e:
        raise SessionError(_INVALID, str(e)) from None
    if not (isinstance(cfg.fps, float | int) and math.isfinite(cfg.fps) and cfg.fps > 0):
        raise SessionError(_INVALID, f"fps must be a finite number > 0, got {cfg.fps}")
    if cfg.fps > settings.max_fps:
        raise SessionError(_INVALID, f"fps {cfg.fps} above the server's max_fps {settings.max_fps}")
    if not 0 <= cfg.seed < 2**63:
        raise SessionError(_INVALID, f"seed must be in [0, 2**63), got {cfg.seed}")
    for name, value, allowed in (
        ("agent", cfg.agent, AGENT_KINDS),
        ("clock", cfg.clock, CLOCKS),
        ("fallback", cfg.fallback, FALLBACKS),
        ("committed", cfg.committed, COMMITMENTS),
        ("opponent", cfg.opponent, OPPONENTS),
    ):
        if value not in allowed:
            raise SessionError(_INVALID, f"{name} must be one of {list(allowed)}, got {value!r}")
    for name in ("time_s", "increment_s"):
        value = getattr(cfg, name)
        if not (
            isinstance(value, float | int) and math.isfinite(value) and 0 <= value <= MAX_CLOCK_S
        ):
            raise SessionError(
                _INVALID, f"{name} must be a number of seconds in [0, {MAX_CLOCK_S}], got {value}"
            )
    if cfg.max_frames < 0:
        raise SessionError(_INVALID, f"max_frames must be >= 0, got {cfg.max_frames}")
    if cfg.opponent_k and cfg.opponent != "planner":
        raise SessionError(
            _INVALID,
            f"opponent_k is for the planner opponent only, not opponent {cfg.opponent!r}"
            + (" (the gate picks each budget)" if cfg.opponent_gated else ""),
        )
    if cfg.agent == "planner":
        if settings.planner_address is None:
            raise SessionError(
                _PRECONDITION,
                "this server has no planner_address (RTPLAN_SERVER_PLANNER_ADDRESS): the "
                "planner agent is unavailable",
            )
    elif cfg.ks:
        raise SessionError(_INVALID, f"k is for the planner agent only, not agent {cfg.agent!r}")
    if cfg.committed == "plan" and cfg.agent != "planner":
        raise SessionError(
            _INVALID,
            f"committed 'plan' is for the planner agent (it follows the planner service's "
            f"plans), not agent {cfg.agent!r}",
        )


def _check_game(cfg: SessionConfig, runtimes: Runtimes, settings: Settings) -> None:
    """Checks what needs the game as this server runs it (its checkpoint and budgets)."""
    game, checkpoint, budgets, _ = runtimes.info(cfg.game_id)
    clock = games.kind_of(game) is games.Kind.CLOCK
    if cfg.opponent_k and not clock:
        raise SessionError(
            _INVALID, f"opponent_k is for the clock games' opponent; {cfg.game_id} has none"
        )
    planner_opponent = clock and cfg.opponent_plans
    if planner_opponent and settings.planner_address is None:
        raise SessionError(
            _PRECONDITION,
            "this server has no planner_address (RTPLAN_SERVER_PLANNER_ADDRESS): the planner "
            "opponent is unavailable; choose opponent 'reflex' or 'random'",
        )
    if cfg.committed == "plan" and clock:
        raise SessionError(
            _INVALID,
            f"committed 'plan' is for the committed-action games: {cfg.game_id} is a clock "
            "game, whose moves have no committed frames",
        )
    if (cfg.time_s or cfg.increment_s) and (not clock or cfg.simulated):
        raise SessionError(
            _INVALID,
            "time_s and increment_s are for the clock games (Speed Hex, Speed Go) in real time; "
            f"{cfg.game_id} with clock {cfg.clock!r} has no time control",
        )
    needs = []
    if cfg.agent in ("reflex", "planner"):
        needs.append(f"agent {cfg.agent!r}")
    if cfg.fallback == "reflex":
        needs.append("fallback 'reflex'")
    if clock and cfg.opponent in ("reflex", "planner", "gate"):
        needs.append(f"opponent {cfg.opponent!r}")
    if needs and checkpoint is None:
        where = planner_path(settings.checkpoint_dir, cfg.game_id)
        missing = missing_checkpoint("planner", cfg.game_id, where, _CHECKPOINT_DIR)
        needed = " and ".join(needs)
        raise SessionError(_PRECONDITION, f"{needed} needs a planner checkpoint: {missing}")
    bad = [k for k in cfg.ks if k not in budgets]
    if bad:
        raise SessionError(
            _INVALID,
            f"k {bad[0]} is not a budget of {cfg.game_id}: choose from {list(budgets)}",
        )
    if planner_opponent and not cfg.opponent_gated and cfg.opponent_k not in budgets:
        raise SessionError(
            _INVALID,
            f"opponent_k {cfg.opponent_k} is not a budget of {cfg.game_id}: choose from "
            f"{list(budgets)}",
        )


#: Seconds before the next tick a session's start on the event loop may begin (it takes about
#: a millisecond: the session, its first frame published, its row of the batch).
START_SLACK_S = 0.008


class SessionManager:
    """Creates and tracks sessions; one per server, on `app.state`."""

    def __init__(self, settings: Settings, runtimes: Runtimes, planner_stub=None) -> None:
        self.settings = settings
        self.runtimes = runtimes
        self.planner_stub = planner_stub
        #: What the planner service serves (asked when needed, kept a few seconds).
        self.planner = PlannerCapabilities(planner_stub, settings.planner_address)
        self._sessions: dict[str, Session] = {}
        #: Real-time single-player sessions tick in batches by (game, FPS) (`batch_ticks`).
        late_after = settings.late_tick_ms / 1e3
        self.ticks = (
            TickGroups(late_after=late_after, max_rows=settings.max_sessions)
            if settings.batch_ticks
            else None
        )
        #: The session `/tv` shows first while it is live (the demo's game): `create(featured=)`.
        self._featured: str | None = None
        #: What `/tv` shows: the live sessions in turn.
        self.tv = TvRotation(settings.tv_turn_s)
        #: Sessions being created (past the limit check, not yet in `_sessions`): they count
        #: against the limit, as creating awaits.
        self._creating = 0

    @property
    def retention(self) -> Retention:
        """The record folder's retention policy, from the settings."""
        s = self.settings
        return Retention(max_count=s.replay_keep, max_age_s=s.replay_max_age_days * 86400.0)

    def prune_replays(self, *, orphans: bool = False) -> list[str]:
        """Deletes the replay files beyond the retention policy (never a recording in progress),
        and with `orphans` (at start-up) what dead servers' sealed recordings left; blocking (a
        folder scan): call it off the event loop. Returns the names deleted."""
        recording = {s.replay_path.name for s in self._sessions.values() if s.replay_path}
        return prune_replays(
            self.settings.record_dir, self.retention, keep=recording, orphans=orphans
        )

    def __len__(self) -> int:
        return len(self._sessions)

    def live_count(self) -> int:
        return sum(s.live for s in self._sessions.values())

    def list(self) -> list[Session]:
        return list(self._sessions.values())

    def ordered(self, *, status: str | None = None, game: str | None = None) -> list[Session]:
        """The sessions live first (running, then waiting), then the ended ones, newest first
        within each; `status` "live" or "ended" (or a status) and `game` filter them."""
        rank = {"running": 0, "waiting": 1}
        out = sorted(self._sessions.values(), key=lambda s: (rank.get(s.status, 2), -s.created))
        if status == "live":
            out = [s for s in out if s.live]
        elif status == "ended":
            out = [s for s in out if not s.live]
        elif status:
            out = [s for s in out if s.status == status]
        return [s for s in out if not game or s.config.game_id == game]

    def featured(self) -> Session | None:
        """What `/tv` shows (`TvRotation`): the live sessions in turn, `tv_turn_s` each or until
        it ends, the ones the planner or a person plays first; the featured session (the
        demo's game) whenever nothing live is on air; with nothing live, the game shown last."""
        return self.tv.pick(self.list(), self._featured)

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionError(grpc.StatusCode.NOT_FOUND, f"no session {session_id!r}")
        return session

    async def resolve(
        self, cfg: SessionConfig, *, opponent_given: bool, pace_given: bool = True
    ) -> SessionConfig:
        """Fills server defaults of a clock game's opponent and pace.

        Unless an opponent was asked for: a human plays the planner opponent at the largest of
        the game's budgets that the planner service plans, else (any agent) the opponent is the
        reflex when a checkpoint exists, else random. A planner opponent asked for without its
        k plays the largest budget the service plans (else the game's largest, which `create`
        refuses). Unless a frame rate or a time control was asked for (`pace_given`), a
        built-in agent (reflex, planner) in real time plays at the pace a person can watch
        (`WATCHED`), and a person on a clock of minutes (`PLAYED`). Nothing is checked here
        (`create` does).
        """
        try:
            game, checkpoint, budgets, _ = self.runtimes.info(cfg.game_id)
        except games.UnknownGameError:
            return cfg  # `create` names the registered games
        if games.kind_of(game) is not games.Kind.CLOCK:
            return cfg
        pace = {"reflex": WATCHED, "planner": WATCHED, "human": PLAYED}.get(cfg.agent)
        if not pace_given and pace is not None and not cfg.simulated:
            cfg = dataclasses.replace(
                cfg, fps=pace.fps, time_s=pace.time_s, increment_s=pace.increment_s
            )
        if opponent_given:
            if cfg.opponent == "planner" and not cfg.opponent_k and budgets:
                k = max(await self._planned(cfg.game_id, budgets), default=max(budgets))
                cfg = dataclasses.replace(cfg, opponent_k=k)
            return cfg
        planned = await self._planned(cfg.game_id, budgets) if cfg.agent == "human" else ()
        if planned:
            return dataclasses.replace(cfg, opponent="planner", opponent_k=max(planned))
        return dataclasses.replace(cfg, opponent="reflex" if checkpoint else "random")

    async def _planned(self, game_id: str, budgets) -> tuple[int, ...]:
        """The budgets among `budgets` that the planner service plans `game_id` at (none when
        there is no service, it does not answer, or does not serve the game)."""
        if self.planner_stub is None:
            return ()
        caps = await self.planner.get(deciding=True)
        return tuple(k for k in budgets if caps.refusal(game_id, k=k) is None)

    async def create(
        self, cfg: SessionConfig, *, owned_by_stream: bool = False, featured: bool = False
    ) -> Session:
        """Validates `cfg`, builds the game runtime if needed, and starts a session (`featured`:
        the one `/tv` shows while it is live). A recorded session first prunes the record folder
        to its retention policy.

        Raises:
            SessionError: the first problem with the request, or the server is full.
        """
        s = self.settings
        _check_basic(cfg, s)
        if self.live_count() + self._creating >= s.max_sessions:
            raise SessionError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"this server is at its limit of {s.max_sessions} live sessions; delete one or "
                "try later",
            )
        _check_game(cfg, self.runtimes, s)
        self._creating += 1
        try:
            return await self._create(cfg, owned_by_stream=owned_by_stream, featured=featured)
        finally:
            self._creating -= 1

    async def _create(self, cfg: SessionConfig, *, owned_by_stream: bool, featured: bool):
        s = self.settings
        kind = games.kind_of(cfg.game_id)
        if cfg.agent == "planner" or (kind is games.Kind.CLOCK and cfg.opponent_plans):
            check_session(cfg, await self.planner.get(deciding=True), kind=kind)
        runtime = await self.runtimes.get(cfg.game_id)
        if cfg.record:
            await asyncio.to_thread(self.prune_replays)
        plans = dict(planner_stub=self.planner_stub, plan_timeout_s=s.plan_timeout_s)
        if cfg.agent == "human":
            buffers = games.game_record(cfg.game_id).buffer_turns
            agent = HumanAgent(buffers_turns=buffers)
        else:
            budgets = self.runtimes.info(cfg.game_id)[2]
            agent = make_agent(cfg, **plans, budgets=budgets)
        # Frame 0 (the reflex's forward pass) off the event loop: the sessions ticking now keep
        # their deadlines while many are created at once.
        first = await asyncio.to_thread(Session.first_frame, cfg, runtime, s.clock_ticks_per_frame)
        if self.ticks is not None:  # and the rest between two ticks
            await self.ticks.slack(START_SLACK_S)
        session = Session(
            cfg,
            runtime,
            agent=agent,
            opponent=make_opponent(cfg, **plans) if runtime.kind is games.Kind.CLOCK else None,
            record_dir=s.record_dir,
            viewer_queue=s.viewer_queue,
            late_tick_ms=s.late_tick_ms,
            clock_ticks_per_frame=s.clock_ticks_per_frame,
            owned_by_stream=owned_by_stream,
            countdown_s=s.human_countdown_s if cfg.agent == "human" else 0.0,
            ticks=self.ticks,
            first=first,
        )
        self._sessions[session.id] = session
        if featured:
            self._featured = session.id
        session.start()
        self._prune()
        return session

    def delete(self, session_id: str, token: str) -> Session:
        """Stops and forgets a session; only its token's holder may."""
        session = self.get(session_id)
        if not session.check_token(token):
            raise SessionError(
                grpc.StatusCode.PERMISSION_DENIED, f"wrong token for session {session_id}"
            )
        session.stop("deleted")
        self._sessions.pop(session_id, None)
        return session

    def _prune(self) -> None:
        ended = [x for x in self._sessions.values() if not x.live]
        for old in ended[: max(0, len(ended) - self.settings.keep_finished)]:
            self._sessions.pop(old.id, None)

    async def shutdown(self, timeout_s: float = 10.0) -> list[str]:
        """Stops every session and waits up to `timeout_s` for their loops to end; returns the
        ids of the sessions still ending then (logged: the server stops anyway, its gRPC port
        and planner channels closed, rather than failing its shutdown on one slow loop)."""
        sessions = list(self._sessions.values())
        for session in sessions:
            session.stop("server shutting down")
        waits = {asyncio.ensure_future(s.wait()): s.id for s in sessions}
        late: list[str] = []
        if waits:
            _, pending = await asyncio.wait(waits, timeout=timeout_s)
            late = sorted(waits[w] for w in pending)
            for w in pending:
                w.cancel()
            if late:
                log.warning(
                    "%d session(s) still ending %g s after the shutdown began: %s",
                    len(late),
                    timeout_s,
                    ", ".join(late),
                )
        if self.ticks is not None:
            self.ticks.close()
        return late
