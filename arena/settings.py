"""Arena settings, read once from RTPLAN_ARENA_* environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rtplan.arena._address import PORT
from rtplan.harness.layout import user_data_dir
from rtplan.processes import check_key

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

    # An error never shows the value it refused: the admin token's would be a secret.
    model_config = SettingsConfigDict(
        env_prefix="RTPLAN_ARENA_", frozen=True, hide_input_in_errors=True
    )

    host: str = Field(
        "127.0.0.1",
        description="interface the arena's HTTP server binds; one that is not loopback needs "
        "an admin key (--api-key-file, RTPLAN_ARENA_ADMIN_TOKEN) or --open",
    )
    port: int = Field(PORT, ge=0, le=65535, description="the arena's HTTP port, 0: any free")
    database: str = Field(
        default_factory=default_database,
        description="where the arena stores: a SQLite file (a path or sqlite:///PATH) or "
        "PostgreSQL (postgresql://USER@HOST:PORT/DB; a password belongs in the environment "
        "variable or ~/.pgpass, not on a command line)",
    )

    admin_token: SecretStr | None = Field(
        None,
        description="a key: when set, the administration routes need it or a key of the API "
        "key file (`Authorization: Bearer`); >= 16 visible ASCII characters",
    )
    api_key_file: Path | None = Field(
        None,
        description="a file of admin keys, one a line (# comments), any of which opens the "
        "administration routes; read again when it changes, so keys rotate without a restart",
    )
    open: bool = Field(
        False,
        description="serve a host that is not loopback with no admin key, on purpose: anyone "
        "who reaches the port can call the administration routes (without it the arena "
        "refuses to start)",
    )

    @field_validator("admin_token")
    @classmethod
    def _check_admin_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_key(value.get_secret_value(), "the admin token")
        return value

    env: str = Field(
        "",
        description="the env servers ranked episodes are played on: their REST URLs, "
        "comma-separated (http://HOST:PORT,...), each followed by =HOST:PORT, its Env API as "
        "agents reach it, where that is not the URL's host (a container's or a pod's name); "
        "none: the arena registers agents only",
    )
    env_key: SecretStr | None = Field(
        None,
        description="the key the env servers ask of whoever creates sessions (their agent "
        "token or one of their API keys)",
    )
    env_key_file: Path | None = Field(
        None,
        description="a key file whose first key the arena presents to the env servers when "
        "it creates sessions (instead of RTPLAN_ARENA_ENV_KEY; e.g. their own API key file)",
    )
    seed_set: str = Field(
        "ranked-v1",
        description="the pre-registered seed set new runs play (docs/preregistration.md): "
        "ranked-v1, the leaderboard's; smoke, 2 short episodes for trying the protocol",
    )
    join_within_s: float = Field(
        30.0, gt=0, le=3600, description="seconds an agent has to join its episode's session"
    )
    lost_after_s: float = Field(
        15.0,
        gt=0,
        le=3600,
        description="seconds an env server may be unreachable before its episode is cut short "
        "(and played again from its seed)",
    )

    web_dir: Path | None = Field(
        None,
        description="folder of the browser pages served at /arena (default: the checkout's "
        "web/ beside the packages, else the installed package's copy)",
    )

    rate_per_address: str = Field(
        "600/minute",
        description="requests one client address may make (a rate: N/second, N/minute, "
        "N/hour or N/day)",
    )
    rate_registrations: str = Field(
        "30/hour", description="registrations (new agent versions) one client address may make"
    )
    rate_per_token: str = Field(
        "240/minute", description="calls one agent version's token may make (runs, episodes)"
    )

    @field_validator("rate_per_address", "rate_registrations", "rate_per_token")
    @classmethod
    def _check_rate(cls, value: str) -> str:
        from rtplan.arena._limits import check_rate

        return check_rate(value)

    @field_validator("seed_set")
    @classmethod
    def _check_seed_set(cls, value: str) -> str:
        from rtplan.arena.ranked import SEED_SETS

        if value not in SEED_SETS:
            raise ValueError(f"{value!r} is no seed set: one of {', '.join(SEED_SETS)}")
        return value

    @field_validator("env")
    @classmethod
    def _check_env(cls, value: str) -> str:
        from rtplan.arena.envs import parse_urls

        return ",".join(parse_urls(value))

    @field_validator("database")
    @classmethod
    def _check_database(cls, value: str) -> str:
        # A URL the arena cannot use fails at start-up, before anything binds.
        from rtplan.arena.database import database_url
        from rtplan.arena.records import StorageError

        try:
            database_url(value)
        except StorageError as e:
            raise ValueError(str(e)) from None
        return value.strip()
