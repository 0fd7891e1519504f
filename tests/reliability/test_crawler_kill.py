"""A site crawl killed outright (SIGKILL to its process group: no cleanup runs) and started again resumes: it
does not fetch again the pages the killed run stored, every page of the site ends up stored once, and every
copy is compared and matched once. Real processes (`fptrack sites run`), the test's own PostgreSQL and Redis
(tests/reliability/cluster.py), a loopback site that logs every request; once with the fingerprint stage in
the crawl's process, once on a real Celery worker over Redis."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.core.settings import Settings
from fptrack.crawler.resume import state_dir
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Chapter, CrawlJob, Match, Page, Site
from testbed.sites import Page as SitePage
from testbed.sites import SiteURL, serve_site
from tests.integration.crawler.harness import REPO_ROOT
from tests.reliability.cluster import Cluster

pytestmark = pytest.mark.slow

SECTIONS = 10
CHAPTERS_PER_SECTION = 19  # 1 index + 10 sections + 190 chapter pages = 201 pages
PAGE_DELAY = 0.04  # seconds per response: the crawl takes long enough for the kill to land mid-crawl
KILL_AFTER_PAGES = 60  # pages stored when the crawl is killed
WORKS = ("lighthouse.txt", "alley.txt")


def _copies() -> dict[str, tuple[str, int]]:
    """Chapter pages that copy a registered chapter: path -> (work file, chapter index), spread over the site
    so that some are crawled before the kill and some after."""
    paths = ["/c/0-3.html", "/c/2-7.html", "/c/4-1.html", "/c/6-11.html", "/c/8-5.html", "/c/9-18.html"]
    chapters = [(work, index) for work in WORKS for index in range(len(demo_chapters(work)))]
    return dict(zip(paths, chapters, strict=True))


def _site_pages() -> dict[str, SitePage]:
    """An index, sections and chapter pages (each linking back to the index, its section and the next chapter,
    so URLs are found many times over); the chapter pages not in :func:`_copies` hold text of no registered
    work."""
    filler = (DEMO_DATA / "library_news.txt").read_text("utf-8").replace("\n", "")
    rng = random.Random(7)
    copies = _copies()
    pages: dict[str, SitePage] = {}
    sections = "".join(f'<a href="/s/{s}/">卷{s}</a> ' for s in range(SECTIONS))
    pages["/"] = SitePage.html(f"<html><body><h1>目录</h1>{sections}</body></html>", delay=PAGE_DELAY)
    for s in range(SECTIONS):
        chapters = "".join(f'<a href="/c/{s}-{c}.html">第{c}章</a> ' for c in range(CHAPTERS_PER_SECTION))
        pages[f"/s/{s}/"] = SitePage.html(
            f"<html><body><h1>卷{s}</h1>{chapters}<a href='/'>目录</a></body></html>", delay=PAGE_DELAY
        )
        for c in range(CHAPTERS_PER_SECTION):
            path = f"/c/{s}-{c}.html"
            if path in copies:
                work, index = copies[path]
                paragraphs = demo_chapters(work)[index].split("\n")
            else:
                start = rng.randrange(len(filler) - 200)
                paragraphs = [filler[start : start + 100], filler[start + 100 : start + 200]]
            text = "".join(f"<p>{p}</p>" for p in paragraphs if p.strip())
            nav = (
                f'<a href="/">目录</a> <a href="/s/{s}/">卷</a> '
                f'<a href="/c/{s}-{(c + 1) % CHAPTERS_PER_SECTION}.html">下一章</a>'
            )
            pages[path] = SitePage.html(
                f"<html><head><title>第{c}章</title></head><body><h1>第{c}章</h1>{text}{nav}</body></html>",
                delay=PAGE_DELAY,
            )
    return pages


def _env(cluster: Cluster, *, workers: bool = False) -> dict[str, str]:
    """The cluster's settings; without its broker (the fingerprint stage in the crawl's process) unless
    ``workers``."""
    env = {**cluster.env, "FPTRACK_CRAWL_CONCURRENCY_PER_SITE": "2"}
    if not workers:
        del env["FPTRACK_BROKER_URL"]
    return env


def _cli(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextmanager
def _session(settings: Settings) -> Iterator[Session]:
    engine = create_engine_for(settings)
    try:
        with Session(engine, expire_on_commit=False) as session:
            yield session
    finally:
        engine.dispose()


def _stored_urls(settings: Settings) -> list[str]:
    with _session(settings) as session:
        return [str(url) for url in session.scalars(select(Page.url))]


def _kill_mid_crawl(env: dict[str, str], base: SiteURL, settings: Settings, after_pages: int) -> None:
    """Start `sites run books` in a process group of its own and SIGKILL the group once ``after_pages`` pages
    are stored (and before the crawl ends)."""
    crawl = subprocess.Popen(
        [sys.executable, "-m", "fptrack.cli", "sites", "run", "books", "-q"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(_stored_urls(settings)) < after_pages:
            assert crawl.poll() is None, f"the crawl ended before the kill:\n{crawl.communicate()}"
            assert time.monotonic() < deadline, "the crawl stored too few pages in time"
            time.sleep(0.05)
    finally:
        os.killpg(crawl.pid, signal.SIGKILL)
        crawl.communicate(timeout=30)
    assert crawl.returncode == -signal.SIGKILL


@pytest.mark.parametrize("fingerprinting", ["in-process", "workers"])
def test_a_killed_site_crawl_resumes_without_refetching_or_duplicating(
    cluster: Cluster, fingerprinting: str
) -> None:
    in_process = _env(cluster)
    env = _env(cluster, workers=fingerprinting == "workers")
    settings = Settings.from_env(env)
    for work in WORKS:
        added = _cli(in_process, "works", "add", str(DEMO_DATA / work))
        assert added.returncode == 0, added.stderr
    pages = _site_pages()
    copies = _copies()
    if fingerprinting == "workers":
        cluster.start_worker("worker")  # another process group: it survives the crawl's kill
    with serve_site(pages) as base:
        added = _cli(
            in_process,
            "sites",
            "add",
            "books",
            base + "/",
            "--depth",
            "3",
            "--max-pages",
            "1000",
            "--allow-private",
        )
        assert added.returncode == 0, added.stderr
        with _session(settings) as session:
            site_id = int(session.scalars(select(Site.id).where(Site.name == "books")).one())
        state = state_dir(settings.data_dir, site_id)

        _kill_mid_crawl(env, base, settings, KILL_AFTER_PAGES)
        before = {url.removeprefix(base) for url in _stored_urls(settings)}
        requests_before = len(base.requests)
        assert (state / "frontier.sqlite").exists(), "the killed crawl left no state to resume from"
        assert len(before) < len(pages), "the kill landed after the crawl had stored every page"

        resumed = _cli(env, "sites", "run", "books", "-q")
        assert resumed.returncode == 0, f"{resumed.stdout}\n{resumed.stderr}"
        second_run = [path for path in base.requests[requests_before:] if path != "/robots.txt"]

    refetched = sorted(set(second_run) & before)
    with _session(settings) as session:
        rows = session.execute(select(Page.url, func.count()).group_by(Page.url)).all()
        uncompared = session.scalar(select(func.count()).select_from(Page).where(Page.compared_at.is_(None)))
        matches = session.execute(
            select(Page.url, Chapter.work_id, Chapter.index)
            .join(Match, Match.page_id == Page.id)
            .join(Chapter, Chapter.id == Match.chapter_id)
        ).all()
        jobs = list(session.scalars(select(CrawlJob).order_by(CrawlJob.id)))
    stored = Counter({str(url).removeprefix(base): int(count) for url, count in rows})
    lost = sorted(set(pages) - set(stored))
    print(
        f"\n[{fingerprinting}] {len(pages)} pages; stored before the kill {len(before)}, fetched after the "
        f"resume {len(set(second_run))}, refetched {len(refetched)}, lost {len(lost)}, "
        f"matches {len(matches)} (expected {len(copies)})"
    )
    assert refetched == [], (
        f"the resumed crawl fetched again pages the killed one had stored: {refetched[:10]}"
    )
    assert lost == []
    assert set(stored) == set(pages) and set(stored.values()) == {1}
    assert uncompared == 0
    by_page = Counter(str(url).removeprefix(base) for url, _, _ in matches)
    assert set(by_page) == set(copies) and set(by_page.values()) == {1}, by_page
    assert len(set(matches)) == len(matches)

    killed, resumed_job = jobs
    assert killed.status == "failed" and "died" in killed.error
    assert resumed_job.status == "finished", resumed_job.error
    notes = resumed_job.stats["notes"]
    assert any(note.startswith(f"resumed the interrupted crawl of job #{killed.id}") for note in notes), notes
    assert resumed_job.stats["counters"]["fptrack/resume/pages_before"] == len(before)
    assert "resumed the interrupted crawl" in resumed.stdout
    assert not state.exists(), "a crawl that finished left its state behind"


def test_the_page_budget_counts_the_pages_of_the_killed_run(cluster: Cluster) -> None:
    env = _env(cluster)
    settings = Settings.from_env(env)
    budget = 120
    pages = _site_pages()
    with serve_site(pages) as base:
        added = _cli(
            env,
            "sites",
            "add",
            "books",
            base + "/",
            "--depth",
            "3",
            "--max-pages",
            str(budget),
            "--allow-private",
        )
        assert added.returncode == 0, added.stderr
        _kill_mid_crawl(env, base, settings, 40)
        before = len(_stored_urls(settings))
        resumed = _cli(env, "sites", "run", "books", "-q")
        assert resumed.returncode == 0, f"{resumed.stdout}\n{resumed.stderr}"
    after = len(_stored_urls(settings))
    print(f"\nbudget {budget}: stored before the kill {before}, after the resume {after}")
    assert before < budget
    assert after == budget


def test_a_changed_site_does_not_resume_a_stale_state(cluster: Cluster) -> None:
    env = _env(cluster)
    settings = Settings.from_env(env)
    with serve_site(_site_pages()) as base:
        added = _cli(
            env, "sites", "add", "books", base + "/", "--depth", "3", "--max-pages", "1000", "--allow-private"
        )
        assert added.returncode == 0, added.stderr
        _kill_mid_crawl(env, base, settings, 30)
        edited = _cli(env, "sites", "edit", "books", "--depth", "1")
        assert edited.returncode == 0, edited.stderr
        requests_before = len(base.requests)
        again = _cli(env, "sites", "run", "books", "-q")
        assert again.returncode == 0, f"{again.stdout}\n{again.stderr}"
        second_run = [path for path in base.requests[requests_before:] if path != "/robots.txt"]
    assert "resumed" not in again.stdout
    # depth 1 from the start page: the index and its sections, fetched again from the start
    assert sorted(second_run) == sorted(["/", *(f"/s/{s}/" for s in range(SECTIONS))])
