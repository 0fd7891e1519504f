"""Revision 0031 (blobs) on both backends: every kept exchange comes through byte for byte, naming no blob
(``blob_sha256`` NULL: formats 1 and 2 hold their payload inline, and still read); the table and column are
the model's; the downgrade keeps every exchange."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from tests.integration.storage.test_migrations import NOW, _skeleton_data, empty_settings

__all__ = ["empty_settings"]

EXCHANGE = (
    "INSERT INTO page_exchanges (id, page_id, snapshot_sha256, fetched_at, rendered, data) "
    f"VALUES (9, 100, 'snap-1', '{NOW}', false, :data)"
)
ROWS = "SELECT id, page_id, snapshot_sha256, data FROM page_exchanges ORDER BY id"


@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_exchanges_come_through_naming_no_blob(empty_settings: Settings) -> None:
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from fptrack.storage.models import Base

    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0001") == "0001"
        _skeleton_data(engine)  # work 1, pages 100-102, match 7 on page 100
        assert migrate(empty_settings, engine, revision="0030") == "0030"
        with engine.begin() as connection:
            connection.execute(text(EXCHANGE), {"data": b"\x02x\x00y" * 1000})
            before = [(r[0], r[1], r[2], bytes(r[3])) for r in connection.execute(text(ROWS))]
        assert migrate(empty_settings, engine, revision="0031") == "0031"
        with engine.connect() as connection:
            assert [(r[0], r[1], r[2], bytes(r[3])) for r in connection.execute(text(ROWS))] == before
            assert connection.execute(text("SELECT blob_sha256 FROM page_exchanges")).scalar_one() is None
            assert connection.execute(text("SELECT count(*) FROM blobs")).scalar_one() == 0
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in differences if "blob" in repr(d)] == []
        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0030")
        assert not inspect(engine).has_table("blobs")
        with engine.connect() as connection:
            assert [(r[0], r[1], r[2], bytes(r[3])) for r in connection.execute(text(ROWS))] == before
    finally:
        engine.dispose()
