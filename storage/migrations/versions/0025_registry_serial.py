"""the registry's serial: one more at every change of the registered chapters' fingerprints, recorded by
each page as the registry it was compared at (pages.registry_serial); on PostgreSQL a change also takes the
registry's advisory lock until it commits, which a batch of pages holds shared while it checks the serial it
compared at and commits, so a registration never falls between a page's compare and its work's look-up

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-29 10:00:00
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

# The triggers as this revision makes them (storage/sql/registry_version.<dialect>.sql when it was written).
_TRIGGERS_POSTGRESQL = """
CREATE OR REPLACE FUNCTION fptrack_registry_version_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE n bigint; s bigint; m bigint; t timestamptz;
BEGIN
    SELECT count(*), coalesce(sum(id), 0), coalesce(max(id), 0), max(created_at) INTO n, s, m, t
        FROM inserted_fingerprints WHERE chapter_id IS NOT NULL;
    IF n > 0 THEN
        PERFORM pg_advisory_xact_lock(1718645366);
        UPDATE registry_version
            SET chapter_rows = chapter_rows + n, id_sum = id_sum + s, max_id = greatest(max_id, m),
                last_at = greatest(last_at, t), serial = serial + 1
            WHERE id = 1;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION fptrack_registry_version_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE n bigint; s bigint;
BEGIN
    SELECT count(*), coalesce(sum(id), 0) INTO n, s FROM deleted_fingerprints WHERE chapter_id IS NOT NULL;
    IF n > 0 THEN
        PERFORM pg_advisory_xact_lock(1718645366);
        UPDATE registry_version SET chapter_rows = chapter_rows - n, id_sum = id_sum - s, serial = serial + 1
            WHERE id = 1;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION fptrack_registry_version_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE n bigint; s bigint; touched bigint;
BEGIN
    SELECT (SELECT count(*) FROM new_fingerprints WHERE chapter_id IS NOT NULL)
               - (SELECT count(*) FROM old_fingerprints WHERE chapter_id IS NOT NULL),
           (SELECT coalesce(sum(id), 0) FROM new_fingerprints WHERE chapter_id IS NOT NULL)
               - (SELECT coalesce(sum(id), 0) FROM old_fingerprints WHERE chapter_id IS NOT NULL),
           (SELECT count(*) FROM new_fingerprints WHERE chapter_id IS NOT NULL)
               + (SELECT count(*) FROM old_fingerprints WHERE chapter_id IS NOT NULL)
        INTO n, s, touched;
    IF touched > 0 THEN
        PERFORM pg_advisory_xact_lock(1718645366);
        UPDATE registry_version
            SET chapter_rows = chapter_rows + n, id_sum = id_sum + s,
                last_at = greatest(last_at, clock_timestamp()), serial = serial + 1
            WHERE id = 1;
    END IF;
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
        max_id = max(max_id, NEW.id), serial = serial + 1,
        last_at = CASE WHEN last_at IS NULL OR NEW.created_at > last_at THEN NEW.created_at ELSE last_at END
        WHERE id = 1;
END;

DROP TRIGGER IF EXISTS tr_fingerprints_registry_delete;

CREATE TRIGGER tr_fingerprints_registry_delete AFTER DELETE ON fingerprints WHEN OLD.chapter_id IS NOT NULL
BEGIN
    UPDATE registry_version SET chapter_rows = chapter_rows - 1, id_sum = id_sum - OLD.id, serial = serial + 1
        WHERE id = 1;
END;

DROP TRIGGER IF EXISTS tr_fingerprints_registry_update;

CREATE TRIGGER tr_fingerprints_registry_update AFTER UPDATE ON fingerprints
    WHEN OLD.chapter_id IS NOT NULL OR NEW.chapter_id IS NOT NULL
BEGIN
    UPDATE registry_version
        SET chapter_rows = chapter_rows - (OLD.chapter_id IS NOT NULL) + (NEW.chapter_id IS NOT NULL),
            id_sum = id_sum - (CASE WHEN OLD.chapter_id IS NOT NULL THEN OLD.id ELSE 0 END)
                + (CASE WHEN NEW.chapter_id IS NOT NULL THEN NEW.id ELSE 0 END),
            last_at = strftime('%Y-%m-%d %H:%M:%f', 'now'), serial = serial + 1
        WHERE id = 1;
END;

INSERT INTO registry_version (id, chapter_rows, id_sum, max_id, last_at)
    SELECT 1, count(*), coalesce(sum(id), 0), coalesce(max(id), 0), max(created_at)
    FROM fingerprints WHERE chapter_id IS NOT NULL
    ON CONFLICT (id) DO NOTHING;
"""

# The triggers as revision 0023 made them, for the downgrade.
_OLD_TRIGGERS_POSTGRESQL = """
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
"""

_OLD_TRIGGERS_SQLITE = """
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
"""


def _statements(script: str) -> list[str]:
    """The statements of ``script``: separated by a blank line, each ending with ``;`` (dropped), its lines
    joined by single spaces (the form ``storage.models`` loads them in)."""
    statements = []
    for block in re.split(r"\n\s*\n", script.strip()):
        statement = " ".join(line.strip() for line in block.splitlines() if line.strip())
        statements.append(statement.removesuffix(";"))
    return statements


def _postgres() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def upgrade() -> None:
    # plain ADD COLUMN (never a batch copy, which on SQLite would recreate the table); pages compared before
    # keep NULL: compared at a registry older than any serial
    op.add_column(
        "registry_version", sa.Column("serial", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
    )
    op.add_column("pages", sa.Column("registry_serial", sa.BigInteger(), nullable=True))
    for statement in _statements(_TRIGGERS_POSTGRESQL if _postgres() else _TRIGGERS_SQLITE):
        op.execute(statement)


def downgrade() -> None:
    for statement in _statements(_OLD_TRIGGERS_POSTGRESQL if _postgres() else _OLD_TRIGGERS_SQLITE):
        op.execute(statement)
    op.drop_column("pages", "registry_serial")
    op.drop_column("registry_version", "serial")
