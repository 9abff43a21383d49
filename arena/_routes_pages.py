"""The pages router: the leaderboard at /arena, an agent's page at /arena/agents/{name}, and
their files under /web/: the web folder the env server serves too (one look, one copy)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from rtplan.harness.assets import find_pages, web_dir

log = logging.getLogger("rtplan.arena")

#: The arena's two pages in the pages' folder (`harness.assets.web_dir`).
LEADERBOARD, AGENT = "arena.html", "arena-agent.html"


def find_web_dir(configured: Path | None = None) -> Path | None:
    """The folder of the arena's pages: `configured` (`--web-dir`, RTPLAN_ARENA_WEB_DIR) when
    given, else the checkout's web/, else the installed wheel's copy; None when that folder
    holds no arena.html."""
    return find_pages(configured, LEADERBOARD)


def mount_pages(app: FastAPI, configured: Path | None) -> None:
    """Finds the pages (`find_web_dir`), serves their files under /web/ and puts their folder
    on `app.state.web_dir` (None, with a warning that says where it looked, when there are
    none: the REST API serves on)."""
    web = find_web_dir(configured)
    app.state.web_dir = web
    if web is None:
        app.state.no_pages = (
            f"no arena pages here: no {LEADERBOARD} in {web_dir(configured)} "
            "(--web-dir or RTPLAN_ARENA_WEB_DIR names the pages' folder)"
        )
        log.warning("%s", app.state.no_pages)
        return
    app.mount("/web", StaticFiles(directory=web), name="web")


def _page(name: str):
    """A dependency: the page file `name` (a 404 that says where no pages were found)."""

    def page(request: Request) -> Path:
        web: Path | None = request.app.state.web_dir
        if web is None:
            raise StarletteHTTPException(404, request.app.state.no_pages)
        return web / name

    return page


# The pages are no part of the REST API's document: each shows JSON the document describes
# (GET /v1/leaderboard, /v1/agents/{name}, /v1/runs?agent=) and links to it.
router = APIRouter(include_in_schema=False)


@router.get("/")
async def home() -> RedirectResponse:
    return RedirectResponse("/arena")


@router.get("/arena")
async def leaderboard_page(page: Annotated[Path, Depends(_page(LEADERBOARD))]) -> FileResponse:
    """The leaderboard of a game, tier and seed set (`?game=&tier=&seed_set=`)."""
    return FileResponse(page)


@router.get("/arena/agents/{name}")
async def agent_page(page: Annotated[Path, Depends(_page(AGENT))]) -> FileResponse:
    """An agent's versions and runs, each with its timing profile and episodes."""
    return FileResponse(page)
