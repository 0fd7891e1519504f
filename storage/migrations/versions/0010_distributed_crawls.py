"""distributed crawls: a managed site's ``distributed`` setting (its crawls share one frontier in Redis)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23 05:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (see 0007: a batch copy of ``sites`` on SQLite would null every ``pages.site_id``).
    op.add_column(
        "sites", sa.Column("distributed", sa.Boolean(), nullable=False, server_default=sa.text("false"))
    )


def downgrade() -> None:
    op.drop_column("sites", "distributed")
