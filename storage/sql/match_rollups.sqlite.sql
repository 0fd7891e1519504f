-- match_rollups kept in step with matches, on SQLite (loaded by storage.models.match_rollup_ddl, run by
-- migration 0012 and by create_all; see storage.models.MatchRollup).
--
-- Row triggers: each change is an upsert of +1 for the new row and -1 for the old one, followed by removing the
-- row it brought to zero. The host comes from the match's page; deleting a page first deletes its matches
-- explicitly (a BEFORE DELETE trigger), so that their triggers still see the page's host, and a page whose
-- host changes moves its matches' counts. An update is counted only when the status or a key changes.
--
-- Format read by the loader: statements end with ';' and are separated by a blank line; lines starting with
-- '--' are dropped; a statement's lines are joined by single spaces.

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
