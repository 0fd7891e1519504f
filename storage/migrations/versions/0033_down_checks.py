"""the checks that found a copy down: a partial index on ``takedown_checks (match_id)`` over the ``gone`` and
``removed`` outcomes, so that "was this copy ever seen down?" (a copy back up, ``analytics.takedowns``) reads
those few rows, not the whole history of checks. An index only: no row changes.

Revision ID: 0033
Revises: 0032
Create Date: 2026-11-29 20:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

# storage.models.TAKEDOWN_DOWN_CHECK, written here (a migration stays as it was)
DOWN = "outcome IN ('gone', 'removed')"


def upgrade() -> None:
    op.create_index(
        "ix_takedown_checks_down_match_id",
        "takedown_checks",
        ["match_id"],
        postgresql_where=sa.text(DOWN),
        sqlite_where=sa.text(DOWN),
    )


def downgrade() -> None:
    op.drop_index("ix_takedown_checks_down_match_id", table_name="takedown_checks")
