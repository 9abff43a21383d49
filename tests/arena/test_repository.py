"""The arena's storage (arena/repository.py) on a SQLite file and on a real PostgreSQL server:
migrations from empty, the newer-schema refusal, versions and tokens, the schema's rules."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from rtplan.arena import _schema, identity
from rtplan.arena.agents import Agents
from rtplan.arena.database import database_url, schema_head
from rtplan.arena.records import Conflict, SchemaTooNew, Stale, StorageError
from rtplan.arena.repository import Repository

TABLES = {"agents", "agent_versions", "runs", "episodes", "alembic_version"}


@pytest.fixture
def repo(db_url):
    repository = Repository.open(db_url)
    yield repository
    repository.close()


def _engine(repo: Repository) -> sa.Engine:
    return sa.create_engine(repo.url)


def test_migrations_build_the_code_s_schema_from_an_empty_database(db_url):
    engine = sa.create_engine(database_url(db_url))
    assert sa.inspect(engine).get_table_names() == []
    repository = Repository.open(db_url)
    try:
        assert repository.revision() == schema_head() == "0002"
        assert repository.migrated_from is None
        with engine.connect() as conn:
            assert set(sa.inspect(conn).get_table_names()) == TABLES
            # The migrations and the tables the code reads (_schema) agree, column by column.
            diff = compare_metadata(MigrationContext.configure(conn), _schema.metadata)
            assert diff == []
        again = Repository.open(db_url)  # at the head: nothing to run
        assert again.migrated_from == "0002" and again.revision() == "0002"
        again.close()
    finally:
        repository.close()
        engine.dispose()


def test_a_database_of_the_first_release_migrates_and_keeps_its_rows(db_url):
    from alembic import command

    from rtplan.arena.database import alembic_config

    engine = sa.create_engine(database_url(db_url))
    with engine.begin() as conn:  # the database as the first release left it
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
    repository = Repository.open(db_url)
    try:
        assert repository.migrated_from == "0001" and repository.revision() == "0002"
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), _schema.metadata) == []
    finally:
        repository.close()
        engine.dispose()


def test_a_database_a_newer_rtplan_migrated_is_refused(repo, db_url):
    agents = Agents(repo)
    agents.register("alice", "1")
    engine = _engine(repo)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099_from_the_future'"))
    with pytest.raises(SchemaTooNew) as refused:
        Repository.open(db_url)
    message = str(refused.value)
    assert "'0099_from_the_future'" in message and "newer rtplan" in message
    assert "its newest is '0002'" in message
    with engine.connect() as conn:  # left as it was: nothing ran on it
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one() == (
            "0099_from_the_future"
        )
        assert conn.execute(sa.text("SELECT count(*) FROM agents")).scalar_one() == 1
    engine.dispose()


def test_versions_their_tokens_and_the_races_the_writes_refuse(repo):
    _, first = identity.new_token()
    record = repo.add_version("alice", "1", first, new_agent=True)
    assert (record.name, record.version, record.kind, record.revoked) == (
        "alice",
        "1",
        "agent",
        False,
    )
    assert record.token == first and record.created_at.tzinfo is not None
    with pytest.raises(Conflict) as taken:
        repo.add_version("alice", "2", identity.new_token()[1], new_agent=True)
    assert taken.value.what == "agent"
    with pytest.raises(Conflict) as duplicate:
        repo.add_version("alice", "1", identity.new_token()[1], new_agent=False)
    assert duplicate.value.what == "version"
    repo.add_version("alice", "2", identity.new_token()[1], new_agent=False)
    assert [v.version for v in repo.find_agent("alice").versions] == ["1", "2"]
    assert repo.find_agent("bob") is None

    _, second = identity.new_token()
    repo.replace_token(record.id, first.token_id, second)
    assert repo.find_token(second.token_id).id == record.id
    assert repo.find_token(first.token_id) is None
    with pytest.raises(Stale):  # the token it was checked against is gone
        repo.replace_token(record.id, first.token_id, identity.new_token()[1])
    revoked_at = repo.revoke(record.id, second.token_id)
    assert repo.find_token(second.token_id).revoked_at == revoked_at
    with pytest.raises(Stale):  # revoked for good
        repo.replace_token(record.id, second.token_id, identity.new_token()[1])
    with pytest.raises(Stale):
        repo.revoke(record.id, second.token_id)


def test_agents_list_by_name_in_pages(repo):
    for name in ("carol", "alice", "bob"):
        repo.add_version(name, "1", identity.new_token()[1], new_agent=True)
    page, total = repo.list_agents(offset=1, limit=1)
    assert total == 3 and [a.name for a in page] == ["bob"]
    assert [a.name for a in repo.list_agents()[0]] == ["alice", "bob", "carol"]


def test_the_schema_holds_one_running_run_per_version_and_one_finished_attempt_per_episode(repo):
    """The rules of ranked runs (docs/arena.md), kept by the database itself (partial unique
    indexes), so several arena processes sharing it keep them too."""
    version = repo.add_version("alice", "1", identity.new_token()[1], new_agent=True)
    now = dt.datetime.now(dt.UTC)
    run = dict(
        agent_version_id=version.id,
        fps=9.0,
        seed_set="ranked-v1",
        episodes_planned=10,
        created_at=now,
        updated_at=now,
    )
    engine = _engine(repo)
    with engine.begin() as conn:
        conn.execute(
            _schema.runs.insert().values(
                game_id="tetris-rt-v0", tier="standard", status="running", **run
            )
        )
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # a second running run
        conn.execute(
            _schema.runs.insert().values(
                game_id="snake-rt-v0", tier="standard", status="running", **run
            )
        )
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # the same game and tier
        conn.execute(
            _schema.runs.insert().values(
                game_id="tetris-rt-v0", tier="standard", status="finished", **run
            )
        )
    with engine.begin() as conn:  # another game, not running: allowed
        conn.execute(
            _schema.runs.insert().values(
                game_id="snake-rt-v0", tier="fast", status="interrupted", **run
            )
        )
        run_id = conn.execute(sa.select(sa.func.min(_schema.runs.c.id))).scalar_one()
    episode = dict(run_id=run_id, episode_index=0, seed=2**63 - 1, started_at=now)
    with engine.begin() as conn:
        conn.execute(_schema.episodes.insert().values(attempt=1, status="cut_short", **episode))
        conn.execute(_schema.episodes.insert().values(attempt=2, status="finished", **episode))
        assert conn.execute(sa.select(_schema.episodes.c.seed)).scalars().all() == [2**63 - 1] * 2
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.execute(_schema.episodes.insert().values(attempt=3, status="finished", **episode))
    engine.dispose()


def test_the_sqlite_file_never_holds_a_token(tmp_path):
    """Only the salted hash is stored: no token, nor its secret, is in any byte the database
    wrote (the file, its write-ahead log), through registration and regeneration."""
    repository = Repository.open(str(tmp_path / "arena.db"))
    agents = Agents(repository)
    tokens = [agents.register("alice", "1")[1]]
    tokens.append(agents.register("alice", "2", owner_token=tokens[0])[1])
    tokens.append(agents.regenerate("alice", "1", tokens[0])[1])
    live = repository.find_token(identity.token_id(tokens[-1]))
    repository.close()
    written = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert live.token.digest in written  # what is stored is in these bytes
    for token in tokens:
        assert token.encode() not in written
        assert token.split("_", 2)[2].encode() not in written


def test_a_database_url_is_sqlite_or_postgresql(tmp_path):
    assert database_url(str(tmp_path / "a.db")).drivername == "sqlite"
    assert database_url("sqlite:////tmp/a.db").database == "/tmp/a.db"
    pg = database_url("postgresql://u:secret@db:5432/arena")
    assert pg.drivername == "postgresql+psycopg" and pg.host == "db"
    assert database_url("postgres://u@db/arena").drivername == "postgresql+psycopg"
    for bad, said in [
        ("mysql://u@db/arena", "not mysql"),
        ("sqlite://", "in memory"),
        ("sqlite:///:memory:", "in memory"),
        ("", "is empty"),
        ("postgresql+asyncpg://u:secret@db/arena", r"not postgresql\+asyncpg"),
    ]:
        with pytest.raises(StorageError, match=said) as refused:
            database_url(bad)
        assert "secret" not in str(refused.value)  # a password is never shown


def test_an_unreachable_postgresql_is_one_clear_error():
    from support import free_port

    with pytest.raises(StorageError, match=r"database postgresql\+psycopg://u:\*\*\*@127"):
        Repository.open(f"postgresql://u:secret@127.0.0.1:{free_port()}/arena")


def test_registrations_racing_for_one_name_leave_one_owner(repo):
    """Four registrations of a new name at once: one gets it, the others are told it needs its
    owner's token; four of one name and version: one gets it, three are duplicates."""
    import concurrent.futures

    from rtplan.arena import ArenaError

    agents = Agents(repo)

    def race(name: str, versions: list[str]) -> list[str]:
        def one(version: str) -> str:
            try:
                agents.register(name, version)
                return "registered"
            except ArenaError as e:
                return e.kind

        with concurrent.futures.ThreadPoolExecutor(len(versions)) as pool:
            return sorted(pool.map(one, versions))

    assert race("zeda", ["1", "2", "3", "4"]) == ["registered"] + ["token_required"] * 3
    assert race("zedb", ["1"] * 4) == ["duplicate_version"] * 3 + ["registered"]
    assert [len(repo.find_agent(n).versions) for n in ("zeda", "zedb")] == [1, 1]


