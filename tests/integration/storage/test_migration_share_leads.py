"""Revision 0029 (share leads) on both backends: new tables, so every row written before comes through as it
was; a lead is one per (platform, share id) and a sighting one per (lead, page) after it; the downgrade drops
the tables alone and keeps the rows; the tables are the models'."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from tests.integration.storage.test_migrations import NOW, _skeleton_data, empty_settings

__all__ = ["empty_settings"]

LEAD = (
    "INSERT INTO share_leads (id, platform, share_id, url, code, work_id, state, first_seen, last_seen, "
    "reviewed_by) VALUES (:id, 'baidu', '1abc', 'https://pan.baidu.com/s/1abc', '', 1, 'new', "
    f"'{NOW}', '{NOW}', '')"
)
SIGHTING = (
    "INSERT INTO share_lead_sightings (id, lead_id, page_id, context, first_seen, last_seen) "
    f"VALUES (:id, 1, 100, '', '{NOW}', '{NOW}')"
)
TABLES = ("share_leads", "share_lead_sightings")


def _counts(connection: object) -> dict[str, int]:
    return {
        table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()  # type: ignore[attr-defined]
        for table in ("works", "pages", "matches")
    }


@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_share_leads_come_and_go_without_touching_a_row(empty_settings: Settings) -> None:
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from fptrack.storage.models import Base

    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0001") == "0001"
        _skeleton_data(engine)  # work 1, pages 100-102, match 7 on page 100
        assert migrate(empty_settings, engine, revision="0028") == "0028"
        with engine.begin() as connection:
            before = _counts(connection)
        assert not inspect(engine).has_table("share_leads")

        assert migrate(empty_settings, engine, revision="0029") == "0029"
        with engine.begin() as connection:
            assert _counts(connection) == before
            connection.execute(text(LEAD), {"id": 1})
            connection.execute(text(SIGHTING), {"id": 1})
        with pytest.raises(IntegrityError), engine.begin() as connection:  # one lead per share
            connection.execute(text(LEAD), {"id": 2})
        with pytest.raises(IntegrityError), engine.begin() as connection:  # one sighting per page
            connection.execute(text(SIGHTING), {"id": 2})
        with engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in differences if any(table in repr(d) for table in TABLES)] == []

        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0028")
        assert not inspect(engine).has_table("share_leads")
        assert not inspect(engine).has_table("share_lead_sightings")
        with engine.begin() as connection:
            assert _counts(connection) == before
    finally:
        engine.dispose()
