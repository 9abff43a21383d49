"""`python -m server` / `rtplan env-server`: runs the env server (uvicorn + the gRPC Env API)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from collections.abc import Sequence

import uvicorn
from pydantic import ValidationError

from rtplan.harness.config import add_settings_flags, settings_overrides
from rtplan.processes import (
    KeyFileError,
    bind_error,
    exposure_refusal,
    exposure_warning,
    is_loopback,
)
from rtplan.server._human import MAX_READ_BYTES
from rtplan.server.app import api_keys, create_app
from rtplan.server.settings import Settings

#: Settings that are no flags: a secret does not belong on a command line (`ps` shows it).
_NOT_FLAGS = ("agent_token",)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rtplan env-server",
        description="Environment server: REST sessions, websocket viewers, gRPC Env API. "
        "Flags override the RTPLAN_SERVER_* environment variables.",
    )
    add_settings_flags(parser, Settings, exclude=_NOT_FLAGS)
    parser.add_argument("--log-level", default="info", help="logging level (default info)")
    parser.add_argument(
        "--access-log",
        action="store_true",
        help="log a line per HTTP request (uvicorn's access log; off by default: an open page "
        "polls about 4 times a second)",
    )
    return parser


def _no_connection_lines(record: logging.LogRecord) -> bool:
    """Leaves out uvicorn's lines per websocket ('... "WebSocket /v1/sessions/ID/ws" [accepted]',
    'connection open', 'connection closed'), which `access_log` does not cover: the access log's
    kin, a few per open page, shown with --access-log only."""
    message = record.getMessage()
    return message not in ("connection open", "connection closed") and '"WebSocket ' not in message


async def _serve(settings: Settings, log_level: str, *, access_log: bool = False) -> int:
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    # Both ports are tried before the app loads anything: one taken is one line, not a
    # traceback (the gRPC one is bound again by the app; only a fixed one is tried here).
    try:
        sock = socket.create_server((settings.host, settings.http_port), family=family)
    except OSError as e:
        reason = os.strerror(e.errno) if e.errno else str(e)
        return _taken(settings.host, settings.http_port, reason, "--http-port", "HTTP_PORT")
    # The same socket, its protocol named: asyncio and uvloop set TCP_NODELAY only on the
    # connections of an IPPROTO_TCP socket, and without it each answer on a kept-alive
    # connection waited ~40 ms (Nagle against the client's delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, fileno=sock.detach())
    taken = bind_error(settings.grpc_port, settings.host)
    if taken is not None:
        sock.close()
        return _taken(settings.host, settings.grpc_port, taken, "--grpc-port", "GRPC_PORT")
    app = create_app(settings)
    http_port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level=log_level,
        lifespan="on",
        access_log=access_log,
        ws_max_size=MAX_READ_BYTES,  # a viewer's message; the app's limit is 4 KiB (1009)
    )
    if not access_log:  # after the Config, which sets uvicorn's loggers up
        logging.getLogger("uvicorn.error").addFilter(_no_connection_lines)
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.05)
        print(
            f"rtplan env server: http on {settings.host}:{http_port} "
            f"(REST /v1/sessions, websockets /v1/sessions/ID/ws), "
            f"gRPC Env API on {settings.host}:{app.state.grpc_port} "
            f"(replays in {settings.record_dir.resolve()})",
            flush=True,
        )

    task = asyncio.create_task(announce())
    try:
        await server.serve(sockets=[sock])
    finally:
        task.cancel()
        sock.close()
    return 0 if server.started else 1


def _taken(host: str, port: int, reason: str, flag: str, variable: str) -> int:
    """Says in one line that `port` cannot be bound and what moves it; the exit code (2)."""
    print(
        f"env server: cannot bind {host}:{port} ({reason}); pass {flag} N "
        f"(0: any free) or set RTPLAN_SERVER_{variable}",
        file=sys.stderr,
    )
    return 2


#: What a key guards on this server (the refusal and the --open warning say it).
_GUARDED = "create sessions"


def _refusal(settings: Settings) -> str | None:
    """One line when the server must not start: a key file that cannot serve, or a host that
    is not loopback with no key and no --open (which gets its WARNING here instead)."""
    try:
        keys = api_keys(settings)
    except KeyFileError as e:
        return f"env server: {e}; fix it or pass another --api-key-file"
    refused = exposure_refusal(
        "env server",
        settings.host,
        keys,
        open_on_purpose=settings.open,
        guarded=_GUARDED,
        token_variable="RTPLAN_SERVER_AGENT_TOKEN",
    )
    if refused is None and not keys.required and not is_loopback(settings.host):
        logging.getLogger("rtplan.server").warning(
            exposure_warning("env server", settings.host, _GUARDED)
        )
    return refused


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the server until interrupted; returns the exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings(**settings_overrides(Settings, args))
    except ValidationError as e:
        print(f"env server: bad settings:\n{e}", file=sys.stderr)
        return 2
    refused = _refusal(settings)
    if refused is not None:
        print(refused, file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(settings, args.log_level, access_log=args.access_log))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
