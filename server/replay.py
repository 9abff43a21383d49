"""Replay files, both ways: the writer, the reader (`ReplayFile`) and the re-simulation."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from rtplan import games
from rtplan.server import _messages as messages
from rtplan.server._compiled import compiled
from rtplan.server._frame_info import HostInfo
from rtplan.server._records import PlanDecision, Report
from rtplan.server._rules import Provenance
from rtplan.server._runtime import AGENT_PLAYER, init_key, state_digest

# JSON lines (docs/services.md, "Replay files", has every field): a header line; a frame line per
# frame (its report, reward, done, and the digest of the state it led to); a late line when a
# frame decided "fallback" gets its action late (its final report; re-simulating skips it); an end
# line unless the server stopped first. Version 1 files (format "rtplan.replay.v1", no version;
# no received_action, decision, spec, status or stats) are read with those fields absent.
FORMAT = "rtplan.replay"
#: The version this module writes; it reads 1 up to this.
VERSION = 2
#: Version 1's format name (its header has no version field).
_FORMAT_V1 = "rtplan.replay.v1"


class ReplayError(ValueError):
    """A replay file that is corrupt or does not re-simulate: says where and what differs."""


# Writing --------------------------------------------------------------------------------------


def _report_fields(r: Report) -> dict[str, Any]:
    decision = None if r.decision is None else dataclasses.asdict(r.decision)
    return {
        "frame": r.frame,
        "action": r.action,
        "cost": r.cost,
        "credit": r.credit,
        "provenance": r.provenance.label,
        "source": r.source,
        "k": r.k,
        "latency_ms": r.latency_ms,
        "slack_ms": round(r.slack_ms, 3),
        "received_action": r.received_action,
        "decision": decision,
    }


class Recorder:
    """Writes one session's replay file, a line per frame (flushed as it goes)."""

    def __init__(self, path: Path, s: messages.Shown) -> None:
        """Writes the header of session `s`, which is at its first state."""
        created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        checkpoint = s.runtime.checkpoint
        self._open(
            path,
            {
                "type": "header",
                "format": FORMAT,
                "version": VERSION,
                "game": s.config.game_id,
                "game_params": s.runtime.game_params,
                "seed": s.config.seed,
                "initial": state_digest(s.state),
                "session": s.id,
                "settings": s.config.to_dict(),
                "gated": s.config.gated,
                # Clock games: the clocks' start in ticks (absent: the game's initial_time).
                "initial_time": s.initial_time,
                "checkpoint": str(checkpoint) if checkpoint else None,
                "spec": s.runtime.describe(),
                "created": created,
            },
        )

    def _open(self, path: Path, header: dict[str, Any]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A sealed session's file holds its seed: it is written under a dot-name, which the
        # replay folder neither lists nor serves, and takes its name when the session ends.
        sealed = bool((header.get("settings") or {}).get("sealed"))
        self._writing = self.path.with_name(f".{self.path.name}") if sealed else self.path
        self._file: IO[str] | None = self._writing.open("w", encoding="utf-8")
        self._write(header)

    @classmethod
    def of_header(cls, path: Path, header: dict[str, Any]) -> Recorder:
        """A recorder of a game that no session played (`server.annotated`): `header` has
        every field a session's has (an "annotation" besides, when the game carries one)."""
        rec = cls.__new__(cls)
        rec._open(path, {"type": "header", "format": FORMAT, "version": VERSION, **header})
        return rec

    def _write(self, obj: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self._file.flush()

    def frame(
        self, report: Report, state: Any, info: HostInfo, annotation: dict | None = None
    ) -> None:
        """Frame `report.frame` applied `report.action` and led to `state` (`annotation`: what
        an annotated game says about the move, `server.annotated`)."""
        summary = {
            "frame": info.frame,
            "digest": state_digest(state),
            "current_player": info.current_player,
            "clocks": list(info.clocks),
        }
        line = {**_report_fields(report), "reward": info.reward, "done": info.done}
        extra = {} if annotation is None else {"annotation": annotation}
        self._write({"type": "frame", **line, "state": summary, **extra})

    def late(self, report: Report) -> None:
        """A frame decided FALLBACK got its action late: its final (LATE) report."""
        self._write({"type": "late", **_report_fields(report)})

    def close(self, end: messages.EndMessage | None = None, *, frames: int = 0) -> None:
        """Writes the end line (of the session's end message, after `frames` frames)."""
        if self._file is None:
            return
        if end is not None:
            line = {"frames": frames, "return": end["episode_return"], "status": end["status"]}
            self._write({"type": "end", **line, "reason": end["reason"], "stats": end["stats"]})
        self._file.close()
        self._file = None
        if self._writing != self.path:
            self._writing.replace(self.path)


# Reading --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FrameLine:
    """One frame line: its report, and the reward, done flag and state summary it led to."""

    line: int  # line number in the file
    report: Report
    reward: float  # to the player who moved (the agent's in committed-action games)
    done: bool
    state: dict[str, Any]  # {"frame": n + 1, "digest", "current_player", "clocks"}
    annotation: dict[str, Any] | None = None  # an annotated game's note on the move


@dataclasses.dataclass(frozen=True)
class LateLine:
    """A frame's final report, once its late action came."""

    line: int
    report: Report


@dataclasses.dataclass(frozen=True)
class ReplayFile:
    """A replay file as written: its checked header, frame and late lines in file order, and
    its end line (None when the server stopped before the session ended). `read` checks the
    structure only; `replay` re-simulates it."""

    path: Path
    version: int
    header: dict[str, Any]
    items: tuple[FrameLine | LateLine, ...]
    end: dict[str, Any] | None

    @property
    def frames(self) -> tuple[FrameLine, ...]:
        return tuple(x for x in self.items if isinstance(x, FrameLine))

    @property
    def game_id(self) -> str:
        return self.header["game"]

    @property
    def seed(self) -> int:
        return self.header["seed"]

    @classmethod
    def read(cls, path: str | Path) -> ReplayFile:
        """Reads and checks a replay file of any version this module knows.

        Raises:
            ReplayError: unreadable, not JSON lines, a header of another format or a newer
                version, or a line with a missing or mistyped field (names the line).
        """
        path = Path(path)
        lines = _lines(path)
        lineno, header = lines[0]
        where = f"{path}:{lineno}"
        if header["type"] != "header":
            raise ReplayError(f"{where}: the first line must be the header, got {header['type']!r}")
        version = header_version(header, where)
        _field(header, "game", str, where)
        _field(header, "seed", int, where)
        _field(header, "game_params", dict, where)
        items: list[FrameLine | LateLine] = []
        end, frames = None, 0
        for lineno, obj in lines[1:]:
            where = f"{path}:{lineno}"
            if end is not None:
                raise ReplayError(f"{where}: a line after the end line")
            if obj["type"] == "end":
                end = obj
            elif obj["type"] == "late":
                items.append(LateLine(lineno, _report(obj, where)))
            elif obj["type"] == "frame":
                report = _report(obj, where)
                if report.frame != frames:
                    raise ReplayError(
                        f"{where}: frame {report.frame} out of order, expected {frames}"
                    )
                summary = _field(obj, "state", dict, where)
                note = obj.get("annotation")
                if note is not None and not isinstance(note, dict):
                    raise ReplayError(f"{where}: field 'annotation' is {note!r}, expected dict")
                line = FrameLine(lineno, report, obj.get("reward"), obj.get("done"), summary, note)
                items.append(line)
                frames += 1
            else:
                raise ReplayError(f"{where}: unknown line type {obj['type']!r}")
        return cls(path, version, header, tuple(items), end)


def header_version(header: dict, where: str) -> int:
    """The format version of a replay header (1 for the unversioned "rtplan.replay.v1").

    Raises:
        ReplayError: another format, a header without a valid version, or a newer version.
    """
    fmt = header.get("format")
    if fmt == _FORMAT_V1 and "version" not in header:
        return 1
    if fmt != FORMAT:
        raise ReplayError(f"{where}: format {fmt!r} is not an rtplan replay ({FORMAT!r})")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 2:
        raise ReplayError(
            f"{where}: a {FORMAT!r} header needs a version >= 2, got {version!r} (version 1 "
            f"files say format {_FORMAT_V1!r} and have no version)"
        )
    if version > VERSION:
        raise ReplayError(
            f"{where}: replay version {version} is newer than this rtplan reads (1 to "
            f"{VERSION}); read it with the rtplan that wrote it"
        )
    return version


def _lines(path: Path) -> list[tuple[int, dict]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReplayError(f"{path}: cannot read: {e}") from e
    lines = []
    for i, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ReplayError(f"{path}:{i}: not JSON ({e.msg})") from e
        if not isinstance(obj, dict) or "type" not in obj:
            raise ReplayError(f"{path}:{i}: expected an object with a 'type'")
        lines.append((i, obj))
    if not lines:
        raise ReplayError(f"{path}: empty replay file")
    return lines


def _field(obj: dict, name: str, kind, where: str):
    if name not in obj:
        raise ReplayError(f"{where}: missing field {name!r}")
    value = obj[name]
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise ReplayError(f"{where}: field {name!r} is {value!r}, expected {kind.__name__}")
    return value


_PROVENANCES = {p.label: p for p in Provenance}


def _report(obj: dict, where: str) -> Report:
    """A frame or late line's report (version 1 late lines carry the viewer's report JSON,
    whose `answer_source` is who answered)."""
    frame = _field(obj, "frame", int, where)
    action = _field(obj, "action", int, where)
    cost, credit = obj.get("cost", 0), obj.get("credit", 0)
    for name, value in (("cost", cost), ("credit", credit)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ReplayError(f"{where}: field {name!r} is {value!r}, expected an int >= 0")
    label = obj.get("provenance", "on_time")
    if label not in _PROVENANCES:
        raise ReplayError(f"{where}: provenance {label!r}, expected one of {list(_PROVENANCES)}")
    d = obj.get("decision")
    try:
        decision = (
            None if d is None else PlanDecision(**{**d, "probabilities": tuple(d["probabilities"])})
        )
    except (TypeError, KeyError) as e:
        raise ReplayError(f"{where}: field 'decision' is {d!r}: {e}") from None
    return Report(
        frame=frame,
        action=action,
        provenance=_PROVENANCES[label],
        slack_ms=obj.get("slack_ms") or 0.0,
        received_action=obj.get("received_action", -1),
        source=obj.get("answer_source", obj.get("source", "agent")),
        k=obj.get("k"),
        cost=cost,
        latency_ms=obj.get("latency_ms"),
        decision=decision,
        credit=credit,
    )


# Re-simulating --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    """What a replay re-simulated."""

    game_id: str
    seed: int
    frames: int
    episode_return: float  # the agent's (player 0's in clock games)
    actions: tuple[int, ...]
    complete: bool  # the file has its end line


@dataclasses.dataclass
class Step:
    """One re-simulated frame line."""

    line: FrameLine
    state: Any  # the state it led to (host arrays)
    info: HostInfo
    agent_reward: float  # the agent's reward (player 0's in clock games)


def resimulate(rf: ReplayFile):
    """The game of a replay and its first state, checked against the header.

    Returns:
        (game fns, the initial state, an iterator over `Step`s and the `LateLine`s in file
        order that checks every frame's recorded summary as it goes).
    """
    where = f"{rf.path}:1"
    params = rf.header["game_params"]
    try:
        fns = compiled(rf.game_id, tuple(sorted(params.items())), None)
    except (ValueError, TypeError) as e:  # UnknownGameError is a ValueError
        raise ReplayError(f"{where}: cannot make game {rf.game_id!r} with {params}: {e}") from e
    state0 = fns.init(init_key(rf.seed))
    initial_time = rf.header.get("initial_time")
    if initial_time is not None and fns.set_clock is not None:
        state0 = fns.set_clock(state0, np.int32(initial_time))
    if rf.header.get("initial") != state_digest(state0):
        raise ReplayError(f"{where}: seed {rf.seed} gives another initial state than recorded")
    return fns, state0, _steps(rf, fns, state0)


def _steps(rf: ReplayFile, fns, state) -> Iterator[Step | LateLine]:
    clock = games.kind_of(fns.game) is games.Kind.CLOCK
    for item in rf.items:
        if isinstance(item, LateLine):  # a report, not a step
            yield item
            continue
        where, r = f"{rf.path}:{item.line}", item.report
        if not 0 <= r.action < fns.game.num_actions:
            raise ReplayError(f"{where}: action {r.action} out of range for {rf.game_id}")
        cost, credit = (r.cost, r.credit) if clock else (0, 0)
        state, dev = fns.frame(None, state, np.int32(r.action), np.int32(cost), np.int32(credit))
        info = HostInfo.from_device(dev)
        if item.state.get("digest") != state_digest(state):
            raise ReplayError(
                f"{where}: frame {r.frame}: the state after action {r.action} differs from the "
                f"recording (digest {state_digest(state)}, recorded {item.state.get('digest')})"
            )
        if item.reward != info.reward or item.done != info.done:
            raise ReplayError(
                f"{where}: frame {r.frame}: reward/done {info.reward}/{info.done}, recorded "
                f"{item.reward}/{item.done}"
            )
        reward = info.rewards[AGENT_PLAYER] if clock else info.reward
        yield Step(item, state, info, reward)


def replay(path: str | Path) -> ReplayResult:
    """Re-simulates a replay file from its seed and checks every recorded state summary.

    Raises:
        ReplayError: unreadable or malformed file (names the line), an unknown game, or a frame
            whose re-simulated reward, done flag or state digest differs from the recording.
    """
    rf = ReplayFile.read(path)
    _, _, steps = resimulate(rf)
    total, actions = 0.0, []
    for item in steps:
        if isinstance(item, Step):
            total += item.agent_reward
            actions.append(item.line.report.action)
    if rf.end is not None:
        if rf.end.get("frames") != len(actions):
            found = len(actions)
            raise ReplayError(
                f"{rf.path}: end line says {rf.end.get('frames')} frames, found {found}"
            )
        if rf.end.get("return") != total:
            raise ReplayError(
                f"{rf.path}: end line says return {rf.end.get('return')}, replayed {total}"
            )
    return ReplayResult(
        rf.game_id, rf.seed, len(actions), total, tuple(actions), rf.end is not None
    )
