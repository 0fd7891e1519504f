"""match roll-ups: counts per first-seen day, work, host and status, kept by triggers; the review list's
indexes end with the match id

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23 05:30:00
"""

import sqlalchemy as sa
from alembic import op

from fptrack.storage.models import match_rollup_ddl

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_BACKFILL = {
    "postgresql": "(m.first_seen AT TIME ZONE 'UTC')::date",
    "sqlite": "date(m.first_seen)",
}


def upgrade() -> None:
    op.create_table(
        "match_rollups",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("work_id", sa.BigInteger(), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("matches", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("day", "work_id", "host", "status", name="pk_match_rollups"),
    )
    dialect = op.get_bind().dialect.name
    # the matches already recorded, then the triggers that keep the counts from now on (same transaction)
    op.execute(
        "INSERT INTO match_rollups (day, work_id, host, status, matches) "
        f"SELECT {_BACKFILL.get(dialect, 'date(m.first_seen)')}, m.work_id, p.host, m.status, count(*) "
        "FROM matches m JOIN pages p ON p.id = m.page_id GROUP BY 1, 2, 3, 4"
    )
    for statement in match_rollup_ddl(dialect):
        op.execute(statement)
    # the same orders as before, with the tie-break (id) in the key: deep pages become index-only walks
    op.create_index("ix_matches_status_first_seen_id", "matches", ["status", "first_seen", "id"])
    op.create_index("ix_matches_first_seen_id", "matches", ["first_seen", "id"])
    op.drop_index("ix_matches_status_first_seen", table_name="matches")
    op.drop_index("ix_matches_first_seen", table_name="matches")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_index("ix_matches_status_first_seen", "matches", ["status", "first_seen"])
    op.create_index("ix_matches_first_seen", "matches", ["first_seen"])
    op.drop_index("ix_matches_status_first_seen_id", table_name="matches")
    op.drop_index("ix_matches_first_seen_id", table_name="matches")
    for name, table in (
        ("tr_matches_rollup_insert", "matches"),
        ("tr_matches_rollup_delete", "matches"),
        ("tr_matches_rollup_update", "matches"),
        ("tr_pages_rollup_delete", "pages"),
        ("tr_pages_rollup_host", "pages"),
    ):
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (f" ON {table}" if dialect == "postgresql" else ""))
    if dialect == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS fptrack_rollup_matches()")
        op.execute("DROP FUNCTION IF EXISTS fptrack_rollup_pages()")
    op.drop_table("match_rollups")
