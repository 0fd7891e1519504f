"""The admin app through Flask's test client, on SQLite and on PostgreSQL (the ``settings`` fixture).

Rows are seeded through the ORM with texts written for these tests; crawled strings carry hostile markup.
"""

from __future__ import annotations

import re
import stat
from html import unescape

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.admin.web import CONTENT_SECURITY_POLICY, SECRET_KEY_FILE, create_app
from fptrack.compare.records import MATCH_FIELDS
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for, migrate
from fptrack.storage.models import Match, ReviewDecision
from tests.support.accounts import add_account, csrf_token_in, log_in
from tests.support.admin_seed import (
    CHAPTER_ONE,
    CHAPTER_TWO,
    COPIED_ONE,
    COPIED_TWO,
    ESCAPED_SCRIPT,
    SCRIPT,
    Seeded,
    passage_span,
)


@pytest.fixture
def client(app: Flask, settings: Settings) -> FlaskClient:
    """A browser logged in as ``rita``, a reviewer."""
    add_account(settings, "rita", "reviewer")
    client = app.test_client()
    log_in(client, "rita")
    return client


def _text(response) -> str:  # type: ignore[no-untyped-def]
    return response.get_data(as_text=True)


def _marks(html: str, container_id: str) -> list[str]:
    block = re.search(rf'<div class="text" id="{container_id}">(.*?)</div>', html, re.DOTALL)
    assert block, container_id
    return [
        unescape(re.sub(r"<[^>]+>", "", inner))
        for inner in re.findall(r"<mark[^>]*>(.*?)</mark>", block.group(1), re.DOTALL)
    ]


def _csrf_from(html: str) -> str:
    assert 'class="review"' in html, "no review form on the page"
    return csrf_token_in(html)


# ---------------------------------------------------------------------------------------------- pages


def test_dashboard_shows_counts_and_top_hosts(client: FlaskClient, seeded: Seeded) -> None:
    response = client.get("/?days=0")  # all time: the seeded matches are older than the default 90 days
    html = _text(response)
    assert response.status_code == 200
    assert 'id="count-works">2<' in html
    assert 'id="count-chapters">3<' in html
    assert 'id="count-pages">4<' in html
    assert 'id="count-matches">4<' in html
    for status in ("flagged", "licensed", "confirmed", "dismissed"):
        assert f'id="status-{status}">1<' in html
    table = re.search(r'<table class="compact" id="table-hosts">(.*?)</table>', html, re.DOTALL)
    assert table
    hosts = re.findall(
        r'<th scope="row" class="host"><a [^>]*>(.*?)</a></th>.*?<td class="num">(\d+)</td></tr>',
        table.group(1),
        re.DOTALL,
    )
    assert hosts[0] == ("pirate.example", "2")
    assert sorted(hosts[1:]) == sorted([("copy.example", "1"), (ESCAPED_SCRIPT, "1")])


def test_works_list_and_detail(client: FlaskClient, seeded: Seeded) -> None:
    html = _text(client.get("/works"))
    rows = re.findall(
        r'<a href="/works/(\d+)">(.*?)</a></td>\s*<td class="num">(\d+)</td>\s*<td class="num">(.*?)</td>',
        html,
    )
    by_id = {
        int(work_id): (title, chapters, re.sub(r"<[^>]+>", "", matches))
        for work_id, title, chapters, matches in rows
    }
    assert by_id[seeded.work_id] == ("山中故事", "2", "3")
    assert by_id[seeded.other_work_id] == (f"Other {ESCAPED_SCRIPT}", "1", "1")

    detail = _text(client.get(f"/works/{seeded.work_id}"))
    chapters = re.findall(
        r'<td class="num">(\d+)</td>\s*<td>(.*?)</td>\s*<td class="num">(\d+)</td>\s*<td '
        r'class="num">(\d+)</td>',
        detail,
    )
    assert chapters == [
        ("1", "第一章 山中", str(len(CHAPTER_ONE)), "2"),
        ("2", "第二章 下山", str(len(CHAPTER_TWO)), "1"),
    ]


