"""The arena's tables as the code sees them: the schema the newest migration leaves.

Only `repository` uses these (tests/arena/test_migrations.py checks that the migrations in
`migrations/versions/` build exactly this schema, on SQLite and on PostgreSQL). A change here
is a new migration there, never an edit of one already released.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    text,
)

from rtplan.arena.identity import NAME_LEN, VERSION_LEN

#: Constraint names fixed by rule, so a later migration can name what it alters (SQLite's
#: batch mode rebuilds a table and needs them).
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
metadata = MetaData(naming_convention=NAMING)


#: An entrant: a person's agent, or a reference row the arena enters itself (the planner's
#: budgets, the gate, the policy-only player) through the same path.
agents = Table(
    "agents",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(NAME_LEN), nullable=False, unique=True),
    Column("kind", String(16), nullable=False, server_default="agent"),
    Column("created_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("kind IN ('agent', 'reference')", name="kind"),
)

#: One row per version of an agent (its results never mix with another version's), holding
#: its token as `identity.StoredToken`: a public id, a salt and a hash, never the token.
agent_versions = Table(
    "agent_versions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("agent_id", Integer, ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("version", String(VERSION_LEN), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("token_id", String(32), nullable=False, unique=True),
    Column("token_salt", LargeBinary(32), nullable=False),
    Column("token_digest", LargeBinary(64), nullable=False),
    Column("token_scheme", String(32), nullable=False),
    Column("token_created_at", DateTime(timezone=True), nullable=False),
    # Set once: a revoked version keeps its rows and can never play or get a token again.
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint("agent_id", "version", name="uq_agent_versions_agent_id_version"),
)

#: A ranked run: one version's pass over a pre-registered seed set of one game at one tier.
#: One per version, game and tier (an agent cannot learn the seeds by entering again), and a
#: version holds one running run at a time (its token plays one run at once), across every
#: arena process that shares the database.
runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column(
        "agent_version_id",
        Integer,
        ForeignKey("agent_versions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("game_id", String(64), nullable=False),
    Column("tier", String(16), nullable=False),
    Column("fps", Float, nullable=False),
    # Which pre-registered seed set (docs/preregistration.md) and how many of its seeds.
    Column("seed_set", String(64), nullable=False),
    Column("episodes_planned", Integer, nullable=False),
    # A reference run's player, built into the env server (`ranked.REFERENCE_PLAYERS`: the
    # reflex, the planner at a fixed budget, the gate); None: an outside agent joins each
    # episode over the Env API.
    Column("player", String(64), nullable=True),
    # The seeds in the order this run plays them: the seed set shuffled when the run was
    # entered, so an episode's place in the run does not tell its seed.
    Column("seed_order", JSON, nullable=True),
    Column("status", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint(
        "agent_version_id", "game_id", "tier", name="uq_runs_agent_version_id_game_id_tier"
    ),
    CheckConstraint("tier IN ('standard', 'fast')", name="tier"),
    CheckConstraint("status IN ('running', 'interrupted', 'finished', 'abandoned')", name="status"),
    CheckConstraint("episodes_planned > 0", name="episodes_planned"),
    Index(
        "ix_runs_one_running",
        "agent_version_id",
        unique=True,
        sqlite_where=text("status = 'running'"),
        postgresql_where=text("status = 'running'"),
    ),
)

#: One attempt at one episode of a run: `playing` from its session's creation (so an arena that
#: restarts finds it), then committed in its own transaction when it ends. An episode cut short
#: (its env server died) keeps its row, `cut_short` with a note, and is played again from the
#: same seed as the next attempt; one whose agent never joined is `no_show` (nothing was shown:
#: played again too). A run's episode has one `finished` attempt; a run one `playing` attempt.
episodes = Table(
    "episodes",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("episode_index", Integer, nullable=False),
    Column("attempt", Integer, nullable=False, server_default="1"),
    Column("seed", BigInteger, nullable=False),
    Column("status", String(16), nullable=False),
    Column("note", String(255), nullable=True),
    # How the game ended: 'terminated' (the game's end) or 'truncated' (its time limit).
    Column("outcome", String(16), nullable=True),
    Column("episode_return", Float, nullable=True),
    Column("frames", Integer, nullable=False, server_default="0"),
    # The timing profile: frames answered on time, late, played by the fallback, invalid.
    Column("on_time", Integer, nullable=False, server_default="0"),
    Column("late", Integer, nullable=False, server_default="0"),
    Column("fallback", Integer, nullable=False, server_default="0"),
    Column("invalid", Integer, nullable=False, server_default="0"),
    # Slack left per frame (ms) and the mean share of the frame period the agent used.
    Column("slack_median_ms", Float, nullable=True),
    Column("slack_p5_ms", Float, nullable=True),
    Column("frame_share_mean", Float, nullable=True),
    # Frames counted by share of the frame period used, in equal bins: a run's slack quantiles
    # come from the summed histograms (a median of medians is not the median).
    Column("frame_share_hist", JSON, nullable=True),
    Column("env_server", String(255), nullable=True),
    Column("session_id", String(64), nullable=True),
    Column("replay", String(255), nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint(
        "run_id", "episode_index", "attempt", name="uq_episodes_run_id_episode_index_attempt"
    ),
    CheckConstraint("status IN ('playing', 'finished', 'cut_short', 'no_show')", name="status"),
    Index(
        "ix_episodes_one_finished",
        "run_id",
        "episode_index",
        unique=True,
        sqlite_where=text("status = 'finished'"),
        postgresql_where=text("status = 'finished'"),
    ),
    Index(
        "ix_episodes_one_playing",
        "run_id",
        unique=True,
        sqlite_where=text("status = 'playing'"),
        postgresql_where=text("status = 'playing'"),
    ),
)
