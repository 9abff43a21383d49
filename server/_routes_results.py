"""The results router: what `harness.layout.result_index` lists under `results_dir` (calibration,
cross-evaluations, training logs, `rtplan report`'s figures and tables, `rtplan annotate-games`'
replays, which the replay routes show) for the results page."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import threading
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

import grpc
from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import FileResponse, JSONResponse

from rtplan.harness.layout import (
    FIGURES,
    REPLAYS,
    RESULTS,
    TABLES,
    describe_result,
    is_listed,
    is_replay,
    result_index,
)
from rtplan.server._config import SessionError
from rtplan.server._deps import AppSettings
from rtplan.server._errors import errors

router = APIRouter()

_FILES = "/v1/results/files/"
LISTED = FIGURES + TABLES + REPLAYS


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


@functools.lru_cache(maxsize=256)
def _png_size(path: Path, mtime_ns: int) -> tuple[int, int] | None:
    """(width, height) in pixels of the PNG at `path` (its IHDR chunk), else None."""
    del mtime_ns  # the cache key: a rewritten file is read again
    try:
        with path.open("rb") as f:
            head = f.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _entry(root: Path, rel: str) -> dict[str, Any]:
    """One file: its name, URL, what it shows and the command that wrote it (the one the file
    records, else its kind's), its rank in the report, and a PNG figure's natural size (the
    page sizes it from that before it loads: never below a readable share of it)."""
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
    if rel.endswith(".png"):
        path = root / rel
        with contextlib.suppress(OSError):
            size = _png_size(path, path.stat().st_mtime_ns)
            if size:
                entry["width"], entry["height"] = size
    if is_replay(rel):  # the replay page shows it (`GET /v1/results/replay?path=`)
        path = root / rel
        with contextlib.suppress(OSError):
            entry["title"] = _replay_title(path, path.stat().st_mtime_ns)
        entry["watch"] = "/watch?" + urlencode({"results_replay": rel})
    return entry


def _listing(root: Path) -> list[dict[str, Any]]:
    """The index's groups, headline first (each group ranked by its best file, then in index
    order), each file with the URL it is fetched from and its caption; folders are shown
    relative to the results root (no path of the server's disk)."""
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


def _tree_version(root: Path) -> tuple:
    """What changes when the index would: every folder under `root` and every file it lists,
    with their modification times and sizes (a file added, removed, renamed or rewritten)."""
    seen = []
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
            seen.append((str(folder), folder.stat().st_mtime_ns))
        except OSError:  # gone, or not a folder: a missing root lists nothing
            continue
        for entry in entries:
            if entry.is_dir():
                stack.append(Path(entry.path))
            elif os.path.splitext(entry.name)[1] in LISTED:
                with contextlib.suppress(OSError):
                    stat = entry.stat()
                    seen.append((entry.path, stat.st_mtime_ns, stat.st_size))
    return tuple(sorted(seen))


class ResultsIndex:
    """`GET /v1/results`' answer, built once and built again only when the results folder
    changes (`_tree_version`: a walk of its folders and listed files' times, milliseconds,
    where building reads every JSON and replay header, seconds).

    Args:
        root: the results folder (`Settings.results_dir`).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()
        self._version: tuple | None = None
        self._body = b""

    def body(self) -> bytes:
        """The answer's JSON, `{"groups": _listing(...)}`, of the folder as it is now (encoded
        once per version: 2,000 files' entries take longer to encode than to check); blocking:
        call it off the event loop."""
        with self._lock:  # one rebuild at a time; the others wait for it
            version = _tree_version(self.root)
            if version != self._version:
                self._body = json.dumps({"groups": _listing(self.root)}).encode()
                self._version = version
            return self._body


def get_results_index(request: Request) -> ResultsIndex:
    return request.app.state.results_index


Index = Annotated[ResultsIndex, Depends(get_results_index)]


@router.get("/v1/results", response_class=JSONResponse)
async def results(index: Index) -> Response:
    """The results folder's index (`ResultsIndex`): `groups`, each with its figures, tables and
    replays."""
    return Response(await asyncio.to_thread(index.body), media_type="application/json")


#: The content type of each kind of file the index lists (a replay is JSON Lines).
MEDIA_TYPES = {
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".csv": "text/csv",
    ".json": "application/json",
    ".jsonl": "application/jsonl",
}
assert set(MEDIA_TYPES) == set(LISTED)


@router.get(
    _FILES + "{path:path}",
    response_class=FileResponse,
    responses={
        200: {
            "description": "the file, by its suffix",
            "content": {t: {} for t in MEDIA_TYPES.values()},
        },
        **errors(404),
    },
)
async def result_file(path: str, settings: AppSettings) -> FileResponse:
    target = is_listed(settings.results_dir, path)
    if target is None:
        raise SessionError(grpc.StatusCode.NOT_FOUND, f"no result file {path}")
    return FileResponse(target, media_type=MEDIA_TYPES[target.suffix])
