"""A stranger cannot lock an owner out: guesses at a username from many addresses refuse logins for it from
browsers it never logged in from, but not from a browser where it logged in before (a signed device cookie,
``admin.views.auth``); forged, foreign or another username's device cookies count for nothing. On SQLite and
PostgreSQL."""

from __future__ import annotations

import time

import pytest
from flask import Flask
from flask.testing import FlaskClient

from fptrack.admin.views.auth import DEVICE_COOKIE, DEVICE_LIFETIME, _device_mark
from fptrack.core.settings import Settings
from fptrack.services.accounts.users import MAX_ADDRESSES_PER_USERNAME, MAX_FAILURES_PER_PAIR
from tests.support.accounts import PASSWORD, add_account, csrf_token_in

HOME = "192.0.2.10"


@pytest.fixture
def accounts(settings: Settings) -> None:
    add_account(settings, "rita", "reviewer")
    add_account(settings, "vera", "viewer")


def _attempt(client: FlaskClient, username: str, password: str, address: str) -> int:
    token = csrf_token_in(client.get("/login").get_data(as_text=True))
    response = client.post(
        "/login",
        data={"username": username, "password": password, "csrf_token": token},
        environ_base={"REMOTE_ADDR": address},
    )
    return response.status_code


def _owner_logged_in_before(app: Flask, username: str = "rita") -> FlaskClient:
    owner = app.test_client()
    assert _attempt(owner, username, PASSWORD, HOME) == 303
    cookie = owner.get_cookie(DEVICE_COOKIE, path="/login")
    assert cookie is not None and cookie.http_only and cookie.path == "/login"
    owner.post("/logout", data={"csrf_token": csrf_token_in(owner.get("/").get_data(as_text=True))})
    return owner


def _stranger_guesses(app: Flask, username: str = "rita") -> None:
    stranger = app.test_client()
    for number in range(MAX_ADDRESSES_PER_USERNAME):
        assert _attempt(stranger, username, f"guess {number}", f"198.51.100.{number}") == 401


def test_guesses_from_elsewhere_do_not_lock_the_owner_out_of_a_browser_it_used(
    app: Flask, accounts: None
) -> None:
    owner = _owner_logged_in_before(app)
    _stranger_guesses(app)
    assert _attempt(owner, "rita", PASSWORD, HOME) == 303
    # travelling with the same browser: a new address is fine too
    owner.post("/logout", data={"csrf_token": csrf_token_in(owner.get("/").get_data(as_text=True))})
    assert _attempt(owner, "rita", PASSWORD, "203.0.113.77") == 303
    # a browser that never logged in as rita is still refused while the guessing lasts
    assert _attempt(app.test_client(), "rita", PASSWORD, "203.0.113.78") == 429


def test_a_known_device_is_still_limited_at_its_own_address(app: Flask, accounts: None) -> None:
    owner = _owner_logged_in_before(app)
    for number in range(MAX_FAILURES_PER_PAIR):
        assert _attempt(owner, "rita", f"typo {number}", HOME) == 401
    assert _attempt(owner, "rita", PASSWORD, HOME) == 429


def test_a_forged_or_anothers_device_cookie_counts_for_nothing(app: Flask, accounts: None) -> None:
    vera_browser = _owner_logged_in_before(app, "vera")
    vera_cookie = vera_browser.get_cookie(DEVICE_COOKIE, path="/login")
    assert vera_cookie is not None
    _stranger_guesses(app, "rita")
    # vera's device cookie does not make the browser rita's
    assert _attempt(vera_browser, "rita", PASSWORD, HOME) == 429
    for value in ("rita", vera_cookie.value.replace("vera", "rita"), vera_cookie.value[:-3] + "abc"):
        forged = app.test_client()
        forged.set_cookie(DEVICE_COOKIE, value, path="/login")
        assert _attempt(forged, "rita", PASSWORD, HOME) == 429, value


def test_an_expired_device_cookie_counts_for_nothing(app: Flask, accounts: None) -> None:
    _stranger_guesses(app, "rita")
    now = int(time.time())
    with app.test_request_context():
        expired = _device_mark("rita", now - int(DEVICE_LIFETIME.total_seconds()) - 60)
        fresh = _device_mark("rita", now)
    for value, status in ((expired, 429), (fresh, 303)):
        browser = app.test_client()
        browser.set_cookie(DEVICE_COOKIE, value, path="/login")
        assert _attempt(browser, "rita", PASSWORD, HOME) == status
