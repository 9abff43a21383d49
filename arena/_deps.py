"""The FastAPI dependencies the arena's routers share: what create_app puts on `app.state`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from rtplan.arena._errors import ArenaError
from rtplan.arena._limits import RateLimits
from rtplan.arena.agents import Agents
from rtplan.arena.runs import Runs
from rtplan.processes import ApiKeys, Verdict


def get_agents(request: Request) -> Agents:
    return request.app.state.agents


def get_runs(request: Request) -> Runs:
    return request.app.state.runs


def get_limits(request: Request) -> RateLimits:
    return request.app.state.limits


def client_address(request: Request) -> str:
    """The address a request came from (a proxy's, behind one)."""
    return request.client.host if request.client else "unknown"


def get_keys(request: Request) -> ApiKeys:
    return request.app.state.keys


def bearer_token(
    authorization: Annotated[
        str | None,
        Header(max_length=1000, description="Bearer <token>: an agent version's token"),
    ] = None,
) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None when there is none."""
    if authorization is None:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


Registry = Annotated[Agents, Depends(get_agents)]
RunBook = Annotated[Runs, Depends(get_runs)]
Limits = Annotated[RateLimits, Depends(get_limits)]
Address = Annotated[str, Depends(client_address)]
Token = Annotated[str | None, Depends(bearer_token)]


def require_admin(
    keys: Annotated[ApiKeys, Depends(get_keys)], token: Annotated[str | None, Depends(bearer_token)]
) -> None:
    """An administration route's guard (`dependencies=[Admin]`, its `responses` naming
    `ADMIN_ERRORS`): refuses a call without a key of the arena (its admin token, its API key
    file's lines) when it has keys; the messages never repeat what was presented.

    Raises:
        ArenaError: `admin_key_required` (401) with no key, `wrong_admin_key` (403) with
            another.
    """
    verdict = keys.verdict(token)
    if verdict is Verdict.MISSING:
        raise ArenaError(
            "admin_key_required",
            "an administration route needs a key of this arena (its admin token or a line of "
            "its API key file): Authorization: Bearer <key>",
        )
    if verdict is Verdict.WRONG:
        raise ArenaError(
            "wrong_admin_key",
            "wrong key: neither this arena's admin token nor a key of its API key file",
        )


#: The errors `require_admin` answers (an administration route's `responses(*ADMIN_ERRORS)`).
ADMIN_ERRORS = ("admin_key_required", "wrong_admin_key")
Admin = Depends(require_admin)
