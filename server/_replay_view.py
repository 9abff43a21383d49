"""The replay page's view of a replay file: the messages a live viewer got, and boards on demand."""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path
from typing import Any, TypedDict

import jax

from rtplan import games
from rtplan.games.render import render
from rtplan.server import _messages as messages
from rtplan.server._config import SessionConfig
from rtplan.server._frame_info import HostInfo
from rtplan.server._rules import Provenance
from rtplan.server._runtime import describe_game
from rtplan.server._stats import SessionStats
from rtplan.server.replay import ReplayError, ReplayFile, Step, resimulate


class ReplayIndex(TypedDict):
    """A replay for the watch page: the file's header and end line, the hello a live viewer of
    the session got, every frame message without its board, and the end message."""

    name: str
    header: dict[str, Any]
    hello: messages.HelloMessage
    frames: list[messages.FrameMessage]
    end: messages.EndMessage | None
    # An annotated game (`server.annotated`): the header's annotation and, per frame message,
    # the annotation of the move that led to it (None: none, and frame 0); else None and [].
    annotation: dict[str, Any] | None
    move_notes: list[dict[str, Any] | None]


def _finished(reason: str) -> str:
    """A version 1 end line's session status (it recorded only the reason)."""
    return "finished" if reason in ("terminated", "truncated", "max_frames") else "stopped"


def _config(rf: ReplayFile) -> SessionConfig:
    fields = {f.name for f in dataclasses.fields(SessionConfig)}
    settings = {k: v for k, v in (rf.header.get("settings") or {}).items() if k in fields}
    settings = {"game_id": rf.game_id, "seed": rf.seed, **settings}
    try:
        return SessionConfig(**{**settings, "ks": tuple(settings.get("ks", ()))})
    except TypeError as e:
        raise ReplayError(f"{rf.path}:1: field 'settings' is {settings!r}: {e}") from None


class ReplayView:
    """A replay re-simulated for the viewer: the messages a live viewer of the session got
    (built by `server._messages`, as live), and each frame's rendered board on demand
    (rendering is the slow part: done per request)."""

    def __init__(self, path: str | Path) -> None:
        """Re-simulates `path` (blocking: call it off the event loop).

        Raises:
            ReplayError: as `replay` does.
        """
        self.path = Path(path)
        rf = ReplayFile.read(self.path)
        fns, state, steps = resimulate(rf)
        self.header = rf.header
        self.game = fns.game
        config = _config(rf)
        self._states = [jax.device_get(state)]
        stats = SessionStats()
        # Per frame n: [report of frame n - 1, return, done, clocks, counters]; a late line
        # replaces the report it finalises (and counts from there on, as live).
        rows: list[list[Any]] = [
            [None, 0.0, False, HostInfo.from_device(fns.info(None, state)).clocks, {}]
        ]
        rows[0][4] = stats.brief(viewer_drops=0)
        total = 0.0
        self.move_notes: list[dict[str, Any] | None] = [None]
        for item in steps:
            if isinstance(item, Step):
                self.move_notes.append(item.line.annotation)
                report = item.line.report
                stats.frame(report.provenance, None)
                total += item.agent_reward
                self._states.append(jax.device_get(item.state))
                info = item.info
                rows.append([report, total, info.done, info.clocks, stats.brief(viewer_drops=0)])
            elif 0 <= item.report.frame < len(rows) - 1:
                row = rows[item.report.frame + 1]
                if row[0].provenance is Provenance.FALLBACK:
                    stats.came_late(item.report.slack_ms)
                row[0] = item.report
        session = rf.header.get("session") or self.path.stem
        period = messages.period_ms(config)
        self.frames = [
            messages.frame_message(
                session=session,
                frame=n,
                state=None,
                previous=report,
                episode_return=ret,
                done=done,
                clocks=clocks,
                period_ms=period,
                stats=brief,
            )
            for n, (report, ret, done, clocks, brief) in enumerate(rows)
        ]
        end = rf.end
        reason = end.get("reason", "") if end is not None else ""
        created = rf.header.get("created")
        try:
            created_s = datetime.datetime.fromisoformat(created).timestamp()
        except (TypeError, ValueError):
            created_s = 0.0
        spec = rf.header.get("spec")
        if spec is None:  # version 1: the game as it is played now (without the planner's budgets)
            ckpt = rf.header.get("checkpoint")
            spec = describe_game(
                fns.game, Path(ckpt) if ckpt else None, (), rf.header["game_params"]
            )
        summary = messages.session_summary(
            id=session,
            config=config,
            kind=games.kind_of(fns.game),
            status="replay",
            reason=reason,
            frame=len(rows) - 1,
            episode_return=total,
            created=created_s,
            agent_connected=False,
            viewers=0,
            viewer_path=f"/v1/replays/{self.path.name}",
        )
        self.hello = messages.hello_message(summary, config, spec)
        self.end: messages.EndMessage | None = None
        if end is not None:
            self.end = messages.end_message(
                session=session,
                status=end.get("status") or _finished(reason),
                reason=reason,
                stats=end.get("stats") or stats.to_dict(viewer_drops=0, link_drops=0),
                episode_return=end.get("return", total),
            )

    def index(self) -> ReplayIndex:
        """The replay without boards."""
        return {
            "name": self.path.name,
            "header": self.header,
            "hello": self.hello,
            "frames": self.frames,
            "end": self.end,
            "annotation": self.header.get("annotation"),
            "move_notes": self.move_notes if any(self.move_notes) else [],
        }

    def boards(self, start: int, count: int) -> list[dict[str, Any]]:
        """The rendered boards of frames start .. start+count-1 (clipped to the replay)."""
        stop = min(len(self._states), start + count)
        return [render(self.game, self._states[n]) for n in range(max(0, start), stop)]
