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

import jax
import numpy as np

from games.render import describe_view, render
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


@dataclasses.dataclass
class _Step:
    """One re-simulated frame line."""

    line: dict  # the frame line as recorded
    state: Any  # the state it led to (host arrays)
    info: HostInfo
    agent_reward: float  # the agent's reward (player 0's in clock games)


def _resimulate(path: Path):
    """Re-simulates a replay file, checking every recorded summary as it goes.

    Returns:
        (header, game fns, the initial state, an iterator of `_Step`, then ("late", line) and
        ("end", line) items) as the tuple (header, fns, state0, steps).
    """
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
    state0 = fns.init(init_key(seed))
    if header.get("initial") != state_digest(state0):
        raise ReplayError(f"{where}: seed {seed} gives another initial state than recorded")
    return header, fns, state0, _steps(path, lines[1:], fns, state0)


def _steps(path: Path, lines: list[tuple[int, dict]], fns, state):
    clock = fns.game.num_players == 2
    game_id = fns.game.id
    frames, complete = 0, False
    for lineno, obj in lines:
        where = f"{path}:{lineno}"
        if complete:
            raise ReplayError(f"{where}: a line after the end line")
        if obj["type"] == "end":
            complete = True
            yield ("end", obj)
            continue
        if obj["type"] == "late":  # a report, not a step
            yield ("late", obj)
            continue
        if obj["type"] != "frame":
            raise ReplayError(f"{where}: unknown line type {obj['type']!r}")
        n = _field(obj, "frame", int, where)
        if n != frames:
            raise ReplayError(f"{where}: frame {n} out of order, expected {frames}")
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
        frames += 1
        reward = info.rewards[AGENT_PLAYER] if clock else info.reward
        yield _Step(obj, state, info, reward)


def replay(path: str | Path) -> ReplayResult:
    """Re-simulates a replay file from its seed and checks every recorded state summary.

    Raises:
        ReplayError: unreadable or malformed file (names the line), an unknown game, or a frame
            whose re-simulated reward, done flag or state digest differs from the recording.
    """
    path = Path(path)
    header, fns, _, steps = _resimulate(path)
    total, actions, end = 0.0, [], None
    for item in steps:
        if isinstance(item, _Step):
            total += item.agent_reward
            actions.append(item.line["action"])
        elif item[0] == "end":
            end = item[1]
    if end is not None:
        if end.get("frames") != len(actions):
            found = len(actions)
            raise ReplayError(f"{path}: end line says {end.get('frames')} frames, found {found}")
        if end.get("return") != total:
            raise ReplayError(f"{path}: end line says return {end.get('return')}, replayed {total}")
    return ReplayResult(
        header["game"], header["seed"], len(actions), total, tuple(actions), end is not None
    )


#: Replay names the server serves: files written by `Recorder` in its record_dir.
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def replay_file(record_dir: Path, name: str) -> Path:
    """The replay file `name` in `record_dir`.

    Raises:
        ReplayError: a name that is not a plain `*.jsonl` file name (no folders), or no such file.
    """
    if not name.endswith(".jsonl") or not set(name) <= _NAME_CHARS or name.startswith("."):
        raise ReplayError(f"{name!r} is not a replay name (a *.jsonl file of the record folder)")
    path = Path(record_dir) / name
    if not path.is_file():
        raise ReplayError(f"no replay {name!r} in {record_dir}")
    return path


