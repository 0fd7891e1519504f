"""the registry's version in one row kept by triggers (issue 20): each batch of pages reads it instead of
aggregating over every registered chapter's fingerprints

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-25 23:00:00
"""

import sqlalchemy as sa
from alembic import op

from fptrack.storage.models import registry_version_ddl

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "registry_version",
        sa.Column("id", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("chapter_rows", sa.BigInteger(), nullable=False),
        sa.Column("id_sum", sa.BigInteger(), nullable=False),
        sa.Column("max_id", sa.BigInteger(), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_registry_version"),
    )
    # the triggers, and the row as the chapters' rows stand now (the same figures the aggregate gave)
    for statement in registry_version_ddl(op.get_bind().dialect.name):
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS tr_fingerprints_registry_{name} ON fingerprints")
            op.execute(f"DROP FUNCTION IF EXISTS fptrack_registry_version_{name}()")
    else:
        for name in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS tr_fingerprints_registry_{name}")
    op.drop_table("registry_version")
