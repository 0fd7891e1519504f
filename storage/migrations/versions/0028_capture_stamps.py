"""capture time-stamps: ``capture_stamps`` keeps, for each kept exchange of a page with a match, the SHA-256
of its capture statement (storage/capture_stamps.py: the exchange's URL, fetch time and the SHA-256 of each
WARC block it becomes) and the RFC 3161 time-stamp token an authority gave over it when the page was flagged,
so that a bundle made weeks later shows the capture was sealed then. A new table: no existing row changes.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-29 16:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "capture_stamps",
        sa.Column("id", BigId, nullable=False),
        sa.Column("page_id", BigId, nullable=False),
        sa.Column("snapshot_sha256", sa.String(64), nullable=False),
        sa.Column("capture_sha256", sa.String(64), nullable=False),
        sa.Column("authority", sa.String(2048), nullable=False),
        sa.Column("token", sa.LargeBinary(), nullable=False),
        sa.Column("stamped_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["page_id"], ["pages.id"], name="fk_capture_stamps_page_id_pages", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_capture_stamps"),
        sa.UniqueConstraint("page_id", "snapshot_sha256", name="uq_capture_stamps_page_id_snapshot_sha256"),
    )


def downgrade() -> None:
    op.drop_table("capture_stamps")