def list_replays(record_dir: Path, *, limit: int = 200) -> list[dict[str, Any]]:
    """The newest `limit` replay files of `record_dir`: name, game, seed, agent, created, frames
    and whether the file has its end line (read from the header and the last line)."""
    folder = Path(record_dir)
    if not folder.is_dir():
        return []
    files = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
    out = []
    for path in files[:limit]:
        try:
            with path.open("rb") as f:
                header = json.loads(f.readline())
                size = path.stat().st_size
                f.seek(max(0, size - 4096))
                last = json.loads(f.read().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            continue  # a file being created, or not a replay: not listed
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            continue
        settings = header.get("settings") or {}
        frames = last.get("frames") if last.get("type") == "end" else last.get("frame", -1) + 1
        out.append(
            {
                "name": path.name,
                "game": header.get("game"),
                "seed": header.get("seed"),
                "agent": settings.get("agent"),
                "ks": settings.get("ks", []),
                "fps": settings.get("fps"),
                "created": header.get("created"),
                "frames": frames if isinstance(frames, int) else 0,
                "complete": last.get("type") == "end",
                "reason": last.get("reason") if last.get("type") == "end" else None,
            }
        )
    return out


class ReplayView:
    """A replay re-simulated for the viewer: every frame's report, return, clocks and counters,
    and each frame's rendered board on demand (rendering is the slow part: done per request)."""

    def __init__(self, path: str | Path) -> None:
        """Re-simulates `path` (blocking: call it off the event loop).

        Raises:
            ReplayError: as `replay` does.
        """
        self.path = Path(path)
        header, fns, state, steps = _resimulate(self.path)
        self.header = header
        self.game = fns.game
        self._states = [jax.device_get(state)]
        counts = {"on_time": 0, "late": 0, "fallback": 0, "invalid": 0}
        settings = header.get("settings") or {}
        fps = settings.get("fps")
        simulated = settings.get("clock") == "simulated"
        period_ms = 0.0 if simulated or not fps else 1e3 / fps
        init_info = HostInfo.from_device(fns.info(None, state))
        frames = [self._frame(0, None, 0.0, False, init_info.clocks, counts, period_ms)]
        self.end: dict | None = None
        total = 0.0
        for item in steps:
            if isinstance(item, _Step):
                line = item.line
                report = _report(line)
                counts[report["provenance"]] += 1
                total += item.agent_reward
                self._states.append(jax.device_get(item.state))
                n = line["frame"] + 1
                info = item.info
                frames.append(
                    self._frame(n, report, total, info.done, info.clocks, counts, period_ms)
                )
            elif item[0] == "late":
                m = item[1].get("frame")
                if isinstance(m, int) and 0 <= m < len(frames) - 1:
                    prev = frames[m + 1]["previous"]
                    if prev["provenance"] == "fallback":
                        counts["fallback"] -= 1
                        counts["late"] += 1
                    prev.update(provenance="late", source="fallback")
            else:
                self.end = item[1]
        self.frames = frames

    @staticmethod
    def _frame(n, report, total, done, clocks, counts, period_ms) -> dict[str, Any]:
        return {
            "frame": n,
            "previous": report,
            "episode_return": total,
            "done": done,
            "clocks": list(clocks),
            "period_ms": period_ms,
            "stats": dict(counts),
        }

    def index(self) -> dict[str, Any]:
        """The replay without boards: header, end line, and every frame's report and counters."""
        spec = {
            "id": self.game.id,
            "num_actions": self.game.num_actions,
            "action_names": list(self.game.action_names),
            "num_players": self.game.num_players,
            "budgets": [],
            "view": describe_view(self.game),
        }
        return {
            "name": self.path.name,
            "header": self.header,
            "end": self.end,
            "spec": spec,
            "frames": self.frames,
        }

    def boards(self, start: int, count: int) -> list[dict[str, Any]]:
        """The rendered boards of frames start .. start+count-1 (clipped to the replay)."""
        stop = min(len(self._states), start + count)
        return [render(self.game, self._states[n]) for n in range(max(0, start), stop)]


def _report(line: dict) -> dict[str, Any]:
    """A frame line as the viewer's report of that frame (the live `Report.to_dict` fields)."""
    provenance = line.get("provenance", "on_time")
    source = line.get("source", "agent")
    return {
        "frame": line["frame"],
        "action": line["action"],
        "provenance": provenance,
        "source": source if provenance == "on_time" else "fallback",
        "answer_source": source,
        "slack_ms": line.get("slack_ms"),
        "k": line.get("k"),
        "cost": line.get("cost", 0),
        "latency_ms": line.get("latency_ms"),
    }
