"""The gRPC Env API: agents join a live session over one bidirectional stream and act in it."""

from __future__ import annotations

import asyncio
import logging
import time

import grpc

import rtplan
from rtplan import games, wire
from rtplan.processes import ApiKeys, Verdict
from rtplan.server._config import SessionConfig, SessionError
from rtplan.server._manager import SessionManager
from rtplan.server._queue import AgentLink
from rtplan.server.session import Session
from rtplan.v1 import env_pb2, env_pb2_grpc

log = logging.getLogger("rtplan.server")

SERVER_VERSION = f"rtplan-server {rtplan.__version__}"

_FALLBACK_IN = {
    env_pb2.FALLBACK_UNSPECIFIED: "game",
    env_pb2.FALLBACK_GAME: "game",
    env_pb2.FALLBACK_REFLEX: "reflex",
}
_FALLBACK_OUT = {"game": env_pb2.FALLBACK_GAME, "reflex": env_pb2.FALLBACK_REFLEX}
_CLOCK_IN = {
    env_pb2.CLOCK_MODE_UNSPECIFIED: "real_time",
    env_pb2.CLOCK_MODE_REAL_TIME: "real_time",
    env_pb2.CLOCK_MODE_SIMULATED: "simulated",
}
_CLOCK_OUT = {"real_time": env_pb2.CLOCK_MODE_REAL_TIME, "simulated": env_pb2.CLOCK_MODE_SIMULATED}
_INVALID = grpc.StatusCode.INVALID_ARGUMENT
_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION


class _Stream:
    """What one Play stream has done so far."""

    def __init__(self, link: AgentLink) -> None:
        self.link = link
        self.session: Session | None = None
        self.left = False


def join_config(join: env_pb2.Join, default_fps: float) -> SessionConfig:
    """The session a `Join` without session_id asks for (SessionError if it cannot)."""
    if join.fallback not in _FALLBACK_IN:
        raise SessionError(_INVALID, f"unknown fallback {join.fallback}: use FALLBACK_GAME/REFLEX")
    if join.clock not in _CLOCK_IN:
        raise SessionError(_INVALID, f"unknown clock mode {join.clock}: use REAL_TIME/SIMULATED")
    return SessionConfig(
        game_id=join.game_id,
        seed=join.seed,
        fps=join.fps if join.fps != 0 else default_fps,
        agent="grpc",
        fallback=_FALLBACK_IN[join.fallback],
        clock=_CLOCK_IN[join.clock],
        record=join.record,
    )


def handshake(session: Session) -> env_pb2.Handshake:
    cfg = session.config
    return env_pb2.Handshake(
        protocol_version=wire.PROTOCOL_VERSION,
        server_version=SERVER_VERSION,
        session_id=session.id,
        spec=session.runtime.spec(),
        fps=cfg.fps,
        clock=_CLOCK_OUT[cfg.clock],
        fallback=_FALLBACK_OUT[cfg.fallback],
        viewer_path=session.viewer_path,
    )


