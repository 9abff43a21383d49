"""The environment server's FastAPI app: REST sessions, websocket viewers, and (in its lifespan)
the gRPC Env API on the same event loop."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import grpc
from fastapi import Depends, FastAPI, Header, Query, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.websockets import WebSocketDisconnect

import games
from rtplan import wire
from rtplan.v1 import planner_pb2_grpc
from server._config import SessionConfig, SessionError
from server._human import PlayerLink
from server._manager import SessionManager
from server._replay_view import ReplayView
from server._runtime import Runtimes
from server._viewers import Viewer
from server.env_service import SERVER_VERSION, EnvService, start_grpc_server
from server.replay import ReplayError, list_replays, replay_file
from server.settings import Settings

log = logging.getLogger("rtplan.server")

#: A planner channel retries a lost connection quickly (gRPC's default backoff grows to 2 min).
PLANNER_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", wire.MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", wire.MAX_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


#: The browser pages of a checkout or an editable install: web/ beside the packages.
WEB_DIR = Path(__file__).resolve().parents[1] / "web"


def find_web_dir(configured: Path | None = None) -> Path | None:
    """The folder of the browser pages: `configured`, else web/ beside the packages (a checkout,
    an editable install), else ./web (a wheel installed in a checkout's copy, as in the image);
    None when none of these holds an index.html."""
    candidates = [Path(configured)] if configured is not None else [WEB_DIR, Path.cwd() / "web"]
    return next((c for c in candidates if (c / "index.html").is_file()), None)


class CreateSession(BaseModel):
    """Body of POST /v1/sessions."""

    model_config = ConfigDict(extra="forbid", strict=True)

    game: str = Field(max_length=100)
    seed: int = Field(0, ge=0, lt=2**63)
    fps: float | None = Field(None, gt=0)
    agent: Literal["grpc", "reflex", "planner", "human"] = "grpc"
    #: Planner agent: a budget, or a sequence of budgets played in turn.
    k: int | list[int] | None = None
    fallback: Literal["game", "reflex"] = "game"
    clock: Literal["real_time", "real-time", "simulated"] = "real_time"
    record: bool = False
    #: Clock games: the built-in opponent; default (`SessionManager.resolve`): for a human, the
    #: planner when the planner service serves the game, else the reflex when a checkpoint
    #: exists, else random.
    opponent: Literal["reflex", "random", "planner"] | None = None
    #: Planner opponent: its budget k (default the game's largest); alone it implies "planner".
    opponent_k: int | None = Field(None, ge=1)
    max_frames: int = Field(0, ge=0)

    @property
    def opponent_given(self) -> bool:
        return self.opponent is not None or self.opponent_k is not None

    def config(self, default_fps: float) -> SessionConfig:
        if self.k is None:
            ks: tuple[int, ...] = ()
        elif isinstance(self.k, int):
            ks = (self.k,)
        else:
            ks = tuple(self.k)
        if isinstance(self.k, list) and not 1 <= len(ks) <= 1024:
            raise SessionError(
                grpc.StatusCode.INVALID_ARGUMENT, "k: a k-sequence needs 1 to 1024 budgets"
            )
        return SessionConfig(
            game_id=self.game,
            seed=self.seed,
            fps=default_fps if self.fps is None else self.fps,
            agent=self.agent,
            ks=ks,
            fallback=self.fallback,
            clock="simulated" if self.clock == "simulated" else "real_time",
            record=self.record,
            opponent=self.opponent or ("planner" if self.opponent_k else "reflex"),
            opponent_k=self.opponent_k or 0,
            max_frames=self.max_frames,
        )


def _error(status: int, kind: str, detail: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": kind, "detail": detail})


def _bearer(authorization: str | None) -> str | None:
    if authorization is None:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def get_manager(request: Request) -> SessionManager:
    return request.app.state.manager


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


Manager = Annotated[SessionManager, Depends(get_manager)]
AppSettings = Annotated[Settings, Depends(get_settings)]
Authorization = Annotated[str | None, Header(max_length=1000)]


def create_app(settings: Settings | None = None) -> FastAPI:
    """The env server app; its lifespan starts the gRPC Env server on the same event loop.

    `app.state` holds the settings, the game runtimes, the session manager, the planner
    channel and the gRPC server (with `grpc_port`, the port it bound).
    """
    settings = Settings() if settings is None else settings

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        runtimes = Runtimes(settings.checkpoint_dir)
        channel = stub = None
        if settings.planner_address:
            channel = grpc.aio.insecure_channel(
                settings.planner_address, options=PLANNER_CHANNEL_OPTIONS
            )
            stub = planner_pb2_grpc.PlannerStub(channel)
        manager = SessionManager(settings, runtimes, stub)
        token = settings.agent_token.get_secret_value() if settings.agent_token else None
        service = EnvService(
            manager,
            agent_token=token,
            default_fps=settings.default_fps,
            agent_queue=settings.agent_queue,
        )
        server, port = await start_grpc_server(service, settings.host, settings.grpc_port)
        app.state.runtimes = runtimes
        app.state.manager = manager
        app.state.planner_channel = channel
        app.state.grpc_server = server
        app.state.grpc_port = port
        try:
            for game_id in settings.preload:
                await runtimes.get(game_id)
            yield
        finally:
            await manager.shutdown()
            await server.stop(settings.grace_s)
            if channel is not None:
                await channel.close()

    app = FastAPI(title="rtplan env server", version=SERVER_VERSION, lifespan=lifespan)
    app.state.settings = settings

    @app.exception_handler(SessionError)
    async def session_error(request: Request, exc: SessionError):
        return _error(exc.http_status, exc.code.name.lower(), exc.message)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError):
        parts = []
        for err in exc.errors()[:5]:
            loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
            parts.append(f"{loc}: {err.get('msg', 'invalid')}")
        return _error(422, "invalid_request", "; ".join(parts) or "invalid request")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return _error(exc.status_code, "http_error", str(exc.detail))

    @app.get("/healthz")
    async def healthz(request: Request, manager: Manager) -> dict[str, Any]:
        return {
            "status": "ok",
            "version": SERVER_VERSION,
            "live_sessions": manager.live_count(),
            "grpc_port": request.app.state.grpc_port,
            "planner_address": settings.planner_address,
        }

    @app.get("/v1/games")
    async def list_games(request: Request) -> dict[str, Any]:
        runtimes: Runtimes = request.app.state.runtimes
        return {"games": [runtimes.describe(g) for g in games.registered_games()]}

    @app.post("/v1/sessions", status_code=201)
    async def create_session(
        body: CreateSession,
        request: Request,
        manager: Manager,
        conf: AppSettings,
        authorization: Authorization = None,
    ) -> dict[str, Any]:
        if conf.agent_token is not None:
            given = _bearer(authorization)
            if given is None:
                raise SessionError(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "creating a session needs the server's agent token: "
                    "Authorization: Bearer <token>",
                )
            if not hmac.compare_digest(
                given.encode(), conf.agent_token.get_secret_value().encode()
            ):
                raise SessionError(grpc.StatusCode.PERMISSION_DENIED, "wrong agent token")
        cfg = await manager.resolve(
            body.config(conf.default_fps), opponent_given=body.opponent_given
        )
        session = await manager.create(cfg)
        return {
            "id": session.id,
            "token": session.token,
            "viewer_path": session.viewer_path,
            "grpc_port": request.app.state.grpc_port,
            "session": session.details(),
        }

    @app.get("/v1/sessions")
    async def list_sessions(manager: Manager) -> dict[str, Any]:
        return {"sessions": [s.summary() for s in manager.list()]}

    @app.get("/v1/sessions/{session_id}")
    async def get_session(session_id: str, manager: Manager) -> dict[str, Any]:
        return manager.get(session_id).details()

    @app.delete("/v1/sessions/{session_id}")
    async def delete_session(
        session_id: str, manager: Manager, authorization: Authorization = None
    ) -> dict[str, Any]:
        token = _bearer(authorization)
        manager.get(session_id)  # 404 before 401 for an unknown id
        if token is None:
            raise SessionError(
                grpc.StatusCode.UNAUTHENTICATED,
                "deleting a session needs its token: Authorization: Bearer <token>",
            )
        session = manager.delete(session_id, token)
        return {"id": session.id, "status": "deleted", "frame": session.frame}

    _serve_pages(app, find_web_dir(settings.web_dir), settings.web_dir)

    @app.websocket("/v1/sessions/{session_id}/ws")
    async def watch(websocket: WebSocket, session_id: str) -> None:
        await websocket.accept()  # then a close code says why, which every client can read
        try:
            session = websocket.app.state.manager.get(session_id)
        except SessionError as e:
            await websocket.close(code=4404, reason=e.message[:120])
            return
        viewer = session.viewers.join()
        player = PlayerLink(session, lambda msg: viewer.put(json.dumps(msg)))
        try:
            await websocket.send_text(json.dumps(session.viewer_hello()))
            if session.status == "running":
                viewer.put(session.viewers.current(session.viewer_frame_text))
            await _serve_viewer(websocket, viewer, player)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            player.leave()
            session.viewers.leave(viewer)

    _replay_routes(app, settings)
    _results_routes(app, settings)

    return app


def _serve_pages(app: FastAPI, web: Path | None, configured: Path | None) -> None:
    """The lobby at /, the watch page at /watch?session=ID, their files under /web/."""
    if web is None:
        where = configured if configured is not None else f"{WEB_DIR} or ./web"
        log.warning("no browser pages: no index.html in %s", where)

        @app.get("/", include_in_schema=False)
        async def no_pages() -> JSONResponse:
            return _error(404, "not_found", f"no browser pages here: no index.html in {where}")

        return
    app.mount("/web", StaticFiles(directory=web), name="web")

    @app.get("/", include_in_schema=False)
    async def lobby() -> FileResponse:
        return FileResponse(web / "index.html")

    @app.get("/watch", include_in_schema=False)
    async def watch_page() -> FileResponse:
        return FileResponse(web / "watch.html")

    @app.get("/results", include_in_schema=False)
    async def results_page() -> FileResponse:
        return FileResponse(web / "results.html")


async def _serve_viewer(websocket: WebSocket, viewer: Viewer, player: PlayerLink) -> None:
    """Sends the viewer's queue until the session ends or the viewer leaves; what the page
    sends goes to `player` (a human session's player page sends its actions; other messages
    get an error reply)."""

    async def send() -> None:
        while (text := await viewer.get()) is not None:
            await websocket.send_text(text)
        await websocket.close()

    async def drain() -> None:
        while (msg := await websocket.receive())["type"] != "websocket.disconnect":
            at = time.monotonic()  # the arrival time the frame rule judges
            if msg.get("text") is not None:
                player.receive(msg["text"], at)

    tasks = [asyncio.create_task(send()), asyncio.create_task(drain())]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()
    finally:
        for task in tasks:
            task.cancel()


#: Re-simulated replays kept for the replay page (each holds every state of its game).
_REPLAY_CACHE = 4
#: Boards one request may render (Pac-Man renders in ~15 ms each: keep requests short).
MAX_BOARDS = 64


def _replay_routes(app: FastAPI, settings: Settings) -> None:
    """The recorded replays: `GET /v1/replays` (list), `/v1/replays/NAME` (every frame's report
    and counters) and `/v1/replays/NAME/boards?start=&count=` (rendered boards)."""
    cache: dict[tuple, ReplayView] = {}

    async def load(name: str) -> ReplayView:
        try:
            path = replay_file(settings.record_dir, name)
        except ReplayError as e:
            raise SessionError(grpc.StatusCode.NOT_FOUND, str(e)) from None
        stat = path.stat()
        key = (name, stat.st_mtime_ns, stat.st_size)
        if key not in cache:
            try:  # re-simulating is the game's compiled step: off the loop that runs ticks
                view = await asyncio.to_thread(ReplayView, path)
            except ReplayError as e:
                raise SessionError(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
            for old in [k for k in cache if k[0] == name]:  # an older version of the file
                del cache[old]
            while len(cache) >= _REPLAY_CACHE:
                del cache[next(iter(cache))]
            cache[key] = view
        return cache[key]

    @app.get("/v1/replays")
    async def replays() -> dict[str, Any]:
        return {
            "record_dir": str(settings.record_dir),
            "replays": await asyncio.to_thread(list_replays, settings.record_dir),
        }

    @app.get("/v1/replays/{name}")
    async def replay_index(name: str) -> dict[str, Any]:
        return (await load(name)).index()

    @app.get("/v1/replays/{name}/boards")
    async def replay_boards(
        name: str,
        start: Annotated[int, Query(ge=0)] = 0,
        count: Annotated[int, Query(ge=1, le=MAX_BOARDS)] = 16,
    ) -> dict[str, Any]:
        view = await load(name)
        boards = await asyncio.to_thread(view.boards, start, count)
        return {"start": start, "boards": boards}


#: What the results page shows, by file suffix.
_FIGURES, _TABLES = (".png", ".svg"), (".csv", ".json")


def _results_routes(app: FastAPI, settings: Settings) -> None:
    """The figures and tables of `rtplan calibrate` (checkpoint_dir/<game>/calibration) and
    `rtplan report` (results_dir): `GET /v1/results` lists them by folder, and
    `/v1/results/files/{checkpoints|results}/PATH` serves one."""
    roots = {"checkpoints": settings.checkpoint_dir, "results": settings.results_dir}

    def group(root_name: str, folder: Path, title: str) -> dict[str, Any] | None:
        base = Path(roots[root_name])
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

    def listing() -> list[dict[str, Any]]:
        groups = []
        ckpt = Path(settings.checkpoint_dir)
        games_dirs = sorted(p for p in ckpt.iterdir() if p.is_dir()) if ckpt.is_dir() else []
        for game_dir in games_dirs:
            g = group("checkpoints", game_dir / "calibration", f"{game_dir.name} · calibration")
            groups.append(g)
        res = Path(settings.results_dir)
        if res.is_dir():
            groups.append(group("results", res, "results"))
            for sub in sorted(p for p in res.iterdir() if p.is_dir()):
                groups.append(group("results", sub, f"results · {sub.name}"))
        return [g for g in groups if g is not None]

    @app.get("/v1/results")
    async def results() -> dict[str, Any]:
        return {"groups": await asyncio.to_thread(listing)}

    @app.get("/v1/results/files/{root}/{path:path}")
    async def result_file(root: str, path: str) -> FileResponse:
        if root not in roots:
            raise SessionError(grpc.StatusCode.NOT_FOUND, f"no results folder {root!r}")
        base = Path(roots[root]).resolve()
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
