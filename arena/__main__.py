"""`python -m rtplan.arena` / `rtplan arena serve`: runs the arena's HTTP server."""

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

from rtplan.arena.app import api_keys, create_app, env_key
from rtplan.arena.records import StorageError
from rtplan.arena.repository import Repository
from rtplan.arena.settings import ArenaSettings
from rtplan.harness.config import add_settings_flags, settings_overrides
from rtplan.processes import KeyFileError, exposure_refusal, exposure_warning, is_loopback

#: Settings that are no flags: a secret does not belong on a command line (`ps` shows it).
_NOT_FLAGS = ("admin_token", "env_key")
#: What an admin key guards (the refusal and the --open warning say it).
_GUARDED = "call its administration routes"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rtplan arena serve",
        description="The arena: agents' registration and identity over REST (docs/arena.md). "
        "Flags override the RTPLAN_ARENA_* environment variables.",
    )
    add_settings_flags(parser, ArenaSettings, exclude=_NOT_FLAGS)
    parser.add_argument("--log-level", default="info", help="logging level (default info)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the arena until interrupted; returns the exit code (2: bad settings, a key file
    that cannot serve, a host that is not loopback with no key and no --open, a port in use or
    a database it cannot use)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    # Alembic says "Context impl ..." at each look at the schema: the start-up line says it once.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        settings = ArenaSettings(**settings_overrides(ArenaSettings, args))
    except ValidationError as e:
        lines = [f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors()]
        print(f"arena: bad settings: {'; '.join(lines)}", file=sys.stderr)
        return 2
    refused = _refusal(settings)
    if refused is not None:
        print(refused, file=sys.stderr)
        return 2
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    try:
        sock = socket.create_server((settings.host, settings.port), family=family)
    except OSError as e:
        reason = os.strerror(e.errno) if e.errno else str(e)
        print(
            f"arena: cannot bind {settings.host}:{settings.port} ({reason}); pass --port N "
            "(0: any free) or set RTPLAN_ARENA_PORT",
            file=sys.stderr,
        )
        return 2
    try:
        # Migrated before the server starts: a database it cannot use is one line, exit 2.
        repository = Repository.open(settings.database)
    except StorageError as e:
        sock.close()
        print(f"arena: {e}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(settings, repository, sock, args.log_level))
    except KeyboardInterrupt:
        return 0
    finally:
        sock.close()
        repository.close()


def _refusal(settings: ArenaSettings) -> str | None:
    """One line when the arena must not start: a key file that cannot serve, or a host that is
    not loopback with no admin key and no --open (which gets its WARNING here instead)."""
    try:
        keys = api_keys(settings)
    except KeyFileError as e:
        return f"arena: {e}; fix it or pass another --api-key-file"
    try:
        env_key(settings)
    except KeyFileError as e:
        return f"arena: {e}; fix it or pass another --env-key-file"
    refused = exposure_refusal(
        "arena",
        settings.host,
        keys,
        open_on_purpose=settings.open,
        guarded=_GUARDED,
        token_variable="RTPLAN_ARENA_ADMIN_TOKEN",
    )
    if refused is None and not keys.required and not is_loopback(settings.host):
        warning = exposure_warning("arena", settings.host, _GUARDED)
        logging.getLogger("rtplan.arena").warning(warning)
    return refused


async def _serve(
    settings: ArenaSettings, repository: Repository, sock: socket.socket, log_level: str
) -> int:
    app = create_app(settings, repository=repository)
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, access_log=False))

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.05)
        print(
            f"rtplan arena: http on {settings.host}:{sock.getsockname()[1]} (REST /v1/agents; "
            f"database {repository.shown_url}, schema {_schema(repository)})",
            flush=True,
        )

    task = asyncio.create_task(announce())
    try:
        await server.serve(sockets=[sock])
    finally:
        task.cancel()
    return 0 if server.started else 1


def _schema(repository: Repository) -> str:
    now, before = repository.revision(), repository.migrated_from
    if before == now:
        return now
    return f"{now}, migrated from {before or 'an empty database'}"


if __name__ == "__main__":
    sys.exit(main())
