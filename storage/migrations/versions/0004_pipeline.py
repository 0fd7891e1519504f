"""one production pipeline: page progress, site templates, per-crawl counts, one-sided code look-ups

- ``pages.compared_at`` (how far a page got: a page with text and no ``compared_at`` is picked up again) and
  ``pages.template_masked`` (its verdicts were decided with its site's template masked);
- ``works.indexed_at`` (a work registered and never indexed is picked up again);
- ``sites.settled_at`` (when the site's templates were last decided from all its pages); existing site keys
  stay (a host without a port is the same key under the new rule);
- ``crawl_jobs``: ``pages_stored``, ``pages_unchanged``, ``copies_found`` and the status ``interrupted``;
- ``code_index`` loses its foreign key to ``fingerprints`` (its check on every inserted row halved the rate of
  bulk loads); a trigger deletes a fingerprint's rows with it instead;
- ``code_index.owner`` / ``owner_id`` with the index ``(code, owner, kind) INCLUDE (owner_id)`` replacing
  ``(kind, code) INCLUDE (fingerprint_id)``: a page's codes are looked up among chapters only (and a chapter's
  among pages only) without joining ``fingerprints`` or reading the other side's rows. The 64-bit code leads:
  b-tree comparisons are decided by one integer comparison instead of a collated text comparison of ``kind``
  (a text ``COPY`` of 300,000 rows into the table measured 10-25 % faster).

Pages already compared before this revision keep a NULL ``compared_at`` only if they were never fingerprinted.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 03:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_OLD_STATUSES = ("queued", "running", "finished", "failed", "cancelled")
_NEW_STATUSES = (*_OLD_STATUSES, "interrupted")


def _code_index_cascade(dialect: str) -> list[str]:
    """Deleting a ``fingerprints`` row deletes its ``code_index`` rows (what ``ON DELETE CASCADE`` did,
    without a foreign-key check per inserted row). PostgreSQL: one statement-level trigger over the deleted
    rows; SQLite: a row trigger on the primary-key prefix."""
    if dialect == "postgresql":
        return [
            (
                "CREATE OR REPLACE FUNCTION fptrack_delete_code_rows() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ "
                "BEGIN DELETE FROM code_index c USING deleted_fingerprints d WHERE c.fingerprint_id = d.id; "
                "RETURN NULL; END $$"
            ),
            "DROP TRIGGER IF EXISTS tr_fingerprints_delete_code_rows ON fingerprints",
            (
                "CREATE TRIGGER tr_fingerprints_delete_code_rows AFTER DELETE ON fingerprints "
                "REFERENCING OLD TABLE AS deleted_fingerprints FOR EACH STATEMENT "
                "EXECUTE FUNCTION fptrack_delete_code_rows()"
            ),
        ]
    return [
        "DROP TRIGGER IF EXISTS tr_fingerprints_delete_code_rows",
        (
            "CREATE TRIGGER tr_fingerprints_delete_code_rows AFTER DELETE ON fingerprints FOR EACH ROW "
            "BEGIN DELETE FROM code_index WHERE fingerprint_id = OLD.id; END"
        ),
    ]


def _status_check(statuses: tuple[str, ...]) -> str:
    return "status IN (" + ", ".join(f"'{s}'" for s in statuses) + ")"


def _replace_status_check(statuses: tuple[str, ...]) -> None:
    """Swap the CHECK constraint on ``crawl_jobs.status``.

    SQLite cannot alter a constraint: the table is copied and swapped (Alembic's batch mode). With foreign
    keys on, dropping the old table runs an implicit ``DELETE`` whose ``ON DELETE SET NULL`` would cut every
    page from its crawl job, so the links are kept aside and put back."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        op.execute(
            "CREATE TEMPORARY TABLE fptrack_page_jobs AS SELECT id, crawl_job_id FROM pages "
            "WHERE crawl_job_id IS NOT NULL"
        )
    with op.batch_alter_table("crawl_jobs") as batch:
        batch.drop_constraint("ck_crawl_jobs_known_status", type_="check")
        batch.create_check_constraint("known_status", _status_check(statuses))
    if sqlite:
        op.execute(
            "UPDATE pages SET crawl_job_id = (SELECT j.crawl_job_id FROM fptrack_page_jobs j WHERE j.id = "
            "pages.id) WHERE id IN (SELECT id FROM fptrack_page_jobs)"
        )
        op.execute("DROP TABLE fptrack_page_jobs")


