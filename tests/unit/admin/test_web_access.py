"""Who may reach what, through Flask's test client on SQLite and PostgreSQL: every route of ``app.url_map``
refused without a session, state changes refused for viewers, CSRF on every POST, Host and Origin checks,
the login form and its rate limit, session cookies, identities from a trusted proxy only, huge numbers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session
from werkzeug.routing import Rule

from fptrack.admin.web import create_app
from fptrack.core.settings import Settings
from fptrack.services.accounts.users import (
    MAX_ADDRESSES_PER_USERNAME,
    MAX_FAILURES_PER_PAIR,
    change_password,
    remove_user,
)
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.models import Match, MatchNote, ReviewDecision, User
from tests.support.accounts import PASSWORD, add_account, csrf_token_in, log_in
from tests.support.admin_seed import Seeded

PUBLIC_ENDPOINTS = {"auth.login", "health.healthz", "static", "language"}  # language: the switch, a cookie
# GET routes that need a query argument (a notice names its site): without it, a 400 that says so
NEEDS_ARGUMENTS = {"reports.notice", "reports.notice_pdf"}
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
# pages that only admins may open (forms that change things): a 403 for everyone else
ADMIN_PAGES = {"sites.new", "sites.edit_form", "senders.senders_index"}
# takedown notices are made and read by reviewers and admins only (a wrongful notice is the sender's
# liability; the sender's contact details are nobody else's business): a 403 for viewers
REVIEWER_PAGES = {"reports.notice", "reports.notice_pdf"}
HUGE = "9" * 30


@pytest.fixture
def accounts(settings: Settings) -> dict[str, int]:
    return {
        name: add_account(settings, name, role)
        for name, role in (("ada", "admin"), ("rita", "reviewer"), ("vera", "viewer"))
    }


@contextmanager
def _database(settings: Settings) -> Iterator[Session]:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()


def _client_as(app: Flask, username: str) -> FlaskClient:
    client = app.test_client()
    log_in(client, username)
    return client


def _routes(app: Flask) -> list[tuple[Rule, str, str]]:
    """(rule, method, url) for every route and method, with ids filled in (1: may or may not exist)."""
    found = []
    for rule in app.url_map.iter_rules():
        url = re.sub(
            r"<(?:[a-z]+:)?([a-z_]+)>", lambda m: "admin-css" if m.group(1) == "filename" else "1", rule.rule
        )
        url = url.replace("admin-css", "admin.css")
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            found.append((rule, method, url))
    return found


def _token(client: FlaskClient) -> str:
    return csrf_token_in(client.get("/").get_data(as_text=True))


def _text(response) -> str:  # type: ignore[no-untyped-def]
    return response.get_data(as_text=True)


# ------------------------------------------------------------------------------------- every route


def test_the_route_map_is_what_these_tests_cover(app: Flask) -> None:
    endpoints = {rule.endpoint for rule in app.url_map.iter_rules()}
    assert PUBLIC_ENDPOINTS <= endpoints
    assert {"matches.set_status", "users.add", "users.remove", "auth.logout"} <= endpoints
    assert {"sites.add", "sites.edit", "sites.run_now", "sites.remove"} <= endpoints
    assert {"networks.index", "networks.decide"} <= endpoints
    assert len(_routes(app)) >= 15


def test_every_route_but_login_static_and_health_needs_a_session(
    app: Flask, seeded: Seeded, accounts: dict[str, int]
) -> None:
    client = app.test_client()
    checked = 0
    for rule, method, url in _routes(app):
        response = client.open(url, method=method)
        if rule.endpoint in PUBLIC_ENDPOINTS:
            assert response.status_code in (200, 400), (method, url, response.status_code)
            continue
        checked += 1
        if url.startswith("/api"):
            assert response.status_code == 401, (method, url)
            assert response.get_json() == {"error": "login required"}
        else:
            assert response.status_code == 303, (method, url, response.status_code)
            assert response.headers["Location"].startswith("/login"), (method, url)
    assert checked >= 12
    # nothing changed on the way
    assert client.get("/api/stats").status_code == 401


def test_unknown_paths_do_not_tell_an_anonymous_visitor_what_exists(
    app: Flask, accounts: dict[str, int]
) -> None:
    client = app.test_client()
    assert client.get("/no/such/page").headers["Location"].startswith("/login")
    assert client.get("/api/nothing").status_code == 401


def test_a_redirect_to_login_brings_the_user_back(app: Flask, accounts: dict[str, int]) -> None:
    client = app.test_client()
    response = client.get("/matches?status=flagged")
    assert response.headers["Location"] == "/login?next=/matches?status%3Dflagged"
    page = _text(client.get(response.headers["Location"]))
    token = csrf_token_in(page)
    assert 'value="/matches?status=flagged"' in page
    logged_in = client.post(
        "/login",
        data={
            "username": "rita",
            "password": PASSWORD,
            "csrf_token": token,
            "next": "/matches?status=flagged",
        },
    )
    assert logged_in.status_code == 303 and logged_in.headers["Location"] == "/matches?status=flagged"


@pytest.mark.parametrize(
    "target", ["//evil.example/", "https://evil.example/", "/\\evil.example", "javascript:x"]
)
def test_login_never_redirects_off_site(app: Flask, accounts: dict[str, int], target: str) -> None:
    client = app.test_client()
    token = csrf_token_in(_text(client.get("/login")))
    response = client.post(
        "/login", data={"username": "rita", "password": PASSWORD, "csrf_token": token, "next": target}
    )
    assert response.status_code == 303 and response.headers["Location"] == "/"


def test_viewers_read_everything_and_change_nothing(
    app: Flask, seeded: Seeded, accounts: dict[str, int], settings: Settings
) -> None:
    viewer = _client_as(app, "vera")
    token = _token(viewer)
    for rule, method, url in _routes(app):
        if rule.endpoint in PUBLIC_ENDPOINTS:
            continue
        if method == "GET":
            response = viewer.get(url)
            expected = (
                (403,) if rule.endpoint.startswith("users.") or rule.endpoint in ADMIN_PAGES else (200, 404)
            )
            if rule.endpoint in NEEDS_ARGUMENTS:
                expected = (400,)
            if rule.endpoint in REVIEWER_PAGES or rule.endpoint.startswith(("notices.", "senders.")):
                expected = (403,)
            assert response.status_code in expected, url
        elif rule.endpoint != "auth.logout":
            for match_id in (seeded.hostile_match_id, 1):
                real_url = url.replace("/1/", f"/{match_id}/")
                response = viewer.open(
                    real_url,
                    method=method,
                    data={"status": "confirmed", "csrf_token": token, "username": "x"},
                )
                assert response.status_code == 403, (method, real_url, response.status_code)
    page = _text(viewer.get(f"/matches/{seeded.hostile_match_id}"))
    assert 'class="review"' not in page and "Confirm piracy" not in page
    with _database(settings) as session:
        assert session.scalar(select(Match.status).where(Match.id == seeded.hostile_match_id)) == "flagged"
        assert session.scalars(select(ReviewDecision)).all() == []
        assert session.scalar(select(User.id).where(User.username == "x")) is None


def test_reviewers_review_but_do_not_manage_accounts(
    app: Flask, seeded: Seeded, accounts: dict[str, int]
) -> None:
    reviewer = _client_as(app, "rita")
    token = _token(reviewer)
    assert reviewer.get("/users").status_code == 403
    refused = reviewer.post(
        "/users", data={"username": "x", "role": "admin", "password": PASSWORD, "csrf_token": token}
    )
    assert refused.status_code == 403
    assert reviewer.post(f"/users/{accounts['vera']}/remove", data={"csrf_token": token}).status_code == 403
    # sites are managed by admins: reviewers read them
    assert reviewer.get("/sites").status_code == 200
    assert reviewer.get("/sites/new").status_code == 403
    site = {"name": "x", "start_urls": "http://x.example/", "csrf_token": token}
    assert reviewer.post("/sites", data=site).status_code == 403
    assert reviewer.post("/sites/1/run", data={"csrf_token": token}).status_code == 403
    response = reviewer.post(
        f"/matches/{seeded.hostile_match_id}/status", data={"status": "confirmed", "csrf_token": token}
    )
    assert response.status_code == 303


def test_every_post_needs_this_sessions_csrf_token(
    app: Flask, seeded: Seeded, accounts: dict[str, int], settings: Settings
) -> None:
    admin = _client_as(app, "ada")
    foreign = csrf_token_in(_text(_client_as(app, "rita").get("/")))
    posts = [(rule, url) for rule, method, url in _routes(app) if method in UNSAFE]
    assert {rule.endpoint for rule, _ in posts} >= {
        "auth.login",
        "auth.logout",
        "matches.set_status",
        "users.add",
    }
    for rule, url in posts:
        real_url = url.replace("/matches/1/", f"/matches/{seeded.hostile_match_id}/").replace(
            "/users/1/", f"/users/{accounts['vera']}/"
        )
        form = {"status": "confirmed", "username": "mallory", "password": PASSWORD, "role": "admin"}
        for token in (None, "forged", foreign):
            data = form if token is None else {**form, "csrf_token": token}
            response = admin.post(real_url, data=data)
            assert response.status_code == 400, (real_url, token, response.status_code)
            assert "security token" in _text(response)
    # nothing changed, and the admin is still logged in
    assert admin.get("/").status_code == 200
    with _database(settings) as session:
        assert session.scalar(select(Match.status).where(Match.id == seeded.hostile_match_id)) == "flagged"
        assert session.scalar(select(User.id).where(User.username == "mallory")) is None
        assert session.scalar(select(User.id).where(User.username == "vera")) is not None


def test_the_api_says_401_and_403_in_json(app: Flask, accounts: dict[str, int]) -> None:
    anonymous = app.test_client().get("/api/matches")
    assert anonymous.status_code == 401 and anonymous.is_json
    viewer = _client_as(app, "vera")
    assert viewer.get("/api/matches").status_code == 200


# ------------------------------------------------------------------------------------ host and origin


def test_host_header_must_name_a_configured_host(app: Flask, accounts: dict[str, int]) -> None:
    client = _client_as(app, "rita")
    assert client.get("/", headers={"Host": "localhost"}).status_code == 200
    for host in ("127.0.0.1:5000", "[::1]:8080", "LOCALHOST"):
        # accepted (the cookie was set for "localhost", so the numeric names ask for a login)
        assert client.get("/", headers={"Host": host}).status_code in (200, 303), host
    for host in ("evil.example", "localhost.evil.example", "127.0.0.2", "[::2]", "a b"):
        response = client.get("/", headers={"Host": host})
        assert response.status_code == 400, host
        assert "FPTRACK_ADMIN_HOSTS" in _text(response)
    # a load balancer's probe may use any name: /healthz says only ok / unavailable
    assert app.test_client().get("/healthz", headers={"Host": "10.1.2.3"}).get_json()["status"] == "ok"


def test_configured_hosts(settings: Settings) -> None:
    app = create_app(settings.with_overrides(admin_hosts=("admin.example.org",), admin_secure_cookies=False))
    try:
        client = app.test_client()
        assert client.get("/login", base_url="http://admin.example.org").status_code == 200
        assert client.get("/login", base_url="http://localhost").status_code == 400
    finally:
        app.extensions["fptrack"].engine.dispose()


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://localhost:9999"},  # another port: another origin
        {"Referer": "http://evil.example/page"},
        {"Origin": "http://evil.example", "Referer": "http://localhost/"},
    ],
)
def test_posts_from_other_origins_are_refused(
    app: Flask, seeded: Seeded, accounts: dict[str, int], headers: dict[str, str]
) -> None:
    client = _client_as(app, "rita")
    token = _token(client)
    url = f"/matches/{seeded.hostile_match_id}/status"
    response = client.post(url, data={"status": "confirmed", "csrf_token": token}, headers=headers)
    assert response.status_code == 403
    same = client.post(
        url,
        data={"status": "confirmed", "csrf_token": token},
        headers={"Origin": "http://localhost", "Referer": "http://localhost/matches/1"},
    )
    assert same.status_code == 303


def test_over_https_a_post_must_say_where_it_comes_from(settings: Settings) -> None:
    app = create_app(settings)
    add_account(settings, "rita", "reviewer")
    try:
        client = app.test_client()
        token = csrf_token_in(_text(client.get("/login", base_url="https://localhost")))
        form = {"username": "rita", "password": PASSWORD, "csrf_token": token}
        assert client.post("/login", data=form, base_url="https://localhost").status_code == 403
        response = client.post(
            "/login",
            data=form,
            base_url="https://localhost",
            headers={"Origin": "https://localhost", "Referer": "https://localhost/login"},
        )
        assert response.status_code == 303
    finally:
        app.extensions["fptrack"].engine.dispose()


# ------------------------------------------------------------------------------------------- login


def _attempt(client: FlaskClient, username: str, password: str, address: str = "192.0.2.1"):  # type: ignore[no-untyped-def]
    token = csrf_token_in(_text(client.get("/login")))
    return client.post(
        "/login",
        data={"username": username, "password": password, "csrf_token": token},
        environ_base={"REMOTE_ADDR": address},
    )


def test_wrong_password_and_unknown_user_look_the_same(app: Flask, accounts: dict[str, int]) -> None:
    client = app.test_client()
    wrong = _attempt(client, "rita", "wrong password!")
    unknown = _attempt(client, "nobody", "wrong password!")
    assert wrong.status_code == unknown.status_code == 401
    assert "Wrong username or password." in _text(wrong) and "Wrong username or password." in _text(unknown)
    assert 'value="wrong password!"' not in _text(wrong)  # the password is never sent back
    assert client.get("/").status_code == 303
    assert _attempt(client, "RITA", PASSWORD).status_code == 303  # usernames are case-insensitive
    assert client.get("/").status_code == 200


def test_login_attempts_are_limited_per_username(app: Flask, accounts: dict[str, int]) -> None:
    client = app.test_client()
    for number in range(MAX_ADDRESSES_PER_USERNAME):
        assert _attempt(client, "rita", f"guess number {number}", f"198.51.100.{number}").status_code == 401
    # from a fresh address, even the right password is refused until the window has passed
    refused = _attempt(client, "rita", PASSWORD, "203.0.113.9")
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0 and "Too many failed logins" in _text(refused)
    assert client.get("/").status_code == 303
    # other accounts are not affected
    assert _attempt(client, "vera", PASSWORD, "203.0.113.9").status_code == 303


def test_one_address_cannot_lock_every_account_out(app: Flask, accounts: dict[str, int]) -> None:
    """Everybody behind a proxy that was not declared shares one address: failures from it close the
    username that failed there, never the others."""
    client = app.test_client()
    for number in range(40):
        assert _attempt(client, f"someone{number}", "guess guess guess", "192.0.2.50").status_code == 401
    assert _attempt(client, "rita", PASSWORD, "192.0.2.50").status_code == 303
    other = app.test_client()
    for number in range(MAX_FAILURES_PER_PAIR):
        assert _attempt(other, "vera", f"guess number {number}", "192.0.2.50").status_code == 401
    assert _attempt(other, "vera", PASSWORD, "192.0.2.50").status_code == 429
    assert _attempt(other, "vera", PASSWORD, "192.0.2.51").status_code == 303
    assert _attempt(app.test_client(), "ada", PASSWORD, "192.0.2.50").status_code == 303


def test_login_form_needs_both_fields(app: Flask, accounts: dict[str, int]) -> None:
    client = app.test_client()
    token = csrf_token_in(_text(client.get("/login")))
    assert client.post("/login", data={"username": "rita", "csrf_token": token}).status_code == 400


def test_logout_ends_the_session(app: Flask, accounts: dict[str, int]) -> None:
    client = _client_as(app, "rita")
    token = _token(client)
    assert client.post("/logout", data={"csrf_token": token}).headers["Location"] == "/login"
    assert client.get("/").status_code == 303


def test_logout_ends_every_session_of_the_user_even_a_copied_cookie(
    app: Flask, accounts: dict[str, int], settings: Settings
) -> None:
    browser, laptop, other = _client_as(app, "rita"), _client_as(app, "rita"), _client_as(app, "vera")
    copied = app.test_client()
    cookie = browser.get_cookie("fptrack_admin")
    assert cookie is not None
    copied.set_cookie("fptrack_admin", cookie.value)
    assert copied.get("/").status_code == 200  # the copy works while the session lives
    token = _token(browser)
    assert browser.post("/logout", data={"csrf_token": token}).status_code == 303
    for client in (copied, laptop):
        assert client.get("/").status_code == 303
        assert client.get("/api/matches").status_code == 401
    write = copied.post("/matches/1/notes", data={"csrf_token": token, "text": "after logout"})
    assert write.status_code in (302, 303, 400, 401)
    with _database(settings) as session:
        assert session.scalar(select(MatchNote.id).where(MatchNote.text == "after logout")) is None
    assert other.get("/").status_code == 200  # another user's session is untouched
    log_in(browser, "rita")
    assert browser.get("/").status_code == 200


def test_session_cookie_flags(app: Flask, settings: Settings, accounts: dict[str, int]) -> None:
    client = app.test_client()
    token = csrf_token_in(_text(client.get("/login")))
    response = client.post("/login", data={"username": "rita", "password": PASSWORD, "csrf_token": token})
    cookies = response.headers.getlist("Set-Cookie")
    cookie = next(cookie for cookie in cookies if cookie.startswith("fptrack_admin="))
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Secure" not in cookie  # served on loopback over http by default
    assert "Expires=" in cookie  # a login lasts SESSION_LIFETIME, not forever

    for overrides in ({"admin_hosts": ("admin.example.org",)}, {"admin_secure_cookies": True}):
        secure_app = create_app(settings.with_overrides(**overrides))
        secure_app.extensions["fptrack"].engine.dispose()
        assert secure_app.config["SESSION_COOKIE_SECURE"] is True, overrides


def test_a_new_password_or_a_removed_account_ends_open_sessions(
    app: Flask, accounts: dict[str, int], settings: Settings
) -> None:
    rita, vera = _client_as(app, "rita"), _client_as(app, "vera")
    assert rita.get("/").status_code == vera.get("/").status_code == 200
    engine = create_engine_for(settings)
    try:
        with session_scope(session_factory(engine)) as session:
            change_password(session, "rita", "a brand new password")
            remove_user(session, "vera")
    finally:
        engine.dispose()
    assert rita.get("/").status_code == 303 and vera.get("/").status_code == 303
    log_in(rita, "rita", "a brand new password")
    assert rita.get("/").status_code == 200


def test_a_forged_session_user_id_is_refused(app: Flask, accounts: dict[str, int]) -> None:
    client = _client_as(app, "vera")
    with client.session_transaction() as session:
        assert session["_user_id"].startswith(f"{accounts['vera']}:")
        session["_user_id"] = f"{accounts['ada']}:{session['_user_id'].split(':', 1)[1]}"
    assert client.get("/").status_code == 303


# --------------------------------------------------------------------------------- trusted proxy header


def test_forwarded_user_header_is_ignored_unless_configured(app: Flask, accounts: dict[str, int]) -> None:
    client = app.test_client()
    for header in ("X-Forwarded-User", "X-Remote-User", "Remote-User"):
        response = client.get("/", headers={header: "ada"}, environ_base={"REMOTE_ADDR": "127.0.0.1"})
        assert response.status_code == 303, header


def test_forwarded_user_header_from_a_trusted_proxy(settings: Settings, accounts: dict[str, int]) -> None:
    proxied = settings.with_overrides(
        admin_trusted_user_header="X-Forwarded-User", admin_trusted_proxies=("10.0.0.0/24",)
    )
    app = create_app(proxied)
    try:
        client = app.test_client()
        from_proxy = {"REMOTE_ADDR": "10.0.0.7"}
        page = client.get("/", headers={"X-Forwarded-User": "rita"}, environ_base=from_proxy)
        assert page.status_code == 200 and 'id="current-user">rita<' in _text(page)
        # the same header from anywhere else, or naming no active account, proves nothing
        assert (
            client.get(
                "/", headers={"X-Forwarded-User": "ada"}, environ_base={"REMOTE_ADDR": "10.0.1.7"}
            ).status_code
            == 303
        )
        assert (
            client.get("/", headers={"X-Forwarded-User": "ghost"}, environ_base=from_proxy).status_code == 303
        )
        # and the proxy's user gets that user's role
        assert (
            client.get("/users", headers={"X-Forwarded-User": "vera"}, environ_base=from_proxy).status_code
            == 403
        )
    finally:
        app.extensions["fptrack"].engine.dispose()


# --------------------------------------------------------------------------------- numbers and health


@pytest.mark.parametrize(
    ("path", "status"),
    [
        (f"/matches/{HUGE}", 404),
        (f"/works/{HUGE}", 404),
        (f"/api/matches/{HUGE}", 404),
        (f"/matches/{2**63}", 404),
        ("/matches/0", 404),
        (f"/matches?page={HUGE}", 400),
        (f"/matches?work={HUGE}", 400),
        (f"/api/matches?page={HUGE}", 400),
        (f"/api/matches?work={HUGE}", 400),
        (f"/api/matches?per_page={HUGE}", 200),  # capped at 500
        (f"/matches?page={2**31 - 1}", 200),  # a page past the end is empty, not an error
    ],
)
def test_huge_numbers_are_404_or_400_never_500(
    app: Flask, seeded: Seeded, accounts: dict[str, int], path: str, status: int
) -> None:
    response = _client_as(app, "vera").get(path)
    assert response.status_code == status, _text(response)[:300]


def test_huge_ids_in_posts_are_404(app: Flask, accounts: dict[str, int]) -> None:
    admin = _client_as(app, "ada")
    token = _token(admin)
    assert (
        admin.post(f"/matches/{HUGE}/status", data={"status": "confirmed", "csrf_token": token}).status_code
        == 404
    )
    assert admin.post(f"/users/{HUGE}/remove", data={"csrf_token": token}).status_code == 404


def test_healthz_is_public_json(app: Flask) -> None:
    response = app.test_client().get("/healthz")
    assert response.status_code == 200 and response.get_json() == {"status": "ok", "database": "ok"}
    assert response.headers["Cache-Control"] == "no-store"


# ------------------------------------------------------------------------------------------ /users


def test_admins_add_and_remove_users_in_the_web(
    app: Flask, accounts: dict[str, int], settings: Settings
) -> None:
    admin = _client_as(app, "ada")
    page = _text(admin.get("/users"))
    assert all(name in page for name in ("ada", "rita", "vera"))
    token = csrf_token_in(page)
    added = admin.post(
        "/users", data={"username": "Nora", "role": "reviewer", "password": PASSWORD, "csrf_token": token}
    )
    assert added.status_code == 303
    assert "Added nora (reviewer)." in _text(admin.get("/users"))
    duplicate = admin.post(
        "/users", data={"username": "nora", "role": "viewer", "password": PASSWORD, "csrf_token": token}
    )
    assert duplicate.status_code == 400 and "already exists" in _text(duplicate)
    short = admin.post(
        "/users", data={"username": "kim", "role": "viewer", "password": "short", "csrf_token": token}
    )
    assert short.status_code == 400 and "at least 10 characters" in _text(short)
    bad_role = admin.post(
        "/users", data={"username": "kim", "role": "root", "password": PASSWORD, "csrf_token": token}
    )
    assert bad_role.status_code == 400
    assert admin.post(f"/users/{accounts['ada']}/remove", data={"csrf_token": token}).status_code == 400
    assert admin.post(f"/users/{accounts['vera']}/remove", data={"csrf_token": token}).status_code == 303
    _nora = _client_as(app, "nora")
    with _database(settings) as session:
        names = set(session.scalars(select(User.username)))
    assert names == {"ada", "rita", "nora"}


def test_networks_page_is_read_by_viewers_and_candidates_are_decided_by_admins(
    app: Flask, accounts: dict[str, int], settings: Settings
) -> None:
    from fptrack.storage.models import DiscoveryCandidate

    with _database(settings) as session:
        for number, host in enumerate(("clone-a.example", "clone-b.example")):
            candidate = DiscoveryCandidate(
                host=host,
                url=f"http://{host}/",
                source="link",
                detail="linked",
                state="probed",
                score=0.5 + number / 10,
                copies=2,
                pages_probed=4,
                requests=5,
                works=[],
                error="",
                decided_by="",
            )
            session.add(candidate)
        session.commit()
        first, second = session.scalars(select(DiscoveryCandidate.id).order_by(DiscoveryCandidate.id)).all()
    viewer, admin, reviewer = _client_as(app, "vera"), _client_as(app, "ada"), _client_as(app, "rita")
    page = _text(viewer.get("/networks"))
    assert "clone-a.example" in page and "Candidate sites" in page and "Monitor" not in page
    token = _token(reviewer)
    refused = reviewer.post(f"/networks/candidates/{first}/reject", data={"csrf_token": token})
    assert refused.status_code == 403
    token = _token(admin)
    assert admin.post(f"/networks/candidates/{first}/reject", data={"csrf_token": token}).status_code == 303
    assert admin.post(f"/networks/candidates/{second}/accept", data={"csrf_token": token}).status_code == 303
    assert admin.post(f"/networks/candidates/{first}/accept", data={"csrf_token": token}).status_code == 303
    assert "is rejected already" in _text(admin.get("/networks"))
    assert admin.post(f"/networks/candidates/{HUGE}/reject", data={"csrf_token": token}).status_code == 404
    with _database(settings) as session:
        states = dict(session.execute(select(DiscoveryCandidate.host, DiscoveryCandidate.state)).all())
        assert states == {"clone-a.example": "rejected", "clone-b.example": "accepted"}
