"""Revision 0034 (the meaning path) on both backends: ``matches.kind`` and ``matches.alignment`` come as NULL
on every match written before (an exact copy), a meaning match and a pending check can be stored after it, a
second check of one page is refused; the downgrade drops the columns and tables alone and keeps every row;
the schema is the model's."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from tests.integration.storage.test_migrations import NOW, _skeleton_data, empty_settings

__all__ = ["empty_settings"]

CHECK = (
    "INSERT INTO meaning_checks (id, page_id, content_sha256, state, reason, candidates, gated_at) "
    f"VALUES (:id, 101, 'sha-p', 'pending', 'near_miss', :candidates, '{NOW}')"
)
VECTORS = (
    "INSERT INTO chapter_vectors (chapter_id, model, text_sha256, spans, vectors, created_at) "
    f"VALUES (10, 'e5-small-q4', 'sha-c', '[[0, 10]]', :vectors, '{NOW}')"
)
TABLES = ("meaning_checks", "chapter_vectors")


def _counts(connection: object) -> dict[str, int]:
    return {
        table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()  # type: ignore[attr-defined]
        for table in ("works", "chapters", "pages", "matches")
    }


@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_meaning_columns_and_tables_come_and_go_keeping_rows(empty_settings: Settings) -> None:
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from fptrack.storage.models import Base

    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0001") == "0001"
        _skeleton_data(engine)  # work 1, chapter 10, pages 100-102, match 7 on page 100
        assert migrate(empty_settings, engine, revision="0033") == "0033"
        with engine.begin() as connection:
            before = _counts(connection)
            old_match = connection.execute(text("SELECT id, score, spans FROM matches")).one()
        assert not any(inspect(engine).has_table(table) for table in TABLES)

        assert migrate(empty_settings, engine, revision="0034") == "0034"
        alignment = {"coverage": 0.5, "pairs": [[0, 4, 0, 5, 0.91]], "page_sentences": 1}
        with engine.begin() as connection:
            assert _counts(connection) == before
            row = connection.execute(text("SELECT id, score, spans, kind, alignment FROM matches")).one()
            assert tuple(row[:3]) == tuple(old_match) and row.kind is None and row.alignment is None
            connection.execute(
                text(
                    "INSERT INTO matches (id, page_id, work_id, chapter_id, score, methods, spans, status, "
                    "first_seen, last_seen, kind, alignment) VALUES (8, 101, 1, 10, 0.5, '[\"meaning\"]', "
                    f"'[[0, 4, 0, 5]]', 'flagged', '{NOW}', '{NOW}', 'translation:en', :alignment)"
                ),
                {"alignment": json.dumps(alignment)},
            )
            connection.execute(text(CHECK), {"id": 1, "candidates": "[[10, 0.4]]"})
            connection.execute(text(VECTORS), {"vectors": b"\x00\x3c" * 384})
            stored = connection.execute(text("SELECT kind, alignment FROM matches WHERE id = 8")).one()
            assert stored.kind == "translation:en"
            raw = stored.alignment
            assert (json.loads(raw) if isinstance(raw, str) else raw) == alignment
        with pytest.raises(IntegrityError), engine.begin() as connection:  # one check a page
            connection.execute(text(CHECK), {"id": 2, "candidates": "[]"})
        with engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in differences if any(t in repr(d) for t in (*TABLES, "'kind'", "'alignment'"))] == []

        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0033")
        assert not any(inspect(engine).has_table(table) for table in TABLES)
        assert {"kind", "alignment"}.isdisjoint(c["name"] for c in inspect(engine).get_columns("matches"))
        with engine.begin() as connection:
            assert _counts(connection) == {**before, "matches": before["matches"] + 1}
            assert connection.execute(text("SELECT score FROM matches WHERE id = 8")).scalar_one() == 0.5
        migrate(empty_settings, engine)
        assert all(inspect(engine).has_table(table) for table in TABLES)
    finally:
        engine.dispose()
