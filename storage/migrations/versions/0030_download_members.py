"""download members: ``notice_items.file_members``, the files of an archive (or e-book) a notice item's
passages were found in (``第一卷/003.txt``), one a line; ``''`` for a page, and for every item drafted before.
A new column with a default: no existing row changes.

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-29 17:05:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("notice_items") as batch:
        batch.add_column(sa.Column("file_members", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("notice_items") as batch:
        batch.drop_column("file_members")
