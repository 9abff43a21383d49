"""The sessions router: health, the game list, REST sessions and the viewer websocket."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated, Any, Literal

import grpc
from fastapi import APIRouter, Query, WebSocket
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from starlette.websockets import WebSocketDisconnect

from rtplan import games
from rtplan.processes import ApiKeys, Verdict
from rtplan.server._config import SessionConfig, SessionError
from rtplan.server._deps import AppSettings, Authorization, GameRuntimes, GrpcPort, Keys, Manager
from rtplan.server._errors import errors
from rtplan.server._human import MalformedMessage, PlayerLink
from rtplan.server._manager import MAX_CLOCK_S
from rtplan.server._viewers import Viewer
from rtplan.server.env_service import SERVER_VERSION
from rtplan.server.settings import Settings

router = APIRouter()

#: The largest seed (`SessionConfig.seed`).
MAX_SEED = 2**63 - 1

#: What a game id looks like (`games.registered_games()`: "snake-rt-v0", "speed-hex-v0").
GAME_ID = r"^[a-z0-9][a-z0-9._-]*$"

#: Sessions one page lists at most (a server keeps `keep_finished` ended ones and
#: `max_sessions` live ones).
MAX_PAGE = 500


def _integral(value: Any) -> Any:
    """A JSON number with no fraction as the integer it is (JSON, like JSON Schema's
    "integer", does not tell 3.0 from 3); anything else as it came, for the strict check."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: An integer field of a JSON body: 3 or 3.0, not "3", true or 3.5.
JsonInt = Annotated[int, BeforeValidator(_integral)]
#: A planner's budget k.
Budget = Annotated[int, Field(ge=1), BeforeValidator(_integral)]


class CreateSession(BaseModel):
    """Body of POST /v1/sessions."""

    model_config = ConfigDict(extra="forbid", strict=True)

    game: str = Field(
        min_length=1,
        max_length=100,
        pattern=GAME_ID,
        description='a game id such as "snake-rt-v0" (GET /v1/games lists them)',
    )
    seed: JsonInt = Field(0, ge=0, le=MAX_SEED, description="an integer in [0, 2**63)")
    fps: float | None = Field(
        None, gt=0, description="a number > 0 (frames per second; leave it out for the default)"
    )
    agent: Literal["grpc", "reflex", "planner", "human"] = "grpc"
    #: Planner agent: a budget, or a sequence of budgets played in turn.
    k: Budget | Annotated[list[Budget], Field(min_length=1, max_length=1024)] | None = Field(
        None,
        description="a budget (an integer) or a list of budgets played in turn "
        "(leave it out to let the gate pick)",
    )
    fallback: Literal["game", "reflex"] = "game"
    #: Planner agent: what the frames before each planned action play (`SessionConfig`).
    committed: Literal["reflex", "plan"] = "reflex"
    clock: Literal["real_time", "real-time", "simulated"] = "real_time"
    record: bool = Field(False, description="true or false")
    #: Clock games: the built-in opponent ("gate": the planner with the service's clock gate);
    #: default (`SessionManager.resolve`): for a human, the planner when the planner service
    #: serves the game, else the reflex when a checkpoint exists, else random.
    opponent: Literal["reflex", "random", "planner", "gate"] | None = None
    #: Planner opponent: its budget k (default the game's largest); alone it implies "planner".
    opponent_k: Budget | None = Field(
        None, description="an integer >= 1 (the planner opponent's budget)"
    )
    max_frames: JsonInt = Field(
        0, ge=0, description="an integer >= 0 (frames to play; 0: until the game ends)"
    )
    #: Clock games in real time: a time control in seconds, e.g. 1+1 is 60 and 1.
    #: Left out with `fps` too, a built-in agent's clock game in real time is paced to be
    #: watched (`server._config.WATCHED`: 1 FPS, 1+1).
    time_s: float | None = Field(
        None,
        ge=0,
        le=MAX_CLOCK_S,
        description=f"a number of seconds in [0, {MAX_CLOCK_S}] (each side's clock; 0: the "
        "game's, in ticks)",
    )
    increment_s: float | None = Field(
        None,
        ge=0,
        le=MAX_CLOCK_S,
        description=f"a number of seconds in [0, {MAX_CLOCK_S}] (given back after each move)",
    )
    #: The session /tv shows first while it is live (the demo's game).
    featured: bool = Field(False, description="true or false")
    #: A ranked episode (the arena's): the seed stays hidden until the session ends.
    sealed: bool = Field(False, description="true or false (hide the seed until the session ends)")
    #: An outside agent's session: stopped when no agent joined within this many seconds.
    join_within_s: float = Field(
        0.0,
        ge=0,
        le=MAX_CLOCK_S,
        description=f"a number of seconds in [0, {MAX_CLOCK_S}] (stop the session when no "
        "agent joined by then; 0: wait for ever)",
    )

    @property
    def opponent_given(self) -> bool:
        return self.opponent is not None or self.opponent_k is not None

    @property
    def pace_given(self) -> bool:
        """The request names a frame rate or a time control (else the server's pace)."""
        return any(v is not None for v in (self.fps, self.time_s, self.increment_s))

    def config(self, default_fps: float) -> SessionConfig:
        if self.k is None:
            ks: tuple[int, ...] = ()
        elif isinstance(self.k, int):
            ks = (self.k,)
        else:
            ks = tuple(self.k)
        return SessionConfig(
            game_id=self.game,
            seed=self.seed,
            fps=default_fps if self.fps is None else self.fps,
            agent=self.agent,
            ks=ks,
            fallback=self.fallback,
            committed=self.committed,
            clock="simulated" if self.clock == "simulated" else "real_time",
            record=self.record,
            opponent=self.opponent or ("planner" if self.opponent_k else "reflex"),
            opponent_k=self.opponent_k or 0,
            max_frames=self.max_frames,
            time_s=self.time_s or 0.0,
            increment_s=self.increment_s or 0.0,
            sealed=self.sealed,
            join_within_s=self.join_within_s,
        )


