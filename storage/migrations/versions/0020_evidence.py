"""evidence a court accepts: the raw HTTP exchange of each flagged page

``page_exchanges`` keeps, for pages with matches, the request and response of a fetch as the crawler received
them (compressed), keyed by the page and the snapshot SHA-256 of that fetch, so that an evidence bundle can
carry WARC request and response records whose payload hashes to the recorded ``snapshot_sha256``. The
installation's signing key is a file (``FPTRACK_SIGNING_KEY_FILE``), not a row.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-25 19:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "page_exchanges",
        sa.Column("id", BigId, nullable=False),
        sa.Column("page_id", BigId, nullable=False),
        sa.Column("snapshot_sha256", sa.String(64), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rendered", sa.Boolean(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["page_id"], ["pages.id"], name="fk_page_exchanges_page_id_pages", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_page_exchanges"),
        sa.UniqueConstraint("page_id", "snapshot_sha256", name="uq_page_exchanges_page_id_snapshot_sha256"),
    )


def downgrade() -> None:
    op.drop_table("page_exchanges")
