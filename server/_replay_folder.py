"""The record folder as the replay routes see it: a replay's file by name, who played it, the
listing (newest first, a page at a time) that the lobby shows, and the retention policy that
keeps the folder bounded. The file format itself is `server.replay`'s."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from rtplan import games
from rtplan.server.replay import ReplayError, header_version

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
    opponent = settings.get("opponent") if _kind(header) is games.Kind.CLOCK else None
    opponent_k = settings.get("opponent_k") if opponent == "planner" else None
    return {
        "agent": agent,
        "ks": ks,
        "gated": bool(gated),
        "opponent": opponent,
        "opponent_k": opponent_k,
    }


def _kind(header: dict[str, Any]) -> games.Kind | None:
    """The recorded game's kind: the registry's (`games.kind_of`) for a registered game, else
    the kind whose players the recorded spec names (None: neither says)."""
    game = header.get("game")
    if isinstance(game, str) and game in games.registered_games():
        return games.kind_of(game)
    recorded = (header.get("spec") or {}).get("num_players")
    return next((kind for kind in games.Kind if kind.num_players == recorded), None)


def _newest_first(folder: Path) -> list[tuple[int, str]]:
    """(mtime_ns, name) of every `*.jsonl` file of `folder`, newest first (one `scandir`: a
    10,000-file folder takes milliseconds; nothing is opened)."""
    out = []
    try:
        with os.scandir(folder) as entries:
            for e in entries:
                if e.name.endswith(".jsonl") and not e.name.startswith("."):
                    try:
                        if e.is_file():
                            out.append((e.stat().st_mtime_ns, e.name))
                    except OSError:
                        continue  # deleted while listing
    except (FileNotFoundError, NotADirectoryError):
        return []
    out.sort(reverse=True)
    return out


def _listing(path: Path) -> dict[str, Any] | None:
    """One replay's listing, from its header and last line; None for a file that is not (yet) a
    replay this rtplan reads."""
    try:
        with path.open("rb") as f:
            header = json.loads(f.readline())
            size = path.stat().st_size
            f.seek(max(0, size - 4096))
            last = json.loads(f.read().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None  # a file being created, or not a replay: not listed
    try:
        version = header_version(header, str(path)) if isinstance(header, dict) else 0
    except ReplayError:
        version = 0
    if not version or not isinstance(last, dict):
        return None
    frames = last.get("frames") if last.get("type") == "end" else last.get("frame", -1) + 1
    return {
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


def list_replays(
    record_dir: Path, *, offset: int = 0, limit: int = 50, game: str | None = None
) -> dict[str, Any]:
    """A page of the replay files of `record_dir`, newest first: `replays` (name, game, seed,
    who played (`players`), created, frames, whether the file has its end line), `total` (files
    in the folder, or of `game`), `offset` and `limit`. Only the page's files are opened, so a
    page of a 10,000-file folder costs one directory scan and `limit` reads.

    Args:
        record_dir: the record folder.
        offset: files skipped (newest first).
        limit: files listed at most.
        game: only this game's files (the `Recorder`'s names start with the game id).
    """
    files = _newest_first(Path(record_dir))
    if game:
        files = [f for f in files if f[1].startswith(f"{game}_")]
    out = []
    for _, name in files[offset:]:
        if len(out) >= limit:
            break
        item = _listing(Path(record_dir) / name)
        if item is not None:
            out.append(item)
    return {"replays": out, "total": len(files), "offset": offset, "limit": limit}


@dataclasses.dataclass(frozen=True)
class Retention:
    """How many replay files a record folder keeps, and for how long."""

    max_count: int = 1000  # files kept at most (the newest); 0: no limit
    max_age_s: float = 30 * 86400.0  # files older than this go; 0: no limit


def prune_replays(
    record_dir: Path,
    retention: Retention,
    *,
    keep: Collection[str] = (),
    now: float | None = None,
    orphans: bool = False,
) -> list[str]:
    """Deletes the replay files of `record_dir` beyond `retention`: the oldest beyond its count
    and those older than its age (by modification time). Files named in `keep` (recordings in
    progress) stay, and count first towards the limit.

    With `orphans` (at start-up, when nothing records), the dot-named files of sealed
    recordings (`replay.Recorder`) go too: a server that died left them, and their episodes
    never ended.

    Returns:
        The names deleted, oldest first.
    """
    now = time.time() if now is None else now
    files = _newest_first(Path(record_dir))
    kept = sum(1 for _, name in files if name in keep)
    doomed = []
    others = (f for f in files if f[1] not in keep)
    for i, (mtime_ns, name) in enumerate(others, start=kept):
        too_many = retention.max_count and i >= retention.max_count
        too_old = retention.max_age_s and now - mtime_ns / 1e9 > retention.max_age_s
        if too_many or too_old:
            doomed.append(name)
    # A sealed recording a dead server left (`replay.Recorder`): its episode never ended.
    if orphans:
        doomed += _orphan_sealed(Path(record_dir), keep)
    deleted = []
    for name in reversed(doomed):
        try:
            (Path(record_dir) / name).unlink()
            deleted.append(name)
        except FileNotFoundError:
            pass
    return deleted


def _orphan_sealed(folder: Path, keep: Collection[str]) -> list[str]:
    """The dot-named files of sealed recordings not in progress (`keep` names the files they
    will have)."""
    try:
        with os.scandir(folder) as entries:
            names = [
                e.name for e in entries if e.name.startswith(".") and e.name.endswith(".jsonl")
            ]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [n for n in names if n[1:] not in keep]
