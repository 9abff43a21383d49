"""The arena's FastAPI app factory: its storage on `app.state`, its one error model, its routers."""

from __future__ import annotations

import contextlib

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from rtplan import __version__
from rtplan.arena import (
    _routes_agents,
    _routes_board,
    _routes_health,
    _routes_pages,
    _routes_runs,
)
from rtplan.arena._deps import client_address
from rtplan.arena._errors import ArenaError
from rtplan.arena._limits import RateLimited, RateLimits
from rtplan.arena.agents import Agents
from rtplan.arena.envs import EnvServers
from rtplan.arena.records import StorageError
from rtplan.arena.repository import Repository
from rtplan.arena.runs import Runs
from rtplan.arena.settings import ArenaSettings
from rtplan.processes import ApiKeys, first_key


def _error(status: int, kind: str, detail: str, headers=None) -> JSONResponse:
    return JSONResponse(
        status_code=status, content={"error": kind, "detail": detail}, headers=headers
    )


def _explain(errors: list[dict]) -> str:
    """Pydantic's validation errors in one line: `where: what` for each."""
    parts = []
    for e in errors:
        where = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {e.get('msg', 'invalid')}")
    return "; ".join(parts)


#: The app's routers, in the order they match.
_ROUTERS = (_routes_agents, _routes_runs, _routes_board, _routes_health, _routes_pages)


def _allowed(app: FastAPI, scope: dict) -> str:
    """The methods some route of `app` answers at the path of `scope` (Starlette's 405 names
    only the first matching route's: POST alone for /v1/agents, where GET answers too)."""
    methods: set[str] = set()
    # The routers' own routes: the app holds each included router as one route of no methods.
    for route in [*app.router.routes, *(r for m in _ROUTERS for r in m.router.routes)]:
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))


def api_keys(settings: ArenaSettings) -> ApiKeys:
    """The keys that open the administration routes: the admin token and the API key file's
    lines.

    Raises:
        KeyFileError: the key file cannot serve (the arena refuses to start).
    """
    token = settings.admin_token.get_secret_value() if settings.admin_token else None
    return ApiKeys(token=token, key_file=settings.api_key_file)


def env_key(settings: ArenaSettings) -> str | None:
    """The key the arena presents to its env servers: `env_key`, else the first of
    `env_key_file`, else none.

    Raises:
        KeyFileError: the key file cannot serve.
    """
    if settings.env_key is not None:
        return settings.env_key.get_secret_value()
    return None if settings.env_key_file is None else first_key(settings.env_key_file)


def create_app(settings: ArenaSettings | None = None, *, repository: Repository | None = None):
    """The arena app.

    Args:
        settings: the arena's settings (default: from the environment).
        repository: its storage, open (the caller closes it); default: `settings.database`,
            opened (migrated) when the app starts and closed when it stops.

    Returns:
        The FastAPI app; `app.state` holds the settings, the admin keys (`keys`: `api_keys`,
        which `_deps.require_admin` checks), the pages' folder (`web_dir`, served at /arena
        and /web/) and, once started, `agents` (the registry over the repository) that the
        routers read by `Depends`.
    """
    settings = ArenaSettings() if settings is None else settings

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        repo = repository or Repository.open(settings.database)
        app.state.agents = Agents(repo)
        key = env_key(settings)
        app.state.runs = Runs(
            repo,
            EnvServers(settings.env.split(",") if settings.env else [], key),
            seed_set=settings.seed_set,
            join_within_s=settings.join_within_s,
            lost_after_s=settings.lost_after_s,
        )
        await app.state.runs.start()
        try:
            yield
        finally:
            await app.state.runs.stop()
            if repository is None:
                repo.close()

    app = FastAPI(title="rtplan arena", version=__version__, lifespan=lifespan)
    app.state.settings = settings
    app.state.keys = api_keys(settings)
    app.state.limits = limits = RateLimits(
        per_address=settings.rate_per_address,
        registrations=settings.rate_registrations,
        per_token=settings.rate_per_token,
    )

    @app.middleware("http")
    async def per_address(request: Request, call_next):
        try:
            limits.hit("address", client_address(request))
        except RateLimited as e:
            return _refused(e)
        return await call_next(request)

    def _refused(exc: ArenaError) -> JSONResponse:
        # A 401 names the scheme it wants (RFC 9110); a 429 when to come back (RFC 6585).
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        if isinstance(exc, RateLimited):
            headers = {"Retry-After": str(exc.retry_after)}
        return _error(exc.status, exc.kind, exc.message, headers)

    @app.exception_handler(ArenaError)
    async def arena_error(request: Request, exc: ArenaError):
        return _refused(exc)

    @app.exception_handler(StorageError)
    async def storage_error(request: Request, exc: StorageError):
        return _error(503, "storage_unavailable", str(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError):
        return _error(422, "invalid_request", _explain(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        kinds = {400: "malformed_body", 404: "not_found", 405: "method_not_allowed"}
        kind = kinds.get(exc.status_code, "http_error")
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:  # RFC 9110: Allow lists every method of the path
            headers = {**(headers or {}), "Allow": _allowed(app, request.scope)}
        return _error(exc.status_code, kind, str(exc.detail), headers)

    for module in _ROUTERS:
        app.include_router(module.router)
    _routes_pages.mount_pages(app, settings.web_dir)
    return app
