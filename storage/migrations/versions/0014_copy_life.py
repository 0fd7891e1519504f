"""the copy's life: page versions that keep the text a match rests on, the re-check cadence and a removal's
confirmation on matches, what fetched each takedown check, listings re-crawled, a shared pace of requests per
site, and per-site rates

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25 15:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # Plain ADD COLUMN (never a batch copy, which on SQLite would recreate the tables and cascade deletes).
    op.add_column("matches", sa.Column("recheck_due_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("matches", sa.Column("down_seen_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("matches", sa.Column("evidence_version_id", sa.BigInteger(), nullable=True))
    op.create_index("ix_matches_status_recheck_due_at", "matches", ["status", "recheck_due_at"])
    op.add_column(
        "takedown_checks", sa.Column("source", sa.String(10), nullable=False, server_default="recheck")
    )
    op.add_column("pages", sa.Column("listing", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("sites", sa.Column("rate", sa.Float(), nullable=True))
    op.add_column("sites", sa.Column("quiet_crawls", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "page_versions",
        sa.Column("id", BigId, nullable=False),
        sa.Column("page_id", BigId, nullable=False),
        sa.Column("status", sa.SmallInteger(), nullable=False),
        sa.Column("final_url", sa.String(2048), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("snapshot_sha256", sa.String(64), nullable=False),
        sa.Column("encoding", sa.String(40), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("replaced_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["page_id"], ["pages.id"], name="fk_page_versions_page_id_pages", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_page_versions"),
        sa.UniqueConstraint("page_id", "content_sha256", name="uq_page_versions_page_id_content_sha256"),
    )
    op.create_index("ix_page_versions_page_id", "page_versions", ["page_id"])
    op.create_table(
        "host_pacing",
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("next_at", sa.Float(), nullable=False),
        sa.Column("interval", sa.Float(), nullable=False),
        sa.Column("blocked_until", sa.Float(), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("host", name="pk_host_pacing"),
    )


def downgrade() -> None:
    op.drop_table("host_pacing")
    op.drop_index("ix_page_versions_page_id", table_name="page_versions")
    op.drop_table("page_versions")
    op.drop_column("sites", "quiet_crawls")
    op.drop_column("sites", "rate")
    op.drop_column("pages", "listing")
    op.drop_column("takedown_checks", "source")
    op.drop_index("ix_matches_status_recheck_due_at", table_name="matches")
    op.drop_column("matches", "evidence_version_id")
    op.drop_column("matches", "down_seen_at")
    op.drop_column("matches", "recheck_due_at")
