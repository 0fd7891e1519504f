"""page notes: what the crawler cut or repaired on a page (text over the character cap, links over the link
cap, nesting flattened), kept beside the text so a shortened page is never mistaken for the whole page

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 06:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN, never a batch copy (see 0007: a batch on SQLite recreates the table).
    op.add_column("pages", sa.Column("note", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("pages", "note")
