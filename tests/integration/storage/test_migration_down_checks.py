"""Revision 0033 (the partial index over the checks that found a copy down) on both backends: the index is
the model's, with its predicate, and the downgrade removes it and keeps the checks."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from tests.integration.storage.test_migrations import empty_settings

__all__ = ["empty_settings"]

INDEX = "ix_takedown_checks_down_match_id"


@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_down_checks_index_up_and_down(empty_settings: Settings) -> None:
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from fptrack.storage.models import Base

    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0033") == "0033"
        indexes = {index["name"]: index for index in inspect(engine).get_indexes("takedown_checks")}
        assert indexes[INDEX]["column_names"] == ["match_id"]
        with engine.begin() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in differences if INDEX in repr(d)] == []
        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0032")
        assert INDEX not in {index["name"] for index in inspect(engine).get_indexes("takedown_checks")}
        assert "ix_takedown_checks_match_id_checked_at" in {
            index["name"] for index in inspect(engine).get_indexes("takedown_checks")
        }
    finally:
        engine.dispose()
