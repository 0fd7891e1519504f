"""sessions that a logout ends everywhere: a per-user session version

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25 19:05:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (never a batch copy, which on SQLite would recreate the table and cascade deletes).
    op.add_column("users", sa.Column("session_version", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    op.drop_column("users", "session_version")
