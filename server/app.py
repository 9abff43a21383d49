"""The env server's FastAPI app factory: its lifespan (the gRPC Env API on the same event loop),
its error handlers, and the routers of sessions, replays, results and pages."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from rtplan.jax_setup import guard_map_count
from rtplan.processes import ApiKeys
from rtplan.server import _routes_pages, _routes_replays, _routes_results, _routes_sessions
from rtplan.server._config import SessionError
from rtplan.server._errors import declare_errors, error_response
from rtplan.server._invalid import explain
from rtplan.server._manager import SessionManager
from rtplan.server._planner_route import open_router
from rtplan.server._routes_pages import find_web_dir
from rtplan.server._routes_replays import ReplayCache
from rtplan.server._runtime import Runtimes
from rtplan.server.env_service import SERVER_VERSION, EnvService, start_grpc_server
from rtplan.server.settings import Settings

__all__ = ["create_app", "find_web_dir"]

log = logging.getLogger("rtplan.server")


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI):
    """Builds what the routes share on `app.state` (the game runtimes, the session manager,
    the planner channels, the replay cache) and starts the gRPC Env server (`grpc_server`, and
    `grpc_port`, the port it bound); stops them in reverse."""
    settings: Settings = app.state.settings
    guard_map_count()  # a load past vm.max_map_count raises, not SIGSEGV
    rows = min(settings.batch_warm_rows, settings.max_sessions) if settings.batch_ticks else 0
    runtimes = Runtimes(settings.checkpoint_dir, batch_rows=rows)
    router, channels = None, []
    if settings.planner_address:
        # One channel per planner service; each game's Plan calls go to the one serving it.
        router, channels = open_router(settings.planner_address)
    manager = SessionManager(settings, runtimes, router)
    service = EnvService(
        manager,
        keys=app.state.keys,
        default_fps=settings.default_fps,
        agent_queue=settings.agent_queue,
    )
    server, port = await start_grpc_server(service, settings.host, settings.grpc_port)
    app.state.runtimes = runtimes
    app.state.manager = manager
    app.state.planner_channels = channels
    app.state.replays = ReplayCache(settings.record_dir)
    app.state.grpc_server = server
    app.state.grpc_port = port
    pruned = await asyncio.to_thread(manager.prune_replays, orphans=True)
    if pruned:
        log.info("deleted %d replay files beyond the retention policy", len(pruned))
    # Compiled while the server already answers (the lobby is up at once); a session of a game
    # still compiling waits for the same load (`Runtimes.get`).
    preloading = asyncio.create_task(_preload(runtimes, settings.preload))
    try:
        yield
    finally:
        preloading.cancel()
        await asyncio.gather(preloading, return_exceptions=True)
        await manager.shutdown()
        await server.stop(settings.grace_s)
        for channel in channels:
            await channel.close()


async def _preload(runtimes: Runtimes, game_ids: tuple[str, ...]) -> None:
    for game_id in game_ids:
        try:
            await runtimes.get(game_id)
        except Exception:  # its first session reports it
            log.exception("preloading %s failed", game_id)


#: The app's routers, in the order they match.
_ROUTERS = (_routes_sessions, _routes_pages, _routes_replays, _routes_results)


def _allowed(app: FastAPI, scope: dict) -> str:
    """The methods some route of `app` answers at the path of `scope` (Starlette's 405 names
    only the first route's, e.g. POST alone for /v1/sessions, where GET answers too)."""
    methods: set[str] = set()
    for route in [*app.router.routes, *(r for m in _ROUTERS for r in m.router.routes)]:
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))


def api_keys(settings: Settings) -> ApiKeys:
    """The keys that create sessions: the agent token and the API key file's lines.

    Raises:
        KeyFileError: the key file cannot serve (the server refuses to start).
    """
    token = settings.agent_token.get_secret_value() if settings.agent_token else None
    return ApiKeys(token=token, key_file=settings.api_key_file)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The env server app; its lifespan starts the gRPC Env server on the same event loop.

    `app.state` holds the settings, the keys that create sessions (`keys`: `api_keys`; a key
    file that cannot serve raises `KeyFileError` here) and the pages' folder (`web_dir`), and
    once the lifespan
    runs the game runtimes, the session manager, the planner channel, the replay cache and the
    gRPC server (with `grpc_port`, the port it bound). The routers read them by `Depends`.
    """
    settings = Settings() if settings is None else settings
    app = FastAPI(title="rtplan env server", version=SERVER_VERSION, lifespan=_lifespan)
    app.state.settings = settings
    app.state.keys = api_keys(settings)
    app.state.results_index = _routes_results.ResultsIndex(settings.results_dir)

    @app.exception_handler(SessionError)
    async def session_error(request: Request, exc: SessionError):
        status = exc.http_status
        # RFC 9110: a 401 names the scheme that would authenticate.
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return error_response(status, exc.code.name.lower(), exc.message, headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError):
        route, content_type = request.scope.get("route"), request.headers.get("content-type", "")
        return error_response(422, "invalid_request", explain(exc.errors(), route, content_type))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        headers = exc.headers  # they go out with it
        if exc.status_code == 405:  # RFC 9110: Allow lists every method of the path
            headers = {**(headers or {}), "Allow": _allowed(app, request.scope)}
        return error_response(exc.status_code, "http_error", str(exc.detail), headers)

    for module in _ROUTERS:
        app.include_router(module.router)

    def openapi() -> dict:
        """FastAPI's document, with what its models cannot say (`document_create_session`)
        and the error body (`declare_errors`)."""
        if app.openapi_schema is None:
            schema = FastAPI.openapi(app)
            _routes_sessions.document_create_session(schema, settings)
            declare_errors(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
    _routes_pages.mount_pages(app, settings.web_dir)
    return app
