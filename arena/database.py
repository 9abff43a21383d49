"""The arena's database address and engine: `--database` URLs, SQLite's settings, and where
the migrations are (`repository.py` opens, migrates, reads and writes through these).
"""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from rtplan.arena.records import StorageError

#: The Alembic scripts: `env.py` and `versions/`.
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
#: Seconds a SQLite writer waits for another's lock before it fails.
_SQLITE_BUSY_S = 30.0


def database_url(value: str) -> URL:
    """The SQLAlchemy URL of a `--database` value: a SQLite file path, `sqlite:///PATH`, or
    `postgresql://USER@HOST:PORT/DB` (psycopg 3 is its driver; `postgresql+psycopg://` too).

    Raises:
        StorageError: any other scheme or driver, an in-memory SQLite, or no such URL shape.
    """
    text_value = value.strip()
    if "://" not in text_value:  # a plain path
        if not text_value:
            raise StorageError("--database is empty: give a SQLite file or a postgresql:// URL")
        return URL.create("sqlite", database=str(Path(text_value).expanduser()))
    try:
        url = make_url(text_value)
    except ArgumentError:
        raise StorageError(f"--database {_hidden(text_value)} is not a database URL") from None
    if url.drivername in ("postgresql", "postgres", "postgresql+psycopg"):
        return url.set(drivername="postgresql+psycopg")
    if url.drivername in ("sqlite", "sqlite+pysqlite"):
        if not url.database or url.database == ":memory:":
            raise StorageError(
                "--database sqlite:// is in memory and keeps nothing: give a file "
                "(sqlite:///PATH or a plain path)"
            )
        return url.set(drivername="sqlite")
    raise StorageError(
        f"--database {_hidden(text_value)}: the arena stores in SQLite (a file path or "
        "sqlite:///PATH) or PostgreSQL (postgresql://USER@HOST:PORT/DB), not "
        f"{url.drivername}"
    )


def _hidden(value: str) -> str:
    """A URL as it may be shown (logs, errors): its password starred."""
    try:
        return make_url(value).render_as_string(hide_password=True)
    except ArgumentError:
        return "(a value that is no URL)"


def schema_head() -> str:
    """The newest schema revision this code knows (`migrations/versions/`)."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def make_engine(url: URL) -> Engine:
    """The engine of a `database_url`: a SQLite file (its folder made) with real transactions,
    or PostgreSQL with connections checked before use.

    Raises:
        StorageError: the SQLite file's folder cannot be made.
    """
    if url.get_backend_name() == "sqlite":
        folder = Path(url.database).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot make the database's folder {folder}: {e}") from None
        engine = create_engine(url, connect_args={"timeout": _SQLITE_BUSY_S})
        _sqlite_transactions(engine)
        return engine
    return create_engine(url, pool_pre_ping=True)


def first_line(error: Exception) -> str:
    orig = getattr(error, "orig", None) or error
    return " ".join(str(orig).split("\n")[0].split())


def _sqlite_transactions(engine: Engine) -> None:
    """SQLite as a database: foreign keys on, WAL (readers never wait for the writer, and a
    killed process loses no committed transaction), and real transactions: Python's sqlite3
    would commit DDL on its own (a half-run migration) and starts no transaction on SELECT."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's "begin" below says when
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("sqlite_immediate", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
