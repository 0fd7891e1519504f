"""One answer in every run mode: the same pages give the same matches (page, work, chapter, spans).

The pirate site of ``test_crawl_to_report`` plus one chapter served under five URLs (desktop, mobile,
print...: copies, never template) and a run of pages whose template quotes a registered chapter (template,
never a copy). It is crawled (a) in-process on SQLite, (b) in-process on PostgreSQL, (c) with two worker
processes on PostgreSQL, one work registered while the crawl's pages are compared, (f) in-process on SQLite,
one work registered likewise by another process; then the same pages are (d) stored and processed in three
different random orders, one batch at a time, and (e) processed with every task delivered twice (and once
more, late, after the site settled)."""

from __future__ import annotations

import random
import subprocess
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import delete, select

from fptrack.cli.demo import DEMO_DATA
from fptrack.compare.service import process_pages
from fptrack.compare.templates import settle_site
from fptrack.core.settings import Settings
from fptrack.crawler.pages import CrawledPage
from fptrack.crawler.store import PageStore
from fptrack.storage.db import create_engine_for, session_factory
from fptrack.storage.models import Page as PageRow
from fptrack.storage.models import Site
from testbed.sites import Page, chapter_page, serve_site
from tests.conftest import REDIS_URL
from tests.e2e.conftest import Fptrack
from tests.support.pirate_site import ALLEY, LIGHT, paragraphs_of, pirate_site
from tests.support.workers import wait_indexed, worker_processes

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

MIRRORS = ["/m/2.html", "/print/2.html", "/wap/2.html", "/amp/2.html", "/txt/2.html"]
TEMPLATE_PAGES = [f"/notes/{n}.html" for n in range(7)]
FILLER = (
    "春夏秋冬东南西北山川河流草木花鸟风雨雷电日月星辰"
    "城市乡村道路桥梁学校医院工厂商店朋友家人老师学生早晚快慢高低"
)


def _parity_site() -> tuple[dict[str, Any], set[str]]:
    pages, expected = pirate_site()
    rng = random.Random(7)
    slogan = LIGHT[0][120:420]  # the site's banner quotes 300 characters of a registered chapter
    for path in TEMPLATE_PAGES:
        body = ["站长推荐：" + slogan] + [
            "".join(rng.choice(FILLER) for _ in range(60)) + "。" for _ in range(12)
        ]
        pages[path] = chapter_page("读书随笔", body, template="html5-article")
    for n, path in enumerate(MIRRORS):
        pages[path] = chapter_page(
            "第二回",
            paragraphs_of(ALLEY[1]),
            template=["biquge", "p-paragraphs", "html5-article", "split-divs", "ad-inside"][n],
        )
    links = "".join(f'<a href="{p}">{p}</a> ' for p in [*TEMPLATE_PAGES, *MIRRORS])
    index = pages["/"].body.decode().replace("</ul>", f"</ul><p>{links}</p>")
    pages["/"] = Page.html(index)
    must_flag = set(expected) | set(MIRRORS)
    return pages, must_flag


def _key(matches: list[dict[str, Any]], base: str) -> set[tuple[Any, ...]]:
    return {
        (m["page_url"].removeprefix(base), m["work_title"], m["chapter_index"], tuple(map(tuple, m["spans"])))
        for m in matches
    }


def _register(fptrack: Fptrack) -> None:
    fptrack.run("init")
    fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"), str(DEMO_DATA / "alley.txt"))


def _register_during_crawl(fptrack: Fptrack, delay: float) -> Callable[[], None]:
    """Start ``works add alley.txt`` ``delay`` seconds from now in another process; the returned call waits
    for it. The crawl is running by then: its pages are compared while the work is registered."""
    failures: list[BaseException] = []

    def register() -> None:
        try:
            threading.Event().wait(delay)
            fptrack.run("works", "add", str(DEMO_DATA / "alley.txt"))
        except (AssertionError, subprocess.TimeoutExpired) as error:  # reported by the waiting call
            failures.append(error)

    thread = threading.Thread(target=register)
    thread.start()

    def join() -> None:
        thread.join()
        if failures:
            raise failures[0]

    return join


def _crawl(
    fptrack: Fptrack, pages: dict[str, Any], *, during: Callable[[], Callable[[], None]] | None = None
) -> tuple[set[tuple[Any, ...]], str]:
    with serve_site(pages) as base:
        registered = during() if during is not None else None
        fptrack.run(
            "crawl",
            base + "/",
            "--allow-private-host",
            base.key,
            "--depth",
            "2",
            "--max-pages",
            "80",
            "--quiet",
            timeout=600,
        )
        if registered is not None:
            registered()
        return _key(fptrack.matches(), base), base


def _stored_pages(settings: Settings) -> list[CrawledPage]:
    """The pages of a finished crawl, as the crawler handed them over."""
    engine = create_engine_for(settings)
    try:
        with session_factory(engine)() as session:
            rows = session.scalars(select(PageRow).order_by(PageRow.url)).all()
            return [
                CrawledPage(
                    url=r.url,
                    final_url=r.final_url,
                    status=r.status,
                    encoding=r.encoding,
                    title=r.title,
                    text=r.text,
                    content_sha256=r.content_sha256,
                    snapshot_sha256=r.snapshot_sha256,
                    fetched_at=datetime.now(UTC),
                    error=r.error,
                )
                for r in rows
            ]
    finally:
        engine.dispose()


