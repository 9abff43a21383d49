"""The pages router: the lobby at /, the watch page at /watch (and at /tv, where it follows the
featured game), the results page at /results, and their files under /web/ (every file of the
web folder, so a new module needs no route)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import grpc
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from rtplan.harness.assets import find_pages, web_dir
from rtplan.server._config import SessionError
from rtplan.server._errors import errors

log = logging.getLogger("rtplan.server")


def find_web_dir(configured: Path | None = None) -> Path | None:
    """The folder of the browser pages: `configured` (`--web-dir`, RTPLAN_SERVER_WEB_DIR) when
    given, else the checkout's web/ beside the packages, else the installed wheel's copy
    (`harness.assets.web_dir`); None when that folder holds no index.html."""
    return find_pages(configured, "index.html")


def mount_pages(app: FastAPI, configured: Path | None) -> None:
    """Finds the pages (`find_web_dir`), serves their files under /web/ and puts their folder
    on `app.state.web_dir` (None, with a warning that says where it looked, when there are
    none)."""
    web = find_web_dir(configured)
    app.state.web_dir = web
    if web is None:
        app.state.no_pages = (
            f"no browser pages here: no index.html in {web_dir(configured)} "
            "(--web-dir or RTPLAN_SERVER_WEB_DIR names the pages' folder)"
        )
        log.warning("%s", app.state.no_pages)
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


router = APIRouter()

#: A page's answers: the HTML page, or a 404 where the server has no pages.
_PAGE = {
    "response_class": FileResponse,
    "responses": {200: {"content": {"text/html": {"schema": {"type": "string"}}}}, **errors(404)},
}


@router.get("/", **_PAGE)
async def lobby(page: Annotated[Path, Depends(_lobby)]) -> FileResponse:
    return FileResponse(page)


@router.get("/watch", **_PAGE)
async def watch_page(page: Annotated[Path, Depends(_page("watch.html"))]) -> FileResponse:
    return FileResponse(page)


@router.get("/tv", **_PAGE)
async def tv_page(page: Annotated[Path, Depends(_page("watch.html"))]) -> FileResponse:
    """The watch page in TV mode: it shows the featured game and follows the next (watch.js)."""
    return FileResponse(page)


@router.get("/results", **_PAGE)
async def results_page(page: Annotated[Path, Depends(_page("results.html"))]) -> FileResponse:
    return FileResponse(page)
