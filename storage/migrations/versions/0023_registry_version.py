"""the registry's version in one row kept by triggers: each batch of pages reads it instead of
aggregating over every registered chapter's fingerprints

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-25 23:00:00
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

# The triggers and the first row as this revision creates them (storage/sql/registry_version.<dialect>.sql
# when it was written).
_TRIGGERS_POSTGRESQL = """
CREATE OR REPLACE FUNCTION fptrack_registry_version_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE registry_version r
        SET chapter_rows = r.chapter_rows + d.n, id_sum = r.id_sum + d.s, max_id = greatest(r.max_id, d.m),
            last_at = greatest(r.last_at, d.t)
        FROM (SELECT count(*) AS n, coalesce(sum(id), 0) AS s, coalesce(max(id), 0) AS m, max(created_at) AS t
              FROM inserted_fingerprints WHERE chapter_id IS NOT NULL) d
        WHERE r.id = 1 AND d.n > 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION fptrack_registry_version_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE registry_version r
        SET chapter_rows = r.chapter_rows - d.n, id_sum = r.id_sum - d.s
        FROM (SELECT count(*) AS n, coalesce(sum(id), 0) AS s
              FROM deleted_fingerprints WHERE chapter_id IS NOT NULL) d
        WHERE r.id = 1 AND d.n > 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION fptrack_registry_version_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE registry_version r
        SET chapter_rows = r.chapter_rows + d.n, id_sum = r.id_sum + d.s,
            last_at = greatest(r.last_at, clock_timestamp())
        FROM (SELECT (SELECT count(*) FROM new_fingerprints WHERE chapter_id IS NOT NULL)
                     - (SELECT count(*) FROM old_fingerprints WHERE chapter_id IS NOT NULL) AS n,
                     (SELECT coalesce(sum(id), 0) FROM new_fingerprints WHERE chapter_id IS NOT NULL)
                     - (SELECT coalesce(sum(id), 0) FROM old_fingerprints WHERE chapter_id IS NOT NULL) AS s,
                     (SELECT count(*) FROM new_fingerprints WHERE chapter_id IS NOT NULL)
                     + (SELECT count(*) FROM old_fingerprints WHERE chapter_id IS NOT NULL) AS touched) d
        WHERE r.id = 1 AND d.touched > 0;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS tr_fingerprints_registry_insert ON fingerprints;

CREATE TRIGGER tr_fingerprints_registry_insert AFTER INSERT ON fingerprints
    REFERENCING NEW TABLE AS inserted_fingerprints FOR EACH STATEMENT
    EXECUTE FUNCTION fptrack_registry_version_insert();

DROP TRIGGER IF EXISTS tr_fingerprints_registry_delete ON fingerprints;

CREATE TRIGGER tr_fingerprints_registry_delete AFTER DELETE ON fingerprints
    REFERENCING OLD TABLE AS deleted_fingerprints FOR EACH STATEMENT
    EXECUTE FUNCTION fptrack_registry_version_delete();

DROP TRIGGER IF EXISTS tr_fingerprints_registry_update ON fingerprints;

CREATE TRIGGER tr_fingerprints_registry_update AFTER UPDATE ON fingerprints
    REFERENCING OLD TABLE AS old_fingerprints NEW TABLE AS new_fingerprints FOR EACH STATEMENT
    EXECUTE FUNCTION fptrack_registry_version_update();

INSERT INTO registry_version (id, chapter_rows, id_sum, max_id, last_at)
    SELECT 1, count(*), coalesce(sum(id), 0), coalesce(max(id), 0), max(created_at)
    FROM fingerprints WHERE chapter_id IS NOT NULL
    ON CONFLICT (id) DO NOTHING;

"""

_TRIGGERS_SQLITE = """
DROP TRIGGER IF EXISTS tr_fingerprints_registry_insert;

CREATE TRIGGER tr_fingerprints_registry_insert AFTER INSERT ON fingerprints WHEN NEW.chapter_id IS NOT NULL
BEGIN
    UPDATE registry_version SET chapter_rows = chapter_rows + 1, id_sum = id_sum + NEW.id,
        max_id = max(max_id, NEW.id),
        last_at = CASE WHEN last_at IS NULL OR NEW.created_at > last_at THEN NEW.created_at ELSE last_at END
        WHERE id = 1;
END;

DROP TRIGGER IF EXISTS tr_fingerprints_registry_delete;

CREATE TRIGGER tr_fingerprints_registry_delete AFTER DELETE ON fingerprints WHEN OLD.chapter_id IS NOT NULL
BEGIN
    UPDATE registry_version SET chapter_rows = chapter_rows - 1, id_sum = id_sum - OLD.id WHERE id = 1;
END;

DROP TRIGGER IF EXISTS tr_fingerprints_registry_update;

CREATE TRIGGER tr_fingerprints_registry_update AFTER UPDATE ON fingerprints
    WHEN OLD.chapter_id IS NOT NULL OR NEW.chapter_id IS NOT NULL
BEGIN
    UPDATE registry_version
        SET chapter_rows = chapter_rows - (OLD.chapter_id IS NOT NULL) + (NEW.chapter_id IS NOT NULL),
            id_sum = id_sum - (CASE WHEN OLD.chapter_id IS NOT NULL THEN OLD.id ELSE 0 END)
                + (CASE WHEN NEW.chapter_id IS NOT NULL THEN NEW.id ELSE 0 END),
            last_at = strftime('%Y-%m-%d %H:%M:%f', 'now')
        WHERE id = 1;
END;

INSERT INTO registry_version (id, chapter_rows, id_sum, max_id, last_at)
    SELECT 1, count(*), coalesce(sum(id), 0), coalesce(max(id), 0), max(created_at)
    FROM fingerprints WHERE chapter_id IS NOT NULL
    ON CONFLICT (id) DO NOTHING;

"""


def _statements(script: str) -> list[str]:
    """The statements of ``script``: separated by a blank line, each ending with ``;`` (dropped), its lines
    joined by single spaces (the form ``storage.models`` loaded them in when this revision was written)."""
    statements = []
    for block in re.split(r"\n\s*\n", script.strip()):
        statement = " ".join(line.strip() for line in block.splitlines() if line.strip())
        statements.append(statement.removesuffix(";"))
    return statements


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
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in _statements(_TRIGGERS_POSTGRESQL if postgres else _TRIGGERS_SQLITE):
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
