"""What a session shows: frame reports, the agents' `Frame`, the REST and viewer JSON, and the
replay lines, each built from what a session exposes (`Shown`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import games
from games.render import render
from rtplan import wire
from rtplan.v1 import env_pb2
from server._agent_api import PlanDecision
from server._config import SessionConfig
from server._queue import AgentLink
from server._rules import Provenance
from server._runtime import AGENT_PLAYER, GameRuntime, HostInfo, state_digest
from server._stats import SessionStats
from server._viewers import ViewerHub


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
    decision: PlanDecision | None = None  # planner agent: the decision of this frame's option

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
            "decision": None if self.decision is None else decision_dict(self.decision),
        }


def decision_dict(d: PlanDecision) -> dict[str, Any]:
    """A planner decision in the viewer JSON: `frame` is the decision frame t of the option
    (every frame of the option repeats it), `probabilities` are over the game's budgets in
    the order of `spec.budgets` (empty for a forced k), `value` the planner's value at s_t."""
    return {
        "frame": d.frame,
        "k": d.k,
        "gated": d.gated,
        "probabilities": [round(p, 6) for p in d.probabilities],
        "value": round(d.value, 6),
    }


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
    clock_game: bool
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
    wall: WallClock
    stats: SessionStats
    viewers: ViewerHub
    link: AgentLink | None
    replay_path: Path | None

    @property
    def viewer_path(self) -> str: ...


def _reward(s: Shown) -> float:
    """The last move's reward to the agent."""
    return s.info.rewards[AGENT_PLAYER] if s.clock_game else s.info.reward


def _period_ms(s: Shown) -> float:
    return 0.0 if s.config.simulated else s.config.period * 1e3


def frame_proto(s: Shown, *, late: Sequence[Report], observation: bool) -> env_pb2.Frame:
    """The Env API's `Frame` of the current frame (see proto/rtplan/v1/env.proto)."""
    info = s.info
    msg = env_pb2.Frame(
        frame=s.frame,
        server_time_ns=s.wall.ns(s.published_at),
        deadline_ns=0 if s.deadline is None else s.wall.ns(s.deadline),
        period_ms=_period_ms(s),
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


def summary(s: Shown) -> dict[str, Any]:
    """JSON view without the token (GET /v1/sessions)."""
    return {
        "id": s.id,
        "game": s.config.game_id,
        "agent": s.config.agent,
        "ks": list(s.config.ks),
        "gated": s.config.gated,
        # Clock games: player 1 ("reflex", "random", "planner"; k of the planner); else None.
        "opponent": s.config.opponent if s.clock_game else None,
        "opponent_k": s.config.opponent_k if s.clock_game and s.config.opponent_plans else None,
        "fps": s.config.fps,
        "clock": s.config.clock,
        "status": s.status,
        "reason": s.reason,
        "frame": s.frame,
        "episode_return": s.episode_return,
        "created": s.created,
        "agent_connected": s.link is not None,
        "viewers": len(s.viewers),
        "viewer_path": s.viewer_path,
    }


def details(s: Shown) -> dict[str, Any]:
    """JSON view with settings and statistics (GET /v1/sessions/{id})."""
    return {
        **summary(s),
        "config": s.config.to_dict(),
        "clocks": list(s.info.clocks),
        "done": s.info.done,
        "stats": stats(s),
        "replay": str(s.replay_path) if s.replay_path else None,
    }


def viewer_hello(s: Shown) -> dict[str, Any]:
    """The websocket JSON a viewer gets first."""
    spec = s.runtime.describe()
    return {"type": "hello", "session": summary(s), "config": s.config.to_dict(), "spec": spec}


def viewer_frame(s: Shown) -> dict[str, Any]:
    """The websocket JSON of the current frame."""
    return {
        "type": "frame",
        "session": s.id,
        "frame": s.frame,
        "state": render(s.runtime.game, s.state),
        "previous": None if s.last_report is None else s.last_report.to_dict(),
        "episode_return": s.episode_return,
        "done": s.info.done,
        "clocks": list(s.info.clocks),
        "period_ms": _period_ms(s),
        "stats": s.stats.brief(viewer_drops=s.viewers.dropped),
    }


def viewer_end(s: Shown) -> dict[str, Any]:
    """The websocket JSON that ends a session's stream."""
    return {
        "type": "end",
        "session": s.id,
        "status": s.status,
        "reason": s.reason,
        "stats": stats(s),
        "episode_return": s.episode_return,
    }


def record_header(s: Shown) -> dict[str, Any]:
    """A replay file's header fields: what re-simulates the session from its first state."""
    return {
        "game": s.config.game_id,
        "game_params": s.runtime.game_params,
        "seed": s.config.seed,
        "initial": state_digest(s.state),
        "session": s.id,
        "settings": s.config.to_dict(),
        "checkpoint": str(s.runtime.checkpoint) if s.runtime.checkpoint else None,
    }


def record_line(report: Report, state: games.State, info: HostInfo) -> dict[str, Any]:
    """A replay file's frame line: what the frame applied and the state it led to."""
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
            "digest": state_digest(state),
            "current_player": info.current_player,
            "clocks": list(info.clocks),
        },
    }
