"""The arena's first schema: agents, their versions and tokens, ranked runs and episodes.

Revision ID: 0001
Revises: none
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False, server_default="agent"),
        sa.Column("created_at", _UTC, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_agents"),
        sa.UniqueConstraint("name", name="uq_agents_name"),
        sa.CheckConstraint("kind IN ('agent', 'reference')", name="ck_agents_kind"),
    )
    op.create_table(
        "agent_versions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("agent_id", sa.Integer, nullable=False),
        sa.Column("version", sa.String(32), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("token_id", sa.String(32), nullable=False),
        sa.Column("token_salt", sa.LargeBinary(32), nullable=False),
        sa.Column("token_digest", sa.LargeBinary(64), nullable=False),
        sa.Column("token_scheme", sa.String(32), nullable=False),
        sa.Column("token_created_at", _UTC, nullable=False),
        sa.Column("revoked_at", _UTC, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_agent_versions"),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name="fk_agent_versions_agent_id_agents",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint("token_id", name="uq_agent_versions_token_id"),
        sa.UniqueConstraint("agent_id", "version", name="uq_agent_versions_agent_id_version"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("agent_version_id", sa.Integer, nullable=False),
        sa.Column("game_id", sa.String(64), nullable=False),
        sa.Column("tier", sa.String(16), nullable=False),
        sa.Column("fps", sa.Float, nullable=False),
        sa.Column("seed_set", sa.String(64), nullable=False),
        sa.Column("episodes_planned", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("updated_at", _UTC, nullable=False),
        sa.Column("finished_at", _UTC, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.ForeignKeyConstraint(
            ["agent_version_id"],
            ["agent_versions.id"],
            name="fk_runs_agent_version_id_agent_versions",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint(
            "agent_version_id", "game_id", "tier", name="uq_runs_agent_version_id_game_id_tier"
        ),
        sa.CheckConstraint("tier IN ('standard', 'fast')", name="ck_runs_tier"),
        sa.CheckConstraint(
            "status IN ('running', 'interrupted', 'finished', 'abandoned')", name="ck_runs_status"
        ),
        sa.CheckConstraint("episodes_planned > 0", name="ck_runs_episodes_planned"),
    )
    op.create_index(
        "ix_runs_one_running",
        "runs",
        ["agent_version_id"],
        unique=True,
        sqlite_where=sa.text("status = 'running'"),
        postgresql_where=sa.text("status = 'running'"),
    )
    op.create_table(
        "episodes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, nullable=False),
        sa.Column("episode_index", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
        sa.Column("seed", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("note", sa.String(255), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("episode_return", sa.Float, nullable=True),
        sa.Column("frames", sa.Integer, nullable=False, server_default="0"),
        sa.Column("on_time", sa.Integer, nullable=False, server_default="0"),
        sa.Column("late", sa.Integer, nullable=False, server_default="0"),
        sa.Column("fallback", sa.Integer, nullable=False, server_default="0"),
        sa.Column("invalid", sa.Integer, nullable=False, server_default="0"),
        sa.Column("slack_median_ms", sa.Float, nullable=True),
        sa.Column("slack_p5_ms", sa.Float, nullable=True),
        sa.Column("frame_share_mean", sa.Float, nullable=True),
        sa.Column("frame_share_hist", sa.JSON, nullable=True),
        sa.Column("env_server", sa.String(255), nullable=True),
        sa.Column("session_id", sa.String(64), nullable=True),
        sa.Column("replay", sa.String(255), nullable=True),
        sa.Column("started_at", _UTC, nullable=False),
        sa.Column("finished_at", _UTC, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_episodes"),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_episodes_run_id_runs", ondelete="CASCADE"
        ),
        sa.UniqueConstraint(
            "run_id",
            "episode_index",
            "attempt",
            name="uq_episodes_run_id_episode_index_attempt",
        ),
        sa.CheckConstraint("status IN ('finished', 'cut_short')", name="ck_episodes_status"),
    )
    op.create_index(
        "ix_episodes_one_finished",
        "episodes",
        ["run_id", "episode_index"],
        unique=True,
        sqlite_where=sa.text("status = 'finished'"),
        postgresql_where=sa.text("status = 'finished'"),
    )


def downgrade() -> None:
    for table in ("episodes", "runs", "agent_versions", "agents"):
        op.drop_table(table)
