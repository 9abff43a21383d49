"""What a session shows: its agents' `Frame`, REST JSON and one typed builder per viewer message.

Every shape a session sends out (gRPC frame, REST JSON, each websocket message's TypedDict and its
builder) sits in this one module, just past ~450 lines, so that web/'s reader and the server's
writer have one place to agree on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, TypedDict

from rtplan import games, wire
from rtplan.games.render import render
from rtplan.server._config import SessionConfig
from rtplan.server._frame_info import HostInfo
from rtplan.server._queue import AgentLink
from rtplan.server._records import PlanDecision, PlayedLog, Report
from rtplan.server._runtime import AGENT_PLAYER, GameRuntime
from rtplan.server._stats import SessionStats
from rtplan.server._viewers import ViewerHub
from rtplan.v1 import env_pb2


class WallClock:
    """Unix time of monotonic instants, anchored once: the frames' times differ exactly as their
    monotonic times do (a pre-emption between two clock reads never skews a deadline)."""

    def __init__(self) -> None:
        self._offset_ns = time.time_ns() - time.monotonic_ns()

    def ns(self, mono: float) -> int:
        return int(mono * 1e9) + self._offset_ns


class Shown(Protocol):
    """What the messages read of a session (`server.session.Session`)."""

    id: str
    config: SessionConfig
    runtime: GameRuntime
    kind: games.Kind
    status: str
    reason: str
    created: float
    frame: int
    state: games.State
    info: HostInfo
    episode_return: float
    published_at: float
    deadline: float | None  # None in simulated mode
    last_report: Report | None
    #: Reports of earlier frames turned LATE since the last frame (an action after its deadline).
    late_reports: tuple[Report, ...]
    played: PlayedLog
    wall: WallClock
    stats: SessionStats
    viewers: ViewerHub
    link: AgentLink | None
    replay_path: Path | None

    @property
    def viewer_path(self) -> str: ...

    @property
    def live(self) -> bool: ...

    @property
    def starts_in_s(self) -> float: ...

    @property
    def pending_turn(self) -> int | None: ...


def _reward(s: Shown) -> float:
    """The last move's reward to the agent."""
    return s.info.rewards[AGENT_PLAYER] if s.kind is games.Kind.CLOCK else s.info.reward


def frame_proto(s: Shown, *, late: Sequence[Report], observation: bool) -> env_pb2.Frame:
    """The Env API's `Frame` of the current frame (see proto/rtplan/v1/env.proto)."""
    info = s.info
    msg = env_pb2.Frame(
        frame=s.frame,
        server_time_ns=s.wall.ns(s.published_at),
        deadline_ns=0 if s.deadline is None else s.wall.ns(s.deadline),
        period_ms=period_ms(s.config),
        legal_action_mask=wire.to_tensor(info.legal),
        reward=_reward(s),
        terminated=info.terminated,
        truncated=info.truncated,
        clocks=list(info.clocks),
        current_player=info.current_player,
        state=s.runtime.state_proto(s.state),
        episode_return=s.episode_return,
        late=[r.proto() for r in late],
    )
    if s.last_report is not None:
        msg.previous.CopyFrom(s.last_report.proto())
    if observation:
        msg.observation.CopyFrom(wire.to_tensor(s.runtime.observe(s.state)))
    return msg


def stats(s: Shown) -> dict[str, Any]:
    """Every counter, with the drops the viewer and agent queues counted."""
    link_drops = s.link.dropped if s.link is not None else 0
    return s.stats.to_dict(viewer_drops=s.viewers.dropped, link_drops=link_drops)


# Viewer messages (docs/services.md, "Viewer messages") ----------------------------------------


class DecisionJson(TypedDict):
    """A planner decision: `frame` is the decision frame t of the option (every frame of the
    option repeats it), `probabilities` are over the game's budgets in the order of
    `spec.budgets` (empty for a forced k), `value` the planner's value at s_t."""

    frame: int
    k: int
    gated: bool
    probabilities: list[float]
    value: float


class ReportJson(TypedDict):
    """How a frame's action was chosen: `source` is where the applied action came from
    ("fallback" unless on time), `answer_source` who answered."""

    frame: int
    action: int
    provenance: str
    source: str
    answer_source: str
    slack_ms: float
    received_action: int
    k: int | None
    cost: int
    credit: int
    latency_ms: float | None
    decision: DecisionJson | None


