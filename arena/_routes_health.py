"""The health router: whether the arena answers, and the schema its database is at."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from rtplan import __version__
from rtplan.arena._deps import Registry
from rtplan.arena._errors import responses

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str
    version: str
    database: str
    schema_revision: str | None


@router.get("/healthz", responses=responses())
def healthz(agents: Registry) -> Health:
    repo = agents.repository
    return Health(
        status="ok", version=__version__, database=repo.dialect, schema_revision=repo.revision()
    )
