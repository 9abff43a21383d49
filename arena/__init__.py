"""The arena: registered agents' ranked, paired evaluation over the env servers' public APIs.

Its own service and process (`rtplan arena serve`), reaching env servers only over REST and the
Env API. So far: `repository` (its database: SQLite or PostgreSQL, SQLAlchemy + Alembic
migrations; the records it hands out in `records`), `identity` (names and tokens, stored as
salted hashes), `agents` (registration, regeneration, revocation) and `app` (the REST API).
docs/arena.md has the design.
"""

from __future__ import annotations

from rtplan.harness.lazy import lazy_exports

# The names load on first use (PEP 562): `rtplan arena register` reads `_address` while the CLI
# builds its parser, without FastAPI or SQLAlchemy.
_EXPORTS = {
    "Agents": "rtplan.arena.agents",
    "ArenaError": "rtplan.arena._errors",
    "ArenaSettings": "rtplan.arena.settings",
    "Repository": "rtplan.arena.repository",
    "SchemaTooNew": "rtplan.arena.records",
    "StorageError": "rtplan.arena.records",
    "create_app": "rtplan.arena.app",
    "schema_head": "rtplan.arena.database",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
