"""The admin in a real browser: Debian's Chromium driven by Playwright against the app on 127.0.0.1.

A reviewer logs in (an account created through the account service), opens the dashboard, goes to a match,
sees the copied passages highlighted on both sides, confirms it, exports the list as CSV and prints the site's
takedown notice (to PDF, through Chromium's own print); the hostile markup in the crawled page never runs.
Screenshots are saved under ``$FPTRACK_TEST_ARTIFACTS`` (default ``test-artifacts/``) by every run; Chinese
renders with the CJK font that ``deploy/ensure-services.sh`` installs. Playwright never downloads a browser
here: it launches ``/usr/bin/chromium`` through ``executable_path``."""

from __future__ import annotations

import csv
import io
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from werkzeug.serving import make_server

from fptrack.admin.web import create_app
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Chapter, Match, Page, ReviewDecision, Work
from tests.support.accounts import PASSWORD, add_account

pytestmark = pytest.mark.browser

CHROMIUM_PATH = "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("FPTRACK_TEST_ARTIFACTS", "test-artifacts")) / "admin-browser"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

CHAPTER_ONE = "第一回 风起\n江边的渡口只有一条旧船，船夫每天黄昏都会唱同一首歌。\n"
CHAPTER_TWO = "第二回 夜航\n那天夜里雾很大，船夫没有唱歌，只是默默地把灯挂上了船头。\n"
WORK_TEXT = CHAPTER_ONE + CHAPTER_TWO
COPIED = ("船夫每天黄昏都会唱同一首歌", "江边的渡口只有一条旧船")
HOSTILE_SCRIPT = "<script>window.__pwned = true; alert('pwned')</script>"
HOSTILE_IMG = '<img src=x onerror="window.__pwned = true">'
PAGE_TEXT = f"{HOSTILE_SCRIPT}本站首页 | {COPIED[1]}。{HOSTILE_IMG}好看：{COPIED[0]}。广告位"


def _seed(settings: Settings) -> int:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            work = Work(title="渡口", source_name="dukou.txt", content_sha256="c" * 64, text=WORK_TEXT)
            one_start = 0
            two_start = len(CHAPTER_ONE)
            work.chapters.append(
                Chapter(index=1, title="第一回 风起", start=one_start, end=two_start, text=CHAPTER_ONE)
            )
            work.chapters.append(
                Chapter(index=2, title="第二回 夜航", start=two_start, end=len(WORK_TEXT), text=CHAPTER_TWO)
            )
            page = Page(
                url='http://pirate.example/read/1.html?x="><script>window.__pwned=1</script>',
                final_url="http://pirate.example/read/1.html",
                host="pirate.example",
                status=200,
                title=f"渡口 全文 {HOSTILE_SCRIPT}",
                text=PAGE_TEXT,
            )
            spans = []
            for passage in COPIED:
                page_start, work_start = PAGE_TEXT.index(passage), WORK_TEXT.index(passage)
                spans.append([page_start, page_start + len(passage), work_start, work_start + len(passage)])
            match = Match(
                page=page,
                work=work,
                chapter=work.chapters[0],
                score=0.97,
                methods=["simhash64", "winnowing"],
                spans=spans,
                status="flagged",
                first_seen=datetime(2026, 3, 2, 8, 30, tzinfo=UTC),
                last_seen=datetime(2026, 3, 2, 8, 30, tzinfo=UTC),
            )
            session.add_all([work, page, match])
            session.commit()
            return match.id
    finally:
        engine.dispose()


@pytest.fixture
def served_admin(sqlite_settings: Settings) -> Iterator[tuple[str, Settings, int]]:
    match_id = _seed(sqlite_settings)
    add_account(sqlite_settings, "rita", "reviewer")
    app = create_app(sqlite_settings)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", sqlite_settings, match_id
    finally:
        server.shutdown()
        thread.join(timeout=10)
        app.extensions["fptrack"].engine.dispose()