@pytest.mark.parametrize("path", ["/works/999999", "/matches/999999", "/api/matches/999999"])
def test_missing_ids_are_404(client: FlaskClient, seeded: Seeded, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    if path.startswith("/api/"):
        assert "999999" in response.get_json()["error"]
    else:
        assert "999999" in _text(response)


def _listed_match_ids(html: str) -> list[int]:
    return [int(found) for found in re.findall(r'href="/matches/(\d+)"', html)]


def test_matches_list_is_newest_first_and_filters(client: FlaskClient, seeded: Seeded) -> None:
    html = _text(client.get("/matches"))
    assert _listed_match_ids(html) == list(seeded.match_ids_newest_first)
    # 12:00 UTC, shown in Asia/Shanghai (FPTRACK_TIMEZONE)
    assert "0.931" in html and "simhash64, winnowing" in html and "2026-03-01 20:00" in html

    flagged = _text(client.get("/matches?status=flagged"))
    assert _listed_match_ids(flagged) == [seeded.hostile_match_id]
    by_work = _text(client.get(f"/matches?work={seeded.work_id}"))
    assert _listed_match_ids(by_work) == list(seeded.match_ids_newest_first[1:])
    both = _text(client.get(f"/matches?work={seeded.work_id}&status=licensed"))
    assert _listed_match_ids(both) == [seeded.plain_match_id]


@pytest.mark.parametrize("query", ["status=stolen", "work=abc", "page=0", "page=x"])
def test_bad_filters_are_400_with_a_reason(client: FlaskClient, seeded: Seeded, query: str) -> None:
    response = client.get(f"/matches?{query}")
    assert response.status_code == 400
    name = query.split("=")[0]
    assert name in _text(response)


def test_matches_list_paginates(client: FlaskClient, seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fptrack.admin.views.matches.PER_PAGE", 3)
    first = _text(client.get("/matches"))
    assert _listed_match_ids(first) == list(seeded.match_ids_newest_first[:3])
    assert "page 1 of 2" in first and 'href="/matches?page=2"' in first
    second = _text(client.get("/matches?page=2"))
    assert _listed_match_ids(second) == list(seeded.match_ids_newest_first[3:])
    # The pager keeps the filter.
    monkeypatch.setattr("fptrack.admin.views.matches.PER_PAGE", 2)
    filtered = _text(client.get(f"/matches?work={seeded.work_id}"))
    assert f'href="/matches?page=2&amp;work={seeded.work_id}"' in filtered
    last = _text(client.get(f"/matches?page=2&work={seeded.work_id}"))
    assert _listed_match_ids(last) == [seeded.hostile_match_id]
    assert "page 2 of 2" in last


def test_evidence_view_highlights_the_same_passages_on_both_sides(
    client: FlaskClient, seeded: Seeded
) -> None:
    response = client.get(f"/matches/{seeded.hostile_match_id}")
    html = _text(response)
    assert response.status_code == 200
    assert _marks(html, "page-text") == [COPIED_ONE, COPIED_TWO]
    # The match is attributed to chapter one: the chapter side shows passage 1; passage 2 lies in chapter two.
    assert _marks(html, "work-text") == [COPIED_ONE]
    assert 'id="p1"' in html and 'id="w1"' in html and 'id="p2"' in html
    assert "第一章 山中" in html


# ------------------------------------------------------------------------------------------- security


@pytest.mark.parametrize(
    # the dashboard over all time: the seeded matches are older than its default 90 days
    "path",
    ["/?days=0", "/works", "/matches", "/matches/{hostile}", "/matches/{javascript}", "/works/{other}"],
)
def test_hostile_crawled_strings_are_escaped(client: FlaskClient, seeded: Seeded, path: str) -> None:
    url = path.format(
        hostile=seeded.hostile_match_id, javascript=seeded.javascript_match_id, other=seeded.other_work_id
    )
    html = _text(client.get(url))
    assert "<script" not in html.lower()
    assert "<b>bold</b>" not in html
    assert ESCAPED_SCRIPT in html
    assert 'href="javascript:' not in html.lower()


def test_only_http_urls_become_links(client: FlaskClient, seeded: Seeded) -> None:
    html = _text(client.get("/matches"))
    assert 'href="https://copy.example/ch2"' in html
    assert 'href="http://pirate.example/book/1.html?q=&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in html
    assert (
        '<span class="url not-link" title="not an http(s) URL, shown as text">javascript:alert(1)</span>'
        in html
    )
    assert 'rel="noopener noreferrer nofollow"' in html


def test_security_headers(client: FlaskClient, seeded: Seeded) -> None:
    for path in ("/", "/matches", f"/matches/{seeded.hostile_match_id}", "/api/stats", "/nowhere"):
        headers = client.get(path).headers
        assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, path
        assert "script-src" not in CONTENT_SECURITY_POLICY and "default-src 'none'" in CONTENT_SECURITY_POLICY
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "same-origin"
        assert headers["X-Frame-Options"] == "DENY"


# -------------------------------------------------------------------------------------- status change


def _decisions_in_db(settings: Settings, match_id: int) -> list[tuple[str, str]]:
    """The review history of a match, oldest first."""
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            rows = session.execute(
                select(ReviewDecision.decision, ReviewDecision.reviewer)
                .where(ReviewDecision.match_id == match_id)
                .order_by(ReviewDecision.id)
            )
            return [tuple(row) for row in rows]  # type: ignore[misc]
    finally:
        engine.dispose()


def _status_in_db(settings: Settings, match_id: int) -> str:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            status = session.scalar(select(Match.status).where(Match.id == match_id))
            assert status is not None
            return status
    finally:
        engine.dispose()


def test_status_change_needs_the_session_token(
    client: FlaskClient, seeded: Seeded, settings: Settings
) -> None:
    match_id = seeded.hostile_match_id
    url = f"/matches/{match_id}/status"

    assert client.post(url, data={"status": "confirmed"}).status_code == 400
    assert client.post(url, data={"status": "confirmed", "csrf_token": "forged"}).status_code == 400
    assert _status_in_db(settings, match_id) == "flagged"

    # A token from another browser session is worth nothing here.
    other_client = client.application.test_client()
    add_account(settings, "sam", "reviewer")
    log_in(other_client, "sam")
    foreign_token = _csrf_from(_text(other_client.get(f"/matches/{match_id}")))
    token = _csrf_from(_text(client.get(f"/matches/{match_id}")))
    assert foreign_token != token
    assert client.post(url, data={"status": "confirmed", "csrf_token": foreign_token}).status_code == 400
    assert _status_in_db(settings, match_id) == "flagged"

    response = client.post(url, data={"status": "confirmed", "csrf_token": token})
    assert response.status_code == 303
    assert response.headers["Location"].endswith(f"/matches/{match_id}")
    assert _status_in_db(settings, match_id) == "confirmed"
    page = _text(client.get(f"/matches/{match_id}"))
    assert f"Match {match_id} is now confirmed." in page
    assert '<span class="status status-confirmed">confirmed</span>' in page

    # The reviewer is the logged-in account: a header naming someone else is not believed.
    response = client.post(
        url, data={"status": "dismissed", "csrf_token": token}, headers={"X-Forwarded-User": "lin"}
    )
    assert response.status_code == 303
    assert _status_in_db(settings, match_id) == "dismissed"
    assert _decisions_in_db(settings, match_id) == [("confirmed", "rita"), ("dismissed", "rita")]


def test_status_change_rejects_other_values_and_missing_matches(
    client: FlaskClient, seeded: Seeded, settings: Settings
) -> None:
    token = _csrf_from(_text(client.get(f"/matches/{seeded.hostile_match_id}")))
    for status in ("licensed", "stolen", ""):
        response = client.post(
            f"/matches/{seeded.hostile_match_id}/status", data={"status": status, "csrf_token": token}
        )
        assert response.status_code == 400, status
    assert _status_in_db(settings, seeded.hostile_match_id) == "flagged"
    missing = client.post("/matches/999999/status", data={"status": "confirmed", "csrf_token": token})
    assert missing.status_code == 404
    assert client.get(f"/matches/{seeded.hostile_match_id}/status").status_code == 405


# ------------------------------------------------------------------------------------------- JSON API


def test_api_matches_carry_the_public_fields_plus_id_and_status(client: FlaskClient, seeded: Seeded) -> None:
    body = client.get("/api/matches").get_json()
    assert body["total"] == 4 and body["page"] == 1 and body["pages"] == 1 and body["per_page"] == 50
    assert [item["id"] for item in body["items"]] == list(seeded.match_ids_newest_first)
    hostile = next(item for item in body["items"] if item["id"] == seeded.hostile_match_id)
    assert list(hostile) == ["id", *MATCH_FIELDS, "status"]
    assert hostile["page_url"] == 'http://pirate.example/book/1.html?q="><script>alert(1)</script>'
    assert hostile["work_id"] == seeded.work_id
    assert hostile["work_title"] == "山中故事"
    assert hostile["chapter_index"] == 1
    assert hostile["chapter_title"] == "第一章 山中"
    assert hostile["score"] == 0.9312
    assert hostile["methods"] == ["simhash64", "winnowing"]
    page_text = f"导航 首页 {SCRIPT} 正文：{COPIED_ONE}，然后 {COPIED_TWO}。<b>bold</b> 广告"
    assert hostile["spans"] == [passage_span(page_text, COPIED_ONE), passage_span(page_text, COPIED_TWO)]
    assert (
        hostile["first_seen"] == "2026-03-01T12:00:00+00:00" or hostile["first_seen"] == "2026-03-01T12:00:00"
    )
    assert hostile["status"] == "flagged"

    one = client.get(f"/api/matches/{seeded.hostile_match_id}").get_json()
    unchecked = {"state": "unchecked", "rechecked_at": None, "taken_down_at": None}
    assert one == {
        **hostile,
        "page_note": "",
        "parts": [],
        "takedown": unchecked,
        "aligned": None,  # an exact copy: no aligned sentences (a meaning match's: test_web_meaning)
    }  # one match says a little more


def test_api_matches_filters_and_paginates(client: FlaskClient, seeded: Seeded) -> None:
    body = client.get(f"/api/matches?work={seeded.work_id}&per_page=2&page=2").get_json()
    assert body["total"] == 3 and body["pages"] == 2 and body["page"] == 2
    assert [item["id"] for item in body["items"]] == [seeded.hostile_match_id]
    dismissed = client.get("/api/matches?status=dismissed").get_json()
    assert [item["id"] for item in dismissed["items"]] == [seeded.javascript_match_id]
    bad = client.get("/api/matches?status=stolen")
    assert bad.status_code == 400 and "stolen" in bad.get_json()["error"]
    assert client.get("/api/matches?per_page=100000").get_json()["per_page"] == 500


def test_api_stats(client: FlaskClient, seeded: Seeded) -> None:
    stats = client.get("/api/stats").get_json()
    assert stats["works"] == 2 and stats["chapters"] == 3 and stats["pages"] == 4 and stats["matches"] == 4
    assert stats["matches_by_status"] == {"flagged": 1, "licensed": 1, "confirmed": 1, "dismissed": 1}
    assert stats["top_hosts"][0] == {"host": "pirate.example", "matches": 2}
    assert {"host": SCRIPT, "matches": 1} in stats["top_hosts"]


def test_empty_database_pages_render(client: FlaskClient) -> None:
    for path in ("/", "/works", "/matches"):
        response = client.get(path)
        assert response.status_code == 200, path
    assert client.get("/api/stats").get_json()["matches"] == 0
    assert client.get("/api/matches").get_json() == {
        "items": [],
        "page": 1,
        "per_page": 50,
        "total": 0,
        "pages": 1,
    }


# ---------------------------------------------------------------------------------- database not ready


def test_uninitialised_database_says_run_fptrack_init(tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(data_dir=tmp_path)
    app = create_app(settings)
    client = app.test_client()
    try:
        page = client.get("/matches")
        assert page.status_code == 503
        assert "fptrack init" in _text(page)
        api = client.get("/api/stats")
        assert api.status_code == 503 and "fptrack init" in api.get_json()["error"]
        assert client.get("/static/admin.css").status_code == 200

        migrate(settings)
        # picked up without a restart: the login page now answers
        assert client.get("/matches").headers["Location"].startswith("/login")
        assert "There are no accounts yet" in _text(client.get("/login"))
    finally:
        app.extensions["fptrack"].engine.dispose()


def test_unreachable_database_is_a_503_that_reveals_nothing(
    tmp_path, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(data_dir=tmp_path, database_url="postgresql://nobody:secret@127.0.0.1:1/hiddendb")
    app = create_app(settings)
    try:
        client = app.test_client()
        with caplog.at_level("WARNING"):
            response = client.get("/")
            api = client.get("/api/stats")
        html = _text(response)
        assert response.status_code == 503 and api.status_code == 503
        assert "database unavailable" in html.lower()
        assert api.get_json() == {"error": "database unavailable"}
        for detail in ("nobody", "secret", "127.0.0.1", ":1/", "hiddendb", "5432"):
            assert detail not in html and detail not in api.get_data(as_text=True), detail
        # the operator finds the reason in the log (password hidden)
        assert "127.0.0.1:1" in caplog.text and "hiddendb" in caplog.text and "secret" not in caplog.text
        health = client.get("/healthz")
        assert health.status_code == 503 and health.get_json()["status"] == "unavailable"
        assert "hiddendb" not in health.get_data(as_text=True)
    finally:
        app.extensions["fptrack"].engine.dispose()


# ------------------------------------------------------------------------------------------ app factory


def test_secret_key_is_kept_private_in_the_data_dir(tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(data_dir=tmp_path / "data")
    first, second = create_app(settings), create_app(settings)
    try:
        key_file = tmp_path / "data" / SECRET_KEY_FILE
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert first.secret_key == second.secret_key and len(first.secret_key) == 32
        assert create_app(Settings(data_dir=tmp_path / "elsewhere")).secret_key != first.secret_key
    finally:
        first.extensions["fptrack"].engine.dispose()
        second.extensions["fptrack"].engine.dispose()


def test_create_app_reads_the_environment_when_called(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FPTRACK_DATA_DIR", str(tmp_path / "from-env"))
    monkeypatch.delenv("FPTRACK_DATABASE_URL", raising=False)
    app = create_app()
    try:
        assert app.extensions["fptrack"].settings.data_dir == tmp_path / "from-env"
        assert (tmp_path / "from-env" / SECRET_KEY_FILE).exists()
    finally:
        app.extensions["fptrack"].engine.dispose()


def test_processes_starting_together_agree_on_one_secret_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import multiprocessing

    from fptrack.admin.web import ensure_secret_key

    data_dir = tmp_path / "shared"
    with multiprocessing.get_context("fork").Pool(6) as pool:
        keys = pool.map(ensure_secret_key, [data_dir] * 24)
    assert len(set(keys)) == 1 and len(keys[0]) == 32
    assert sorted(p.name for p in data_dir.iterdir()) == [SECRET_KEY_FILE]  # no temporary file left behind
    (data_dir / SECRET_KEY_FILE).write_text("not hex", encoding="ascii")
    replaced = ensure_secret_key(data_dir)
    assert replaced != keys[0] and ensure_secret_key(data_dir) == replaced


def test_the_match_page_shows_the_page_note_and_the_later_parts_escaped(
    client: FlaskClient, seeded: Seeded, session: Session
) -> None:
    match = session.get(Match, seeded.hostile_match_id)
    assert match is not None
    match.page.note = f"text cut at 300000 characters {SCRIPT}"
    match.part_spans = [
        {"page_id": 9, "url": f"http://pirate.example/2?{SCRIPT}", "part": 2, "spans": [[0, 9, 0, 9]]},
        {"page_id": 10, "url": "javascript:alert(1)", "part": 3, "spans": []},
    ]
    session.commit()
    html = _text(client.get(f"/matches/{seeded.hostile_match_id}"))
    note = re.search(r'<dd class="page-note">(.*?)</dd>', html, re.DOTALL)
    assert note and note.group(1) == f"text cut at 300000 characters {ESCAPED_SCRIPT}"
    parts = re.search(r'<dd class="later-parts">(.*?)</dd>', html, re.DOTALL)
    assert parts and "part 2:" in parts.group(1) and ", 1 passage</li>" in parts.group(1)
    assert f"http://pirate.example/2?{ESCAPED_SCRIPT}" in parts.group(1) and SCRIPT not in html
    assert (
        'href="javascript:' not in parts.group(1)
        and "part 3:" in parts.group(1)
        and ", 0 passages</li>" in parts.group(1)
    )
