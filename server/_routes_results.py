"""The results router: the figures and tables of `rtplan calibrate` (checkpoint_dir/<game>/
calibration) and `rtplan report` (results_dir) for the results page."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
from fastapi import APIRouter
from fastapi.responses import FileResponse

from server._config import SessionError
from server._deps import AppSettings
from server.settings import Settings

#: What the results page shows, by file suffix.
_FIGURES, _TABLES = (".png", ".svg"), (".csv", ".json")

router = APIRouter()


def _roots(settings: Settings) -> dict[str, Path]:
    """The folders whose files the results page may show, by the name in their URLs."""
    return {"checkpoints": Path(settings.checkpoint_dir), "results": Path(settings.results_dir)}


def _group(base: Path, root_name: str, folder: Path, title: str) -> dict[str, Any] | None:
    """The shown files of `folder` (under root `base`), or None when it has none."""
    files = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    shown = [p for p in files if p.suffix in _FIGURES + _TABLES]
    if not shown:
        return None

    def entry(p: Path) -> dict[str, str]:
        rel = p.relative_to(base).as_posix()
        return {"name": p.name, "url": f"/v1/results/files/{root_name}/{rel}"}

    return {
        "title": title,
        "folder": str(folder),
        "figures": [entry(p) for p in shown if p.suffix in _FIGURES],
        "tables": [entry(p) for p in shown if p.suffix in _TABLES],
    }


def _listing(settings: Settings) -> list[dict[str, Any]]:
    """Every calibration folder under the checkpoints, then the results folder and its
    sub-folders, each as a group of figures and tables."""
    groups = []
    ckpt = _roots(settings)["checkpoints"]
    games_dirs = sorted(p for p in ckpt.iterdir() if p.is_dir()) if ckpt.is_dir() else []
    for game_dir in games_dirs:
        title = f"{game_dir.name} · calibration"
        groups.append(_group(ckpt, "checkpoints", game_dir / "calibration", title))
    res = _roots(settings)["results"]
    if res.is_dir():
        groups.append(_group(res, "results", res, "results"))
        for sub in sorted(p for p in res.iterdir() if p.is_dir()):
            groups.append(_group(res, "results", sub, f"results · {sub.name}"))
    return [g for g in groups if g is not None]


@router.get("/v1/results")
async def results(settings: AppSettings) -> dict[str, Any]:
    return {"groups": await asyncio.to_thread(_listing, settings)}


@router.get("/v1/results/files/{root}/{path:path}")
async def result_file(root: str, path: str, settings: AppSettings) -> FileResponse:
    roots = _roots(settings)
    if root not in roots:
        raise SessionError(grpc.StatusCode.NOT_FOUND, f"no results folder {root!r}")
    base = roots[root].resolve()
    target = (base / path).resolve()
    listed = root == "results" or target.parent.name == "calibration"
    if (
        not target.is_relative_to(base)
        or not listed
        or target.suffix not in _FIGURES + _TABLES
        or not target.is_file()
    ):
        raise SessionError(grpc.StatusCode.NOT_FOUND, f"no result file {root}/{path}")
    return FileResponse(target)