def test_reviewer_confirms_a_match_and_crawled_markup_never_runs(
    served_admin: tuple[str, Settings, int],
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base_url, settings, match_id = served_admin
    dialogs: list[str] = []
    console: list[str] = []
    outside_requests: list[str] = []

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(accept_downloads=True)
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.on("console", lambda message: console.append(message.text))
            page.on(
                "request",
                lambda request: (
                    None if request.url.startswith(base_url) else outside_requests.append(request.url)
                ),
            )

            page.goto(base_url + "/")
            # Without a session every page leads to the login form, which brings the reviewer back.
            expect(page).to_have_url(base_url + "/login?next=/")
            page.get_by_label("Username").fill("rita")
            page.get_by_label("Password").fill("not the password")
            page.get_by_role("button", name="Log in").click()
            expect(page.locator("#login-error")).to_have_text("Wrong username or password.")
            page.get_by_label("Username").fill("rita")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            expect(page).to_have_url(base_url + "/")
            expect(page.locator("#current-user")).to_have_text("rita")
            expect(page.locator("#count-matches")).to_have_text("1")
            expect(page.locator("#status-flagged")).to_have_text("1")
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
            # all time: the seeded match is older than the default 90 days; the charts are SVG images drawn by
            # the server, each loaded and drawn (a blocked or broken image has no natural width)
            page.get_by_label("Period").select_option("0")
            page.get_by_role("button", name="Show").click()
            expect(page).to_have_url(base_url + "/?days=0&per=")
            charts = page.locator("img.chart")
            expect(charts).to_have_count(3)
            for index in range(3):
                chart = charts.nth(index)
                chart.scroll_into_view_if_needed()
                page.wait_for_function(
                    "image => image.complete && image.naturalWidth > 0", arg=chart.element_handle()
                )
            expect(page.locator("#table-works tbody th")).to_have_text(["渡口"])
            expect(page.locator("#table-hosts tbody th")).to_have_text(["pirate.example"])
            page.screenshot(path=str(ARTIFACTS / "dashboard-all-time.png"), full_page=True)
            page.get_by_role("link", name="Sites", exact=True).click()
            expect(page.locator("h1")).to_have_text("Sites")

            page.get_by_role("link", name="Matches", exact=True).first.click()
            expect(page).to_have_url(base_url + "/matches")
            # The hostile page title is shown as text in the list.
            expect(page.locator(".page-title")).to_have_text(f"渡口 全文 {HOSTILE_SCRIPT}")
            page.get_by_role("link", name="evidence").click()
            expect(page).to_have_url(f"{base_url}/matches/{match_id}")

            page_marks = page.locator("#page-text mark")
            expect(page_marks).to_have_text([COPIED[1], COPIED[0]])
            expect(page.locator("#work-text mark")).to_have_text([COPIED[1], COPIED[0]])
            highlight = page_marks.first.evaluate("element => getComputedStyle(element).backgroundColor")
            assert highlight not in ("rgba(0, 0, 0, 0)", "transparent"), "the stylesheet did not load"
            page_text = page.locator("#page-text").inner_text()
            assert HOSTILE_SCRIPT in page_text and HOSTILE_IMG in page_text
            assert page.locator("#page-text script, #page-text img, script").count() == 0

            # Passage 1 of the page links to the same passage in the registered chapter.
            page.locator("#page-text mark a").nth(1).click()
            expect(page).to_have_url(f"{base_url}/matches/{match_id}#w1")

            page.get_by_label("reason").fill("whole chapter copied")
            page.get_by_role("button", name="Confirm piracy").click()
            expect(page).to_have_url(f"{base_url}/matches/{match_id}")
            expect(page.locator("h1 .status")).to_have_text("confirmed")
            expect(page.locator(".notice")).to_have_text(f"Match {match_id} is now confirmed.")
            expect(page.get_by_role("button", name="Confirm piracy")).to_have_count(0)

            page.screenshot(path=str(ARTIFACTS / "evidence.png"), full_page=True)

            page.goto(base_url + "/matches?status=confirmed")
            expect(page.locator("td .status")).to_have_text(["confirmed"])
            page.screenshot(path=str(ARTIFACTS / "matches.png"), full_page=True)

            # Export the filtered list as CSV: the hostile URL is a cell, the status and id are there.
            with page.expect_download() as download_info:
                page.locator("#export-csv").click()
            download = download_info.value
            assert download.suggested_filename.startswith("fptrack-matches-")
            exported = Path(download.path()).read_text(encoding="utf-8-sig")
            rows = list(csv.DictReader(io.StringIO(exported)))
            assert [(row["id"], row["status"], row["work_title"]) for row in rows] == [
                (str(match_id), "confirmed", "渡口")
            ]
            assert rows[0]["page_url"].endswith("<script>window.__pwned=1</script>")
            (ARTIFACTS / "matches.csv").write_text(exported, encoding="utf-8")

            # The site's takedown notice: printable HTML, printed to PDF by Chromium.
            page.get_by_role("link", name="Reports").first.click()
            expect(page).to_have_url(base_url + "/reports")
            page.locator("a.notice-html").click()
            expect(page.locator("#notice-host")).to_have_text("pirate.example")
            expect(page.locator("#notice-count")).to_contain_text("1 infringing page")
            expect(page.locator("blockquote.passage")).to_have_text(list(COPIED))  # in the match's span order
            expect(page.locator("h2 .url")).to_have_text(
                'http://pirate.example/read/1.html?x="><script>window.__pwned=1</script>'
            )
            page.screenshot(path=str(ARTIFACTS / "notice.png"), full_page=True)
            pdf = page.pdf(path=str(ARTIFACTS / "notice-printed.pdf"), format="A4")
            assert pdf.startswith(b"%PDF-")
            with page.expect_download() as pdf_info:
                page.get_by_role("link", name="Download as PDF").click()
            assert Path(pdf_info.value.path()).read_bytes().startswith(b"%PDF-")
            pdf_info.value.save_as(ARTIFACTS / "notice.pdf")
            page.goto(base_url + "/")  # the notice is a bare document: back to the admin to log out

            assert page.evaluate("typeof window.__pwned") == "undefined"

            page.get_by_role("button", name="Log out").click()
            expect(page).to_have_url(base_url + "/login")
            page.goto(base_url + "/matches")
            expect(page).to_have_url(base_url + "/login?next=/matches")
        finally:
            browser.close()

    assert dialogs == []
    # Nothing even tried to run: a blocked inline script would show up as a CSP report in the console.
    assert not [line for line in console if "Content Security Policy" in line], console
    assert outside_requests == []

    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            assert session.scalar(select(Match.status).where(Match.id == match_id)) == "confirmed"
            decision = session.scalars(
                select(ReviewDecision).where(ReviewDecision.match_id == match_id)
            ).one()
            assert (decision.decision, decision.reviewer, decision.note) == (
                "confirmed",
                "rita",
                "whole chapter copied",
            )
    finally:
        engine.dispose()