def _matches_of(settings: Settings, base: str) -> set[tuple[Any, ...]]:
    from fptrack.compare.records import match_to_dict
    from fptrack.storage.models import Match

    engine = create_engine_for(settings)
    try:
        with session_factory(engine)() as session:
            return _key([match_to_dict(m) for m in session.scalars(select(Match))], base)
    finally:
        engine.dispose()


def _replay(settings: Settings, crawled: list[CrawledPage], seed: int, *, deliveries: int) -> None:
    """Store ``crawled`` in a shuffled order and process the batches in another, each delivered ``deliveries``
    times, then settle the site and deliver every batch once more (a late duplicate)."""
    rng = random.Random(seed)
    engine = create_engine_for(settings)
    sessions = session_factory(engine)
    try:
        with sessions() as session:
            session.execute(delete(PageRow))
            session.commit()
        batches: list[list[int]] = []
        store = PageStore(
            sessions, job_id=None, dispatch=batches.append, batch_size=rng.randint(3, 9), settings=settings
        )
        order = list(crawled)
        rng.shuffle(order)
        for page in order:
            if store.add(page):
                store.flush()
        store.flush()
        rng.shuffle(batches)
        for batch in batches:
            for _ in range(deliveries):
                with sessions() as session:
                    process_pages(session, rng.sample(batch, len(batch)), settings)
                    session.commit()
        with sessions() as session:
            for site_id in session.scalars(select(Site.id)):
                settle_site(session, site_id, settings)
            session.commit()
        for batch in batches:  # late duplicates, after the site settled: done already, changes nothing
            with sessions() as session:
                process_pages(session, batch, settings)
                session.commit()
    finally:
        engine.dispose()


def test_every_run_mode_gives_the_same_matches(sqlite_settings, postgres_settings, tmp_path) -> None:
    pages, must_flag = _parity_site()
    answers: dict[str, set[tuple[Any, ...]]] = {}

    sqlite = Fptrack(sqlite_settings, {})
    _register(sqlite)
    answers["a: in-process, SQLite"], base_a = _crawl(sqlite, pages)

    postgres = Fptrack(postgres_settings, {})
    _register(postgres)
    answers["b: in-process, PostgreSQL"], _ = _crawl(postgres, pages)

    # c: a fresh PostgreSQL database of its own, two worker processes over Redis
    worker_db = f"{postgres_settings.database_url.rsplit('/', 1)[0]}/fptrack_parity_{uuid.uuid4().hex[:8]}"
    from sqlalchemy import create_engine, text

    admin = create_engine(postgres_settings.database_url, isolation_level="AUTOCOMMIT")
    name = worker_db.rsplit("/", 1)[1]
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    try:
        worker_settings = Settings(data_dir=tmp_path / "workers", database_url=worker_db)
        workers = Fptrack(
            worker_settings,
            {"FPTRACK_BROKER_URL": REDIS_URL, "FPTRACK_TASK_QUEUE": f"fptrack-parity-{uuid.uuid4().hex[:8]}"},
        )
        worker_settings.data_dir.mkdir(parents=True, exist_ok=True)
        workers.run("init")  # a worker refuses a database that was never initialised
        with worker_processes(workers.env(), tmp_path, 2):
            workers.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
            wait_indexed(worker_settings)
            # the second work is registered (and indexed by a worker) while the crawl's pages are compared
            # on the workers: a page compared before the work was visible is found by its look-up
            answer, base_c = _crawl(workers, pages, during=lambda: _register_during_crawl(workers, 1.5))
            wait_indexed(worker_settings)
            mid_crawl = "c: two workers, PostgreSQL, a work registered mid-crawl"
            answers[mid_crawl] = _key(workers.matches(), base_c)
            assert answer <= answers[mid_crawl]
    finally:
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()

    # f: in-process on SQLite, the second work registered by another process during the crawl
    during_db = f"sqlite:///{tmp_path / 'during.db'}"
    during_settings = Settings(data_dir=tmp_path / "during", database_url=during_db)
    during_settings.data_dir.mkdir(parents=True, exist_ok=True)
    during = Fptrack(during_settings, {})
    during.run("init")
    during.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
    answers["f: in-process, SQLite, a work registered mid-crawl"], _ = _crawl(
        during, pages, during=lambda: _register_during_crawl(during, 1.0)
    )

    crawled = _stored_pages(sqlite_settings)
    for seed in (1, 2, 3):
        _replay(postgres_settings, crawled, seed, deliveries=1)
        answers[f"d: random order {seed}"] = _matches_of(postgres_settings, base_a)
    _replay(postgres_settings, crawled, 4, deliveries=2)
    answers["e: every task twice"] = _matches_of(postgres_settings, base_a)

    reference = answers["a: in-process, SQLite"]
    assert {path for path, *_ in reference} == must_flag  # the mirrors are copies, the template pages are not
    for mode, answer in answers.items():
        assert answer == reference, f"{mode} differs: {sorted(answer ^ reference)[:6]}"
