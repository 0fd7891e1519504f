"""admin: reviewers' notes on matches, API tokens, an index for the newest-first review list

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "match_notes",
        sa.Column("id", BigId, nullable=False),
        sa.Column("match_id", BigId, nullable=False),
        sa.Column("author", sa.String(200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["match_id"], ["matches.id"], name="fk_match_notes_match_id_matches", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_match_notes"),
    )
    op.create_index("ix_match_notes_match_id", "match_notes", ["match_id"])
    op.create_table(
        "api_tokens",
        sa.Column("id", BigId, nullable=False),
        sa.Column("user_id", BigId, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_api_tokens_user_id_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_api_tokens"),
        sa.UniqueConstraint("token_sha256", name="uq_api_tokens_token_sha256"),
    )
    op.create_index("ix_api_tokens_user_id", "api_tokens", ["user_id"])
    op.create_index("ix_matches_first_seen", "matches", ["first_seen"])


def downgrade() -> None:
    op.drop_index("ix_matches_first_seen", table_name="matches")
    op.drop_index("ix_api_tokens_user_id", table_name="api_tokens")
    op.drop_table("api_tokens")
    op.drop_index("ix_match_notes_match_id", table_name="match_notes")
    op.drop_table("match_notes")