class EnvService(env_pb2_grpc.EnvServicer):
    """Thin handlers over the session manager."""

    def __init__(
        self,
        manager: SessionManager,
        *,
        keys: ApiKeys,
        default_fps: float,
        agent_queue: int = 256,
    ) -> None:
        self._manager = manager
        self._keys = keys
        self._default_fps = default_fps
        self._agent_queue = agent_queue

    async def ListGames(self, request, context) -> env_pb2.ListGamesResponse:
        if isinstance(request, wire.Unparsed):
            await context.abort(_INVALID, request.error)
        specs = [self._manager.runtimes.spec(g) for g in games.registered_games()]
        return env_pb2.ListGamesResponse(games=specs)

    async def Play(self, request_iterator, context):
        stream = _Stream(AgentLink(maxsize=self._agent_queue))
        reader = asyncio.get_running_loop().create_task(self._read(request_iterator, stream))
        try:
            while (msg := await stream.link.get()) is not None:
                yield msg
        finally:
            reader.cancel()
            if stream.session is not None:
                stream.session.detach(stream.link)

    async def _read(self, requests, stream: _Stream) -> None:
        try:
            async for msg in requests:
                now = time.monotonic()
                try:
                    await self._handle(msg, stream, now)
                except SessionError as e:
                    stream.link.error(e.code, e.message)
                    if stream.session is not None:
                        stream.session.error_sent()
                if stream.left:
                    break
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the client went away mid-read: end this stream only
            log.debug("agent stream ended: %s", type(e).__name__)
        finally:
            stream.link.close()

    async def _handle(self, msg: env_pb2.AgentMessage, stream: _Stream, now: float) -> None:
        if isinstance(msg, wire.Unparsed):
            raise SessionError(_INVALID, msg.error)
        kind = msg.WhichOneof("message")
        if kind == "join":
            if stream.session is not None:
                raise SessionError(_PRECONDITION, f"already joined session {stream.session.id}")
            await self._join(msg.join, stream)
        elif kind == "action":
            if stream.session is None:
                raise SessionError(_PRECONDITION, "missing join: the first message must be Join")
            err = stream.session.submit(msg.action.frame, msg.action.action, now)
            if err is not None:
                raise err
        elif kind == "leave":
            stream.left = True
            if stream.session is not None:
                stream.session.stop("agent left")
        else:
            raise SessionError(_INVALID, "empty AgentMessage: set one of join, action, leave")

    async def _join(self, join: env_pb2.Join, stream: _Stream) -> None:
        if join.protocol_version != wire.PROTOCOL_VERSION:
            raise SessionError(
                _INVALID,
                f"protocol version {join.protocol_version!r} is not supported: this server "
                f"speaks {wire.PROTOCOL_VERSION!r}",
            )
        if join.session_id:
            session = self._manager.get(join.session_id)
            if not session.check_token(join.token):
                raise SessionError(
                    grpc.StatusCode.PERMISSION_DENIED, f"wrong token for session {session.id}"
                )
            if session.config.agent != "grpc":
                raise SessionError(
                    _PRECONDITION,
                    f"session {session.id} is played by the built-in {session.config.agent} "
                    f"agent; watch it on {session.viewer_path}",
                )
            if not session.live:
                raise SessionError(_PRECONDITION, f"session {session.id} is {session.status}")
        else:
            if not join.game_id:
                raise SessionError(
                    _INVALID, "Join needs session_id and token, or game_id to create a session"
                )
            if self._keys.verdict(join.token) in (Verdict.MISSING, Verdict.WRONG):
                raise SessionError(
                    grpc.StatusCode.PERMISSION_DENIED,
                    "creating a session over gRPC needs a key of this server (its agent token "
                    "or a line of its API key file) in Join.token",
                )
            cfg = await self._manager.resolve(
                join_config(join, self._default_fps), opponent_given=False
            )
            session = await self._manager.create(cfg, owned_by_stream=True)
        if session.link is not None:
            raise SessionError(_PRECONDITION, f"session {session.id} already has an agent")
        stream.link.send_observation = join.send_observation
        stream.link.put(env_pb2.ServerMessage(handshake=handshake(session)))
        session.attach(stream.link)
        stream.session = session


def _handlers(service: EnvService) -> grpc.GenericRpcHandler:
    """The Env service's method handlers, parsing requests leniently (`wire.lenient`): bytes
    that are not a message get INVALID_ARGUMENT (in a Play stream, an error; the game goes on)."""
    methods = {
        "Play": grpc.stream_stream_rpc_method_handler(
            service.Play,
            request_deserializer=wire.lenient(env_pb2.AgentMessage),
            response_serializer=env_pb2.ServerMessage.SerializeToString,
        ),
        "ListGames": grpc.unary_unary_rpc_method_handler(
            service.ListGames,
            request_deserializer=wire.lenient(env_pb2.ListGamesRequest),
            response_serializer=env_pb2.ListGamesResponse.SerializeToString,
        ),
    }
    return grpc.method_handlers_generic_handler("rtplan.v1.Env", methods)


async def start_grpc_server(
    service: EnvService, host: str, port: int
) -> tuple[grpc.aio.Server, int]:
    """Starts a `grpc.aio` server with the Env service on the running loop; returns it and the
    port it bound (useful with port 0)."""
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", wire.MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", wire.MAX_MESSAGE_BYTES),
        ]
    )
    server.add_generic_rpc_handlers((_handlers(service),))
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise RuntimeError(f"cannot bind the gRPC Env server to {host}:{port}")
    await server.start()
    return server, bound