class SessionSummary(TypedDict):
    """A session without its token (GET /v1/sessions, and the hello's `session`)."""

    id: str
    game: str
    agent: str
    ks: list[int]
    gated: bool
    opponent: str | None
    opponent_k: int | None
    fps: float
    clock: str
    status: str
    reason: str
    frame: int
    episode_return: float
    created: float
    agent_connected: bool
    viewers: int
    viewer_path: str
    starts_in_ms: float  # the countdown before frame 0's clock (a person's game); 0 after
    sealed: bool  # its seed hidden until it ends: an arena's ranked episode


class MoveJson(TypedDict):
    """A clock game's move: its frame, action and who answered (`ReportJson.answer_source`)."""

    frame: int
    action: int
    source: str


class PastJson(TypedDict):
    """What the session played before a viewer joined (`_records.PlayedLog`): the reports of
    the last frames (oldest first), every planner decision, and a clock game's every move."""

    reports: list[ReportJson]
    decisions: list[DecisionJson]
    moves: list[MoveJson]


class HelloMessage(TypedDict):
    """The first message a viewer gets: the session, its settings, the game's description and
    what was played before the viewer joined (`past`)."""

    type: Literal["hello"]
    session: SessionSummary
    config: dict[str, Any]
    spec: dict[str, Any]
    past: PastJson


class FrameMessage(TypedDict):
    """One frame: `state` is the rendered board (None in a replay's index: the boards come
    apart), `previous` the report of the frame that led here."""

    type: Literal["frame"]
    session: str
    frame: int
    state: dict[str, Any] | None
    previous: ReportJson | None
    late: list[ReportJson]  # earlier frames' reports turned LATE since the last frame
    episode_return: float
    done: bool
    clocks: list[int]
    period_ms: float
    stats: dict[str, Any]
    starts_in_ms: float  # at publication: the countdown left before this frame's clock starts
    pending: int | None  # a person's buffered turn, waiting for a frame where it is legal


class EndMessage(TypedDict):
    """The last message of a session's stream."""

    type: Literal["end"]
    session: str
    status: str
    reason: str
    stats: dict[str, Any]
    episode_return: float


class PlayerMessage(TypedDict):
    """Tells the page it plays: keys (committed-action games) or clicks (clock games)."""

    type: Literal["player"]
    player: int
    input: Literal["keys", "click"]
    keys: dict[str, int]
    tick_ms: float


class ErrorMessage(TypedDict, total=False):
    """What was wrong with a page's message (`frame` and `action` when it was an action)."""

    type: Literal["error"]
    message: str
    frame: int
    action: int


def decision_json(d: PlanDecision) -> DecisionJson:
    return {
        "frame": d.frame,
        "k": d.k,
        "gated": d.gated,
        "probabilities": [round(p, 6) for p in d.probabilities],
        "value": round(d.value, 6),
    }


def report_json(r: Report) -> ReportJson:
    return {
        "frame": r.frame,
        "action": r.action,
        "provenance": r.provenance.label,
        "source": r.shown_source,
        "answer_source": r.source,
        "slack_ms": round(r.slack_ms, 3),
        "received_action": r.received_action,
        "k": r.k,
        "cost": r.cost,
        "credit": r.credit,
        "latency_ms": None if r.latency_ms is None else round(r.latency_ms, 3),
        "decision": None if r.decision is None else decision_json(r.decision),
    }


def session_summary(
    *,
    id: str,
    config: SessionConfig,
    kind: games.Kind,
    status: str,
    reason: str,
    frame: int,
    episode_return: float,
    created: float,
    agent_connected: bool,
    viewers: int,
    viewer_path: str,
    starts_in_s: float = 0.0,
) -> SessionSummary:
    clock = kind is games.Kind.CLOCK
    return {
        "id": id,
        "game": config.game_id,
        "agent": config.agent,
        "ks": list(config.ks),
        "gated": config.gated,
        # Clock games: player 1 ("reflex", "random", "planner", "gate"; k of the planner at a
        # fixed budget); else None.
        "opponent": config.opponent if clock else None,
        "opponent_k": config.opponent_k if clock and config.opponent == "planner" else None,
        "fps": config.fps,
        "clock": config.clock,
        "status": status,
        "reason": reason,
        "frame": frame,
        "episode_return": episode_return,
        "created": created,
        "agent_connected": agent_connected,
        "viewers": viewers,
        "viewer_path": viewer_path,
        "starts_in_ms": round(starts_in_s * 1e3, 1),
        "sealed": config.sealed,
    }


