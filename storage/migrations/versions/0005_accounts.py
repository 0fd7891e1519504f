"""accounts: users of the admin (role admin / reviewer / viewer) and failed logins for rate limiting

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", BigId, nullable=False),
        sa.Column("username", sa.String(150), nullable=False),
        sa.Column("password_hash", sa.String(255), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_login_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("role IN ('viewer', 'reviewer', 'admin')", name="ck_users_known_role"),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("username", name="uq_users_username"),
    )
    op.create_table(
        "login_failures",
        sa.Column("id", BigId, nullable=False),
        sa.Column("username", sa.String(150), nullable=False),
        sa.Column("client", sa.String(64), nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_login_failures"),
    )
    op.create_index("ix_login_failures_username_failed_at", "login_failures", ["username", "failed_at"])
    op.create_index("ix_login_failures_client_failed_at", "login_failures", ["client", "failed_at"])


def downgrade() -> None:
    op.drop_index("ix_login_failures_client_failed_at", table_name="login_failures")
    op.drop_index("ix_login_failures_username_failed_at", table_name="login_failures")
    op.drop_table("login_failures")
    op.drop_table("users")
