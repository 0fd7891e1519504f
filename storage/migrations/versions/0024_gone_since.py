"""since when a page has answered gone (for retention): a page re-fetched as a 404 on every crawl kept a
recent ``fetched_at`` and never reached "gone for FPTRACK_RETAIN_GONE_DAYS", and the index rows of a page
whose fetch replaced its text with a 404 stayed for good

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-26 02:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

GONE = "(404, 410, 451)"  # storage.match_life.GONE_STATUSES, as it stands at this revision


def upgrade() -> None:
    # Plain ADD COLUMN (never a batch copy, which on SQLite would recreate the table). A page gone now has
    # been gone at least since its last fetch: the earliest the rows tell: retention never comes early.
    op.add_column("pages", sa.Column("gone_since", sa.DateTime(timezone=True), nullable=True))
    op.execute(f"UPDATE pages SET gone_since = fetched_at WHERE status IN {GONE}")
    op.create_index(
        "ix_pages_gone_since",
        "pages",
        ["gone_since"],
        postgresql_where=sa.text("gone_since IS NOT NULL"),
        sqlite_where=sa.text("gone_since IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_pages_gone_since", table_name="pages")
    op.drop_column("pages", "gone_since")
