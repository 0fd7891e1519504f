"""the named-entity index (issue 36, ``compare.entities``): the candidates of the meaning path that survive
rewording and translation. ``entity_chapters``: the chapters indexed, with their term counts (its largest id
and row count tell a process its vocabulary is stale); ``entity_postings``: one row per (term, chapter), a
term being a Han entity or its pinyin or Wade-Giles key, with its occurrences and its first place in the
chapter. Rows go with their chapter (``ON DELETE CASCADE``). New tables only; the works registered before
are indexed when they are fingerprinted again, or by ``compare.entities.index_chapters``.

Revision ID: 0035
Revises: 0034
Create Date: 2026-11-30 00:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "entity_chapters",
        sa.Column("id", BigId, nullable=False),
        sa.Column("chapter_id", BigId, nullable=False),
        sa.Column("work_id", BigId, nullable=False),
        sa.Column("terms", sa.Integer(), nullable=False),
        sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["chapter_id"], ["chapters.id"], name="fk_entity_chapters_chapter_id_chapters", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["work_id"], ["works.id"], name="fk_entity_chapters_work_id_works", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_entity_chapters"),
        sa.UniqueConstraint("chapter_id", name="uq_entity_chapters_chapter_id"),
    )
    op.create_index("ix_entity_chapters_work_id", "entity_chapters", ["work_id"])
    op.create_table(
        "entity_postings",
        sa.Column("term", sa.String(64), nullable=False),
        sa.Column("chapter_id", BigId, nullable=False),
        sa.Column("occurrences", sa.Integer(), nullable=False),
        sa.Column("first", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["chapter_id"], ["chapters.id"], name="fk_entity_postings_chapter_id_chapters", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("term", "chapter_id", name="pk_entity_postings"),
    )
    op.create_index("ix_entity_postings_chapter_id", "entity_postings", ["chapter_id"])


def downgrade() -> None:
    op.drop_index("ix_entity_postings_chapter_id", table_name="entity_postings")
    op.drop_table("entity_postings")
    op.drop_index("ix_entity_chapters_work_id", table_name="entity_chapters")
    op.drop_table("entity_chapters")
