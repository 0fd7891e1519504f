-- registry_version kept in step with the registered chapters' fingerprints, on PostgreSQL (loaded by
-- storage.models.registry_version_ddl, run by migration 0023 and by create_all; see
-- storage.models.RegistryVersion and compare.chapter_index.observe).
--
-- Statement-level triggers over transition tables: a statement that writes no chapter row (every page batch)
-- changes nothing and takes no lock on the one row; a registration adds its rows' count and id sum, a removal
-- takes them off, an update in place moves last_at.
--
-- Format read by the loader: statements end with ';' and are separated by a blank line; lines starting with
-- '--' are dropped; a statement's lines are joined by single spaces.

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
