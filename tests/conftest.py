"""Shared fixtures: settings and databases for both backends, and the real services the tests need.

Services (PostgreSQL, Redis, Chromium) are used for real. Where one is missing, its tests are skipped with the
reason; under ``CI=true`` a missing service fails the run instead (see ``_require``).

- ``FPTRACK_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``): a server where
  the tests may create and drop their own databases (``fptrack_test_<pid>...``).
- ``FPTRACK_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/15``).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for, migrate
from testbed.services import reachable
from tests.support.env import TEST_SITE_RATE

POSTGRES_URL = os.environ.get("FPTRACK_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("FPTRACK_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Crawls in tests go at TEST_SITE_RATE per site, not the polite default of one request a second (their sites
# are loopback servers of their own): in this process (Settings.from_env), in the children that inherit it,
# and in the settings fixtures below. Tests of the pace set their own rate.
os.environ.setdefault("FPTRACK_SITE_RATE", TEST_SITE_RATE)
# The seeded notices name fictitious hosts (pirate.example): fetching them again before a notice is sent would
# leave loopback. The tests of that fetch turn it on and serve the pages from 127.0.0.1.
os.environ.setdefault("FPTRACK_NOTICE_REFETCH", "false")


def _require(available: bool, what: str) -> None:
    if available:
        return
    if IN_CI:
        pytest.fail(f"{what} is required under CI=true but is not available", pytrace=False)
    pytest.skip(f"{what} is not available on this machine")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    checks = {
        "postgres": (lambda: reachable(POSTGRES_URL, 5432), f"PostgreSQL at {POSTGRES_URL}"),
        "redis": (lambda: reachable(REDIS_URL, 6379), f"Redis at {REDIS_URL}"),
        "browser": (lambda: CHROMIUM is not None, "Chromium (Debian package chromium)"),
    }
    cache: dict[str, bool] = {}
    for item in items:
        for marker, (probe, what) in checks.items():
            if marker in item.keywords:
                if marker not in cache:
                    cache[marker] = probe()
                if not cache[marker] and not IN_CI:
                    item.add_marker(pytest.mark.skip(reason=f"{what} is not available on this machine"))


# ---------------------------------------------------------------------------------------------- PostgreSQL


def _pg_url(database: str) -> str:
    parts = urlsplit(POSTGRES_URL)
    return parts._replace(path="/" + database).geturl()


def _admin_engine() -> Engine:
    return create_engine(Settings(database_url=POSTGRES_URL).database_url, isolation_level="AUTOCOMMIT")


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A PostgreSQL database migrated once per session by Alembic; returns its name."""
    _require(reachable(POSTGRES_URL, 5432), f"PostgreSQL at {POSTGRES_URL}")
    name = f"fptrack_test_{os.getpid()}_tpl"
    admin = _admin_engine()
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    settings = Settings(database_url=_pg_url(name))
    engine = create_engine_for(settings)
    migrate(settings, engine)
    engine.dispose()
    yield name
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def postgres_settings(postgres_template: str, tmp_path: Path) -> Iterator[Settings]:
    """Settings for a fresh, migrated PostgreSQL database of this test alone (copied from the template);
    for tests whose code commits, or that run fptrack in a subprocess."""
    name = f"fptrack_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = _admin_engine()
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"'))
    yield Settings(
        data_dir=tmp_path / "data",
        database_url=_pg_url(name),
        site_rate=float(TEST_SITE_RATE),
        notice_refetch=False,
        evidence_screenshot=False,  # a browser for every bundle; the screenshot's own tests turn it on
    )
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


# ------------------------------------------------------------------------------------------------- SQLite


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "fptrack.db"
    settings = Settings(database_url=f"sqlite:///{path}")
    engine = create_engine_for(settings)
    migrate(settings, engine)
    with engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return path


@pytest.fixture
def sqlite_settings(sqlite_template: Path, tmp_path: Path) -> Settings:
    """Settings for a fresh, migrated SQLite file of this test alone."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    shutil.copyfile(sqlite_template, data_dir / "fptrack.db")
    return Settings(
        data_dir=data_dir,
        database_url=f"sqlite:///{data_dir / 'fptrack.db'}",
        site_rate=float(TEST_SITE_RATE),
        notice_refetch=False,
        evidence_screenshot=False,  # a browser for every bundle; the screenshot's own tests turn it on
    )


# ---------------------------------------------------------------------------------------- both backends


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def settings(request: pytest.FixtureRequest) -> Settings:
    """A fresh migrated database on each backend: the same test runs on SQLite and on PostgreSQL."""
    return request.getfixturevalue(f"{request.param}_settings")


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    engine = create_engine_for(settings)
    yield engine
    engine.dispose()


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    with Session(engine, expire_on_commit=False) as session:
        yield session
