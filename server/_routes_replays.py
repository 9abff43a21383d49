"""The replays router: the recorded replays listed, indexed and rendered for the replay page, and
the replays of the results folder (annotated games) indexed and rendered the same way."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import grpc
from fastapi import APIRouter, Depends, Query, Request, Response

from rtplan.harness.layout import REPLAYS, is_listed
from rtplan.server._config import SessionError
from rtplan.server._deps import AppSettings
from rtplan.server._errors import errors
from rtplan.server._replay_folder import list_replays, replay_file
from rtplan.server._replay_view import ReplayView
from rtplan.server.replay import ReplayError
from rtplan.server.replay_gif import MAX_GIF_FRAMES, gif_bytes

#: Boards one request may render (Pac-Man renders in ~15 ms each: keep requests short).
MAX_BOARDS = 64

router = APIRouter()


class GifResponse(Response):
    """An animated GIF (`server.replay_gif.gif_bytes`)."""

    media_type = "image/gif"


#: A GIF route's answers: the image, or the errors of a replay's load.
_GIF = {
    200: {"content": {"image/gif": {"schema": {"type": "string", "format": "binary"}}}},
    **errors(404, 422),
}


class ReplayCache:
    """The last few re-simulated replays (each holds every state of its game), keyed by name
    and the file's version, so that scrubbing does not re-simulate.

    Args:
        record_dir: the folder of the replay files.
        size: replays kept.
    """

    def __init__(self, record_dir: Path, size: int = 4) -> None:
        self.record_dir = record_dir
        self.size = size
        self._views: dict[tuple, ReplayView] = {}

    async def load(self, name: str) -> ReplayView:
        """The replay `name` of the record folder, re-simulated (off the event loop) if new."""
        try:
            path = replay_file(self.record_dir, name)
        except ReplayError as e:
            raise SessionError(grpc.StatusCode.NOT_FOUND, str(e)) from None
        return await self.view(path)

    async def load_result(self, results_dir: Path, rel: str) -> ReplayView:
        """The replay at `rel` under the results folder (an annotated game: `rtplan
        annotate-games`), when the results index lists it (`harness.layout.is_listed`: a
        `*.jsonl` file inside the folder), re-simulated if new."""
        path = is_listed(results_dir, rel) if rel.endswith(REPLAYS) else None
        if path is None:
            raise SessionError(grpc.StatusCode.NOT_FOUND, f"no replay {rel!r} in the results")
        return await self.view(path)

    async def view(self, path: Path) -> ReplayView:
        """The replay file at `path`, re-simulated (off the event loop) unless cached."""
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        cache = self._views
        if key not in cache:
            try:  # re-simulating is the game's compiled step: off the loop that runs ticks
                view = await asyncio.to_thread(ReplayView, path)
            except ReplayError as e:
                raise SessionError(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
            for old in [k for k in cache if k[0] == key[0]]:  # an older version of the file
                del cache[old]
            while len(cache) >= self.size:
                del cache[next(iter(cache))]
            cache[key] = view
        return cache[key]


def get_replays(request: Request) -> ReplayCache:
    return request.app.state.replays


Replays = Annotated[ReplayCache, Depends(get_replays)]


#: Replays one page lists at most.
MAX_REPLAY_PAGE = 200


@router.get("/v1/replays", responses=errors(422))
async def replays(
    settings: AppSettings,
    offset: Annotated[int, Query(ge=0, description="an integer >= 0 (replays skipped)")] = 0,
    limit: Annotated[
        int, Query(ge=1, le=MAX_REPLAY_PAGE, description=f"an integer in [1, {MAX_REPLAY_PAGE}]")
    ] = 50,
    game: Annotated[str | None, Query(max_length=100, description="a game id")] = None,
) -> dict[str, Any]:
    """A page of the record folder's replays, newest first (`list_replays`), with `total`."""
    page = await asyncio.to_thread(
        list_replays, settings.record_dir, offset=offset, limit=limit, game=game
    )
    return {"record_dir": str(settings.record_dir), **page}


Every = Annotated[
    int | None,
    Query(
        ge=1,
        description="an integer >= 1 (show every n-th frame; default: as few as "
        f"keep the GIF within {MAX_GIF_FRAMES} frames)",
    ),
]
MaxFrames = Annotated[
    int, Query(ge=1, le=MAX_GIF_FRAMES, description=f"an integer in [1, {MAX_GIF_FRAMES}]")
]
Fps = Annotated[
    float | None, Query(gt=0, le=50, description="a number in (0, 50] (GIF frames a second)")
]
Start = Annotated[int, Query(ge=0, description="an integer >= 0 (the first frame)")]
Count = Annotated[int, Query(ge=1, le=MAX_BOARDS, description=f"an integer in [1, {MAX_BOARDS}]")]
#: A results replay's path, relative to the results folder.
ResultPath = Annotated[
    str,
    Query(
        max_length=500,
        description="a replay file of the results, e.g. GAME/clock-eval/games/NAME.jsonl",
    ),
]


async def _boards(view: ReplayView, start: int, count: int) -> dict[str, Any]:
    boards = await asyncio.to_thread(view.boards, start, count)
    return {"start": start, "boards": boards}


@router.get("/v1/replays/{name}", responses=errors(404, 422))
async def replay_index(name: str, cache: Replays) -> dict[str, Any]:
    return (await cache.load(name)).index()


@router.get("/v1/replays/{name}/boards", responses=errors(404, 422))
async def replay_boards(name: str, cache: Replays, start: Start = 0, count: Count = 16):
    return await _boards(await cache.load(name), start, count)


@router.get("/v1/results/replay", responses=errors(404, 422))
async def result_replay_index(path: ResultPath, cache: Replays, settings: AppSettings):
    """A replay of the results folder (an annotated game), as `GET /v1/replays/NAME`."""
    return (await cache.load_result(settings.results_dir, path)).index()


@router.get("/v1/results/replay/boards", responses=errors(404, 422))
async def result_replay_boards(
    path: ResultPath, cache: Replays, settings: AppSettings, start: Start = 0, count: Count = 16
):
    return await _boards(await cache.load_result(settings.results_dir, path), start, count)


@router.get("/v1/results/replay/gif", response_class=GifResponse, responses=_GIF)
async def result_replay_gif(
    path: ResultPath,
    cache: Replays,
    settings: AppSettings,
    every: Every = None,
    max_frames: MaxFrames = MAX_GIF_FRAMES,
    fps: Fps = None,
) -> Response:
    """A results replay as an animated GIF, as `GET /v1/replays/NAME/gif`."""
    view = await cache.load_result(settings.results_dir, path)
    return await _gif(view, Path(path).name, every, max_frames, fps)


@router.get("/v1/replays/{name}/gif", response_class=GifResponse, responses=_GIF)
async def replay_gif(
    name: str,
    cache: Replays,
    every: Every = None,
    max_frames: MaxFrames = MAX_GIF_FRAMES,
    fps: Fps = None,
) -> Response:
    """The replay as an animated GIF (`server.replay_gif.gif_bytes`), downloaded as NAME.gif."""
    return await _gif(await cache.load(name), name, every, max_frames, fps)


async def _gif(
    view: ReplayView, name: str, every: int | None, max_frames: int, fps: float | None
) -> Response:
    if every is None:  # the whole game, thinned to the bound
        every = max(1, -(-len(view.frames) // max_frames))
    data = await asyncio.to_thread(gif_bytes, view, fps=fps, every=every, max_frames=max_frames)
    filename = name.removesuffix(".jsonl") + ".gif"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    return GifResponse(data, headers=headers)
