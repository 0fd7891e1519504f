"""the meaning path (issue 36): a match may be a copy that keeps the meaning, not the words.

``matches.kind`` (NULL: an exact copy, as every match before; ``rewrite``, ``translation:en``, ...) and
``matches.alignment`` (the page's and the chapter's sentences aligned in order: coverage, pairs, sentence
counts, model id; NULL on an exact match). ``meaning_checks``: the pages the gate sent to the meaning path,
with their candidate chapters, pending until a worker of queue ``meaning`` checks them (one row a page).
``chapter_vectors``: a chapter's sentences embedded once per model (float16), with the hash of the text they
were embedded from. New nullable columns and new tables: no existing row changes.

Revision ID: 0034
Revises: 0033
Create Date: 2026-11-29 23:50:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # Plain ADD COLUMN (never a batch copy, which on SQLite would recreate ``matches`` and lose its triggers).
    op.add_column("matches", sa.Column("kind", sa.String(32), nullable=True))
    op.add_column("matches", sa.Column("alignment", sa.JSON(), nullable=True))
    op.create_table(
        "meaning_checks",
        sa.Column("id", BigId, nullable=False),
        sa.Column("page_id", BigId, nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("candidates", sa.JSON(), nullable=False),
        sa.Column("gated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("matches", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cpu_seconds", sa.Float(), nullable=True),
        sa.CheckConstraint("state IN ('pending', 'done')", name="ck_meaning_checks_known_state"),
        sa.ForeignKeyConstraint(
            ["page_id"], ["pages.id"], name="fk_meaning_checks_page_id_pages", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_meaning_checks"),
        sa.UniqueConstraint("page_id", name="uq_meaning_checks_page_id"),
    )
    op.create_index("ix_meaning_checks_state_id", "meaning_checks", ["state", "id"])
    op.create_table(
        "chapter_vectors",
        sa.Column("chapter_id", BigId, nullable=False),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("text_sha256", sa.String(64), nullable=False),
        sa.Column("spans", sa.JSON(), nullable=False),
        sa.Column("vectors", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["chapter_id"], ["chapters.id"], name="fk_chapter_vectors_chapter_id_chapters", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("chapter_id", "model", name="pk_chapter_vectors"),
    )


def downgrade() -> None:
    op.drop_table("chapter_vectors")
    op.drop_index("ix_meaning_checks_state_id", table_name="meaning_checks")
    op.drop_table("meaning_checks")
    op.drop_column("matches", "alignment")
    op.drop_column("matches", "kind")
