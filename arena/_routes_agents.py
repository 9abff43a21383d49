"""The agents router: register a version, regenerate or revoke its token, list the agents."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from rtplan.arena._deps import Address, Limits, Registry, Token
from rtplan.arena._errors import responses
from rtplan.arena.identity import NAME_LEN, NAME_PATTERN, VERSION_LEN
from rtplan.arena.ranked import REFERENCE_PREFIX
from rtplan.arena.records import AgentRecord

router = APIRouter(tags=["agents"])

#: Agents one page lists at most, and the most a page may skip (a database's integer).
MAX_PAGE, MAX_OFFSET = 500, 2**31 - 1

_NAME = dict(
    min_length=1,
    max_length=NAME_LEN,
    pattern=NAME_PATTERN,
    description=f"the agent's name: 1 to {NAME_LEN} letters, digits, '.', '_' or '-', "
    "starting with a letter or digit",
)
_VERSION = dict(
    min_length=1,
    max_length=VERSION_LEN,
    pattern=NAME_PATTERN,
    description=f"the version: 1 to {VERSION_LEN} letters, digits, '.', '_' or '-', "
    "starting with a letter or digit",
)
AgentName = Annotated[str, Path(**_NAME)]
VersionLabel = Annotated[str, Path(**_VERSION)]


class Register(BaseModel):
    """Body of POST /v1/agents."""

    model_config = ConfigDict(extra="forbid", strict=True)

    # A name starting `ranked.REFERENCE_PREFIX` is the arena's references' (`reserved_name`).
    name: str = Field(**_NAME, json_schema_extra={"not": {"pattern": f"^{REFERENCE_PREFIX}"}})
    version: str = Field(**_VERSION)


class Issued(BaseModel):
    """A version with its token: the only answer that ever holds a token (keep it: it is not
    stored and cannot be shown again)."""

    name: str
    version: str
    token: str = Field(description="the version's token, shown this once")
    token_created_at: dt.datetime


class Revoked(BaseModel):
    name: str
    version: str
    revoked_at: dt.datetime


class VersionView(BaseModel):
    version: str
    created_at: dt.datetime
    token_created_at: dt.datetime
    revoked: bool
    revoked_at: dt.datetime | None


class AgentView(BaseModel):
    """An agent and its versions (never a token)."""

    name: str
    kind: str = Field(description='"agent", or "reference" for a row the arena enters itself')
    created_at: dt.datetime
    versions: list[VersionView]


class AgentPage(BaseModel):
    agents: list[AgentView]
    total: int
    offset: int
    limit: int


def _view(agent: AgentRecord) -> AgentView:
    return AgentView(
        name=agent.name,
        kind=agent.kind,
        created_at=agent.created_at,
        versions=[
            VersionView(
                version=v.version,
                created_at=v.created_at,
                token_created_at=v.token_created_at,
                revoked=v.revoked,
                revoked_at=v.revoked_at,
            )
            for v in agent.versions
        ],
    )


# Plain `def` handlers: FastAPI runs them on its thread pool, where the database calls and a
# token's scrypt hash (~50 ms) block no other request.


@router.post(
    "/v1/agents",
    status_code=201,
    responses=responses(
        "malformed_body", "duplicate_version", "reserved_name", "token_required", "wrong_token",
        "revoked_token",
    ),
)  # fmt: skip
def register(
    body: Register, agents: Registry, limits: Limits, address: Address, token: Token = None
) -> Issued:
    """Registers a version of an agent and answers its token, this once. A new version of an
    existing agent needs a live token of one of its versions (`Authorization: Bearer`)."""
    limits.hit("registration", address)
    record, issued = agents.register(body.name, body.version, owner_token=token)
    return Issued(
        name=record.name,
        version=record.version,
        token=issued,
        token_created_at=record.token_created_at,
    )


@router.get("/v1/agents", responses=responses())
def list_agents(
    agents: Registry,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="agents skipped")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="agents listed at most")] = 100,
) -> AgentPage:
    """A page of the agents by name, each with its versions (never a token)."""
    listed, total = agents.page(offset=offset, limit=limit)
    return AgentPage(agents=[_view(a) for a in listed], total=total, offset=offset, limit=limit)


@router.get("/v1/agents/{name}", responses=responses("unknown_agent"))
def get_agent(name: AgentName, agents: Registry) -> AgentView:
    return _view(agents.agent(name))


@router.post(
    "/v1/agents/{name}/versions/{version}/token",
    responses=responses(
        "unknown_agent", "unknown_version", "token_required", "wrong_token", "revoked_token"
    ),
)
def regenerate_token(
    name: AgentName, version: VersionLabel, agents: Registry, token: Token = None
) -> Issued:
    """A new token for the version, in place of its current one (given as the bearer token),
    which stops working at once."""
    record, issued = agents.regenerate(name, version, token)
    return Issued(
        name=record.name,
        version=record.version,
        token=issued,
        token_created_at=record.token_created_at,
    )


@router.delete(
    "/v1/agents/{name}/versions/{version}/token",
    responses=responses(
        "unknown_agent", "unknown_version", "token_required", "wrong_token", "revoked_token"
    ),
)
def revoke_token(
    name: AgentName, version: VersionLabel, agents: Registry, token: Token = None
) -> Revoked:
    """Revokes the version's token (given as the bearer token) for good: the version keeps its
    rows and never plays again."""
    return Revoked(name=name, version=version, revoked_at=agents.revoke(name, version, token))
