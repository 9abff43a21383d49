"""`rtplan arena register` and `rtplan arena serve` as a user runs them (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import sqlalchemy as sa

from rtplan.arena import Repository
from rtplan.arena.agents import Agents
from rtplan.arena.database import schema_head
from support import ROOT


def _rtplan(*args: str, env: dict | None = None, timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-m", "rtplan", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_register_prints_a_token_that_then_authenticates(arena):
    base, repository = arena
    done = _rtplan("arena", "register", "eve", "--version", "1", "--arena", base)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert done.stdout == token + "\n"  # stdout is the token alone: TOKEN=$(rtplan arena ...)
    assert "shown this once" in done.stderr and token not in done.stderr
    assert Agents(repository).authenticate_token(token).version == "1"
    renewed = httpx.post(
        f"{base}/v1/agents/eve/versions/1/token", headers={"Authorization": f"Bearer {token}"}
    )
    assert renewed.status_code == 200, renewed.text
    # A second version of the same agent: the owner's token comes from the environment.
    owner = {"RTPLAN_ARENA_TOKEN": renewed.json()["token"], "RTPLAN_ARENA_URL": base}
    second = _rtplan("arena", "register", "eve", "--version", "2", env=owner)
    assert second.returncode == 0, second.stderr
    assert Agents(repository).authenticate_token(second.stdout.strip()).version == "2"
    again = _rtplan("arena", "register", "eve", "--version", "2", env=owner)
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.strip().splitlines() == [
        f"rtplan arena register: error: the arena at {base}/v1/agents answered "
        "duplicate_version: agent eve already has version 2: register another version"
    ]


def _serve(*args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "rtplan", "arena", "serve", "--port", "0", *args]
    return subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_serve_migrates_its_database_and_answers(tmp_path):
    db = tmp_path / "data" / "arena.db"  # its folder is made too
    proc = _serve("--database", str(db))
    try:
        line = proc.stdout.readline()
        assert line.startswith("rtplan arena: http on 127.0.0.1:"), line + proc.stderr.read()
        assert f"schema {schema_head()}, migrated from an empty database" in line
        port = int(line.split("127.0.0.1:")[1].split()[0])
        health = httpx.get(f"http://127.0.0.1:{port}/healthz").json()
        assert health["status"] == "ok" and health["schema_revision"] == schema_head()
        made = httpx.post(f"http://127.0.0.1:{port}/v1/agents", json={"name": "f", "version": "1"})
        assert made.status_code == 201
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    assert "Traceback" not in proc.stderr.read()
    repository = Repository.open(str(db))  # what it stored is there after it stopped
    assert repository.find_agent("f").version("1") is not None
    repository.close()


def test_serve_on_postgresql(postgres_server):
    """`--database postgresql://...` on a real server: migrated on start, what it stores is
    there after it stops; the start-up line stars the password."""
    import psycopg

    with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "arena_serve"')
        conn.execute('CREATE DATABASE "arena_serve"')
    url = postgres_server.replace("rtplan@", "rtplan:pw@") + "/arena_serve"
    proc = _serve("--database", url)
    try:
        line = proc.stdout.readline()
        assert "database postgresql+psycopg://rtplan:***@127.0.0.1:" in line, line
        assert (
            f"schema {schema_head()}, migrated from an empty database" in line and "pw" not in line
        )
        port = int(line.split("127.0.0.1:")[1].split()[0])
        made = httpx.post(f"http://127.0.0.1:{port}/v1/agents", json={"name": "g", "version": "1"})
        assert made.status_code == 201, made.text
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    repository = Repository.open(url)
    assert repository.find_agent("g").version("1") is not None
    repository.close()


def test_serve_refuses_a_newer_database_and_a_bad_url_in_one_line(tmp_path):
    db = tmp_path / "arena.db"
    Repository.open(str(db)).close()
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099'"))
    engine.dispose()
    refused = _serve("--database", str(db))
    out, err = refused.communicate(timeout=60)
    assert refused.returncode == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("arena: the database at sqlite:///") and "'0099'" in line
    assert "a newer rtplan migrated it" in line
    bad = _serve("--database", "mysql://me:pw@db/arena")
    out, err = bad.communicate(timeout=60)
    assert bad.returncode == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("arena: bad settings: database:") and "SQLite" in line
    assert "pw" not in line


def test_serve_refuses_a_database_folder_it_cannot_make_in_one_line(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    refused = _serve("--database", str(tmp_path / "a-file" / "arena.db"))
    out, err = refused.communicate(timeout=60)
    assert refused.returncode == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("arena: cannot make the database's folder") and "a-file" in line
