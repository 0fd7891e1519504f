"""licensed sites: a per-work allowlist of sites where copies are licensed (compare/licensing.py)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 15:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "licensed_sites",
        sa.Column("id", BigId, nullable=False),
        sa.Column("work_id", BigId, nullable=False),
        sa.Column("site", sa.String(300), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["work_id"], ["works.id"], name="fk_licensed_sites_work_id_works", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_licensed_sites"),
        sa.UniqueConstraint("work_id", "site", name="uq_licensed_sites_work_id_site"),
    )
    op.create_index("ix_licensed_sites_work_id", "licensed_sites", ["work_id"])


def downgrade() -> None:
    op.drop_index("ix_licensed_sites_work_id", table_name="licensed_sites")
    op.drop_table("licensed_sites")
