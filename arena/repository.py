"""The arena's storage: the one module that opens, migrates, reads and writes its database.

SQLite (a file; the embedded default) or PostgreSQL (`postgresql://...`, over psycopg 3),
through SQLAlchemy 2 Core. `Repository.open` brings the schema to the newest migration
(`alembic upgrade head`, run here in-process) and refuses a database a newer rtplan migrated.
Callers get frozen records (`records.py`), never a connection or a row: what the database holds
stays here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator

from alembic import command
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, func, select, text, update
from sqlalchemy import true as sa_true
from sqlalchemy.exc import IntegrityError, OperationalError

from rtplan.arena._schema import agent_versions, agents, episodes, runs
from rtplan.arena.database import alembic_config, database_url, first_line, make_engine, schema_head
from rtplan.arena.identity import StoredToken
from rtplan.arena.records import (
    ENDING,
    AgentRecord,
    Conflict,
    EpisodeRecord,
    RunRecord,
    SchemaTooNew,
    Stale,
    StorageError,
    VersionRecord,
    episode_record,
    run_record,
    token_columns,
    utc,
    version_record,
)

#: PostgreSQL advisory lock held while migrating: arenas sharing a database start one by one.
_MIGRATION_LOCK = 0x72746C616E61


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Repository:
    """The arena's database; `Repository.open(url)` to use one (migrated, checked).

    Args:
        url: a `--database` value (`database_url`).
    """

    def __init__(self, url: str) -> None:
        self.url = database_url(url)
        self.migrated_from: str | None = None
        self.dialect = self.url.get_backend_name()
        self._engine = make_engine(self.url)

    @classmethod
    def open(cls, url: str) -> Repository:
        """A repository whose schema is at `schema_head()` (migrated now if it was older).

        Raises:
            SchemaTooNew: a newer rtplan migrated the database.
            StorageError: the database cannot be reached or opened.
        """
        repo = cls(url)
        try:
            repo.migrate()
        except BaseException:
            repo.close()
            raise
        return repo

    @property
    def shown_url(self) -> str:
        """The URL, its password starred (what logs and errors may show)."""
        return self.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self._engine.dispose()

    def migrate(self) -> str:
        """Runs the migrations up to the head (`alembic upgrade head`), in one transaction.

        Returns:
            The schema revision now in the database.

        Raises:
            SchemaTooNew: the database is at a revision this code does not know.
        """
        config = alembic_config()
        known = {s.revision for s in ScriptDirectory.from_config(config).walk_revisions()}
        with self._writing() as conn:
            if self.dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
            current = MigrationContext.configure(conn).get_current_revision()
            if current is not None and current not in known:
                raise SchemaTooNew(
                    f"the database at {self.shown_url} has schema revision {current!r}, which "
                    f"this rtplan does not know (its newest is {schema_head()!r}): a newer "
                    "rtplan migrated it. Run that rtplan, upgrade this one, or pass another "
                    "--database"
                )
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        #: The revision the database was at before (None: it was empty), for the start-up line.
        self.migrated_from = current
        return self.revision()

    def revision(self) -> str | None:
        """The schema revision the database is at (None before any migration)."""
        with self._reading() as conn:
            return MigrationContext.configure(conn).get_current_revision()

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Connection]:
        try:
            with self._engine.connect() as conn, conn.begin():
                yield conn
        except OperationalError as e:
            raise StorageError(f"database {self.shown_url}: {first_line(e)}") from e

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Connection]:
        # SQLite: BEGIN IMMEDIATE takes the write lock first, so two writers queue (busy
        # timeout) instead of one failing when its snapshot goes stale.
        try:
            with self._engine.connect() as conn:
                conn.execution_options(sqlite_immediate=True)
                with conn.begin():
                    yield conn
        except OperationalError as e:
            raise StorageError(f"database {self.shown_url}: {first_line(e)}") from e

    # ---- agents and versions ----

    def find_agent(self, name: str) -> AgentRecord | None:
        """The agent called `name` with its versions, or None."""
        with self._reading() as conn:
            found = self._agents(conn, agents.c.name == name)
        return found[0] if found else None

    def find_token(self, token_id: str) -> VersionRecord | None:
        """The version whose current token has the public id `token_id`, or None."""
        with self._reading() as conn:
            rows = conn.execute(_VERSIONS.where(agent_versions.c.token_id == token_id)).mappings()
            found = [version_record(r) for r in rows]
        return found[0] if found else None

    def list_agents(self, *, offset: int = 0, limit: int = 100) -> tuple[list[AgentRecord], int]:
        """A page of the agents by name, and how many there are."""
        with self._reading() as conn:
            total = conn.execute(select(func.count()).select_from(agents)).scalar_one()
            names = select(agents.c.id).order_by(agents.c.name).offset(offset).limit(limit)
            return self._agents(conn, agents.c.id.in_(names)), total

    def add_version(
        self, name: str, version: str, token: StoredToken, *, new_agent: bool, kind: str = "agent"
    ) -> VersionRecord:
        """Stores a new version of agent `name`, and the agent too when `new_agent`.

        Raises:
            Conflict: "agent" when `new_agent` and the name exists (or, not `new_agent`, when
                it does not), "version" when that version exists.
        """
        now = _now()
        try:
            with self._writing() as conn:
                if new_agent:
                    agent_id = conn.execute(
                        agents.insert()
                        .values(name=name, kind=kind, created_at=now)
                        .returning(agents.c.id)
                    ).scalar_one()
                else:
                    agent_id = conn.execute(
                        select(agents.c.id).where(agents.c.name == name)
                    ).scalar_one_or_none()
                    if agent_id is None:
                        raise Conflict("agent")
                conn.execute(
                    agent_versions.insert().values(
                        agent_id=agent_id,
                        version=version,
                        created_at=now,
                        token_created_at=now,
                        **token_columns(token),
                    )
                )
        except IntegrityError:
            # Another registration won the race (the constraint's wording differs by database).
            raise Conflict(self._which_conflict(name, version)) from None
        found = self.find_agent(name)
        return found.version(version)

    def _which_conflict(self, name: str, version: str) -> str:
        agent = self.find_agent(name)
        return "version" if agent is not None and agent.version(version) else "agent"

    def replace_token(self, version_id: int, old_token_id: str, token: StoredToken) -> None:
        """Replaces a live version's token, if it is still `old_token_id`.

        Raises:
            Stale: the token was regenerated or revoked meanwhile.
        """
        self._change(version_id, old_token_id, token_created_at=_now(), **token_columns(token))

    def revoke(self, version_id: int, old_token_id: str) -> dt.datetime:
        """Revokes a live version's token, if it is still `old_token_id`; returns when.

        Raises:
            Stale: the token was regenerated or revoked meanwhile.
        """
        now = _now()
        self._change(version_id, old_token_id, revoked_at=now)
        return now

    def _change(self, version_id: int, old_token_id: str, **values) -> None:
        with self._writing() as conn:
            changed = conn.execute(
                update(agent_versions)
                .where(
                    agent_versions.c.id == version_id,
                    agent_versions.c.token_id == old_token_id,
                    agent_versions.c.revoked_at.is_(None),
                )
                .values(**values)
            ).rowcount
        if changed != 1:
            raise Stale("the token changed meanwhile")

    # ---- runs and their episodes ----

    def create_run(
        self,
        version_id: int,
        *,
        game_id: str,
        tier: str,
        fps: float,
        seed_set: str,
        episodes_planned: int,
        seed_order: list[int],
        player: str | None = None,
    ) -> RunRecord:
        """A new running run of version `version_id`.

        Raises:
            Conflict: "run" when the version has a run of this game and tier, "running" when
                it has another run running.
        """
        now = _now()
        try:
            with self._writing() as conn:
                run_id = conn.execute(
                    runs.insert()
                    .values(
                        agent_version_id=version_id,
                        game_id=game_id,
                        tier=tier,
                        fps=fps,
                        seed_set=seed_set,
                        episodes_planned=episodes_planned,
                        player=player,
                        seed_order=list(seed_order),
                        status="running",
                        created_at=now,
                        updated_at=now,
                    )
                    .returning(runs.c.id)
                ).scalar_one()
        except IntegrityError:
            same = self.find_run(version_id, game_id=game_id, tier=tier)
            raise Conflict("run" if same is not None else "running") from None
        return self.run(run_id)

    def find_run(self, version_id: int, *, game_id: str, tier: str) -> RunRecord | None:
        """Version `version_id`'s run of `game_id` at `tier`, or None."""
        where = (
            (runs.c.agent_version_id == version_id)
            & (runs.c.game_id == game_id)
            & (runs.c.tier == tier)
        )
        return self._run_where(where)

    def running_run(self, version_id: int) -> RunRecord | None:
        """The run version `version_id` has running, or None."""
        return self._run_where(
            (runs.c.agent_version_id == version_id) & (runs.c.status == "running")
        )

    def runs_where_running_references(self) -> list[RunRecord]:
        """The reference runs still running (what an arena that restarts plays on)."""
        return self._runs_where((runs.c.status == "running") & runs.c.player.is_not(None))

    def run(self, run_id: int) -> RunRecord | None:
        """Run `run_id` with its attempts, or None."""
        return self._run_where(runs.c.id == run_id)

    def list_runs(
        self,
        *,
        game_id: str | None = None,
        tier: str | None = None,
        seed_set: str | None = None,
        agent: str | None = None,
    ) -> list[RunRecord]:
        """The runs (with their attempts), oldest first, of a game, tier, seed set and agent
        (its name) if given."""
        where = sa_true()
        for column, value in (
            (runs.c.game_id, game_id),
            (runs.c.tier, tier),
            (runs.c.seed_set, seed_set),
            (agents.c.name, agent),
        ):
            if value is not None:
                where = where & (column == value)
        return self._runs_where(where)

    def _run_where(self, where) -> RunRecord | None:
        found = self._runs_where(where)
        return found[0] if found else None

    def _runs_where(self, where) -> list[RunRecord]:
        """The runs matching `where`, oldest first, each with its attempts in play order: the
        one select that builds `RunRecord`s."""
        with self._reading() as conn:
            heads = list(
                conn.execute(
                    select(
                        runs,
                        agents.c.name.label("agent"),
                        agents.c.kind.label("agent_kind"),
                        agent_versions.c.version,
                    )
                    .join_from(runs, agent_versions)
                    .join(agents)
                    .where(where)
                    .order_by(runs.c.id)
                ).mappings()
            )
            ids = [r["id"] for r in heads]
            attempts: dict[int, list[EpisodeRecord]] = {i: [] for i in ids}
            if ids:
                rows = conn.execute(
                    select(episodes)
                    .where(episodes.c.run_id.in_(ids))
                    .order_by(episodes.c.run_id, episodes.c.episode_index, episodes.c.attempt)
                ).mappings()
                for r in rows:
                    attempts[r["run_id"]].append(episode_record(r))
        return [run_record(r, attempts[r["id"]]) for r in heads]

    def set_run_status(self, run_id: int, status: str) -> None:
        """Sets run `run_id`'s status ("finished" also stamps `finished_at`)."""
        now = _now()
        values = {"status": status, "updated_at": now}
        if status == "finished":
            values["finished_at"] = now
        with self._writing() as conn:
            conn.execute(update(runs).where(runs.c.id == run_id).values(**values))

    def start_attempt(
        self, run_id: int, episode_index: int, attempt: int, seed: int
    ) -> EpisodeRecord:
        """A `playing` attempt at episode `episode_index` of run `run_id` (no session yet).

        Raises:
            Conflict: "playing" when the run has an attempt playing or this attempt exists.
        """
        try:
            with self._writing() as conn:
                episode_id = conn.execute(
                    episodes.insert()
                    .values(
                        run_id=run_id,
                        episode_index=episode_index,
                        attempt=attempt,
                        seed=seed,
                        status="playing",
                        started_at=_now(),
                    )
                    .returning(episodes.c.id)
                ).scalar_one()
                conn.execute(update(runs).where(runs.c.id == run_id).values(updated_at=_now()))
        except IntegrityError:
            raise Conflict("playing") from None
        return self.attempt(episode_id)

    def attempt(self, episode_id: int) -> EpisodeRecord | None:
        with self._reading() as conn:
            row = (
                conn.execute(select(episodes).where(episodes.c.id == episode_id)).mappings().first()
            )
        return None if row is None else episode_record(row)

    def place_attempt(self, episode_id: int, *, env_server: str, session_id: str) -> None:
        """Where a playing attempt plays: its env server and session."""
        with self._writing() as conn:
            conn.execute(
                update(episodes)
                .where(episodes.c.id == episode_id)
                .values(env_server=env_server, session_id=session_id)
            )

    def end_attempt(self, episode_id: int, status: str, **values) -> bool:
        """Ends a playing attempt as `status` ("finished", "cut_short" or "no_show") with the
        `ENDING` columns in `values`, in one transaction; False when it was no longer playing
        (another process ended it)."""
        unknown = set(values) - set(ENDING)
        if unknown:
            raise ValueError(f"not an ending column: {sorted(unknown)}")
        if "frame_share_hist" in values and values["frame_share_hist"] is not None:
            values["frame_share_hist"] = list(values["frame_share_hist"])
        with self._writing() as conn:
            changed = conn.execute(
                update(episodes)
                .where(episodes.c.id == episode_id, episodes.c.status == "playing")
                .values(status=status, finished_at=_now(), **values)
            ).rowcount
        return changed == 1

    def drop_attempt(self, episode_id: int) -> None:
        """Forgets a playing attempt that never got a session (its creation failed)."""
        with self._writing() as conn:
            conn.execute(
                episodes.delete().where(episodes.c.id == episode_id, episodes.c.status == "playing")
            )

    def playing_attempts(self) -> list[EpisodeRecord]:
        """Every attempt still playing (what an arena that restarts watches again)."""
        with self._reading() as conn:
            rows = conn.execute(
                select(episodes).where(episodes.c.status == "playing").order_by(episodes.c.id)
            ).mappings()
            return [episode_record(r) for r in rows]

    @staticmethod
    def _agents(conn: Connection, where) -> list[AgentRecord]:
        heads = conn.execute(select(agents).where(where).order_by(agents.c.name)).mappings()
        listed = {r["id"]: r for r in heads}
        versions: dict[int, list[VersionRecord]] = {i: [] for i in listed}
        if listed:
            for r in conn.execute(
                _VERSIONS.where(agent_versions.c.agent_id.in_(list(listed))).order_by(
                    agent_versions.c.id
                )
            ).mappings():
                versions[r["agent_id"]].append(version_record(r))
        return [
            AgentRecord(r["name"], r["kind"], utc(r["created_at"]), tuple(versions[i]))
            for i, r in listed.items()
        ]


_VERSIONS = select(agent_versions, agents.c.name, agents.c.kind.label("agent_kind")).join_from(
    agent_versions, agents
)
