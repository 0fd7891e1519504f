"""Revision 0032 (releases) on both backends: the two tables are the model's, a release of an existing work
can be written, and the downgrade removes them and keeps the works."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from tests.integration.storage.test_migrations import NOW, _skeleton_data, empty_settings

__all__ = ["empty_settings"]


@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_release_tables_up_and_down(empty_settings: Settings) -> None:
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from fptrack.storage.models import Base

    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0001") == "0001"
        _skeleton_data(engine)  # work 1
        assert migrate(empty_settings, engine, revision="0032") == "0032"
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO releases (work_id, released_at, source, ref, recorded_at) "
                    f"VALUES (1, '{NOW}', 'feed', 'entry-1', '{NOW}')"
                )
            )
            connection.execute(text("INSERT INTO release_feeds (work_id, url) VALUES (1, 'http://x/feed')"))
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in differences if "release" in repr(d)] == []
        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0031")
        assert not inspect(engine).has_table("releases")
        assert not inspect(engine).has_table("release_feeds")
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM works")).scalar_one() == 1
    finally:
        engine.dispose()
