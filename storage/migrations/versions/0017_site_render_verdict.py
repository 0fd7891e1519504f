"""a site's learned rendering verdict: its pages need the browser, so crawls render them at once

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25 19:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (never a batch copy, which on SQLite would recreate the table and cascade deletes).
    op.add_column(
        "sites", sa.Column("render_direct", sa.Boolean(), nullable=False, server_default=sa.false())
    )


def downgrade() -> None:
    op.drop_column("sites", "render_direct")
