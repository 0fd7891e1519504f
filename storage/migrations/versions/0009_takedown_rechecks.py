"""takedown re-checks (history table, the latest state on matches) and conditional re-crawls (ETag and
Last-Modified per page)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 05:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
OUTCOMES = ("present", "gone", "removed", "error")


def upgrade() -> None:
    # Plain ADD COLUMN (never a batch copy, which on SQLite would recreate the tables and cascade deletes).
    op.add_column("matches", sa.Column("rechecked_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("matches", sa.Column("recheck_state", sa.String(10), nullable=True))
    op.add_column("matches", sa.Column("taken_down_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_matches_status_rechecked_at", "matches", ["status", "rechecked_at"])
    op.create_index("ix_matches_recheck_state_taken_down_at", "matches", ["recheck_state", "taken_down_at"])
    op.create_table(
        "takedown_checks",
        sa.Column("id", BigId, nullable=False),
        sa.Column("match_id", BigId, nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(10), nullable=False),
        sa.Column("http_status", sa.SmallInteger(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False, server_default=""),
        sa.CheckConstraint(
            "outcome IN (" + ", ".join(f"'{o}'" for o in OUTCOMES) + ")",
            name="ck_takedown_checks_known_outcome",
        ),
        sa.ForeignKeyConstraint(
            ["match_id"], ["matches.id"], name="fk_takedown_checks_match_id_matches", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_takedown_checks"),
    )
    op.create_index("ix_takedown_checks_match_id_checked_at", "takedown_checks", ["match_id", "checked_at"])
    op.add_column("pages", sa.Column("etag", sa.String(300), nullable=False, server_default=""))
    op.add_column("pages", sa.Column("last_modified", sa.String(100), nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("pages", "last_modified")
    op.drop_column("pages", "etag")
    op.drop_index("ix_takedown_checks_match_id_checked_at", table_name="takedown_checks")
    op.drop_table("takedown_checks")
    op.drop_index("ix_matches_recheck_state_taken_down_at", table_name="matches")
    op.drop_index("ix_matches_status_rechecked_at", table_name="matches")
    op.drop_column("matches", "taken_down_at")
    op.drop_column("matches", "recheck_state")
    op.drop_column("matches", "rechecked_at")
