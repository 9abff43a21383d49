"""Replay files: one JSON line per frame, written live and checked by re-simulating from the seed.

Format ``rtplan.replay.v1`` (JSON lines):
    {"type": "header", "format": ..., "game": id, "game_params": {...}, "seed": s,
     "initial": digest of the first state, "settings": {...}, "created": ISO time}
    {"type": "frame", "frame": n, "action": a, "cost": ticks, "provenance": "on_time", "source":
     "reflex", "k": k or null, "latency_ms": ... or null, "slack_ms": ..., "reward": r,
     "done": bool, "state": {"frame": n + 1, "digest": ..., "current_player": p}}   (one per frame)
    {"type": "late", "frame": n, ...}   (frame n, decided "fallback", got its action late: the
     final report, as `Frame.late` sends it; replaying skips it)
    {"type": "end", "frames": N, "return": R, "reason": why}   (absent if the server stopped)

A frame line says which action frame n applied and summarises the state it led to. Replaying
re-plays the recorded actions from the seed's initial state and checks every summary.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path
from typing import IO, Any

import numpy as np

from server._runtime import AGENT_PLAYER, HostInfo, compiled, init_key, state_digest

FORMAT = "rtplan.replay.v1"


class ReplayError(ValueError):
    """A replay file that is corrupt or does not re-simulate: says where and what differs."""


class Recorder:
    """Writes one session's replay file, a line per frame (flushed as it goes)."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = self.path.open("w", encoding="utf-8")
        created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        self._write({"type": "header", "format": FORMAT, **header, "created": created})

    def _write(self, obj: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self._file.flush()

    def frame(self, line: dict[str, Any]) -> None:
        self._write({"type": "frame", **line})

    def late(self, report: dict[str, Any]) -> None:
        self._write({"type": "late", **report})

    def close(self, end: dict[str, Any] | None = None) -> None:
        if self._file is None:
            return
        if end is not None:
            self._write({"type": "end", **end})
        self._file.close()
        self._file = None


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    """What a replay re-simulated."""

    game_id: str
    seed: int
    frames: int
    episode_return: float  # the agent's (player 0's in clock games)
    actions: tuple[int, ...]
    complete: bool  # the file has its end line


def _parse(path: Path) -> list[tuple[int, dict]]:
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


def replay(path: str | Path) -> ReplayResult:
    """Re-simulates a replay file from its seed and checks every recorded state summary.

    Raises:
        ReplayError: unreadable or malformed file (names the line), an unknown game, or a frame
            whose re-simulated reward, done flag or state digest differs from the recording.
    """
    path = Path(path)
    lines = _parse(path)
    lineno, header = lines[0]
    where = f"{path}:{lineno}"
    if header.get("type") != "header":
        raise ReplayError(f"{where}: the first line must be the header, got {header['type']!r}")
    if header.get("format") != FORMAT:
        raise ReplayError(f"{where}: format {header.get('format')!r}, expected {FORMAT!r}")
    game_id = _field(header, "game", str, where)
    seed = _field(header, "seed", int, where)
    params = _field(header, "game_params", dict, where)
    try:
        fns = compiled(game_id, tuple(sorted(params.items())), None)
    except (ValueError, TypeError) as e:  # UnknownGameError is a ValueError
        raise ReplayError(f"{where}: cannot make game {game_id!r} with {params}: {e}") from e
    clock = fns.game.num_players == 2
    state = fns.init(init_key(seed))
    if header.get("initial") != state_digest(state):
        raise ReplayError(f"{where}: seed {seed} gives another initial state than recorded")

    total, actions, complete, end = 0.0, [], False, None
    for lineno, obj in lines[1:]:
        where = f"{path}:{lineno}"
        if complete:
            raise ReplayError(f"{where}: a line after the end line")
        if obj["type"] == "end":
            complete, end = True, obj
            continue
        if obj["type"] == "late":  # a report, not a step
            continue
        if obj["type"] != "frame":
            raise ReplayError(f"{where}: unknown line type {obj['type']!r}")
        n = _field(obj, "frame", int, where)
        if n != len(actions):
            raise ReplayError(f"{where}: frame {n} out of order, expected {len(actions)}")
        action = _field(obj, "action", int, where)
        cost = obj.get("cost", 0)
        if not isinstance(cost, int) or isinstance(cost, bool) or cost < 0:
            raise ReplayError(f"{where}: field 'cost' is {cost!r}, expected an int >= 0")
        summary = _field(obj, "state", dict, where)
        if not 0 <= action < fns.game.num_actions:
            raise ReplayError(f"{where}: action {action} out of range for {game_id}")
        state, dev = fns.frame(None, state, np.int32(action), np.int32(cost if clock else 0))
        info = HostInfo.from_device(dev)
        if summary.get("digest") != state_digest(state):
            raise ReplayError(
                f"{where}: frame {n}: the state after action {action} differs from the "
                f"recording (digest {state_digest(state)}, recorded {summary.get('digest')})"
            )
        if obj.get("reward") != info.reward or obj.get("done") != info.done:
            raise ReplayError(
                f"{where}: frame {n}: reward/done {info.reward}/{info.done}, recorded "
                f"{obj.get('reward')}/{obj.get('done')}"
            )
        total += info.rewards[AGENT_PLAYER] if clock else info.reward
        actions.append(action)
    if end is not None:
        if end.get("frames") != len(actions):
            found = len(actions)
            raise ReplayError(f"{path}: end line says {end.get('frames')} frames, found {found}")
        if end.get("return") != total:
            raise ReplayError(f"{path}: end line says return {end.get('return')}, replayed {total}")
    return ReplayResult(game_id, seed, len(actions), total, tuple(actions), complete)
