"""``benchmarks.scale.pages --replicate-from``: the pages past what the fill reaches copied row for row under
the generator's numbers and hosts (``benchmarks.scale._replicate``), on a PostgreSQL database of the test's
own filled through the product's store and compare. The 1M-page figures rest on these copies being the
product's rows of their originals, and on the product writing on top of them afterwards."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from benchmarks.scale._replicate import replicate
from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare.service import index_work, process_pages
from fptrack.compare.works import register_work
from fptrack.core.settings import Settings
from fptrack.crawler.pages import CrawledPage
from fptrack.crawler.store import PageStore
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.models import Fingerprint, Match, Page, PageCodes, Site

HOST_PAGES = 5  # pages per generated host in this test (the benchmark's generator: 20,000)
CHAPTER = demo_chapters("lighthouse.txt")[0]  # registered
OTHER = (DEMO_DATA / "library_news.txt").read_text("utf-8")  # not


def _url(number: int, mirror: int = 0) -> str:
    prefix = "www" if mirror == 0 else f"m{mirror}"
    return f"http://{prefix}.pirate{number // HOST_PAGES:03d}.example/book/{number}.html"


def _page(url: str, text: str) -> CrawledPage:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return CrawledPage(
        url=url, final_url=url, status=200, encoding="utf-8", title="", text=text, content_sha256=digest,
        snapshot_sha256=digest, fetched_at=datetime.now(UTC),
    )  # fmt: skip


def _store(sessions: object, settings: Settings, pages: list[CrawledPage]) -> None:
    handed: list[int] = []
    store = PageStore(sessions, job_id=None, dispatch=handed.extend, settings=settings)  # type: ignore[arg-type]
    for page in pages:
        store.add(page)
    store.flush()
    with session_scope(sessions) as session:  # type: ignore[arg-type]
        process_pages(session, handed, settings)


def _number(url: str) -> int:
    return int(url.rsplit("/", 1)[1].split(".")[0])


def test_copies_are_their_originals_rows_under_the_generators_numbers(postgres_settings: Settings) -> None:
    settings = postgres_settings
    engine = create_engine_for(settings)
    sessions = session_factory(engine)
    try:
        with session_scope(sessions) as session:
            lighthouse = (DEMO_DATA / "lighthouse.txt").read_bytes()
            work = register_work(session, lighthouse, source_name="lighthouse.txt", title="lighthouse")
            index_work(session, work.work_id, settings)
        # numbers 0-9 on hosts pirate000 and pirate001: copies of the chapter on the even numbers (one on a
        # mirror host), other text on the odd ones
        originals = {
            n: _page(_url(n, mirror=1 if n == 4 else 0), (f"第{n}章\n" + (CHAPTER if n % 2 == 0 else OTHER)))
            for n in range(10)
        }
        _store(sessions, settings, list(originals.values()))
        dsn = make_url(settings.database_url).set(drivername="postgresql")
        dsn_text = dsn.render_as_string(hide_password=False)
        added = replicate(dsn_text, 10, 10, 30, [23], [], lambda _: None, host_pages=HOST_PAGES)
        assert added["pages"] == 19  # two rounds of 10, number 23 left for the caller

        with session_scope(sessions) as session:
            rows = session.execute(select(Page.id, Page.url, Page.text, Page.host, Page.site_id))
            pages = {str(url): (int(i), str(text), str(host), int(site)) for i, url, text, host, site in rows}
            sites = {int(i): str(h) for i, h in session.execute(select(Site.id, Site.host))}
            matches = Counter(int(p) for p in session.scalars(select(Match.page_id)))
            codes = session.execute(select(PageCodes.page_id, PageCodes.sample))
            samples = {int(p): list(s) for p, s in codes}
            of_pages = select(Fingerprint.page_id).where(Fingerprint.page_id.is_not(None))
            fingerprints = Counter(int(p) for p in session.scalars(of_pages))
        expected = {_url(n, mirror=1 if n % 10 == 4 else 0) for n in range(30) if n != 23}
        assert set(pages) == expected
        by_number = {_number(url): row for url, row in pages.items()}
        for url, (page_id, text, host, site_id) in pages.items():
            number = _number(url)
            original = by_number[number % 10]
            assert text == original[1]  # the original's text, under the copy's number
            assert host == url.split("/")[2] and sites[site_id] == host  # on the site of its own host
            assert matches[page_id] == matches[original[0]]
            assert fingerprints[page_id] == fingerprints[original[0]]
            assert samples[page_id] == samples[original[0]]
        copies = [n for n in by_number if n % 2 == 0]
        assert len(copies) == 15 and all(matches[by_number[n][0]] for n in copies)  # every copy matched

        # the product writes on top: fresh ids past the copies, a page at the number left out
        _store(sessions, settings, [_page(_url(23), "第23章\n" + CHAPTER)])
        with session_scope(sessions) as session:
            newest = session.execute(select(Page.id, Page.url).order_by(Page.id.desc()).limit(1)).one()
            assert newest.url == _url(23) and newest.id == session.scalar(select(func.max(Page.id)))
            found = select(func.count()).select_from(Match).where(Match.page_id == newest.id)
            assert session.scalar(found) == 1
    finally:
        engine.dispose()
