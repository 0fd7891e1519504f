"""blobs: a downloaded file's payload kept once per SHA-256 (``blobs``), however many URLs and fetches serve
it; ``page_exchanges.blob_sha256`` names the blob of an exchange stored in format 3 (storage/exchanges.py),
NULL for every row before and for small pages, which keep their payload inline. A new table and a new
nullable column: no existing row changes.

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-29 17:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("first_stored", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name="pk_blobs"),
    )
    with op.batch_alter_table("page_exchanges") as batch:
        batch.add_column(sa.Column("blob_sha256", sa.String(64), nullable=True))
        batch.create_index("ix_page_exchanges_blob_sha256", ["blob_sha256"])


def downgrade() -> None:
    with op.batch_alter_table("page_exchanges") as batch:
        batch.drop_index("ix_page_exchanges_blob_sha256")
        batch.drop_column("blob_sha256")
    op.drop_table("blobs")
