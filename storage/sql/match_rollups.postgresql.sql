-- match_rollups kept in step with matches, on PostgreSQL (loaded by storage.models.match_rollup_ddl, run by
-- migration 0012 and by create_all; see storage.models.MatchRollup).
--
-- Each change is an upsert of a signed delta (+1 per inserted row, -1 per deleted row, both for an update that
-- changes a key or the status), followed by removing the rows it brought to zero. The host comes from the
-- match's page; deleting a page first deletes its matches explicitly (a BEFORE DELETE trigger), so that their
-- triggers still see the page's host, and a page whose host changes moves its matches' counts.
--
-- Inserts and deletes: statement-level triggers over transition tables, one upsert per statement, rows in key
-- order so that concurrent writers lock rollup rows in the same order. Updates: a row trigger, skipped by its
-- WHEN clause (evaluated in C) unless the status or a key changes, so that the far more frequent updates of
-- last_seen, score and spans (every re-comparison) cost nothing here.
--
-- Format read by the loader: statements end with ';' and are separated by a blank line; lines starting with
-- '--' are dropped; a statement's lines are joined by single spaces.

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
            FROM (SELECT (OLD.first_seen AT TIME ZONE 'UTC')::date AS day, OLD.work_id, p.host, OLD.status, -1 AS d
                FROM pages p WHERE p.id = OLD.page_id
                UNION ALL SELECT (NEW.first_seen AT TIME ZONE 'UTC')::date, NEW.work_id, p.host, NEW.status, 1
                FROM pages p WHERE p.id = NEW.page_id) AS delta
            GROUP BY day, work_id, host, status HAVING sum(d) <> 0 ORDER BY day, work_id, host, status
            ON CONFLICT (day, work_id, host, status) DO UPDATE SET matches = r.matches + EXCLUDED.matches;
        DELETE FROM match_rollups WHERE matches = 0 AND (day, work_id, host, status) IN
            (SELECT day, work_id, host, status
            FROM (SELECT (OLD.first_seen AT TIME ZONE 'UTC')::date AS day, OLD.work_id, p.host, OLD.status, -1 AS d
                FROM pages p WHERE p.id = OLD.page_id
                UNION ALL SELECT (NEW.first_seen AT TIME ZONE 'UTC')::date, NEW.work_id, p.host, NEW.status, 1
                FROM pages p WHERE p.id = NEW.page_id) AS delta);
    END IF;
    RETURN NULL;
END $$;

-- a page: deleted, it deletes its matches first (their triggers then still see its host); its host changed, its
-- matches' counts move from the old host to the new
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
