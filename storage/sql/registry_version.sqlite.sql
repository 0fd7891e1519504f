-- registry_version kept in step with the registered chapters' fingerprints, on SQLite (loaded by
-- storage.models.registry_version_ddl, run by the migrations and by create_all; see
-- storage.models.RegistryVersion and compare.chapter_index.observe).
--
-- Row triggers that fire for chapter rows only. SQLite gives a deleted largest rowid to the next row: the
-- count, sum and largest id are then as before, and only last_at (the new row's created_at) moves. Every
-- chapter row written adds one to serial. A batch of pages looks at the serial last while it holds the
-- database's one write lock (compare.chapter_index.hold_registry), so a registration commits either before
-- that look or after the batch's commit.
--
-- Format read by the loader: statements end with ';' and are separated by a blank line; lines starting with
-- '--' are dropped; a statement's lines are joined by single spaces.

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
