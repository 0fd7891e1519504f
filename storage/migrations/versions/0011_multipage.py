"""multi-page chapters: each page records the URL of its chapter's next part ("下一页"); a match found on the
joined parts records the passages on the later parts

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23 06:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (never a batch copy, which on SQLite would recreate ``pages`` and cascade to its
    # matches).
    op.add_column("pages", sa.Column("next_part_url", sa.String(2048), nullable=False, server_default=""))
    op.add_column("matches", sa.Column("part_spans", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("matches", "part_spans")
    op.drop_column("pages", "next_part_url")
