"""Arena commands: `arena serve` (the arena service), `arena register` (a version's token),
`arena references` (the reference rows) and `arena export` (a run's episodes as CSV)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
import urllib.error
import urllib.request

from rtplan.arena._address import ADMIN_KEY_ENV, LOCAL_URL, TOKEN_ENV, URL_ENV
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
    refs = own.add_parser(
        "references",
        help="enter the reference players (policy-only, fixed budgets, the gate) in ranked runs "
        "the arena plays itself, and follow them",
    )
    refs.add_argument("--game", required=True, help="a ranked game, e.g. tetris-rt-v0")
    refs.add_argument("--tier", default="standard", choices=["standard", "fast"])
    refs.add_argument(
        "--players",
        default="policy-only,k1,k2,k3,k4,gate",
        help="comma-separated reference players (default policy-only,k1,k2,k3,k4,gate)",
    )
    refs.add_argument("--no-wait", action="store_true", help="enter them and return at once")
    _arena_flag(refs)
    refs.set_defaults(handler=_references, command="arena references")
    export = own.add_parser("export", help="write a run's episodes as CSV (stdout or --out)")
    export.add_argument("run", type=int, help="the run's id")
    export.add_argument("--out", default=None, help="the CSV file (default stdout)")
    _arena_flag(export)
    export.set_defaults(handler=_export, command="arena export")


def _arena_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--arena",
        default=None,
        metavar="URL",
        help=f"the arena's address (default ${URL_ENV}, else {LOCAL_URL})",
    )


def _base(args: argparse.Namespace) -> str:
    base = (args.arena or os.environ.get(URL_ENV) or LOCAL_URL).rstrip("/")
    return base if "://" in base else f"http://{base}"


def _serve(args: argparse.Namespace) -> int:
    from rtplan.arena.__main__ import main

    return main(args.args)


def _register(args: argparse.Namespace) -> int:
    base = _base(args)
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


def _references(args: argparse.Namespace) -> int:
    base = _base(args)
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(ADMIN_KEY_ENV)
    if key:  # an arena with keys: one of them (a key on a command line shows in `ps`)
        headers["Authorization"] = f"Bearer {key}"
    players = [p.strip() for p in args.players.split(",") if p.strip()]
    body = json.dumps({"game": args.game, "tier": args.tier, "players": players}).encode()
    runs = _call(urllib.request.Request(f"{base}/v1/references", body, headers, method="POST"))
    ids = [r["id"] for r in runs["runs"]]
    for r in runs["runs"]:
        print(f"run {r['id']}: {r['agent']} {r['version']}, {r['game']} at {r['fps']:g} FPS, "
              f"{r['episodes_finished']}/{r['episodes_planned']} episodes")  # fmt: skip
    if not ids:
        print("every reference run asked for has finished", file=sys.stderr)
    if args.no_wait or not ids:
        return 0
    shown: dict[int, int] = {}
    while ids:
        time.sleep(2.0)
        for run_id in list(ids):
            run = _call(urllib.request.Request(f"{base}/v1/runs/{run_id}"))
            if shown.get(run_id) != run["episodes_finished"]:
                shown[run_id] = run["episodes_finished"]
                mean = "" if run["mean_return"] is None else f", mean {run['mean_return']:.2f}"
                print(f"run {run_id} {run['agent']}: {run['episodes_finished']}/"
                      f"{run['episodes_planned']}{mean}", flush=True)  # fmt: skip
            if run["status"] != "running":
                ids.remove(run_id)
    return 0


#: `arena export`'s columns: an episode's attempt, how it ended and its timing profile.
EXPORT_COLUMNS = (
    "run", "agent", "version", "game", "tier", "fps", "seed_set", "episode", "attempt", "status",
    "seed", "outcome", "note", "episode_return", "frames", "on_time", "late", "fallback",
    "invalid", "slack_median_ms", "slack_p5_ms", "frame_share_mean", "replay", "started_at",
    "finished_at",
)  # fmt: skip


def _export(args: argparse.Namespace) -> int:
    run = _call(urllib.request.Request(f"{_base(args)}/v1/runs/{args.run}"))
    out = sys.stdout if args.out is None else open(args.out, "w", newline="")  # noqa: SIM115
    try:
        writer = csv.DictWriter(out, EXPORT_COLUMNS)
        writer.writeheader()
        for e in run["episodes"]:
            timing = e["timing"] or {}
            writer.writerow({
                "run": run["id"], "agent": run["agent"], "version": run["version"],
                "game": run["game"], "tier": run["tier"], "fps": run["fps"],
                "seed_set": run["seed_set"], **{k: e[k] for k in (
                    "episode", "attempt", "status", "seed", "outcome", "note", "episode_return",
                    "frames", "replay", "started_at", "finished_at")},
                **{k: timing.get(k) for k in (
                    "on_time", "late", "fallback", "invalid", "slack_median_ms", "slack_p5_ms",
                    "frame_share_mean")},
            })  # fmt: skip
    finally:
        if out is not sys.stdout:
            out.close()
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
