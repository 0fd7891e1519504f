"""Storage fixtures: a PostgreSQL session rolled back after each test, on a database copied once per session
from the Alembic-migrated template (the template itself must stay free of connections: it is copied by other
tests)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from tests.conftest import _admin_engine, _pg_url


@pytest.fixture(scope="session")
def rollback_engine(postgres_template: str) -> Iterator[Engine]:
    name = f"fptrack_test_{os.getpid()}_rollback"
    admin = _admin_engine()
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"'))
    engine = create_engine_for(Settings(database_url=_pg_url(name)))
    yield engine
    engine.dispose()
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def pg_session(rollback_engine: Engine) -> Iterator[Session]:
    """A session on migrated PostgreSQL whose work is rolled back at the end of the test (commits included:
    they become savepoint releases)."""
    connection = rollback_engine.connect()
    transaction = connection.begin()
    session = Session(bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False)
    yield session
    session.close()
    transaction.rollback()
    connection.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Session]:
    """A session on each backend: SQLite on a fresh migrated file of this test, PostgreSQL rolled back
    (``pg_session``). Tests that want isolation between hypothesis examples call ``session.rollback()``."""
    if request.param == "postgres":
        yield request.getfixturevalue("pg_session")
        return
    settings = request.getfixturevalue("sqlite_settings")
    engine = create_engine_for(settings)
    session = Session(engine, expire_on_commit=False)
    yield session
    session.close()
    engine.dispose()
