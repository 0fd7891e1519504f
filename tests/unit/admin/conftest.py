"""Fixtures of the admin's tests: the app built on the test's database (``settings``: SQLite and PostgreSQL)
and the rows of ``tests/support/admin_seed.py``. A module that needs another app or other rows defines its own
fixture of the same name, which pytest prefers to these."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from sqlalchemy.orm import Session

from fptrack.admin.web import create_app
from fptrack.core.settings import Settings
from tests.support.admin_seed import Seeded, seed


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    app = create_app(settings)
    yield app
    app.extensions["fptrack"].engine.dispose()


@pytest.fixture
def seeded(session: Session) -> Seeded:
    return seed(session)
