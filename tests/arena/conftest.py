"""The arena's fixtures: a real PostgreSQL server (a throwaway cluster) and a fresh database of
each kind per test."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rtplan.arena import ArenaSettings, Repository, create_app
from support import free_port, uvicorn_app

#: Why the PostgreSQL tests skip where its server is missing (`make test` installs it).
NO_POSTGRES = (
    "PostgreSQL's server binaries are not installed (Debian: apt-get install -y postgresql; "
    "`make test` installs it with the other APT_TEST_PACKAGES)"
)


def _pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder (Debian keeps initdb out of PATH)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server of its own (a cluster in a temp folder, trust auth, a free port),
    stopped at the end; yields its URL without a database name. As root (CI), the server runs
    as the `postgres` user, since it refuses to run as root."""
    bin_dir = _pg_bin()
    if bin_dir is None:
        pytest.skip(NO_POSTGRES)
    folder = Path(tempfile.mkdtemp(prefix="rtplan-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    data, log = folder / "db", folder / "log"
    subprocess.run(
        [*as_user, str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "rtplan"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    ctl = [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log)]
    subprocess.run([*ctl, "-o", options, "-w", "start"], check=True, capture_output=True)
    try:
        yield f"postgresql://rtplan@127.0.0.1:{port}"
    finally:
        subprocess.run([*ctl, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def new_postgres_database(server: str) -> str:
    """A new, empty database on `server`; its URL."""
    import psycopg

    name = f"arena_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    """An empty database: a SQLite file, or a new database on the PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "arena.db")
    return new_postgres_database(request.getfixturevalue("postgres_server"))


@pytest.fixture(scope="module")
def arena(tmp_path_factory) -> Iterator[tuple[str, Repository]]:
    """An arena on a SQLite file, served by uvicorn on a free port in this process; yields
    (its base URL, its repository)."""
    folder = tmp_path_factory.mktemp("arena")
    repository = Repository.open(str(folder / "arena.db"))
    settings = ArenaSettings(database=str(folder / "arena.db"), port=0)
    with uvicorn_app(create_app(settings, repository=repository)) as base:
        yield base, repository
    repository.close()
