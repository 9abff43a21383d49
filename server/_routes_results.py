"""The results router: what `harness.layout.result_index` lists under `results_dir` (calibration,
cross-evaluations, training logs, `rtplan report`'s figures and tables) for the results page."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
from fastapi import APIRouter
from fastapi.responses import FileResponse

from harness.layout import is_listed, result_index
from server._config import SessionError
from server._deps import AppSettings
from server.settings import Settings

router = APIRouter()

_FILES = "/v1/results/files/"


def _listing(settings: Settings) -> list[dict[str, Any]]:
    """The index's groups, each file with the URL it is fetched from."""

    def entry(rel: str) -> dict[str, str]:
        return {"name": Path(rel).name, "url": _FILES + rel}

    return [
        {
            "title": g.title,
            "folder": str(g.folder),
            "figures": [entry(p) for p in g.figures],
            "tables": [entry(p) for p in g.tables],
        }
        for g in result_index(settings.results_dir)
    ]


@router.get("/v1/results")
async def results(settings: AppSettings) -> dict[str, Any]:
    return {"groups": await asyncio.to_thread(_listing, settings)}


@router.get(_FILES + "{path:path}")
async def result_file(path: str, settings: AppSettings) -> FileResponse:
    target = is_listed(settings.results_dir, path)
    if target is None:
        raise SessionError(grpc.StatusCode.NOT_FOUND, f"no result file {path}")
    return FileResponse(target)
