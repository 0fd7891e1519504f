"""match roll-ups: counts per first-seen day, work, host and status, kept by triggers; the review list's
indexes end with the match id

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23 05:30:00
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# The roll-up triggers as this revision creates them (storage/sql/match_rollups.<dialect>.sql when it was
# written): PostgreSQL's statement-level triggers over transition tables, SQLite's row triggers.
_TRIGGERS_POSTGRESQL = """
CREATE OR REPLACE FUNCTION fptrack_rollup_matches() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO match_rollups AS r (day, work_id, host, status, matches)
            SELECT day, work_id, host, status, sum(d)
            FROM (SELECT (m.first_seen AT TIME ZONE 'UTC')::date AS day, m.work_id, p.host, m.status, 1 AS d
                FROM new_matches m JOIN pages p ON p.id = m.page_id) AS delta
            GROUP BY day, work_id, host, status HAVING sum(d) <> 0 ORDER BY day, work_id, host, status
            ON CONFLICT (day, work_id, host, status) DO UPDATE SET matches = r.matches + EXCLUDED.matches;
        DELETE FROM match_rollups WHERE matches = 0 AND (day, work_id, host, status) IN
            (SELECT day, work_id, host, status
            FROM (SELECT (m.first_seen AT TIME ZONE 'UTC')::date AS day, m.work_id, p.host, m.status, 1 AS d
                FROM new_matches m JOIN pages p ON p.id = m.page_id) AS delta);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO match_rollups AS r (day, work_id, host, status, matches)
            SELECT day, work_id, host, status, sum(d)
            FROM (SELECT (m.first_seen AT TIME ZONE 'UTC')::date AS day, m.work_id, p.host, m.status, -1 AS d
                FROM old_matches m JOIN pages p ON p.id = m.page_id) AS delta
            GROUP BY day, work_id, host, status HAVING sum(d) <> 0 ORDER BY day, work_id, host, status
            ON CONFLICT (day, work_id, host, status) DO UPDATE SET matches = r.matches + EXCLUDED.matches;
        DELETE FROM match_rollups WHERE matches = 0 AND (day, work_id, host, status) IN
            (SELECT day, work_id, host, status
            FROM (SELECT (m.first_seen AT TIME ZONE 'UTC')::date AS day, m.work_id, p.host, m.status, -1 AS d
                FROM old_matches m JOIN pages p ON p.id = m.page_id) AS delta);
    ELSE
        INSERT INTO match_rollups AS r (day, work_id, host, status, matches)
            SELECT day, work_id, host, status, sum(d)
            FROM (SELECT (OLD.first_seen AT TIME ZONE 'UTC')::date AS day, OLD.work_id, p.host, OLD.status,
                -1 AS d
                FROM pages p WHERE p.id = OLD.page_id
                UNION ALL SELECT (NEW.first_seen AT TIME ZONE 'UTC')::date, NEW.work_id, p.host, NEW.status, 1
                FROM pages p WHERE p.id = NEW.page_id) AS delta
            GROUP BY day, work_id, host, status HAVING sum(d) <> 0 ORDER BY day, work_id, host, status
            ON CONFLICT (day, work_id, host, status) DO UPDATE SET matches = r.matches + EXCLUDED.matches;
        DELETE FROM match_rollups WHERE matches = 0 AND (day, work_id, host, status) IN
            (SELECT day, work_id, host, status
            FROM (SELECT (OLD.first_seen AT TIME ZONE 'UTC')::date AS day, OLD.work_id, p.host, OLD.status,
                -1 AS d
                FROM pages p WHERE p.id = OLD.page_id
                UNION ALL SELECT (NEW.first_seen AT TIME ZONE 'UTC')::date, NEW.work_id, p.host, NEW.status, 1
                FROM pages p WHERE p.id = NEW.page_id) AS delta);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION fptrack_rollup_pages() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF TG_OP = 'DELETE' THEN DELETE FROM matches WHERE page_id = OLD.id; RETURN OLD; END IF;
    INSERT INTO match_rollups AS r (day, work_id, host, status, matches)
        SELECT (m.first_seen AT TIME ZONE 'UTC')::date, m.work_id, h.host, m.status, sum(h.d)
        FROM matches m CROSS JOIN (VALUES (NEW.host, 1), (OLD.host, -1)) AS h (host, d)
        WHERE m.page_id = NEW.id GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (day, work_id, host, status) DO UPDATE SET matches = r.matches + EXCLUDED.matches;
    DELETE FROM match_rollups WHERE matches = 0 AND host = OLD.host;
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS tr_matches_rollup_insert ON matches;

