"""a site's template as its last settling decided it: a newly registered work compares the pages that may copy
it with that template instead of settling their whole sites again

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-25 22:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for every site settled before: its next settling (or the first work registered after) decides and
    # stores it. Plain ADD COLUMN (never a batch copy, which on SQLite would recreate the table).
    op.add_column("sites", sa.Column("template_codes", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    op.drop_column("sites", "template_codes")
