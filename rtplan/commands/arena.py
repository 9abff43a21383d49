"""Arena commands: `arena serve` (the arena service) and `arena register` (a version's token)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

from rtplan.arena._address import LOCAL_URL, TOKEN_ENV, URL_ENV
from rtplan.commands._errors import FAILED, CommandError

#: Seconds a request to the arena waits for its answer (a registration hashes one token).
TIMEOUT_S = 30.0


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `arena` and its subcommands to the `rtplan` subcommands."""
    arena = sub.add_parser(
        "arena",
        help="the arena: `arena serve` runs it, `arena register NAME --version V` prints a "
        "version's token (docs/arena.md)",
    )
    own = arena.add_subparsers(
        dest="arena_command", required=True, metavar="<subcommand>", prog="rtplan arena"
    )
    serve = own.add_parser(
        "serve",
        help="run the arena service (REST; SQLite in the user data directory or --database "
        "postgresql://...)",
        add_help=False,
    )
    serve.add_argument("args", nargs=argparse.REMAINDER)
    # Its own parser, built from its settings, takes the flags (`rtplan arena serve --help`);
    # importing it loads FastAPI and SQLAlchemy: only once it is run.
    serve.set_defaults(handler=_serve, forward=True)
    reg = own.add_parser(
        "register",
        help="register a version of an agent and print its token (shown once) on stdout",
    )
    reg.add_argument("name", help="the agent's name (letters, digits, '.', '_', '-')")
    reg.add_argument("--version", required=True, help="the version's label, e.g. 1 or 2026-12")
    reg.add_argument(
        "--arena",
        default=None,
        metavar="URL",
        help=f"the arena's address (default ${URL_ENV}, else {LOCAL_URL})",
    )
    reg.set_defaults(handler=_register, command="arena register")


def _serve(args: argparse.Namespace) -> int:
    from rtplan.arena.__main__ import main

    return main(args.args)


def _register(args: argparse.Namespace) -> int:
    base = (args.arena or os.environ.get(URL_ENV) or LOCAL_URL).rstrip("/")
    base = base if "://" in base else f"http://{base}"
    headers = {"Content-Type": "application/json"}
    owner = os.environ.get(TOKEN_ENV)
    if owner:  # a new version of an agent already registered: a live token of it
        headers["Authorization"] = f"Bearer {owner}"
    body = json.dumps({"name": args.name, "version": args.version}).encode()
    answer = _call(urllib.request.Request(f"{base}/v1/agents", body, headers, method="POST"))
    print(answer["token"], flush=True)
    print(
        f"registered {answer['name']} {answer['version']} at {base}; its token (above) is shown "
        f"this once: keep it (an agent reads it from ${TOKEN_ENV})",
        file=sys.stderr,
    )
    return 0


def _call(request: urllib.request.Request) -> dict:
    """The JSON answer of an arena request.

    Raises:
        CommandError: the arena's error (its kind and detail), or unreachable (`FAILED`).
    """
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        try:
            error = json.loads(e.read())
            said = f"{error['error']}: {error['detail']}"
        except (ValueError, KeyError, TypeError):
            said = f"{e.code} {e.reason}"
        raise CommandError(f"the arena at {request.full_url} answered {said}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise CommandError(
            f"the arena at {request.full_url} is unreachable: {reason}", FAILED
        ) from None
