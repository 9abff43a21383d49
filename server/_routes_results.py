"""The results router: what `harness.layout.result_index` lists under `results_dir` (calibration,
cross-evaluations, training logs, `rtplan report`'s figures and tables, `rtplan annotate-games`'
replays, which the replay routes show) for the results page."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import grpc
from fastapi import APIRouter
from fastapi.responses import FileResponse

from rtplan.harness.layout import REPLAYS, RESULTS, describe_result, is_listed, result_index
from rtplan.server._config import SessionError
from rtplan.server._deps import AppSettings
from rtplan.server.settings import Settings

router = APIRouter()

_FILES = "/v1/results/files/"


@functools.lru_cache(maxsize=256)
def _recorded_command(path: Path, mtime_ns: int) -> str | None:
    """The `command` a JSON results file records (`rtplan eval` writes it), else None."""
    del mtime_ns  # the cache key: a rewritten file is read again
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    command = data.get("command") if isinstance(data, dict) else None
    return command if isinstance(command, str) else None


@functools.lru_cache(maxsize=256)
def _replay_title(path: Path, mtime_ns: int) -> str | None:
    """The title a replay's header annotation gives (`server.annotated`), else None."""
    del mtime_ns  # the cache key: a rewritten file is read again
    try:
        with path.open(encoding="utf-8") as f:
            header = json.loads(f.readline())
    except (OSError, ValueError):
        return None
    note = header.get("annotation") if isinstance(header, dict) else None
    title = note.get("title") if isinstance(note, dict) else None
    return title if isinstance(title, str) else None


def _entry(root: Path, rel: str) -> dict[str, Any]:
    """One file: its name, URL, what it shows and the command that wrote it (the one the file
    records, else its kind's), and its rank in the report."""
    kind = describe_result(rel)
    command = kind.command if kind else None
    if rel.endswith(".json"):
        path = root / rel
        with contextlib.suppress(OSError):
            command = _recorded_command(path, path.stat().st_mtime_ns) or command
    entry = {
        "name": Path(rel).name,
        "url": _FILES + rel,
        "shows": kind.shows if kind else None,
        "command": command,
        "rank": kind.rank if kind else 9,
    }
    if rel.endswith(REPLAYS):  # the replay page shows it (`GET /v1/results/replay?path=`)
        path = root / rel
        with contextlib.suppress(OSError):
            entry["title"] = _replay_title(path, path.stat().st_mtime_ns)
        entry["watch"] = "/watch?" + urlencode({"results_replay": rel})
    return entry


def _listing(settings: Settings) -> list[dict[str, Any]]:
    """The index's groups, headline first (each group ranked by its best file, then in index
    order), each file with the URL it is fetched from and its caption; folders are shown
    relative to the results root (no path of the server's disk)."""
    root = Path(settings.results_dir)
    groups = []
    for g in result_index(root):
        figures = [_entry(root, p) for p in g.figures]
        tables = [_entry(root, p) for p in g.tables]
        replays = [_entry(root, p) for p in g.replays]
        rel = g.folder.relative_to(root).as_posix()
        groups.append(
            {
                "title": g.title,
                "folder": RESULTS if rel == "." else f"{RESULTS}/{rel}",
                "rank": min(e["rank"] for e in figures + tables + replays),
                "figures": sorted(figures, key=lambda e: e["rank"]),
                "tables": sorted(tables, key=lambda e: e["rank"]),
                "replays": replays,
            }
        )
    return sorted(groups, key=lambda g: g["rank"])  # stable: index order within a rank


@router.get("/v1/results")
async def results(settings: AppSettings) -> dict[str, Any]:
    return {"groups": await asyncio.to_thread(_listing, settings)}


@router.get(_FILES + "{path:path}")
async def result_file(path: str, settings: AppSettings) -> FileResponse:
    target = is_listed(settings.results_dir, path)
    if target is None:
        raise SessionError(grpc.StatusCode.NOT_FOUND, f"no result file {path}")
    return FileResponse(target)
