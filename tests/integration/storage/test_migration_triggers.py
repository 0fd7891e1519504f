"""The triggers and trigger functions of a database migrated to head are exactly those the product's DDL
(``storage.models``: ``code_index_cascade_ddl``, ``registry_version_ddl``, ``match_rollup_ddl``) creates: the
frozen copies in the revisions and the product's ``storage/sql`` files say the same, on SQLite and on
PostgreSQL. The product's statements replace what they create, so running them again over a migrated database
must leave every definition as it was; a change to the product's DDL that no new revision carries fails
here."""

from __future__ import annotations

from sqlalchemy import Connection, Engine, text

from fptrack.storage.models import code_index_cascade_ddl, match_rollup_ddl, registry_version_ddl


def _triggers(connection: Connection) -> dict[str, str]:
    """Every trigger (and, on PostgreSQL, every function in the public schema) by name, with its
    definition as the database keeps it."""
    if connection.dialect.name == "sqlite":
        rows = connection.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
        return {str(name): str(sql) for name, sql in rows}
    triggers = connection.execute(
        text("SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal")
    ).all()
    functions = connection.execute(
        text(
            "SELECT proname, prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'public'"
        )
    ).all()
    return {str(name): str(body) for name, body in [*triggers, *functions]}


def test_migrated_triggers_are_the_products_triggers(engine: Engine) -> None:
    with engine.begin() as connection:
        migrated = _triggers(connection)
        dialect = connection.dialect.name
        for statement in [
            *code_index_cascade_ddl(dialect),
            *registry_version_ddl(dialect),
            *match_rollup_ddl(dialect),
        ]:
            connection.exec_driver_sql(statement)
        products = _triggers(connection)
    expected = {
        "tr_fingerprints_delete_code_rows",
        "tr_fingerprints_registry_insert",
        "tr_matches_rollup_insert",
    }
    assert expected <= set(migrated)
    assert migrated == products
