"""An export that fails midway fails loudly: the admin's CSV and JSON exports are written whole before a byte
is sent, so a row that cannot be read is an error status rather than a 200 with the list cut short (a reader
would take a truncated export for the whole list). On SQLite, where a JSON column can hold text that is not
JSON: PostgreSQL refuses to store it."""

from __future__ import annotations

import csv
import io

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import text
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from tests.support.accounts import add_account, log_in
from tests.support.admin_seed import Seeded


@pytest.fixture
def settings(sqlite_settings: Settings) -> Settings:
    return sqlite_settings


@pytest.fixture
def reviewer(app: Flask, settings: Settings) -> FlaskClient:
    add_account(settings, "rita", "reviewer")
    client = app.test_client()
    log_in(client, "rita")
    return client


@pytest.mark.parametrize("path", ["/matches/export.csv", "/matches/export.json"])
def test_an_export_that_fails_midway_is_an_error_not_a_short_200(
    reviewer: FlaskClient, seeded: Seeded, session: Session, path: str
) -> None:
    oldest = seeded.match_ids_newest_first[-1]
    session.execute(text("UPDATE matches SET spans = '[not json' WHERE id = :id"), {"id": oldest})
    session.commit()
    response = reviewer.get(path)
    assert response.status_code == 500
    assert "attachment" not in response.headers.get("Content-Disposition", "")


def test_a_whole_export_says_its_length(reviewer: FlaskClient, seeded: Seeded) -> None:
    response = reviewer.get("/matches/export.csv")
    body = response.get_data()
    assert response.status_code == 200 and int(response.headers["Content-Length"]) == len(body)
    assert body.startswith(b"\xef\xbb\xbfpage_url,")  # the byte order mark spreadsheets need, once
    rows = list(csv.DictReader(io.StringIO(body.decode("utf-8-sig"))))
    assert sorted(int(row["id"]) for row in rows) == sorted(seeded.match_ids_newest_first)
