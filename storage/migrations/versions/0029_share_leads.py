"""cloud-drive share links as leads: ``share_leads`` keeps one row per (platform, share id) seen on crawled
pages (its link, extraction code, the work it is a lead of, a reviewer's state, first and last seen), and
``share_lead_sightings`` every page it was seen on (the text around it). New tables: no existing row changes.

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-29 17:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "share_leads",
        sa.Column("id", BigId, nullable=False),
        sa.Column("platform", sa.String(20), nullable=False),
        sa.Column("share_id", sa.String(200), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("code", sa.String(20), nullable=False),
        sa.Column("work_id", BigId, nullable=True),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reviewed_by", sa.String(200), nullable=False),
        sa.CheckConstraint("state IN ('new', 'confirmed', 'dismissed')", name="ck_share_leads_known_state"),
        sa.ForeignKeyConstraint(
            ["work_id"], ["works.id"], name="fk_share_leads_work_id_works", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_share_leads"),
        sa.UniqueConstraint("platform", "share_id", name="uq_share_leads_platform_share_id"),
    )
    op.create_index("ix_share_leads_work_id", "share_leads", ["work_id"])
    op.create_table(
        "share_lead_sightings",
        sa.Column("id", BigId, nullable=False),
        sa.Column("lead_id", BigId, nullable=False),
        sa.Column("page_id", BigId, nullable=False),
        sa.Column("context", sa.Text(), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["lead_id"],
            ["share_leads.id"],
            name="fk_share_lead_sightings_lead_id_share_leads",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["page_id"], ["pages.id"], name="fk_share_lead_sightings_page_id_pages", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_share_lead_sightings"),
        sa.UniqueConstraint("lead_id", "page_id", name="uq_share_lead_sightings_lead_id_page_id"),
    )
    op.create_index("ix_share_lead_sightings_page_id", "share_lead_sightings", ["page_id"])


def downgrade() -> None:
    op.drop_table("share_lead_sightings")
    op.drop_table("share_leads")
