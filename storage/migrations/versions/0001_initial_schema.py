"""initial schema: works, chapters, pages, fingerprints, index rows, matches

Revision ID: 0001
Revises:
Create Date: 2026-11-21 13:19:10.419934
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pages",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("final_url", sa.String(length=2048), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("status", sa.SmallInteger(), nullable=False),
        sa.Column("encoding", sa.String(length=40), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("snapshot_sha256", sa.String(length=64), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pages")),
        sa.UniqueConstraint("url", name=op.f("uq_pages_url")),
    )
    with op.batch_alter_table("pages", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pages_content_sha256"), ["content_sha256"], unique=False)
        batch_op.create_index(batch_op.f("ix_pages_host"), ["host"], unique=False)

    op.create_table(
        "works",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("source_name", sa.String(length=1000), nullable=False),
        sa.Column("encoding", sa.String(length=40), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_works")),
        sa.UniqueConstraint("content_sha256", name=op.f("uq_works_content_sha256")),
    )
    op.create_table(
        "chapters",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("work_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("end", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["work_id"], ["works.id"], name=op.f("fk_chapters_work_id_works"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chapters")),
        sa.UniqueConstraint("work_id", "index", name=op.f("uq_chapters_work_id_index")),
    )
    with op.batch_alter_table("chapters", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_chapters_work_id"), ["work_id"], unique=False)

    op.create_table(
        "fingerprints",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("chapter_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("page_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=True),
        sa.Column("payload", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "(chapter_id IS NULL) <> (page_id IS NULL)", name=op.f("ck_fingerprints_one_owner")
        ),
        sa.ForeignKeyConstraint(
            ["chapter_id"],
            ["chapters.id"],
            name=op.f("fk_fingerprints_chapter_id_chapters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["page_id"], ["pages.id"], name=op.f("fk_fingerprints_page_id_pages"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fingerprints")),
        sa.UniqueConstraint("chapter_id", "kind", name=op.f("uq_fingerprints_chapter_id_kind")),
        sa.UniqueConstraint("page_id", "kind", name=op.f("uq_fingerprints_page_id_kind")),
    )
    op.create_table(
        "matches",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("page_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("work_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("chapter_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("methods", sa.JSON(), nullable=False),
        sa.Column("spans", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["chapter_id"], ["chapters.id"], name=op.f("fk_matches_chapter_id_chapters"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["page_id"], ["pages.id"], name=op.f("fk_matches_page_id_pages"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["work_id"], ["works.id"], name=op.f("fk_matches_work_id_works"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_matches")),
        sa.UniqueConstraint("page_id", "chapter_id", name=op.f("uq_matches_page_id_chapter_id")),
    )
    with op.batch_alter_table("matches", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_matches_page_id"), ["page_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_matches_work_id"), ["work_id"], unique=False)

    op.create_table(
        "code_index",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("fingerprint_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("code", sa.BigInteger(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["fingerprint_id"],
            ["fingerprints.id"],
            name=op.f("fk_code_index_fingerprint_id_fingerprints"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_code_index")),
    )
    with op.batch_alter_table("code_index", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_code_index_fingerprint_id"), ["fingerprint_id"], unique=False)
        batch_op.create_index("ix_code_index_kind_code", ["kind", "code"], unique=False)

    op.create_table(
        "simhash_index",
        sa.Column("fingerprint_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("table_no", sa.SmallInteger(), nullable=False),
        sa.Column("prefix", sa.BigInteger(), nullable=False),
        sa.Column("fingerprint", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["fingerprint_id"],
            ["fingerprints.id"],
            name=op.f("fk_simhash_index_fingerprint_id_fingerprints"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("fingerprint_id", "table_no", name=op.f("pk_simhash_index")),
    )
    with op.batch_alter_table("simhash_index", schema=None) as batch_op:
        batch_op.create_index("ix_simhash_index_table_prefix", ["table_no", "prefix"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("simhash_index", schema=None) as batch_op:
        batch_op.drop_index("ix_simhash_index_table_prefix")

    op.drop_table("simhash_index")
    with op.batch_alter_table("code_index", schema=None) as batch_op:
        batch_op.drop_index("ix_code_index_kind_code")
        batch_op.drop_index(batch_op.f("ix_code_index_fingerprint_id"))

    op.drop_table("code_index")
    with op.batch_alter_table("matches", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_matches_work_id"))
        batch_op.drop_index(batch_op.f("ix_matches_page_id"))

    op.drop_table("matches")
    op.drop_table("fingerprints")
    with op.batch_alter_table("chapters", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_chapters_work_id"))

    op.drop_table("chapters")
    op.drop_table("works")
    with op.batch_alter_table("pages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pages_host"))
        batch_op.drop_index(batch_op.f("ix_pages_content_sha256"))

    op.drop_table("pages")