def _when(condition: dict[str, Any], then: dict[str, Any]) -> dict[str, Any]:
    return {"if": {"properties": condition, "required": list(condition)}, "then": then}


def document_create_session(schema: dict[str, Any], settings: Settings) -> None:
    """States in the OpenAPI document `schema` what a session's body must be beyond its fields'
    types, as `SessionManager.resolve` checks it: the registered games, the server's `max_fps`,
    and the rules that tie fields together (JSON Schema `if`/`then`). What depends on the loaded
    checkpoints (a planner's budgets) stays a 409 or 422 that names the field."""
    body = schema["components"]["schemas"]["CreateSession"]
    ids = list(games.registered_games())
    clock = [g for g in ids if games.kind_of(g) is games.Kind.CLOCK]
    body["properties"]["game"]["enum"] = ids
    body["properties"]["fps"]["anyOf"][0]["maximum"] = settings.max_fps
    # Exact: pydantic writes the bound as a float (2**63), which a client (or the fuzzer's
    # generator) takes for a bound past the largest seed.
    body["properties"]["seed"].update(minimum=0, maximum=MAX_SEED)
    given = {"not": {"type": "null"}}
    body["allOf"] = [
        # k and committed "plan" are the planner agent's.
        _when({"k": given}, {"properties": {"agent": {"const": "planner"}}, "required": ["agent"]}),
        _when(
            {"committed": {"const": "plan"}},
            {
                "properties": {"agent": {"const": "planner"}, "game": {"not": {"enum": clock}}},
                "required": ["agent"],
            },
        ),
        # opponent_k is the clock games' planner opponent's.
        _when(
            {"opponent_k": given},
            {
                "properties": {"opponent": {"enum": ["planner", None]}, "game": {"enum": clock}},
            },
        ),
        # A time control is the clock games' in real time.
        *(
            _when(
                {name: {"not": {"enum": [None, 0]}}},
                {
                    "properties": {
                        "game": {"enum": clock},
                        "clock": {"not": {"const": "simulated"}},
                    },
                },
            )
            for name in ("time_s", "increment_s")
        ),
    ]


#: POST /v1/sessions' answers: the session, with the links to read it and end it (the
#: stateful fuzz follows them), or why not.
_CREATED: dict[int | str, dict[str, Any]] = {
    201: {
        "description": "the session: its id, token, viewer path and details",
        "links": {
            "GetSession": {
                "operationId": "get_session_v1_sessions__session_id__get",
                "parameters": {"session_id": "$response.body#/id"},
            },
            "DeleteSession": {
                "operationId": "delete_session_v1_sessions__session_id__delete",
                "parameters": {
                    "session_id": "$response.body#/id",
                    "header.authorization": "Bearer {$response.body#/token}",
                },
            },
        },
    },
    **errors(400, 401, 403, 409, 422, 429),
}


def _bearer(authorization: str | None) -> str | None:
    if authorization is None:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _check_key(keys: ApiKeys, authorization: str | None) -> None:
    """Refuses a session's creation without a key of the server, when it has keys (its agent
    token, its API key file's lines); the messages never repeat what was presented."""
    verdict = keys.verdict(_bearer(authorization))
    if verdict is Verdict.MISSING:
        raise SessionError(
            grpc.StatusCode.UNAUTHENTICATED,
            "creating a session needs a key of this server (its agent token or a line of its "
            "API key file): Authorization: Bearer <key>",
        )
    if verdict is Verdict.WRONG:
        raise SessionError(
            grpc.StatusCode.PERMISSION_DENIED,
            "wrong key: neither this server's agent token nor a key of its API key file",
        )


