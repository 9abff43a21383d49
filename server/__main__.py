"""`python -m server` / `rtplan env-server`: runs the env server (uvicorn + the gRPC Env API)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from collections.abc import Sequence

import uvicorn
from pydantic import ValidationError

from rtplan.harness.config import add_settings_flags, settings_overrides
from rtplan.server.app import create_app
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
    return parser


async def _serve(settings: Settings, log_level: str) -> int:
    app = create_app(settings)
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.create_server((settings.host, settings.http_port), family=family)
    http_port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan="on"))

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


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the server until interrupted; returns the exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings(**settings_overrides(Settings, args))
    except ValidationError as e:
        print(f"env server: bad settings:\n{e}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(settings, args.log_level))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
