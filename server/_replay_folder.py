"""The record folder as the replay routes see it: a replay's file by name, who played it, and the
listing (newest first) that the lobby shows. The file format itself is `server.replay`'s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from server.replay import ReplayError, header_version

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


def players(header: dict[str, Any]) -> dict[str, Any]:
    """Who played a recorded session, as the session list has it (`agent`, `ks`, `gated`,
    `opponent`, `opponent_k`: what web/api.js's `agentLabel` names), from a replay header.
    Headers before `gated` was recorded: a planner without ks was gated, as live."""
    settings = header.get("settings") or {}
    agent, ks = settings.get("agent"), list(settings.get("ks") or [])
    gated = header.get("gated", agent == "planner" and not ks)
    clock_game = (header.get("spec") or {}).get("num_players") == 2
    opponent = settings.get("opponent") if clock_game else None
    opponent_k = settings.get("opponent_k") if opponent == "planner" else None
    return {
        "agent": agent,
        "ks": ks,
        "gated": bool(gated),
        "opponent": opponent,
        "opponent_k": opponent_k,
    }


def list_replays(record_dir: Path, *, limit: int = 200) -> list[dict[str, Any]]:
    """The newest `limit` replay files of `record_dir`: name, game, seed, who played
    (`players`), created, frames and whether the file has its end line (read from the header
    and the last line)."""
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
        try:
            version = header_version(header, str(path)) if isinstance(header, dict) else 0
        except ReplayError:
            version = 0
        if not version:
            continue  # not a replay this rtplan reads
        frames = last.get("frames") if last.get("type") == "end" else last.get("frame", -1) + 1
        out.append(
            {
                "name": path.name,
                "version": version,
                "game": header.get("game"),
                "seed": header.get("seed"),
                **players(header),
                "fps": (header.get("settings") or {}).get("fps"),
                "created": header.get("created"),
                "frames": frames if isinstance(frames, int) else 0,
                "complete": last.get("type") == "end",
                "reason": last.get("reason") if last.get("type") == "end" else None,
            }
        )
    return out
