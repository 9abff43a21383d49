"""Health command: `health`, whether a planner service, an env server or an arena is ready (exit
0) or not."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request

from rtplan.commands._errors import FAILED, CommandError

#: Seconds one check waits for its answer: a container's health check must end well inside its
#: own `timeout`, and an answer that slow means not ready anyway.
TIMEOUT_S = 3.0


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `health` to the `rtplan` subcommands."""
    p = sub.add_parser(
        "health",
        help="exit 0 when a planner service is SERVING (every game compiled), or an env server "
        "or an arena answers /healthz, else 1 with one line saying what it answered (a "
        "container's health check, docker-compose.yml)",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--planner", metavar="HOST:PORT", help="a planner service's gRPC address: its Health RPC"
    )
    which.add_argument(
        "--env", metavar="http://HOST:PORT", help="an env server's HTTP address: GET /healthz"
    )
    which.add_argument(
        "--arena", metavar="http://HOST:PORT", help="an arena's HTTP address: GET /healthz"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_S,
        help=f"seconds to wait for the answer (default {TIMEOUT_S:g})",
    )
    p.set_defaults(handler=_health)


def _health(args: argparse.Namespace) -> int:
    if args.planner is not None:
        print(planner_health(args.planner, timeout=args.timeout))
    elif args.env is not None:
        print(env_health(args.env, timeout=args.timeout))
    else:
        print(arena_health(args.arena, timeout=args.timeout))
    return 0


def planner_health(address: str, *, timeout: float = TIMEOUT_S) -> str:
    """Asks the planner service at `address` (host:port) for its Health.

    Returns:
        One line: SERVING, what it compiled and its device.

    Raises:
        CommandError: (`FAILED`) NOT_SERVING with its detail (still compiling), or unreachable.
    """
    import grpc  # only once the command runs: `rtplan --help` stays light

    from rtplan.v1 import planner_pb2, planner_pb2_grpc

    name = planner_pb2.HealthResponse.ServingStatus.Name
    try:
        with grpc.insecure_channel(address) as channel:
            stub = planner_pb2_grpc.PlannerStub(channel)
            health = stub.Health(planner_pb2.HealthRequest(), timeout=timeout)
    except grpc.RpcError as e:
        raise CommandError(
            f"planner service at {address} is unreachable: {e.code().name} ({_line(e.details())})",
            FAILED,
        ) from None
    said = f"{name(health.status)} ({_line(health.detail)}) on {health.device or '?'}"
    if health.status != planner_pb2.HealthResponse.SERVING:
        raise CommandError(f"planner service at {address} is {said}", FAILED)
    return f"planner service at {address} is {said}"


def env_health(url: str, *, timeout: float = TIMEOUT_S) -> str:
    """GET `url`/healthz of an env server (`url`: http://host:port; the scheme may be left out).

    Returns:
        One line: ok, its version and live sessions.

    Raises:
        CommandError: (`FAILED`) an error status, an answer that is not ok, or unreachable.
    """
    target, body = _healthz("env server", url, timeout)
    return (
        f"env server at {target} is ok (version {body.get('version')}, "
        f"{body.get('live_sessions')} live sessions)"
    )


def arena_health(url: str, *, timeout: float = TIMEOUT_S) -> str:
    """GET `url`/healthz of an arena (`url`: http://host:port; the scheme may be left out).

    Returns:
        One line: ok, its version, its database's kind and schema revision.

    Raises:
        CommandError: (`FAILED`) an error status (503: its database cannot be reached), an
            answer that is not ok, or unreachable.
    """
    target, body = _healthz("arena", url, timeout)
    return (
        f"arena at {target} is ok (version {body.get('version')}, {body.get('database')} "
        f"database at schema {body.get('schema_revision')})"
    )


def _healthz(kind: str, url: str, timeout: float) -> tuple[str, dict]:
    """GET `url`/healthz of a `kind` of service; returns (the URL asked, its ok answer)."""
    base = url if "://" in url else f"http://{url}"
    target = base.rstrip("/") + "/healthz"
    try:
        with urllib.request.urlopen(target, timeout=timeout) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise CommandError(f"{kind} at {target} answered {e.code} {e.reason}", FAILED) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        # URLError wraps a refused connection; a timeout is an OSError; bad JSON a ValueError.
        reason = getattr(e, "reason", e)
        raise CommandError(f"{kind} at {target} is unreachable: {_line(reason)}", FAILED) from None
    if not isinstance(body, dict) or body.get("status") != "ok":
        raise CommandError(f"{kind} at {target} is not ok: {_line(body)}", FAILED)
    return target, body


def _line(what: object) -> str:
    return " ".join(str(what).split())[:300]