def past_json(log: PlayedLog | None) -> PastJson:
    """A session's `PlayedLog` as the hello carries it (None: nothing played, as a replay's)."""
    if log is None:
        return {"reports": [], "decisions": [], "moves": []}
    moves = log.moves or ()
    return {
        "reports": [report_json(r) for r in log.recent],
        "decisions": [decision_json(d) for d in log.decisions],
        "moves": [{"frame": r.frame, "action": r.action, "source": r.source} for r in moves],
    }


def hello_message(
    session: SessionSummary,
    config: SessionConfig,
    spec: dict,
    past: PlayedLog | None = None,
    *,
    reveal: bool = True,
) -> HelloMessage:
    """`reveal` False: a sealed session's seed is not shown (`SessionConfig.sealed`)."""
    return {
        "type": "hello",
        "session": session,
        "config": config.to_dict(reveal=reveal),
        "spec": spec,
        "past": past_json(past),
    }


def frame_message(
    *,
    session: str,
    frame: int,
    state: dict[str, Any] | None,
    previous: Report | None,
    late: Sequence[Report] = (),
    episode_return: float,
    done: bool,
    clocks: Sequence[int],
    period_ms: float,
    stats: dict[str, Any],
    starts_in_s: float = 0.0,
    pending: int | None = None,
) -> FrameMessage:
    return {
        "type": "frame",
        "session": session,
        "frame": frame,
        "state": state,
        "previous": None if previous is None else report_json(previous),
        "late": [report_json(r) for r in late],
        "episode_return": episode_return,
        "done": done,
        "clocks": list(clocks),
        "period_ms": period_ms,
        "stats": stats,
        "starts_in_ms": round(starts_in_s * 1e3, 1),
        "pending": pending,
    }


def end_message(
    *, session: str, status: str, reason: str, stats: dict[str, Any], episode_return: float
) -> EndMessage:
    return {
        "type": "end",
        "session": session,
        "status": status,
        "reason": reason,
        "stats": stats,
        "episode_return": episode_return,
    }


def player_message(
    *, player: int, clicks: bool, keys: dict[str, int], tick_ms: float
) -> PlayerMessage:
    return {
        "type": "player",
        "player": player,
        "input": "click" if clicks else "keys",
        "keys": {} if clicks else keys,
        "tick_ms": tick_ms,
    }


def error_message(message: str, **about: int) -> ErrorMessage:
    """`about`: the `frame` and `action` of the refused action, when it was one."""
    return {"type": "error", "message": message, **about}  # type: ignore[typeddict-item]


def period_ms(config: SessionConfig) -> float:
    """The frame period the viewer shows (0: simulated clock)."""
    return 0.0 if config.simulated else config.period * 1e3


# A live session's views ------------------------------------------------------------------------


def summary(s: Shown) -> SessionSummary:
    """JSON view without the token (GET /v1/sessions)."""
    return session_summary(
        id=s.id,
        config=s.config,
        kind=s.kind,
        status=s.status,
        reason=s.reason,
        frame=s.frame,
        episode_return=s.episode_return,
        created=s.created,
        agent_connected=s.link is not None,
        viewers=len(s.viewers),
        viewer_path=s.viewer_path,
        starts_in_s=s.starts_in_s,
    )


def details(s: Shown) -> dict[str, Any]:
    """JSON view with settings and statistics (GET /v1/sessions/{id})."""
    return {
        **summary(s),
        "config": s.config.to_dict(reveal=not s.live),
        "clocks": list(s.info.clocks),
        "done": s.info.done,
        "stats": stats(s),
        # A sealed session's file appears when it ends (its header holds the seed).
        "replay": str(s.replay_path) if s.replay_path and not sealed(s) else None,
    }


def sealed(s: Shown) -> bool:
    """The session hides its seed now: sealed, and not ended."""
    return s.config.sealed and s.live


def viewer_hello(s: Shown) -> HelloMessage:
    return hello_message(summary(s), s.config, s.runtime.describe(), s.played, reveal=not s.live)


def viewer_frame(s: Shown) -> FrameMessage:
    return frame_message(
        session=s.id,
        frame=s.frame,
        state=render(s.runtime.game, s.state),
        previous=s.last_report,
        late=s.late_reports,
        episode_return=s.episode_return,
        done=s.info.done,
        clocks=s.info.clocks,
        period_ms=period_ms(s.config),
        stats=s.stats.brief(viewer_drops=s.viewers.dropped),
        starts_in_s=s.starts_in_s,
        pending=s.pending_turn,
    )


def viewer_end(s: Shown) -> EndMessage:
    return end_message(
        session=s.id,
        status=s.status,
        reason=s.reason,
        stats=stats(s),
        episode_return=s.episode_return,
    )
