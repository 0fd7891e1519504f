-- registry_version kept in step with the registered chapters' fingerprints, on PostgreSQL (loaded by
-- storage.models.registry_version_ddl, run by the migrations and by create_all; see
-- storage.models.RegistryVersion and compare.chapter_index.observe).
--
-- Statement-level triggers over transition tables: a statement that writes no chapter row (every page batch)
-- changes nothing and takes no lock; a registration adds its rows' count and id sum, a removal takes them
-- off, an update in place moves last_at. Each of them adds one to serial, and first takes the registry's
-- advisory lock (key 1718645366, "fprv"; storage.models.REGISTRY_LOCK_KEY) exclusively until its transaction
-- ends: a batch of pages holds it shared from its last look at the serial to its commit
-- (compare.chapter_index.hold_registry), so a registration commits either before that look or after the
-- batch's commit.
--
-- Format read by the loader: statements end with ';' and are separated by a blank line; lines starting with
-- '--' are dropped; a statement's lines are joined by single spaces.

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
