"""The FastAPI dependencies the arena's routers share: what create_app puts on `app.state`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from rtplan.arena.agents import Agents


def get_agents(request: Request) -> Agents:
    return request.app.state.agents


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
Token = Annotated[str | None, Depends(bearer_token)]
