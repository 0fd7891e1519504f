"""Revision 0030 (download members) on both backends: notice items drafted before come through as they were,
naming no file of an archive (``file_members`` ''), the column is the model's, and the downgrade keeps every
item."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from tests.integration.storage.test_migration_rights import _old_rows
from tests.integration.storage.test_migrations import empty_settings

__all__ = ["empty_settings"]

ITEMS = (
    "SELECT id, notice_id, match_id, url, work_title, chapter_title, passages FROM notice_items ORDER BY id"
)


@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_notice_items_come_through_naming_no_file(empty_settings: Settings) -> None:
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from fptrack.storage.models import Base

    _old_rows(empty_settings)  # a notice (3) with an item (4) on match 7, at 0026
    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0029") == "0029"
        with engine.connect() as connection:
            before = [tuple(row) for row in connection.execute(text(ITEMS))]
        assert len(before) == 1
        assert migrate(empty_settings, engine, revision="0030") == "0030"
        with engine.connect() as connection:
            assert [tuple(row) for row in connection.execute(text(ITEMS))] == before
            assert connection.execute(text("SELECT file_members FROM notice_items")).scalar_one() == ""
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in differences if "file_members" in repr(d)] == []
        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0029")
        assert "file_members" not in {c["name"] for c in inspect(engine).get_columns("notice_items")}
        with engine.connect() as connection:
            assert [tuple(row) for row in connection.execute(text(ITEMS))] == before
    finally:
        engine.dispose()