def test_a_run_s_attempts_one_playing_at_a_time_each_ended_once(repo):
    """What the arena's ranked runs write, on SQLite and on PostgreSQL: a run with its own seed
    order, one playing attempt per run, an attempt ended once (a second ender is told), and
    the finished episodes by seed."""
    version = repo.add_version("alice", "1", identity.new_token()[1], new_agent=True)
    run = repo.create_run(
        version.id, game_id="tetris-rt-v0", tier="standard", fps=9.0, seed_set="smoke",
        episodes_planned=2, seed_order=[3_100_001, 3_100_000],
    )  # fmt: skip
    assert run.seed_order == (3_100_001, 3_100_000) and run.player is None
    with pytest.raises(Conflict):  # one run per version, game and tier
        repo.create_run(
            version.id, game_id="tetris-rt-v0", tier="standard", fps=9.0, seed_set="smoke",
            episodes_planned=2, seed_order=[1, 2],
        )  # fmt: skip
    first = repo.start_attempt(run.id, 0, 1, run.seed_order[0])
    with pytest.raises(Conflict):  # one playing attempt per run
        repo.start_attempt(run.id, 1, 1, run.seed_order[1])
    repo.place_attempt(first.id, env_server="http://e:8000", session_id="s1")
    assert [a.session_id for a in repo.playing_attempts()] == ["s1"]
    assert repo.end_attempt(first.id, "cut_short", note="env server unreachable")
    assert not repo.end_attempt(first.id, "finished")  # ended already: the second is told
    again = repo.start_attempt(run.id, 0, 2, run.seed_order[0])
    hist = [0] * 20 + [3]
    assert repo.end_attempt(
        again.id, "finished", outcome="max_frames", episode_return=7.5, frames=30,
        on_time=27, late=3, frame_share_hist=hist, frame_share_mean=1.1,
    )  # fmt: skip
    read = repo.run(run.id)
    assert [(a.episode_index, a.attempt, a.status) for a in read.attempts] == [
        (0, 1, "cut_short"),
        (0, 2, "finished"),
    ]
    assert read.by_seed == {3_100_001: read.attempts[1]} and read.playing is None
    assert read.attempts[1].frame_share_hist == tuple(hist)
    with pytest.raises(ValueError, match="not an ending column"):
        repo.end_attempt(again.id, "finished", seed=1)
