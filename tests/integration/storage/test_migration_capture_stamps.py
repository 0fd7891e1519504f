"""Revision 0028 (capture time-stamps) on both backends: a new table, so every row written before comes
through as it was (a page, its match and its kept exchange among them); a stamp can be stored for the kept
exchange after it, once per capture; the downgrade drops the table alone and keeps the rows; the table is
the model's."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from tests.integration.storage.test_migrations import NOW, _skeleton_data, empty_settings

__all__ = ["empty_settings"]

EXCHANGE = (
    "INSERT INTO page_exchanges (id, page_id, snapshot_sha256, fetched_at, rendered, data) "
    f"VALUES (9, 100, 'snap-1', '{NOW}', false, :data)"
)
STAMP = (
    "INSERT INTO capture_stamps (id, page_id, snapshot_sha256, capture_sha256, authority, token, stamped_at, "
    f"created_at) VALUES (:id, 100, 'snap-1', :digest, 'http://127.0.0.1:1/tsa', :token, '{NOW}', '{NOW}')"
)


def _counts(connection: object) -> dict[str, int]:
    return {
        table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()  # type: ignore[attr-defined]
        for table in ("works", "pages", "matches", "page_exchanges")
    }


@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_capture_stamps_come_and_go_without_touching_a_row(empty_settings: Settings) -> None:
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from fptrack.storage.models import Base

    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0001") == "0001"
        _skeleton_data(engine)  # work 1, pages 100-102, match 7 on page 100
        assert migrate(empty_settings, engine, revision="0027") == "0027"
        with engine.begin() as connection:
            connection.execute(text(EXCHANGE), {"data": b"x\x00y"})
            before = _counts(connection)
        assert not inspect(engine).has_table("capture_stamps")

        assert migrate(empty_settings, engine, revision="0028") == "0028"
        with engine.begin() as connection:
            assert _counts(connection) == before
            assert connection.execute(text("SELECT data FROM page_exchanges")).scalar_one() == b"x\x00y"
            connection.execute(text(STAMP), {"id": 1, "digest": "a" * 64, "token": b"\x30\x03"})
        with pytest.raises(IntegrityError), engine.begin() as connection:  # one stamp per capture
            connection.execute(text(STAMP), {"id": 2, "digest": "b" * 64, "token": b"\x30\x03"})
        with engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in differences if "capture_stamps" in repr(d)] == []

        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0027")
        assert not inspect(engine).has_table("capture_stamps")
        with engine.begin() as connection:
            assert _counts(connection) == before
        migrate(empty_settings, engine)
        assert inspect(engine).has_table("capture_stamps")
    finally:
        engine.dispose()
