"""Review, exports and reports through Flask's test client on SQLite and PostgreSQL: filters, sort and URL
search; bulk decisions; notes and the history; the character differences inside copied passages; CSV/JSON
exports; takedown notices (HTML and PDF); evidence bundles (WARC + SHA-256). Crawled strings are hostile."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import zipfile
from datetime import timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session
from warcio.archiveiterator import ArchiveIterator

from fptrack.core.settings import Settings
from fptrack.services.exports import CSV_MATCH_COLUMNS
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Match, MatchNote, Page, ReviewDecision, as_utc
from tests.support.accounts import add_account, csrf_token_in, log_in
from tests.support.admin_seed import SCRIPT, T0, WORK_TEXT, Seeded, seed

ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
FORMULA = '=HYPERLINK("http://evil.example","x")'
# A copy of chapter one's sentence with one character changed (一 -> 二), one inserted (真) and two deleted
# (清晨).
ORIGINAL = "每天清晨他都去溪边挑水"
EDITED = "每天他真都去溪边挑水"


@pytest.fixture
def seeded(session: Session) -> Seeded:
    found = seed(session)
    hostile = session.get(Match, found.hostile_match_id)
    assert hostile is not None
    text = f"前文<i>x</i>{EDITED}。"
    page = Page(
        url=FORMULA, final_url=FORMULA, host="edits.example", status=200, title=f"-改 {SCRIPT}", text=text
    )
    start = text.index(EDITED)
    work_start = WORK_TEXT.index(ORIGINAL)
    session.add(
        Match(
            page=page,
            work_id=hostile.work_id,
            chapter_id=hostile.chapter_id,
            score=0.55,
            methods=["winnowing"],
            spans=[[start, start + len(EDITED), work_start, work_start + len(ORIGINAL)]],
            status="flagged",
            first_seen=T0 - timedelta(days=3),
            last_seen=T0,
        )
    )
    session.commit()
    session.close()
    return found


@pytest.fixture
def app(settings: Settings) -> Flask:
    from fptrack.admin.web import create_app

    app = create_app(settings)
    yield app  # type: ignore[misc]
    app.extensions["fptrack"].engine.dispose()


def _client(app: Flask, settings: Settings, name: str, role: str) -> FlaskClient:
    add_account(settings, name, role)
    client = app.test_client()
    log_in(client, name)
    return client


@pytest.fixture
def reviewer(app: Flask, settings: Settings) -> FlaskClient:
    return _client(app, settings, "rita", "reviewer")


def _text(response) -> str:  # type: ignore[no-untyped-def]
    return response.get_data(as_text=True)


def _ids(html: str) -> list[int]:
    return [int(found) for found in re.findall(r'<tr id="match-(\d+)">', html)]


def _edits_id(settings: Settings) -> int:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            found = session.scalar(select(Match.id).join(Page).where(Page.host == "edits.example"))
            assert found is not None
            return found
    finally:
        engine.dispose()


# ------------------------------------------------------------------------------------- list and filters


def test_filters_sort_and_url_search(reviewer: FlaskClient, seeded: Seeded, settings: Settings) -> None:
    edits = _edits_id(settings)
    every = _ids(_text(reviewer.get("/matches")))
    assert every == [*seeded.match_ids_newest_first, edits]  # newest first by default
    assert _ids(_text(reviewer.get("/matches?order=asc"))) == every[::-1]
    by_score = _ids(_text(reviewer.get("/matches?sort=score")))
    assert by_score[0] != by_score[-1] and by_score[-1] == edits  # 0.55 is the lowest
    assert _ids(_text(reviewer.get("/matches?site=pirate.example&sort=site"))) == [
        seeded.match_ids_newest_first[0],
        seeded.hostile_match_id,
    ]
    assert _ids(_text(reviewer.get("/matches?site=PIRATE.example&status=flagged"))) == [
        seeded.hostile_match_id
    ]
    assert _ids(_text(reviewer.get("/matches?q=COPY.example"))) == [seeded.plain_match_id]
    assert _ids(_text(reviewer.get("/matches?q=%25"))) == []  # % is a character, not a wildcard
    assert _ids(_text(reviewer.get("/matches?q=HYPERLINK"))) == [edits]
    assert _ids(_text(reviewer.get("/matches?min_score=0.9"))) == [
        seeded.match_ids_newest_first[0],
        seeded.hostile_match_id,
    ]
    assert _ids(_text(reviewer.get("/matches?max_score=0.6"))) == [edits]
    assert _ids(_text(reviewer.get("/matches?from=2026-02-20&to=2026-02-28"))) == [edits]
    assert len(_ids(_text(reviewer.get("/matches?from=2026-03-01&to=2026-03-01")))) == 4
    for sort in ("work", "status", "date", "site"):
        assert sorted(_ids(_text(reviewer.get(f"/matches?sort={sort}")))) == sorted(every), sort
    page = _text(reviewer.get("/matches?site=pirate.example&q=book"))
    assert (
        'value="pirate.example"' in page
        and 'href="/matches/export.csv?site=pirate.example&amp;q=book"' in page
    )


@pytest.mark.parametrize(
    "query",
    [
        "sort=stolen",
        "order=up",
        "from=yesterday",
        "to=2026-13-01",
        "min_score=2",
        "min_score=nan",
        "from=2026-03-02&to=2026-03-01",
        "q=" + "x" * 400,
        "status=stolen",
        "work=abc",
    ],
)
def test_bad_filters_are_400(reviewer: FlaskClient, seeded: Seeded, query: str) -> None:
    for path in ("/matches", "/matches/export.csv", "/api/matches"):
        assert reviewer.get(f"{path}?{query}").status_code == 400, (path, query)


# ------------------------------------------------------------------------------------------- bulk review


def test_bulk_confirm_the_ticked_matches_of_a_filtered_list(
    reviewer: FlaskClient, seeded: Seeded, settings: Settings
) -> None:
    html = _text(reviewer.get("/matches?site=pirate.example"))
    assert 'action="/matches/bulk"' in html
    token = csrf_token_in(html)
    response = reviewer.post(
        "/matches/bulk",
        data={
            "csrf_token": token,
            "site": "pirate.example",
            "scope": "selected",
            # the plain match is not on this list: ticking it (a forged form) changes nothing
            "ids": [str(seeded.hostile_match_id), str(seeded.plain_match_id)],
            "decision": "confirmed",
            "note": "整站盗版",
        },
    )
    assert response.status_code == 303 and response.headers["Location"] == "/matches?site=pirate.example"
    assert "1 match now confirmed; 1 acted on." in _text(reviewer.get("/matches"))
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            assert session.get(Match, seeded.hostile_match_id).status == "confirmed"  # type: ignore[union-attr]
            assert session.get(Match, seeded.plain_match_id).status == "licensed"  # type: ignore[union-attr]
            decision = session.scalars(select(ReviewDecision)).one()
            assert (decision.match_id, decision.reviewer, decision.note) == (
                seeded.hostile_match_id,
                "rita",
                "整站盗版",
            )
    finally:
        engine.dispose()


def test_bulk_on_all_matches_of_a_list_needs_the_count_the_reviewer_saw(
    reviewer: FlaskClient, seeded: Seeded, settings: Settings
) -> None:
    html = _text(reviewer.get("/matches?status=flagged"))
    assert 'name="status" value="flagged"' in html and 'name="expected" value="2"' in html
    form = {
        "csrf_token": csrf_token_in(html),
        "status": "flagged",
        "scope": "all",
        "decision": "dismissed",
        "note": "bulk",
    }
    stale = reviewer.post("/matches/bulk", data={**form, "expected": "1"})
    assert stale.status_code == 409 and "has changed" in _text(stale)
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            assert session.scalars(select(ReviewDecision)).all() == []
    finally:
        engine.dispose()
    response = reviewer.post("/matches/bulk", data={**form, "expected": "2"})
    assert response.status_code == 303 and response.headers["Location"] == "/matches?status=flagged"
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            statuses = dict(session.execute(select(Match.id, Match.status)).all())
            decisions = session.scalars(select(ReviewDecision)).all()
    finally:
        engine.dispose()
    assert statuses[seeded.hostile_match_id] == statuses[_edits_id(settings)] == "dismissed"
    assert statuses[seeded.plain_match_id] == "licensed"
    assert sorted(d.match_id for d in decisions) == sorted([seeded.hostile_match_id, _edits_id(settings)])
    assert {(d.reviewer, d.note) for d in decisions} == {("rita", "bulk")}


def test_bulk_refuses_bad_input(reviewer: FlaskClient, seeded: Seeded) -> None:
    token = csrf_token_in(_text(reviewer.get("/matches")))
    base = {"csrf_token": token, "scope": "selected"}
    assert (
        reviewer.post("/matches/bulk", data={**base, "ids": "abc", "decision": "confirmed"}).status_code
        == 400
    )
    assert (
        reviewer.post("/matches/bulk", data={**base, "ids": "9" * 30, "decision": "confirmed"}).status_code
        == 404
    )
    bad = reviewer.post(
        "/matches/bulk", data={**base, "ids": str(seeded.hostile_match_id), "decision": "licensed"}
    )
    assert bad.status_code == 400
    assert (
        reviewer.post("/matches/bulk", data={**base, "scope": "some", "decision": "confirmed"}).status_code
        == 400
    )
    nothing = reviewer.post("/matches/bulk", data={**base, "decision": "confirmed"})
    assert nothing.status_code == 303
    assert "No match was selected" in _text(reviewer.get("/matches"))


# ----------------------------------------------------------------------------------- evidence and history


def test_differences_inside_copied_passages_are_marked(
    reviewer: FlaskClient, seeded: Seeded, settings: Settings
) -> None:
    html = _text(reviewer.get(f"/matches/{_edits_id(settings)}"))
    page = re.search(r'<div class="text" id="page-text">(.*?)</div>', html, re.DOTALL)
    work = re.search(r'<div class="text" id="work-text">(.*?)</div>', html, re.DOTALL)
    assert page and work
    # page: 每天 [清晨 missing] 他 [真 inserted] 都去溪边挑水
    assert '<ins class="edit-inserted">真</ins>' in page.group(1)
    assert 'class="gap gap-deleted" title="2 characters missing from the copy here"' in page.group(1)
    assert '<del class="edit-deleted">清晨</del>' in work.group(1)
    assert 'class="gap gap-inserted" title="1 character inserted by the copy here"' in work.group(1)
    assert "&lt;i&gt;x&lt;/i&gt;" in page.group(1) and "<i>" not in page.group(1)
    assert re.sub(r"<[^>]+>", "", page.group(1)).startswith("前文&lt;i&gt;x&lt;/i&gt;每天他真都去溪边挑水")
    summary = re.search(r'<td class="diff-summary">(.*?)</td>', html, re.DOTALL)
    assert summary and re.sub(r"<[^>]+>", "", summary.group(1)) == "0 changed, 1 inserted, 2 deleted"
    # a verbatim copy says so
    verbatim = _text(reviewer.get(f"/matches/{seeded.plain_match_id}"))
    assert '<td class="diff-summary">identical</td>' in verbatim
    # the page's title is its title: the history section is in the page body, once
    assert re.search(r"<title>Match \d+ · fptrack admin</title>", verbatim)
    assert verbatim.count('id="history"') == 1
    assert 'class="edit-' not in verbatim.split('id="page-text"')[1]


def test_notes_and_decisions_make_the_history(
    reviewer: FlaskClient, app: Flask, seeded: Seeded, settings: Settings
) -> None:
    url = f"/matches/{seeded.hostile_match_id}"
    html = _text(reviewer.get(url))
    assert "No decision or note yet." in html
    token = csrf_token_in(html)
    assert (
        reviewer.post(f"{url}/notes", data={"csrf_token": token, "text": f"站长已联系 {SCRIPT}"}).status_code
        == 303
    )
    assert (
        reviewer.post(
            f"{url}/status", data={"csrf_token": token, "status": "confirmed", "note": "全章"}
        ).status_code
        == 303
    )
    assert reviewer.post(f"{url}/notes", data={"csrf_token": token, "text": "   "}).status_code == 400
    assert reviewer.post("/matches/999999/notes", data={"csrf_token": token, "text": "x"}).status_code == 404
    history = _text(reviewer.get(url)).split('id="history"')[1]
    rows = re.findall(r'<tr class="history-(\w+)">(.*?)</tr>', history, re.DOTALL)
    assert [kind for kind, _ in rows] == ["note", "decision"]
    assert f"站长已联系 {ESCAPED}" in rows[0][1] and "rita" in rows[0][1]
    assert "confirmed" in rows[1][1] and "全章" in rows[1][1]
    assert SCRIPT not in history
    viewer = _client(app, settings, "vera", "viewer")
    viewer_page = _text(viewer.get(url))
    assert "站长已联系" in viewer_page and 'class="note-form"' not in viewer_page
    assert viewer.post(f"{url}/notes", data={"csrf_token": token, "text": "x"}).status_code in (400, 403)
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            assert [note.author for note in session.scalars(select(MatchNote))] == ["rita"]
    finally:
        engine.dispose()


# ---------------------------------------------------------------------------------------------- exports


def test_csv_export_of_a_filtered_list(reviewer: FlaskClient, seeded: Seeded, settings: Settings) -> None:
    response = reviewer.get("/matches/export.csv?status=flagged")
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert response.headers["Content-Disposition"].startswith('attachment; filename="fptrack-matches-')
    body = response.get_data().decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(body)))
    assert list(rows[0]) == list(CSV_MATCH_COLUMNS)
    assert {row["status"] for row in rows} == {"flagged"}
    assert {int(row["id"]) for row in rows} == {seeded.hostile_match_id, _edits_id(settings)}
    assert "'" + FORMULA in {row["page_url"] for row in rows}
    assert not any(cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row.values())
    hostile = next(row for row in rows if int(row["id"]) == seeded.hostile_match_id)
    assert hostile["page_url"].endswith('"><script>alert(1)</script>')  # data, in a text/csv download
    everything = list(
        csv.DictReader(io.StringIO(reviewer.get("/matches/export.csv").get_data().decode("utf-8-sig")))
    )
    assert len(everything) == 5


def test_json_export_of_a_filtered_list(reviewer: FlaskClient, seeded: Seeded) -> None:
    response = reviewer.get("/matches/export.json?site=pirate.example&sort=score&order=asc")
    assert response.status_code == 200 and response.mimetype == "application/json"
    records = json.loads(response.get_data(as_text=True))
    assert [record["id"] for record in records] == [seeded.hostile_match_id, seeded.match_ids_newest_first[0]]
    assert records[0]["spans"] and records[0]["status"] == "flagged" and "first_seen" in records[0]
    assert json.loads(reviewer.get("/matches/export.json?site=nowhere.example").get_data(as_text=True)) == []


# ---------------------------------------------------------------------------------------------- reports


def test_takedown_notice_previews_the_sites_confirmed_matches(reviewer: FlaskClient, seeded: Seeded) -> None:
    """The preview is drafted through the notice model (jobs/notices.py): confirmed matches only, no hidden
    sender parameter, and what it still lacks on screen (no sender yet)."""
    reports = _text(reviewer.get("/reports"))
    assert 'href="/reports/notice?host=pirate.example"' in reports and ESCAPED in reports
    probe = "<b>sender-probe</b>"
    response = reviewer.get("/reports/notice?host=pirate.example&sender=" + probe)
    confirmed = _text(response)
    assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert "http://pirate.example/other.html" in confirmed and "1 infringing page (confirmed" in confirmed
    assert "book/1.html" not in confirmed  # flagged, not confirmed
    # &sender= is gone: neither the value nor its escaped form is shown (the works' titles are, escaped: the
    # seed's hostile title appears in what the notice lacks)
    assert "sender-probe" not in confirmed and SCRIPT not in confirmed
    assert "This notice cannot be sent yet" in confirmed and "512(c)(3)(A)(i)" in confirmed
    assert confirmed.count('<blockquote class="passage">') == 1 and "<script>" not in confirmed
    assert reviewer.get("/reports/notice").status_code == 400
    for status in ("flagged", "stolen", "dismissed"):
        assert reviewer.get(f"/reports/notice?host=pirate.example&status={status}").status_code == 400
    assert "No confirmed match on nowhere.example" in _text(
        reviewer.get("/reports/notice?host=nowhere.example")
    )


def test_takedown_notice_as_pdf(reviewer: FlaskClient, seeded: Seeded) -> None:
    response = reviewer.get("/reports/notice.pdf?host=pirate.example")
    assert response.status_code == 200 and response.mimetype == "application/pdf"
    assert response.get_data().startswith(b"%PDF-")
    assert 'filename="takedown-notice-pirate.example.pdf"' in response.headers["Content-Disposition"]


def test_evidence_bundle_has_the_page_as_a_warc_record_and_checksums(
    reviewer: FlaskClient, seeded: Seeded, settings: Settings
) -> None:
    response = reviewer.get(f"/matches/{seeded.hostile_match_id}/bundle.zip")
    assert response.status_code == 200 and response.mimetype == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(response.get_data()))
    assert set(archive.namelist()) == {
        "page.warc.gz",
        "evidence.json",
        "README.txt",
        "signing-key.pub",
        "SHA256SUMS",
        "SHA256SUMS.sig",
    }
    for line in archive.read("SHA256SUMS").decode().splitlines():
        digest, name = line.split("  ")
        assert hashlib.sha256(archive.read(name)).hexdigest() == digest, name
    evidence = json.loads(archive.read("evidence.json"))
    warc = archive.read("page.warc.gz")
    assert evidence["warc"]["sha256"] == hashlib.sha256(warc).hexdigest()
    assert evidence["match"]["id"] == seeded.hostile_match_id
    assert [p["page_text"] for p in evidence["passages"]] == ["庙里住着一位老和尚", "他带着一把旧伞出发了"]
    records = list(ArchiveIterator(io.BytesIO(warc)))
    assert [r.rec_type for r in records] == ["warcinfo", "resource", "metadata"]
    resource = records[1]
    assert resource.rec_headers.get_header("WARC-Target-URI").endswith("<script>alert(1)</script>")
    # the records are dated when the page was fetched (seeded: when the test stored it), to the second, in UTC
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            fetched = session.scalar(
                select(Page.fetched_at)
                .join(Match, Match.page_id == Page.id)
                .where(Match.id == seeded.hostile_match_id)
            )
    finally:
        engine.dispose()
    assert fetched is not None
    fetched_at = as_utc(fetched).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert [r.rec_headers.get_header("WARC-Date") for r in records[1:]] == [fetched_at, fetched_at]
    assert reviewer.get("/matches/999999/bundle.zip").status_code == 404
