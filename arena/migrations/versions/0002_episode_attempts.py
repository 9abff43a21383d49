"""Ranked runs in play: an episode attempt is `playing` from its session's creation until it
ends, or `no_show` when its agent never joined; a run has one playing attempt at a time; a
reference run names the env server's built-in player that plays it (`runs.player`); a run plays
its seed set in an order of its own, drawn when it is entered (`runs.seed_order`).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_BEFORE = "status IN ('finished', 'cut_short')"
_AFTER = "status IN ('playing', 'finished', 'cut_short', 'no_show')"


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("player", sa.String(64), nullable=True))
        batch.add_column(sa.Column("seed_order", sa.JSON, nullable=True))
    with op.batch_alter_table("episodes") as batch:
        batch.drop_constraint("ck_episodes_status", type_="check")
        batch.create_check_constraint("ck_episodes_status", _AFTER)
    op.create_index(
        "ix_episodes_one_playing",
        "episodes",
        ["run_id"],
        unique=True,
        sqlite_where=sa.text("status = 'playing'"),
        postgresql_where=sa.text("status = 'playing'"),
    )


def downgrade() -> None:
    op.drop_index("ix_episodes_one_playing", table_name="episodes")
    op.execute("DELETE FROM episodes WHERE status IN ('playing', 'no_show')")
    with op.batch_alter_table("episodes") as batch:
        batch.drop_constraint("ck_episodes_status", type_="check")
        batch.create_check_constraint("ck_episodes_status", _BEFORE)
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("player")
        batch.drop_column("seed_order")