@router.get("/healthz")
async def healthz(manager: Manager, settings: AppSettings, grpc_port: GrpcPort) -> dict[str, Any]:
    return {
        "status": "ok",
        "version": SERVER_VERSION,
        "live_sessions": manager.live_count(),
        "grpc_port": grpc_port,
        "planner_address": settings.planner_address,
        "arena_url": settings.arena_url,  # the lobby's link to an arena, or null
    }


@router.get("/v1/games")
async def list_games(runtimes: GameRuntimes, manager: Manager) -> dict[str, Any]:
    """Each game as this server runs it, with `planner`: what the planner service offers for it
    (`available`, the `budgets` it plans, `gate`, `clock_gate`, and the `reason` when it cannot
    plan it)."""
    caps = await manager.planner.get()
    return {
        "games": [
            {**runtimes.describe(g), "planner": caps.describe(g)} for g in games.registered_games()
        ]
    }


@router.post("/v1/sessions", status_code=201, responses=_CREATED)
async def create_session(
    body: CreateSession,
    manager: Manager,
    settings: AppSettings,
    grpc_port: GrpcPort,
    keys: Keys,
    authorization: Authorization = None,
) -> dict[str, Any]:
    _check_key(keys, authorization)
    cfg = await manager.resolve(
        body.config(settings.default_fps),
        opponent_given=body.opponent_given,
        pace_given=body.pace_given,
    )
    session = await manager.create(cfg, featured=body.featured)
    return {
        "id": session.id,
        "token": session.token,
        "viewer_path": session.viewer_path,
        "grpc_port": grpc_port,
        "session": session.details(),
    }


@router.get("/v1/sessions", responses=errors(422))
async def list_sessions(
    manager: Manager,
    offset: Annotated[int, Query(ge=0, description="an integer >= 0 (sessions skipped)")] = 0,
    limit: Annotated[
        int, Query(ge=1, le=MAX_PAGE, description=f"an integer in [1, {MAX_PAGE}]")
    ] = MAX_PAGE,
    status: Annotated[
        Literal["live", "ended", "waiting", "running", "finished", "stopped", "failed"] | None,
        Query(description='"live", "ended" or a session status'),
    ] = None,
    game: Annotated[str | None, Query(max_length=100, description="a game id")] = None,
) -> dict[str, Any]:
    """A page of the sessions, live first (running, waiting), then ended, newest first."""
    listed = manager.ordered(status=status, game=game)
    page = listed[offset : offset + limit]
    return {
        "sessions": [s.summary() for s in page],
        "total": len(listed),
        "live": manager.live_count(),
        "offset": offset,
        "limit": limit,
    }


@router.get("/v1/featured")
async def featured_session(manager: Manager) -> dict[str, Any]:
    """The session /tv shows (`SessionManager.featured`), or null when there is none."""
    s = manager.featured()
    return {"session": None if s is None else s.summary()}


@router.get("/v1/sessions/{session_id}", responses=errors(404))
async def get_session(session_id: str, manager: Manager) -> dict[str, Any]:
    return manager.get(session_id).details()


@router.delete("/v1/sessions/{session_id}", responses=errors(401, 403, 404, 422))
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


@router.websocket("/v1/sessions/{session_id}/ws")
async def watch(websocket: WebSocket, session_id: str) -> None:
    await websocket.accept()  # then a close code says why, which every client can read
    try:
        session = websocket.app.state.manager.get(session_id)
    except SessionError as e:
        await websocket.close(code=4404, reason=e.message[:120])
        return
    viewer = session.viewers.join(session.viewer_frame_text)
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


async def _serve_viewer(websocket: WebSocket, viewer: Viewer, player: PlayerLink) -> None:
    """Sends the viewer's queue until the session ends or the viewer leaves; what the page
    sends goes to `player` (a human session's player page sends its actions; a message a
    person can act on gets an error reply; a malformed one closes the websocket with a code
    and a reason: `MalformedMessage`)."""

    async def send() -> None:
        while (text := await viewer.get()) is not None:
            await websocket.send_text(text)
        await websocket.close()

    async def drain() -> MalformedMessage | None:
        while (msg := await websocket.receive())["type"] != "websocket.disconnect":
            at = time.monotonic()  # the arrival time the frame rule judges
            data = msg.get("text") if msg.get("text") is not None else msg.get("bytes")
            if data is not None:
                try:
                    player.receive(data, at)
                except MalformedMessage as e:
                    return e
        return None

    sending, reading = asyncio.create_task(send()), asyncio.create_task(drain())
    try:
        done, _ = await asyncio.wait((sending, reading), return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()
    finally:
        for task in (sending, reading):
            task.cancel()
    if reading in done and (malformed := reading.result()) is not None:
        await asyncio.wait((sending,))  # its cancel taken: nothing else sends now
        await websocket.close(code=malformed.code, reason=malformed.reason)
