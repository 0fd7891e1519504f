"""monitoring: managed sites (start URLs, limits, patterns, schedule, politeness), crawl job trigger and
stats, claims on scheduled work

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

_SITE_COLUMNS: list[sa.Column[object]] = [
    sa.Column("managed", sa.Boolean(), nullable=False, server_default=sa.text("false")),
    sa.Column("enabled", sa.Boolean(), nullable=False, server_default=sa.text("true")),
    sa.Column("start_urls", sa.JSON(), nullable=False, server_default=sa.text("'[]'")),
    sa.Column("allowed_hosts", sa.JSON(), nullable=False, server_default=sa.text("'[]'")),
    sa.Column("depth", sa.Integer(), nullable=False, server_default="2"),
    sa.Column("max_pages", sa.Integer(), nullable=False, server_default="200"),
    sa.Column("include_patterns", sa.JSON(), nullable=False, server_default=sa.text("'[]'")),
    sa.Column("exclude_patterns", sa.JSON(), nullable=False, server_default=sa.text("'[]'")),
    sa.Column("schedule", sa.String(100), nullable=False, server_default=""),
    sa.Column("delay", sa.Float(), nullable=True),
    sa.Column("concurrency", sa.Integer(), nullable=True),
    sa.Column("obey_robots", sa.Boolean(), nullable=False, server_default=sa.text("true")),
    sa.Column("render_js", sa.String(8), nullable=False, server_default="auto"),
    sa.Column("allow_private", sa.Boolean(), nullable=False, server_default=sa.text("false")),
    sa.Column("next_crawl_at", sa.DateTime(timezone=True), nullable=True),
]


def upgrade() -> None:
    # Plain ADD COLUMN, never a batch copy: on SQLite a batch recreates the table, and dropping the old
    # ``sites`` would set every ``pages.site_id`` to NULL (ON DELETE SET NULL).
    for column in _SITE_COLUMNS:
        op.add_column("sites", column)
    op.add_column("crawl_jobs", sa.Column("trigger", sa.String(20), nullable=False, server_default="cli"))
    op.add_column("crawl_jobs", sa.Column("stats", sa.JSON(), nullable=True))
    op.create_table(
        "monitor_locks",
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("job_id", BigId, nullable=True),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["crawl_jobs.id"], name="fk_monitor_locks_job_id_crawl_jobs", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("name", name="pk_monitor_locks"),
    )


def downgrade() -> None:
    op.drop_table("monitor_locks")
    op.drop_column("crawl_jobs", "stats")
    op.drop_column("crawl_jobs", "trigger")
    for column in reversed(_SITE_COLUMNS):
        op.drop_column("sites", column.name)
