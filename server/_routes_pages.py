"""The pages router: the lobby at /, the watch page at /watch, the results page at /results, and
their files under /web/ (every file of the web folder, so a new module needs no route)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import grpc
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from server._config import SessionError

log = logging.getLogger("rtplan.server")

#: The browser pages of a checkout or an editable install: web/ beside the packages.
WEB_DIR = Path(__file__).resolve().parents[1] / "web"


def find_web_dir(configured: Path | None = None) -> Path | None:
    """The folder of the browser pages: `configured`, else web/ beside the packages (a checkout,
    an editable install), else ./web (a wheel installed in a checkout's copy, as in the image);
    None when none of these holds an index.html."""
    candidates = [Path(configured)] if configured is not None else [WEB_DIR, Path.cwd() / "web"]
    return next((c for c in candidates if (c / "index.html").is_file()), None)


def mount_pages(app: FastAPI, configured: Path | None) -> None:
    """Finds the pages (`find_web_dir`), serves their files under /web/ and puts their folder
    on `app.state.web_dir` (None, with a warning, when there are none)."""
    web = find_web_dir(configured)
    app.state.web_dir = web
    if web is None:
        where = configured if configured is not None else f"{WEB_DIR} or ./web"
        app.state.no_pages = f"no browser pages here: no index.html in {where}"
        log.warning("no browser pages: no index.html in %s", where)
        return
    app.mount("/web", StaticFiles(directory=web), name="web")


def _page(name: str):
    """A dependency: the page file `name` of the web folder (a 404 when there are no pages)."""

    def page(request: Request) -> Path:
        web: Path | None = request.app.state.web_dir
        if web is None:
            raise StarletteHTTPException(404, "Not Found")
        return web / name

    return page


def _lobby(request: Request) -> Path:
    """The lobby, or the error that says where no pages were found."""
    if request.app.state.web_dir is None:
        raise SessionError(grpc.StatusCode.NOT_FOUND, request.app.state.no_pages)
    return request.app.state.web_dir / "index.html"


router = APIRouter(include_in_schema=False)


@router.get("/")
async def lobby(page: Annotated[Path, Depends(_lobby)]) -> FileResponse:
    return FileResponse(page)


@router.get("/watch")
async def watch_page(page: Annotated[Path, Depends(_page("watch.html"))]) -> FileResponse:
    return FileResponse(page)


@router.get("/results")
async def results_page(page: Annotated[Path, Depends(_page("results.html"))]) -> FileResponse:
    return FileResponse(page)
