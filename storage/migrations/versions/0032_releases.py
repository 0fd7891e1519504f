"""releases: when a work's new chapters came out (``releases``: a new chapter registered as a release of the
work, or an entry of the work's release feed), and the feed each work's releases are read from
(``release_feeds``). The scheduler crawls the sites that copied a work at a quicker pace for a while after its
releases (jobs/releases.py). New tables: no existing row changes.

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-29 20:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "releases",
        sa.Column("id", BigId, nullable=False),
        sa.Column("work_id", BigId, nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("ref", sa.String(2048), nullable=False),
        sa.Column("new_work_id", BigId, nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("source IN ('registration', 'feed')", name="ck_releases_known_source"),
        sa.ForeignKeyConstraint(
            ["work_id"], ["works.id"], name="fk_releases_work_id_works", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["new_work_id"], ["works.id"], name="fk_releases_new_work_id_works", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_releases"),
        sa.UniqueConstraint("work_id", "ref", name="uq_releases_work_id_ref"),
    )
    op.create_index("ix_releases_released_at", "releases", ["released_at"])
    op.create_table(
        "release_feeds",
        sa.Column("work_id", BigId, nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("next_check_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=False, server_default=""),
        sa.ForeignKeyConstraint(
            ["work_id"], ["works.id"], name="fk_release_feeds_work_id_works", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("work_id", name="pk_release_feeds"),
    )


def downgrade() -> None:
    op.drop_table("release_feeds")
    op.drop_index("ix_releases_released_at", table_name="releases")
    op.drop_table("releases")