CREATE TRIGGER tr_matches_rollup_insert AFTER INSERT ON matches REFERENCING NEW TABLE AS new_matches
    FOR EACH STATEMENT EXECUTE FUNCTION fptrack_rollup_matches();

DROP TRIGGER IF EXISTS tr_matches_rollup_delete ON matches;

CREATE TRIGGER tr_matches_rollup_delete AFTER DELETE ON matches REFERENCING OLD TABLE AS old_matches
    FOR EACH STATEMENT EXECUTE FUNCTION fptrack_rollup_matches();

DROP TRIGGER IF EXISTS tr_matches_rollup_update ON matches;

CREATE TRIGGER tr_matches_rollup_update AFTER UPDATE OF status, work_id, page_id, first_seen ON matches
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.work_id IS DISTINCT FROM NEW.work_id
    OR OLD.page_id IS DISTINCT FROM NEW.page_id OR OLD.first_seen IS DISTINCT FROM NEW.first_seen)
    EXECUTE FUNCTION fptrack_rollup_matches();

DROP TRIGGER IF EXISTS tr_pages_rollup_delete ON pages;

CREATE TRIGGER tr_pages_rollup_delete BEFORE DELETE ON pages FOR EACH ROW
    EXECUTE FUNCTION fptrack_rollup_pages();

DROP TRIGGER IF EXISTS tr_pages_rollup_host ON pages;

CREATE TRIGGER tr_pages_rollup_host AFTER UPDATE OF host ON pages
    FOR EACH ROW WHEN (OLD.host IS DISTINCT FROM NEW.host) EXECUTE FUNCTION fptrack_rollup_pages();

"""

_TRIGGERS_SQLITE = """
DROP TRIGGER IF EXISTS tr_matches_rollup_insert;

CREATE TRIGGER tr_matches_rollup_insert AFTER INSERT ON matches BEGIN
    INSERT INTO match_rollups (day, work_id, host, status, matches)
        SELECT date(NEW.first_seen), NEW.work_id, p.host, NEW.status, +1 FROM pages p WHERE p.id = NEW.page_id
        ON CONFLICT (day, work_id, host, status) DO UPDATE SET matches = matches + excluded.matches;
    DELETE FROM match_rollups WHERE matches = 0 AND day = date(NEW.first_seen)
        AND work_id = NEW.work_id AND status = NEW.status;
END;

DROP TRIGGER IF EXISTS tr_matches_rollup_delete;

CREATE TRIGGER tr_matches_rollup_delete AFTER DELETE ON matches BEGIN
    INSERT INTO match_rollups (day, work_id, host, status, matches)
        SELECT date(OLD.first_seen), OLD.work_id, p.host, OLD.status, -1 FROM pages p WHERE p.id = OLD.page_id
        ON CONFLICT (day, work_id, host, status) DO UPDATE SET matches = matches + excluded.matches;
    DELETE FROM match_rollups WHERE matches = 0 AND day = date(OLD.first_seen)
        AND work_id = OLD.work_id AND status = OLD.status;
END;

DROP TRIGGER IF EXISTS tr_matches_rollup_update;

