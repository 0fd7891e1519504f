"""Input that must not break the admin, on SQLite and PostgreSQL (which refuses a NUL character in any text
of a query): NUL characters in every route's query arguments and form fields, the anonymous login form's
included, are a 400; ids past a signed 64-bit integer in any route or form are a 404 or a 400, never a 500."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from fptrack.core.settings import Settings
from tests.support.accounts import PASSWORD, add_account, csrf_token_in, log_in
from tests.support.admin_seed import Seeded

TOO_BIG = str(2**63)
NUL = "a\x00b"


@pytest.fixture
def admin(app: Flask, settings: Settings) -> FlaskClient:
    add_account(settings, "ada", "admin")
    client = app.test_client()
    log_in(client, "ada")
    return client


def _token(client: FlaskClient) -> str:
    return csrf_token_in(client.get("/").get_data(as_text=True))


def _routes(app: Flask, number: str) -> list[tuple[str, str]]:
    """(method, url) of every route but the static files, each id replaced by ``number``."""
    found = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        url = re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", number, rule.rule)
        found.extend((method, url) for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}))
    return found


def test_a_nul_character_in_the_login_form_is_a_400(app: Flask, settings: Settings) -> None:
    add_account(settings, "ada", "admin")
    client = app.test_client()
    token = csrf_token_in(client.get("/login").get_data(as_text=True))
    for username, password in ((NUL, PASSWORD), ("ada", NUL)):
        response = client.post(
            "/login", data={"username": username, "password": password, "csrf_token": token}
        )
        assert response.status_code == 400, response.get_data(as_text=True)[:300]
        assert "NUL" in response.get_data(as_text=True)


def test_a_nul_character_in_any_query_argument_or_form_field_is_a_400(
    app: Flask, seeded: Seeded, admin: FlaskClient
) -> None:
    token = _token(admin)
    for method, url in _routes(app, "1"):
        if method == "GET":
            for query in ({"q": NUL}, {NUL: "1"}, {"status": NUL, "host": NUL, "state": NUL}):
                response = admin.get(url, query_string=query)
                assert response.status_code == 400, (url, query, response.status_code)
        else:
            form = {"csrf_token": token, "name": NUL, "username": NUL, "email": NUL, "text": NUL}
            response = admin.open(url, method=method, data=form)
            assert response.status_code == 400, (method, url, response.status_code)


def test_a_nul_character_in_a_json_body_is_a_400(app: Flask, seeded: Seeded, admin: FlaskClient) -> None:
    token = _token(admin)
    response = admin.post(
        "/api/matches/bulk",
        json={"ids": [1], "status": "confirmed", "reason": {"deep": [NUL]}},
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 400 and "NUL" in response.get_json()["error"]


def test_ids_past_64_bits_in_any_route_are_a_404(app: Flask, seeded: Seeded, admin: FlaskClient) -> None:
    token = _token(admin)
    for method, url in _routes(app, TOO_BIG):
        if TOO_BIG not in url:
            continue
        response = admin.open(url, method=method, data={"csrf_token": token})
        assert response.status_code == 404, (method, url, response.status_code)


@pytest.mark.parametrize(
    "form",
    [{"match": TOO_BIG}, {"match": "1", "sender": TOO_BIG}],
    ids=["match", "sender"],
)
def test_ids_past_64_bits_in_the_notice_form_are_refused(
    seeded: Seeded, admin: FlaskClient, form: dict[str, str]
) -> None:
    response = admin.post("/notices", data={**form, "csrf_token": _token(admin)})
    assert response.status_code in (400, 404), response.get_data(as_text=True)[:300]
