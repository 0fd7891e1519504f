"""Revision 0036 (the entity index's term counts and stamp) on both backends, and ``fptrack init`` indexing
the works registered before revision 0035: a database at 0034 with a work, brought to head by ``fptrack
init``, gets its entity rows, its term counts and its stamp, and a second ``init`` does nothing; 0036 fills
``entity_terms`` and the stamp from the rows already there, its triggers take deleted rows off, and its
downgrade drops its two tables alone, keeping every row; the schema is the model's."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import inspect, text

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from tests.integration.storage.test_migrations import _skeleton_data, empty_settings

__all__ = ["empty_settings"]

CHAPTER = (
    "第一回 桃园结义 刘备引兵来到城下，关羽出马迎敌。关羽引兵来到城下，张飞出马迎敌。张飞引兵来到城下，"
    "刘备出马迎敌。董卓引兵来到洛阳，曹操出马迎敌。曹操引兵来到洛阳，董卓出马迎敌。"
)
TABLES = ("entity_terms", "entity_stamp")


def _one(connection: object, sql: str) -> object:
    return connection.execute(text(sql)).scalar_one()  # type: ignore[attr-defined]


def _terms(connection: object) -> dict[str, int]:
    rows = connection.execute(text("SELECT term, chapters FROM entity_terms"))  # type: ignore[attr-defined]
    return {str(t): int(n) for t, n in rows}


@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_init_indexes_a_work_registered_before_the_entity_index(empty_settings: Settings) -> None:
    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0001") == "0001"
        _skeleton_data(engine)  # work 1, chapter 10
        with engine.begin() as connection:
            connection.execute(text("UPDATE works SET text = :t"), {"t": CHAPTER})
            connection.execute(
                text('UPDATE chapters SET text = :t, "end" = :n'), {"t": CHAPTER, "n": len(CHAPTER)}
            )
        assert migrate(empty_settings, engine, revision="0034") == "0034"
        assert not inspect(engine).has_table("entity_postings")

        env = {
            "FPTRACK_DATABASE_URL": empty_settings.database_url,
            "FPTRACK_DATA_DIR": str(empty_settings.data_dir),
        }
        result = CliRunner().invoke(main, ["init"], env=env)
        assert result.exit_code == 0, result.output
        assert "entity index: 1 works registered before it indexed" in result.output
        assert "entity index: work 1 (1/1)" in result.output  # the progress line (stderr, mixed in)
        with engine.begin() as connection:
            postings = {
                str(t): int(n)
                for t, n in connection.execute(
                    text("SELECT term, count(*) FROM entity_postings WHERE chapter_id = 10 GROUP BY term")
                )
            }
            assert {"刘备", "关羽", "董卓", "洛阳", "liubei", "kuanyu", "loyang"} <= set(postings)
            assert _terms(connection) == postings
            assert _one(connection, "SELECT chapters FROM entity_stamp WHERE id = 1") == 1
        again = CliRunner().invoke(main, ["init"], env=env)
        assert again.exit_code == 0 and "entity index" not in again.output

        from alembic import command
        from alembic.autogenerate import compare_metadata
        from alembic.migration import MigrationContext

        from fptrack.storage.models import Base

        with engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in differences if any(t in repr(d) for t in TABLES)] == []

        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0035")
        assert not any(inspect(engine).has_table(table) for table in TABLES)
        with engine.begin() as connection:  # the rows stay, and a delete no longer needs the tables gone
            rows = _one(connection, "SELECT count(*) FROM entity_postings")
            assert rows == len(postings)
            connection.execute(text("DELETE FROM entity_postings WHERE term = '刘备'"))
        assert migrate(empty_settings, engine) != "0035"  # up again: filled from the rows there
        with engine.begin() as connection:
            assert _terms(connection) == {t: 1 for t in postings if t != "刘备"}
            assert _one(connection, "SELECT chapters FROM entity_stamp WHERE id = 1") == 1
            serial = _one(connection, "SELECT serial FROM entity_stamp WHERE id = 1")
            connection.execute(text("DELETE FROM chapters WHERE id = 10"))  # cascades, through the triggers
            assert _one(connection, "SELECT count(*) FROM entity_postings") == 0
            assert set(_terms(connection).values()) == {0}
            stamp = connection.execute(text("SELECT serial, chapters FROM entity_stamp WHERE id = 1")).one()
            assert tuple(stamp) == (int(serial) + 1, 0)  # type: ignore[call-overload]
    finally:
        engine.dispose()
