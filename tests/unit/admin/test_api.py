"""The JSON API: OpenAPI description (validated, and in step with the routes), API tokens (created by the
service behind ``fptrack users token``, stored hashed, revocable), every list and every review action, on
SQLite and PostgreSQL."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from flask import Flask
from openapi_spec_validator import validate
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.compare.records import MATCH_FIELDS
from fptrack.core.settings import Settings
from fptrack.services.accounts.tokens import create_token, list_tokens, revoke_token
from fptrack.services.accounts.users import change_password
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.models import ApiToken, Match, MatchNote, ReviewDecision
from tests.support.accounts import add_account, csrf_token_in, log_in
from tests.support.admin_seed import SCRIPT, Seeded


def _token(settings: Settings, username: str, role: str) -> str:
    add_account(settings, username, role)
    engine = create_engine_for(settings)
    try:
        with session_scope(session_factory(engine)) as session:
            return create_token(session, username, "test").token
    finally:
        engine.dispose()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _db(settings: Settings):  # type: ignore[no-untyped-def]
    engine = create_engine_for(settings)
    return engine, Session(engine)


def test_openapi_document_is_valid_and_describes_every_api_route(app: Flask, settings: Settings) -> None:
    token = _token(settings, "vera", "viewer")
    response = app.test_client().get("/api/openapi.json", headers=_bearer(token))
    assert response.status_code == 200
    document = response.get_json()
    validate(document)
    described = {(path, method.upper()) for path, item in document["paths"].items() for method in item}
    routed = set()
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/api"):
            path = re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule.rule)
            routed |= {(path, method) for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}}
    assert described == routed


def test_tokens_are_stored_hashed_and_act_with_their_users_role(
    app: Flask, seeded: Seeded, settings: Settings
) -> None:
    viewer, reviewer = _token(settings, "vera", "viewer"), _token(settings, "rita", "reviewer")
    assert viewer.startswith("fpt_") and len(viewer) > 40
    client = app.test_client()
    listing = client.get("/api/matches?status=flagged", headers=_bearer(viewer))
    assert listing.status_code == 200 and [m["id"] for m in listing.get_json()["items"]] == [
        seeded.hostile_match_id
    ]
    url = f"/api/matches/{seeded.hostile_match_id}/review"
    refused = client.post(url, json={"status": "confirmed"}, headers=_bearer(viewer))
    assert refused.status_code == 403 and refused.is_json
    # a token needs no CSRF token and no Origin: it is no ambient credential
    done = client.post(url, json={"status": "confirmed", "reason": "API"}, headers=_bearer(reviewer))
    assert done.status_code == 200
    assert done.get_json() == {
        "id": seeded.hostile_match_id,
        "previous_status": "flagged",
        "status": "confirmed",
        "recorded": True,
    }
    engine, session = _db(settings)
    try:
        hashes = session.scalars(select(ApiToken.token_sha256)).all()
        assert len(hashes) == 2 and viewer not in hashes and reviewer not in hashes
        decision = session.scalars(select(ReviewDecision)).one()
        assert (decision.reviewer, decision.note) == ("rita", "API")
        assert all(t.last_used_at is not None for t in list_tokens(session))
    finally:
        session.close()
        engine.dispose()


@pytest.mark.parametrize(
    "header",
    [
        "Bearer fpt_not-a-token",
        "Bearer ",
        "Basic cml0YTpwYXNzd29yZA==",
        "Bearer " + "x" * 5000,
        f"Bearer {SCRIPT}",
    ],
)
def test_bad_tokens_are_401_even_with_a_session(app: Flask, settings: Settings, header: str) -> None:
    add_account(settings, "rita", "reviewer")
    client = app.test_client()
    log_in(client, "rita")
    assert client.get("/api/stats").status_code == 200  # the session alone works
    response = client.get("/api/stats", headers={"Authorization": header})
    assert response.status_code == 401 and response.get_json() == {"error": "invalid or revoked API token"}
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_revoked_tokens_and_removed_users_stop_working(app: Flask, settings: Settings) -> None:
    token = _token(settings, "rita", "reviewer")
    other = _token(settings, "otto", "viewer")
    client = app.test_client()
    assert client.get("/api/stats", headers=_bearer(token)).status_code == 200
    engine = create_engine_for(settings)
    try:
        with session_scope(session_factory(engine)) as session:
            token_id = next(t.id for t in list_tokens(session, "rita"))
            assert revoke_token(session, token_id).revoked
            from fptrack.services.accounts.users import remove_user

            remove_user(session, "otto")
    finally:
        engine.dispose()
    assert client.get("/api/stats", headers=_bearer(token)).status_code == 401
    assert client.get("/api/stats", headers=_bearer(other)).status_code == 401


def test_tokens_do_not_open_the_html_pages(app: Flask, settings: Settings) -> None:
    token = _token(settings, "ada", "admin")
    response = app.test_client().get("/users", headers=_bearer(token))
    assert response.status_code == 303 and response.headers["Location"].startswith("/login")


def test_every_list(app: Flask, seeded: Seeded, settings: Settings) -> None:
    client, headers = app.test_client(), _bearer(_token(settings, "vera", "viewer"))
    matches = client.get(
        "/api/matches?site=pirate.example&sort=score&order=asc&per_page=1", headers=headers
    ).get_json()
    assert (matches["total"], matches["pages"], matches["per_page"]) == (2, 2, 1)
    assert list(matches["items"][0]) == ["id", *MATCH_FIELDS, "status"]
    works = client.get("/api/works", headers=headers).get_json()["items"]
    assert {w["title"] for w in works} == {"山中故事", f"Other {SCRIPT}"}
    work = client.get(f"/api/works/{seeded.work_id}", headers=headers).get_json()
    assert [c["matches"] for c in work["chapters"]] == [2, 1]
    assert client.get("/api/works/999999", headers=headers).status_code == 404
    assert client.get("/api/crawls", headers=headers).get_json() == {"items": []}
    rollup = client.get("/api/reports/rollup?by=host", headers=headers).get_json()
    assert rollup["items"][0]["key"] == "pirate.example" and rollup["items"][0]["total"] == 2
    assert client.get("/api/reports/rollup?by=moon", headers=headers).status_code == 400
    assert client.get("/api/stats", headers=headers).get_json()["matches"] == 4
    history = client.get(f"/api/matches/{seeded.hostile_match_id}/history", headers=headers).get_json()
    assert history == {"items": []}


def test_review_actions(app: Flask, seeded: Seeded, settings: Settings) -> None:
    client, headers = app.test_client(), _bearer(_token(settings, "rita", "reviewer"))
    note = client.post(
        f"/api/matches/{seeded.hostile_match_id}/notes", json={"text": SCRIPT}, headers=headers
    )
    assert note.status_code == 201 and note.get_json()["text"] == SCRIPT  # JSON data, not markup
    assert (
        client.post(
            f"/api/matches/{seeded.hostile_match_id}/notes", json={"text": 5}, headers=headers
        ).status_code
        == 400
    )
    assert (
        client.post("/api/matches/999999/review", json={"status": "confirmed"}, headers=headers).status_code
        == 404
    )
    assert (
        client.post(
            f"/api/matches/{seeded.hostile_match_id}/review", json={"status": "licensed"}, headers=headers
        ).status_code
        == 400
    )
    assert (
        client.post(
            f"/api/matches/{seeded.hostile_match_id}/review",
            data="[1]",
            content_type="application/json",
            headers=headers,
        ).status_code
        == 400
    )
    # bulk on the ids of a filtered list: the plain match is not on it
    bulk = client.post(
        "/api/matches/review?site=pirate.example",
        json={
            "status": "dismissed",
            "reason": "bulk",
            "ids": [seeded.hostile_match_id, seeded.plain_match_id],
        },
        headers=headers,
    )
    assert bulk.status_code == 200 and [d["id"] for d in bulk.get_json()["items"]] == [
        seeded.hostile_match_id
    ]
    stale = client.post(
        "/api/matches/review?status=dismissed",
        json={"status": "flagged", "all": True, "expected": 1},
        headers=headers,
    )
    assert stale.status_code == 409
    every = client.post(
        "/api/matches/review?status=dismissed",
        json={"status": "flagged", "all": True, "expected": 2},
        headers=headers,
    )
    assert every.status_code == 200 and len(every.get_json()["items"]) == 2
    assert (
        client.post(
            "/api/matches/review", json={"status": "flagged", "ids": ["1"]}, headers=headers
        ).status_code
        == 400
    )
    assert client.post("/api/matches/review", json={"status": "flagged"}, headers=headers).status_code == 400
    history = client.get(f"/api/matches/{seeded.hostile_match_id}/history", headers=headers).get_json()[
        "items"
    ]
    assert [(e["kind"], e["status"]) for e in history] == [
        ("note", None),
        ("decision", "dismissed"),
        ("decision", "flagged"),
    ]
    engine, session = _db(settings)
    try:
        assert session.scalars(select(MatchNote.author)).all() == ["rita"]
        assert session.get(Match, seeded.javascript_match_id).status == "flagged"  # type: ignore[union-attr]
    finally:
        session.close()
        engine.dispose()


def test_session_clients_still_need_the_csrf_token(app: Flask, seeded: Seeded, settings: Settings) -> None:
    add_account(settings, "rita", "reviewer")
    client = app.test_client()
    log_in(client, "rita")
    url = f"/api/matches/{seeded.hostile_match_id}/review"
    assert client.post(url, json={"status": "confirmed"}).status_code == 400
    token = csrf_token_in(client.get("/").get_data(as_text=True))
    assert client.post(url, json={"status": "confirmed"}, headers={"X-CSRFToken": token}).status_code == 200


def test_sites_and_takedowns_are_listed_for_api_clients(
    app: Flask, seeded: Seeded, settings: Settings
) -> None:
    from datetime import timedelta

    from sqlalchemy.orm import Session

    from fptrack.jobs.sites import SiteSpec, add_site
    from fptrack.storage.db import create_engine_for
    from fptrack.storage.models import Match, utcnow

    engine = create_engine_for(settings)
    with Session(engine) as session:
        add_site(session, SiteSpec(name="pirate-one", start_urls=("https://pirate.example/",), schedule="6h"))
        match = session.get(Match, seeded.hostile_match_id)
        assert match is not None and match.status == "flagged"
        match.recheck_state, match.rechecked_at = "gone", utcnow()
        match.taken_down_at = match.first_seen + timedelta(hours=3)
        session.commit()
    engine.dispose()
    client, viewer = app.test_client(), _bearer(_token(settings, "vera", "viewer"))
    sites = client.get("/api/sites", headers=viewer).get_json()["items"]
    assert [(s["name"], s["host"], s["schedule"], s["enabled"]) for s in sites] == [
        ("pirate-one", "pirate.example", "21600", True)
    ]
    down = client.get("/api/takedowns?state=down", headers=viewer).get_json()
    assert [(t["id"], t["state"], t["time_to_takedown_seconds"]) for t in down["items"]] == [
        (seeded.hostile_match_id, "gone", 10800.0)
    ]
    stats = client.get("/api/takedowns/stats", headers=viewer).get_json()["items"][0]
    assert (stats["checked"], stats["taken_down"], stats["rate"], stats["median_seconds"]) == (
        1,
        1,
        1.0,
        10800.0,
    )
    assert client.get("/api/takedowns?state=bogus", headers=viewer).status_code == 400
    assert client.get("/api/takedowns/stats?by=bogus", headers=viewer).status_code == 400
    assert client.get("/api/takedowns").status_code == 401


def test_one_match_carries_its_page_note_parts_and_takedown_state(
    app: Flask, seeded: Seeded, settings: Settings
) -> None:
    engine, session = _db(settings)
    with session:
        match = session.get(Match, seeded.hostile_match_id)
        assert match is not None
        match.page.note = "text cut at 300000 characters"
        match.part_spans = [
            {"page_id": 77, "url": f"http://pirate.example/{SCRIPT}", "part": 2, "spans": [[0, 10, 20, 30]]}
        ]
        match.recheck_state = "gone"
        match.rechecked_at = match.taken_down_at = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
        session.commit()
    engine.dispose()
    client, headers = app.test_client(), _bearer(_token(settings, "vera", "viewer"))
    one = client.get(f"/api/matches/{seeded.hostile_match_id}", headers=headers).get_json()
    assert one["page_note"] == "text cut at 300000 characters"
    assert one["parts"] == [
        {"page_id": 77, "url": f"http://pirate.example/{SCRIPT}", "part": 2, "spans": [[0, 10, 20, 30]]}
    ]
    assert one["takedown"] == {
        "state": "gone",
        "rechecked_at": "2026-03-02T08:00:00+00:00",
        "taken_down_at": "2026-03-02T08:00:00+00:00",
    }
    listed = client.get("/api/matches", headers=headers).get_json()["items"]
    assert all("takedown" not in item for item in listed)  # the list stays light


def test_a_new_password_ends_the_users_api_tokens(app: Flask, settings: Settings) -> None:
    token = _token(settings, "rita", "reviewer")
    other = _token(settings, "otto", "viewer")
    client = app.test_client()
    assert client.get("/api/stats", headers=_bearer(token)).status_code == 200
    engine = create_engine_for(settings)
    try:
        with session_scope(session_factory(engine)) as session:
            change_password(session, "rita", "a brand new password")
    finally:
        engine.dispose()
    assert client.get("/api/stats", headers=_bearer(token)).status_code == 401
    assert client.get("/api/stats", headers=_bearer(other)).status_code == 200  # nobody else's


@pytest.mark.parametrize("path", ["/api/matches/1/review", "/api/matches/1/notes", "/api/matches/review"])
def test_json_nested_too_deep_is_a_400_on_every_post_route(
    app: Flask, seeded: Seeded, settings: Settings, path: str
) -> None:
    token = _token(settings, "rita", "reviewer")
    body = "[" * 5_000 + "]" * 5_000  # well inside the request size limit, far past the parser's depth
    response = app.test_client().post(
        path, data=body, headers={**_bearer(token), "Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.is_json and "JSON" in response.get_json()["error"]


@pytest.mark.parametrize("day", ["9999-12-31", "0001-01-01"])
def test_the_far_ends_of_the_calendar_are_days_like_any_other(
    app: Flask, seeded: Seeded, settings: Settings, day: str
) -> None:
    token = _token(settings, "vera", "viewer")
    client = app.test_client()
    for argument in ("to", "from"):
        response = client.get(f"/api/matches?{argument}={day}", headers=_bearer(token))
        assert response.status_code == 200, (argument, response.get_data(as_text=True)[:200])
    everything = client.get("/api/matches?to=9999-12-31", headers=_bearer(token)).get_json()
    assert everything["total"] == client.get("/api/matches", headers=_bearer(token)).get_json()["total"]
