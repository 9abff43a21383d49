"""Arena settings, read once from RTPLAN_ARENA_* environment variables."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rtplan.arena._address import PORT
from rtplan.harness.layout import user_data_dir

#: The database file in the per-user data directory: the embedded default.
DATABASE_FILE = "arena.db"


def default_database() -> str:
    """SQLite in the per-user data directory: `$XDG_DATA_HOME/rtplan/arena.db`, else
    `~/.local/share/rtplan/arena.db`."""
    return f"sqlite:///{user_data_dir() / DATABASE_FILE}"


class ArenaSettings(BaseSettings):
    """Settings of one arena; keyword arguments override the environment.

    Each field's description and default are also its `rtplan arena serve --help` text
    (`harness.config.add_settings_flags`).
    """

    model_config = SettingsConfigDict(env_prefix="RTPLAN_ARENA_", frozen=True)

    host: str = Field("127.0.0.1", description="interface the arena's HTTP server binds")
    port: int = Field(PORT, ge=0, le=65535, description="the arena's HTTP port, 0: any free")
    database: str = Field(
        default_factory=default_database,
        description="where the arena stores: a SQLite file (a path or sqlite:///PATH) or "
        "PostgreSQL (postgresql://USER@HOST:PORT/DB; a password belongs in the environment "
        "variable or ~/.pgpass, not on a command line)",
    )

    @field_validator("database")
    @classmethod
    def _check_database(cls, value: str) -> str:
        # A URL the arena cannot use fails at start-up, before anything binds.
        from rtplan.arena.repository import StorageError, database_url

        try:
            database_url(value)
        except StorageError as e:
            raise ValueError(str(e)) from None
        return value.strip()