def upgrade() -> None:
    # Plain ADD COLUMN on both backends (a batch copy of ``pages`` on SQLite is not needed for added columns).
    op.add_column("pages", sa.Column("compared_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "pages", sa.Column("template_masked", sa.Boolean(), nullable=False, server_default=sa.text("false"))
    )
    op.execute("UPDATE pages SET compared_at = fingerprinted_at WHERE fingerprinted_at IS NOT NULL")
    op.add_column("works", sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE works SET indexed_at = created_at WHERE EXISTS (SELECT 1 FROM chapters c JOIN fingerprints f "
        "ON f.chapter_id = c.id WHERE c.work_id = works.id)"
    )
    op.add_column("sites", sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True))
    for column in ("pages_stored", "pages_unchanged", "copies_found"):
        op.add_column("crawl_jobs", sa.Column(column, sa.Integer(), nullable=False, server_default="0"))
    _replace_status_check(_NEW_STATUSES)

    op.add_column("code_index", sa.Column("owner", sa.SmallInteger(), nullable=True))
    op.add_column("code_index", sa.Column("owner_id", sa.BigInteger(), nullable=True))
    op.execute(
        "UPDATE code_index SET "
        "owner = (SELECT CASE WHEN f.chapter_id IS NOT NULL THEN 0 ELSE 1 END FROM fingerprints f "
        "WHERE f.id = code_index.fingerprint_id), "
        "owner_id = (SELECT COALESCE(f.chapter_id, f.page_id) FROM fingerprints f "
        "WHERE f.id = code_index.fingerprint_id)"
    )
    with op.batch_alter_table("code_index") as batch:
        batch.alter_column("owner", existing_type=sa.SmallInteger(), nullable=False)
        batch.alter_column("owner_id", existing_type=sa.BigInteger(), nullable=False)
        # 0002 built the table under a _v2 name and renamed its constraints on PostgreSQL only
        sqlite = op.get_bind().dialect.name == "sqlite"
        batch.drop_constraint(
            f"fk_code_index_fingerprint_id_fingerprints{'_v2' if sqlite else ''}", type_="foreignkey"
        )
    for statement in _code_index_cascade(op.get_bind().dialect.name):
        op.execute(statement)
    op.drop_index("ix_code_index_kind_code", table_name="code_index")
    op.create_index(
        "ix_code_index_code_owner_kind",
        "code_index",
        ["code", "owner", "kind"],
        postgresql_include=["owner_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_code_index_code_owner_kind", table_name="code_index")
    op.create_index(
        "ix_code_index_kind_code", "code_index", ["kind", "code"], postgresql_include=["fingerprint_id"]
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS tr_fingerprints_delete_code_rows ON fingerprints")
        op.execute("DROP FUNCTION IF EXISTS fptrack_delete_code_rows()")
    else:
        op.execute("DROP TRIGGER IF EXISTS tr_fingerprints_delete_code_rows")
    with op.batch_alter_table("code_index") as batch:
        batch.drop_column("owner_id")
        batch.drop_column("owner")
        batch.create_foreign_key(
            "fk_code_index_fingerprint_id_fingerprints",
            "fingerprints",
            ["fingerprint_id"],
            ["id"],
            ondelete="CASCADE",
        )
    op.execute("UPDATE crawl_jobs SET status = 'failed' WHERE status = 'interrupted'")
    _replace_status_check(_OLD_STATUSES)
    for column in ("copies_found", "pages_unchanged", "pages_stored"):
        op.drop_column("crawl_jobs", column)
    op.drop_column("sites", "settled_at")
    op.drop_column("works", "indexed_at")
    op.drop_column("pages", "template_masked")
    op.drop_column("pages", "compared_at")