CREATE TRIGGER tr_matches_rollup_update AFTER UPDATE OF status, work_id, page_id, first_seen ON matches
    WHEN OLD.status IS NOT NEW.status OR OLD.work_id IS NOT NEW.work_id OR OLD.page_id IS NOT NEW.page_id
    OR date(OLD.first_seen) IS NOT date(NEW.first_seen) BEGIN
    INSERT INTO match_rollups (day, work_id, host, status, matches)
        SELECT date(OLD.first_seen), OLD.work_id, p.host, OLD.status, -1 FROM pages p WHERE p.id = OLD.page_id
        ON CONFLICT (day, work_id, host, status) DO UPDATE SET matches = matches + excluded.matches;
    DELETE FROM match_rollups WHERE matches = 0 AND day = date(OLD.first_seen)
        AND work_id = OLD.work_id AND status = OLD.status;
    INSERT INTO match_rollups (day, work_id, host, status, matches)
        SELECT date(NEW.first_seen), NEW.work_id, p.host, NEW.status, +1 FROM pages p WHERE p.id = NEW.page_id
        ON CONFLICT (day, work_id, host, status) DO UPDATE SET matches = matches + excluded.matches;
    DELETE FROM match_rollups WHERE matches = 0 AND day = date(NEW.first_seen)
        AND work_id = NEW.work_id AND status = NEW.status;
END;

DROP TRIGGER IF EXISTS tr_pages_rollup_delete;

CREATE TRIGGER tr_pages_rollup_delete BEFORE DELETE ON pages BEGIN
    DELETE FROM matches WHERE page_id = OLD.id;
END;

DROP TRIGGER IF EXISTS tr_pages_rollup_host;

CREATE TRIGGER tr_pages_rollup_host AFTER UPDATE OF host ON pages WHEN OLD.host IS NOT NEW.host BEGIN
    INSERT INTO match_rollups (day, work_id, host, status, matches)
        SELECT date(m.first_seen), m.work_id, h.host, m.status, sum(h.d)
        FROM matches m CROSS JOIN (SELECT NEW.host AS host, 1 AS d UNION ALL SELECT OLD.host, -1) AS h
        WHERE m.page_id = NEW.id GROUP BY 1, 2, 3, 4
        ON CONFLICT (day, work_id, host, status) DO UPDATE SET matches = matches + excluded.matches;
    DELETE FROM match_rollups WHERE matches = 0 AND host = OLD.host;
END;

"""

_BACKFILL = {
    "postgresql": "(m.first_seen AT TIME ZONE 'UTC')::date",
    "sqlite": "date(m.first_seen)",
}


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
        "match_rollups",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("work_id", sa.BigInteger(), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("matches", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("day", "work_id", "host", "status", name="pk_match_rollups"),
    )
    dialect = op.get_bind().dialect.name
    # the matches already recorded, then the triggers that keep the counts from now on (same transaction)
    op.execute(
        "INSERT INTO match_rollups (day, work_id, host, status, matches) "
        f"SELECT {_BACKFILL.get(dialect, 'date(m.first_seen)')}, m.work_id, p.host, m.status, count(*) "
        "FROM matches m JOIN pages p ON p.id = m.page_id GROUP BY 1, 2, 3, 4"
    )
    for statement in _statements(_TRIGGERS_POSTGRESQL if dialect == "postgresql" else _TRIGGERS_SQLITE):
        op.execute(statement)
    # the same orders as before, with the tie-break (id) in the key: deep pages become index-only walks
    op.create_index("ix_matches_status_first_seen_id", "matches", ["status", "first_seen", "id"])
    op.create_index("ix_matches_first_seen_id", "matches", ["first_seen", "id"])
    op.drop_index("ix_matches_status_first_seen", table_name="matches")
    op.drop_index("ix_matches_first_seen", table_name="matches")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_index("ix_matches_status_first_seen", "matches", ["status", "first_seen"])
    op.create_index("ix_matches_first_seen", "matches", ["first_seen"])
    op.drop_index("ix_matches_status_first_seen_id", table_name="matches")
    op.drop_index("ix_matches_first_seen_id", table_name="matches")
    for name, table in (
        ("tr_matches_rollup_insert", "matches"),
        ("tr_matches_rollup_delete", "matches"),
        ("tr_matches_rollup_update", "matches"),
        ("tr_pages_rollup_delete", "pages"),
        ("tr_pages_rollup_host", "pages"),
    ):
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (f" ON {table}" if dialect == "postgresql" else ""))
    if dialect == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS fptrack_rollup_matches()")
        op.execute("DROP FUNCTION IF EXISTS fptrack_rollup_pages()")
    op.drop_table("match_rollups")
