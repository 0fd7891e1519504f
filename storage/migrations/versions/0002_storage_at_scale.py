"""storage at scale: sites, crawl jobs, review decisions, corpus statistics; the Simhash index becomes
expression b-trees on fingerprints.value; re-split (hot) buckets; a slimmer code index

Data is kept: pages gain their site (one per existing host); the old ``simhash_index`` rows are derived data
(the Simhash itself is ``fingerprints.value``) and are replaced by the expression indexes; ``code_index`` rows
are copied into the new shape.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 14:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# The default layout (64 bits, k = 3, 4 blocks of 16 bits): table t keys on block t. Frozen here on purpose: a
# migration must not change when the code's default changes (storage.db.ensure_simhash_indexes adds others).
_SIMHASH_KEYS = {
    "ix_fingerprints_f64k3b4_t0": "(((value >> 48) & 65535))",
    "ix_fingerprints_f64k3b4_t1": "(((value >> 32) & 65535))",
    "ix_fingerprints_f64k3b4_t2": "(((value >> 16) & 65535))",
    "ix_fingerprints_f64k3b4_t3": "((value & 65535))",
}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name

    op.create_table(
        "sites",
        sa.Column("id", BigId, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("name", sa.String(500), nullable=False, server_default=""),
        sa.Column("notes", sa.Text(), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("last_crawled_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_sites"),
        sa.UniqueConstraint("host", name="uq_sites_host"),
    )
    op.create_table(
        "crawl_jobs",
        sa.Column("id", BigId, nullable=False),
        sa.Column("site_id", BigId, nullable=True),
        sa.Column("start_urls", sa.JSON(), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("max_pages", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pages_seen", sa.Integer(), nullable=False),
        sa.Column("pages_failed", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'finished', 'failed', 'cancelled')",
            name="ck_crawl_jobs_known_status",
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["sites.id"], name="fk_crawl_jobs_site_id_sites", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_crawl_jobs"),
    )
    op.create_index("ix_crawl_jobs_site_id", "crawl_jobs", ["site_id"])
    op.create_index("ix_crawl_jobs_started_at", "crawl_jobs", ["started_at"])

    # Plain ALTER TABLE ADD COLUMN on both backends: a batch (copy-and-swap) of ``pages`` on SQLite would drop
    # the old table, and with foreign keys on that cascades into fingerprints and matches.
    op.add_column("pages", sa.Column("content_type", sa.String(200), nullable=False, server_default=""))
    op.add_column("pages", sa.Column("error", sa.Text(), nullable=False, server_default=""))
    op.add_column("pages", sa.Column("fingerprinted_at", sa.DateTime(timezone=True), nullable=True))
    if dialect == "sqlite":
        op.execute(
            "ALTER TABLE pages ADD COLUMN site_id INTEGER "
            "CONSTRAINT fk_pages_site_id_sites REFERENCES sites (id) ON DELETE SET NULL"
        )
        op.execute(
            "ALTER TABLE pages ADD COLUMN crawl_job_id INTEGER "
            "CONSTRAINT fk_pages_crawl_job_id_crawl_jobs REFERENCES crawl_jobs (id) ON DELETE SET NULL"
        )
    else:
        op.add_column("pages", sa.Column("site_id", BigId, nullable=True))
        op.add_column("pages", sa.Column("crawl_job_id", BigId, nullable=True))
        op.create_foreign_key(
            "fk_pages_site_id_sites", "pages", "sites", ["site_id"], ["id"], ondelete="SET NULL"
        )
        op.create_foreign_key(
            "fk_pages_crawl_job_id_crawl_jobs",
            "pages",
            "crawl_jobs",
            ["crawl_job_id"],
            ["id"],
            ondelete="SET NULL",
        )
    op.create_index("ix_pages_site_id", "pages", ["site_id"])
    op.create_index("ix_pages_crawl_job_id", "pages", ["crawl_job_id"])
    op.create_index("ix_pages_fetched_at", "pages", ["fetched_at"])

    # one site per host already crawled; pages point at it; pages with a Simhash were fingerprinted
    op.execute(
        "INSERT INTO sites (host, name, notes, created_at) "
        "SELECT host, host, '', MIN(fetched_at) FROM pages WHERE host <> '' GROUP BY host"
    )
    op.execute("UPDATE pages SET site_id = (SELECT sites.id FROM sites WHERE sites.host = pages.host)")
    op.execute(
        "UPDATE pages SET fingerprinted_at = (SELECT MIN(f.created_at) FROM fingerprints f "
        "WHERE f.page_id = pages.id)"
    )

    op.create_table(
        "review_decisions",
        sa.Column("id", BigId, nullable=False),
        sa.Column("match_id", BigId, nullable=False),
        sa.Column("decision", sa.String(20), nullable=False),
        sa.Column("reviewer", sa.String(200), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "decision IN ('flagged', 'confirmed', 'dismissed', 'licensed')",
            name="ck_review_decisions_known_decision",
        ),
        sa.ForeignKeyConstraint(
            ["match_id"], ["matches.id"], name="fk_review_decisions_match_id_matches", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_review_decisions"),
    )
    op.create_index("ix_review_decisions_match_id", "review_decisions", ["match_id"])
    op.create_index("ix_matches_status_first_seen", "matches", ["status", "first_seen"])

    op.create_table(
        "corpus_stats",
        sa.Column("id", BigId, nullable=False),
        sa.Column("name", sa.String(60), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("document_count", sa.BigInteger(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_corpus_stats"),
        sa.UniqueConstraint("name", "version", name="uq_corpus_stats_name_version"),
    )

    # --- the Simhash index: expression b-trees on fingerprints.value replace the table of copies
    op.drop_index("ix_simhash_index_table_prefix", table_name="simhash_index")
    op.drop_table("simhash_index")
    for name, key in _SIMHASH_KEYS.items():
        include = " INCLUDE (id)" if dialect == "postgresql" else ""
        op.execute(f"CREATE INDEX {name} ON fingerprints ({key}, value){include} WHERE kind = 'simhash64'")

    op.create_table(
        "simhash_hot_buckets",
        sa.Column("layout", sa.String(16), nullable=False),
        sa.Column("table_no", sa.SmallInteger(), nullable=False),
        sa.Column("key", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("split_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("layout", "table_no", "key", name="pk_simhash_hot_buckets"),
    )
    op.create_table(
        "simhash_hot_index",
        sa.Column("fingerprint_id", BigId, nullable=False),
        sa.Column("layout", sa.String(16), nullable=False),
        sa.Column("table_no", sa.SmallInteger(), nullable=False),
        sa.Column("sub_no", sa.SmallInteger(), nullable=False),
        sa.Column("key", sa.BigInteger(), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["fingerprint_id"],
            ["fingerprints.id"],
            name="fk_simhash_hot_index_fingerprint_id_fingerprints",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "fingerprint_id", "layout", "table_no", "sub_no", name="pk_simhash_hot_index"
        ),
    )
    op.create_index(
        "ix_simhash_hot_index_lookup",
        "simhash_hot_index",
        ["layout", "table_no", "sub_no", "key", "value"],
        postgresql_include=["fingerprint_id"],
    )

    # --- code_index without the surrogate id: copy into the new shape, then swap names
    op.create_table(
        "code_index_v2",
        sa.Column("fingerprint_id", BigId, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("code", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["fingerprint_id"],
            ["fingerprints.id"],
            name="fk_code_index_fingerprint_id_fingerprints_v2",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("fingerprint_id", "position", name="pk_code_index_v2"),
    )
    op.execute(
        "INSERT INTO code_index_v2 (fingerprint_id, position, kind, code) "
        "SELECT fingerprint_id, position, kind, code FROM code_index "
        "WHERE id IN (SELECT MIN(id) FROM code_index GROUP BY fingerprint_id, position)"
    )
    op.drop_index("ix_code_index_kind_code", table_name="code_index")
    op.drop_index("ix_code_index_fingerprint_id", table_name="code_index")
    op.drop_table("code_index")
    op.rename_table("code_index_v2", "code_index")
    if dialect == "postgresql":
        op.execute("ALTER TABLE code_index RENAME CONSTRAINT pk_code_index_v2 TO pk_code_index")
        op.execute(
            "ALTER TABLE code_index RENAME CONSTRAINT fk_code_index_fingerprint_id_fingerprints_v2 "
            "TO fk_code_index_fingerprint_id_fingerprints"
        )
    op.create_index(
        "ix_code_index_kind_code", "code_index", ["kind", "code"], postgresql_include=["fingerprint_id"]
    )


def downgrade() -> None:
    raise NotImplementedError("0002 is not reversible: restore a backup taken before the upgrade instead")
