"""Every page of the admin as a person sees it: in Chromium, in Chinese and in English, at 1400 and 390 pixels
wide. No page is wider than the window (tables scroll inside their own box), no English is left on a Chinese
page, and each page's screenshot is kept under ``$FPTRACK_TEST_ARTIFACTS/screenshots/`` for CI to upload.

One browser and one seeded database serve the whole module (the rows of ``tests/support/admin_seed.py``, a
monitored site with a crawl, a sender, a host contact and a drafted notice)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session
from werkzeug.serving import make_server

from fptrack.admin.i18n import LANGUAGE_COOKIE
from fptrack.admin.web import create_app
from fptrack.core.settings import Settings
from fptrack.jobs.notices import add_contact, draft_notice, save_sender
from fptrack.jobs.sites import SiteSpec, add_site
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CrawlJob, Match, Page, Work, utcnow
from tests.conftest import TEST_SITE_RATE
from tests.integration.admin.test_web_browser import ARTIFACTS, CHROMIUM_ARGS, CHROMIUM_PATH
from tests.support.accounts import PASSWORD, add_account
from tests.support.admin_seed import COPIED_ONE, T0, Seeded, passage_span, seed
from tests.support.meaning_seed import add_meaning_match
from tests.unit.admin.test_web_i18n import _untranslated

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SCREENSHOTS = ARTIFACTS.parent / "screenshots"
WIDTHS = (1400, 390)
# Pages that still show English words on a Chinese page, and where they come from (to translate next; every
# other page fails the test on one English word outside data and the allow-list of test_web_i18n._KEPT)
ENGLISH_LEFT = {
    "notice-document": (
        "data the notice's own body does not mark as data (jobs/templates/notice_document.html): the emails, "
        "a copy's page title, the compared passages, the URL inside each evidence-bundle line; the 'cannot "
        "be sent yet' box is Chinese (its reasons are core.phrase phrases the admin translates)"
    ),
}


@dataclass(frozen=True)
class Served:
    base_url: str
    pages: dict[str, str]


LONG_URL = "http://pirate.example/book/" + "chapter-0123456789abcdef" * 12 + ".html"
LONG_HOST = "www." + "mirror-of-a-mirror-" * 4 + "pirate.example"


def _long_ones(session: Session, seeded: Seeded) -> None:
    """Confirmed copies at a 300-character URL (in the notice) and on a 90-character host (in the
    dashboard's top sites): what pushed pages past the window's edge."""
    work = session.get(Work, seeded.work_id)
    assert work is not None
    for url, host in ((LONG_URL, "pirate.example"), (f"http://{LONG_HOST}/1.html", LONG_HOST)):
        text = f"转载：{COPIED_ONE}。"
        page = Page(url=url, final_url=url, host=host, status=200, title="长", text=text)
        session.add(page)
        session.add(
            Match(
                page=page,
                work=work,
                chapter=work.chapters[0],
                score=0.9,
                methods=["winnowing"],
                spans=[passage_span(text, COPIED_ONE)],
                status="confirmed",
                first_seen=T0,
                last_seen=T0,
            )
        )
    session.flush()


def _seed(settings: Settings) -> dict[str, str]:
    """The rows every page needs to show something, and the path of each page."""
    engine = create_engine_for(settings)
    try:
        with Session(engine, expire_on_commit=False) as session:
            seeded = seed(session)
            _long_ones(session, seeded)
            # a copy that keeps the meaning (issue 36): its kind, coverage and aligned sentences side by side
            meaning_id = add_meaning_match(session, seeded)
            site = add_site(
                session, SiteSpec(name="盗版书站", start_urls=("http://pirate.example/",), schedule="6h")
            )
            crawl = CrawlJob(
                site_id=site.id,
                start_urls=["http://pirate.example/"],
                depth=2,
                max_pages=200,
                status="finished",
                trigger="site",
                started_at=utcnow(),
                finished_at=utcnow(),
                pages_seen=4,
                copies_found=2,
            )
            session.add(crawl)
            sender = save_sender(
                session,
                "山中出版社",
                create=True,
                address="北京市东城区一号",
                email="rights@shan.example",
                signer_name="王五",
                language="zh",
            )
            add_contact(session, "pirate.example", "abuse@pirate.example")
            session.flush()
            notice = draft_notice(session, actor="admin:ada", host="pirate.example", sender=sender)
            session.commit()
            return {
                "dashboard": "/?days=0",
                "matches": "/matches",
                "match": f"/matches/{seeded.hostile_match_id}",
                "match-meaning": f"/matches/{meaning_id}",
                "works": "/works",
                "work": f"/works/{seeded.work_id}",
                "sites": "/sites",
                "site": f"/sites/{site.id}",
                "crawls": "/crawls",
                "crawl": f"/crawls/{crawl.id}",
                "notices": "/notices",
                "notice": f"/notices/{notice.id}",
                "notice-document": f"/notices/{notice.id}/document",
                "senders": "/senders",
                "users": "/users",
                "reports": "/reports",
                "networks": "/networks",
                "leads": "/leads",
            }
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def served(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data_dir = tmp_path_factory.mktemp("admin-pages")
    (data_dir / "fptrack.db").write_bytes(sqlite_template.read_bytes())
    settings = Settings(
        data_dir=data_dir,
        database_url=f"sqlite:///{data_dir / 'fptrack.db'}",
        site_rate=float(TEST_SITE_RATE),
        notice_refetch=False,
        evidence_screenshot=False,
    )
    pages = _seed(settings)
    add_account(settings, "ada", "admin")
    app = create_app(settings)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base_url = f"http://127.0.0.1:{server.server_port}"
        if "/takedowns" in {rule.rule for rule in app.url_map.iter_rules()}:
            pages["takedowns"] = "/takedowns"
        yield Served(base_url, pages)
    finally:
        server.shutdown()
        thread.join(timeout=10)
        app.extensions["fptrack"].engine.dispose()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


# the page's width beyond the window, and the elements that stick out past its right edge (the outermost)
_OVERFLOW = """() => {
  const width = window.innerWidth;
  const out = [];
  for (const element of document.querySelectorAll('body *')) {
    const box = element.getBoundingClientRect();
    if (box.width === 0 || box.right <= width + 1) continue;
    let inside = false;
    for (let up = element.parentElement; up; up = up.parentElement) {
      const style = getComputedStyle(up);
      if (style.overflowX === 'auto' || style.overflowX === 'scroll' || style.overflowX === 'hidden') {
        inside = true;
        break;
      }
    }
    if (inside) continue;
    if (out.some(other => other.contains(element))) continue;
    out.push(element);
  }
  return {
    scroll: document.documentElement.scrollWidth,
    width: width,
    culprits: out.slice(0, 5).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
      (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ').join('.') : '') +
      ' right=' + Math.round(e.getBoundingClientRect().right)),
  };
}"""


# ordinary words (a run of letters between spaces, so not URLs, hosts, hashes or markup) that the layout
# broke across lines: a word whose letters lie on two line boxes (`overflow-wrap: anywhere` in a narrow cell)
_BROKEN_WORDS = r"""() => {
  const broken = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.getBoundingClientRect().width < 2) continue;  // visually hidden (screen readers)
    for (const token of node.data.matchAll(/\S+/g)) {
      const word = token[0].replace(/^[("'“‘]+/, '').replace(/[.,;:!?)"'”’]+$/, '');
      if (!/^[A-Za-z]{2,}$/.test(word)) continue;  // a URL, host, hash, number or markup, not a word
      const start = token.index + token[0].indexOf(word);
      range.setStart(node, start);
      range.setEnd(node, start + word.length);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) broken.push(`${word} in <${node.parentElement.tagName.toLowerCase()}>`);
    }
  }
  return broken.slice(0, 5);
}"""


@pytest.mark.parametrize("language", ["zh", "en"])
def test_every_page_fits_the_window_and_speaks_the_language(
    served: Served, browser: Any, language: str
) -> None:
    host = served.base_url.removeprefix("http://").split(":")[0]
    problems: list[str] = []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900})
    try:
        context.add_cookies([{"name": LANGUAGE_COOKIE, "value": language, "domain": host, "path": "/"}])
        page = context.new_page()
        page.goto(served.base_url + "/login")
        page.locator("input[name=username]").fill("ada")
        page.locator("input[name=password]").fill(PASSWORD)
        page.locator("input[name=password]").press("Enter")
        page.wait_for_url(served.base_url + "/")
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            for name, path in served.pages.items():
                response = page.goto(served.base_url + path)
                if response is None or response.status != 200:
                    problems.append(f"{language} {path}: {response.status if response else 'no'} response")
                    continue
                # JPEG: a third less time than PNG for a full page, and a tenth of the bytes to upload
                shot = SCREENSHOTS / f"{language}-{width}-{name}.jpg"
                page.screenshot(path=str(shot), full_page=True, type="jpeg", quality=75)
                measured = page.evaluate(_OVERFLOW)
                if measured["scroll"] > measured["width"]:
                    problems.append(
                        f"{language} {width}px {path}: {measured['scroll']} px wide; {measured['culprits']}"
                    )
                if broken := page.evaluate(_BROKEN_WORDS):
                    problems.append(f"{language} {width}px {path}: words broken mid-word: {broken}")
                if language == "zh" and width == WIDTHS[0] and (left := _untranslated(page.content())):
                    if name in ENGLISH_LEFT:  # known, listed for the lead: printed, not failed
                        print(f"zh {path}: English left ({ENGLISH_LEFT[name]}): {left}")
                    else:
                        problems.append(f"zh {path}: English left: {left}")
    finally:
        context.close()
    assert not problems, "\n".join(problems)
