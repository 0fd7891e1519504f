"""Faults injected into a running crawl, on a cluster of the test's own (tests/reliability/cluster.py): a
generated loopback site of known copies crawled through real workers over Redis into PostgreSQL, then the
database read back. Each test prints what it did and what was lost, which must be nothing:

- a worker killed with SIGKILL while it holds a task, then restarted: every page fingerprinted and compared
  exactly once, every copy found once;
- PostgreSQL restarted during the crawl: the crawl and the workers ride it out; no page or match lost or
  doubled; the same with tasks in-process (no broker): the crawl's own thread rides it out;
- Redis (no persistence) restarted during the crawl, every queued message lost: the workers' sweep hands the
  pages on again; the crawl finishes or says why it could not, and every page is compared in the end.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence

import pytest

from fptrack.jobs.tasks import PAGES_PER_TASK
from testbed.sites import Page as SitePage
from testbed.sites import serve_site
from tests.reliability.cluster import Census, Cluster, Worker
from tests.support.copy_site import WORK, copy_site, expected_copies

pytestmark = pytest.mark.slow

COPIES, OTHERS = 120, 30
PAGES = COPIES + OTHERS + 1  # and the index page


def _slow_site(delay: float) -> dict[str, SitePage]:
    """The copy site with every page answered after ``delay`` s: a crawl that lasts long enough to be hit."""
    return {
        path: SitePage(page.body, content_type=page.content_type, delay=delay)
        for path, page in copy_site(COPIES, OTHERS).items()
    }


def _wait_compared(cluster: Cluster, at_least: int, timeout: float = 120) -> tuple[int, int]:
    """Wait until ``at_least`` pages are compared; returns (stored, compared) then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stored, compared = cluster.count_pages()
        if compared >= at_least:
            return stored, compared
        time.sleep(0.2)
    raise AssertionError(f"fewer than {at_least} pages compared within {timeout:.0f} s")


def _wait_stored(cluster: Cluster, at_least: int, timeout: float = 120) -> int:
    """Wait until ``at_least`` pages are stored; returns how many are then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stored, _ = cluster.count_pages()
        if stored >= at_least:
            return stored
        time.sleep(0.2)
    raise AssertionError(f"fewer than {at_least} pages stored within {timeout:.0f} s")


def _compared_twice(workers: Sequence[Worker]) -> list[int]:
    """Pages that finished ``process_pages`` tasks say they compared more than once."""
    done = Counter(page_id for worker in workers for page_id in worker.pages_done())
    return sorted(page_id for page_id, times in done.items() if times > 1)


def _report(title: str, did: Sequence[str], census: Census, problems: dict[str, object]) -> None:
    matched = sum(len(ranks) for ranks in census.matches.values())
    print(f"\n== {title}")
    for line in did:
        print(f"   {line}")
    print(
        f"   after: {census.pages} pages stored, {census.pages - census.not_compared} compared, {matched} "
        "matches "
        f"on {len(census.matches)} pages ({COPIES} copies expected); crawl jobs {census.jobs}"
    )
    print(f"   lost or duplicated: {problems or 'nothing'}")


def test_a_worker_killed_mid_batch_and_restarted_compares_every_page_once(cluster: Cluster) -> None:
    cluster.env["FPTRACK_STALL_SECONDS"] = "8"  # the crawl hands stalled pages on again after this long
    cluster.fptrack("works", "add", str(WORK))
    first = cluster.start_worker("first")
    with serve_site(copy_site(COPIES, OTHERS)) as base:
        crawl = cluster.start_crawl(base)
        first.wait_until_holding(after_batches=1)
        stored, compared = cluster.count_pages()
        first.kill()  # the whole group (main process and its pool child) while a batch is in its hands
        second = cluster.start_worker("second")
        result = crawl.wait()
    census = cluster.census(base)
    problems = census.lost_or_duplicated(expected_copies(COPIES))
    twice = _compared_twice([first, second])
    _report(
        "worker killed (SIGKILL) mid-batch, another started",
        [
            (
                f"killed worker 'first' holding a task, at {stored} pages stored, {compared} compared "
                f"({len(first.pages_done())} compared by it); started 'second' ({len(second.pages_done())} "
                "compared by it)"
            ),
            f"crawl exit {result.returncode}; pages compared twice by the workers: {twice or 'none'}",
        ],
        census,
        problems,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert f"{COPIES} page(s) copy registered works" in result.stdout, result.stdout
    assert census.pages == PAGES
    assert problems == {}
    assert twice == []
    assert second.pages_done(), "the restarted worker compared nothing: the killed batch was not handed on"


@pytest.mark.parametrize("mode", ["workers", "in-process"])
def test_postgres_restarted_during_a_crawl_loses_and_doubles_nothing(cluster: Cluster, mode: str) -> None:
    # in-process: no broker, the crawl's own thread stores and compares each batch
    env = {"FPTRACK_BROKER_URL": ""} if mode == "in-process" else {}
    cluster.fptrack("works", "add", str(WORK), env=env)
    workers = [cluster.start_worker("w1"), cluster.start_worker("w2")] if mode == "workers" else []
    with serve_site(_slow_site(0.1)) as base:
        crawl = cluster.start_crawl(base, **env)
        # a batch through the compare stage: all at work
        stored, compared = _wait_compared(cluster, at_least=33)
        cluster.postgres.restart()  # fast shutdown: every connection of the crawl and the workers is cut
        assert crawl.process.poll() is None, "the crawl ended before PostgreSQL was restarted: make it longer"
        result = crawl.wait()
    census = cluster.census(base)
    problems = census.lost_or_duplicated(expected_copies(COPIES))
    retried = f"crawl exit {result.returncode}; its database operations tried again: " + str(
        result.stderr.count("the database is unreachable")
    )
    if workers:
        retried += (
            f"; worker tasks retried: {sum(w.log().count('] retry:') for w in workers)}; workers "
            "alive "
            f"after: {[w.process.poll() is None for w in workers]}; pages compared twice by the "
            f"workers: {_compared_twice(workers) or 'none'}"
        )
    _report(
        f"PostgreSQL restarted during the crawl ({mode})",
        [
            f"restarted PostgreSQL (fast shutdown + start) at {stored} pages stored, {compared} compared",
            retried,
        ],
        census,
        problems,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert f"{COPIES} page(s) copy registered works" in result.stdout, result.stdout
    assert all(worker.process.poll() is None for worker in workers), "a worker did not survive the restart"
    assert census.pages == PAGES
    assert problems == {}
    assert _compared_twice(workers) == []


def test_an_in_process_batch_compared_while_postgres_is_down_waits_for_it(cluster: Cluster) -> None:
    """The window the restart above may miss: the crawl's thread starts comparing a batch while PostgreSQL is
    down. Celery's eager retry would give up at once; the crawl's own retry waits for the database and
    compares it."""
    import hashlib
    import threading
    from datetime import UTC, datetime

    from fptrack.core.settings import Settings
    from fptrack.crawler.pages import CrawledPage
    from fptrack.crawler.store import PageStore
    from fptrack.jobs import tasks
    from fptrack.jobs.crawls import _copies, _Dispatcher, _pending
    from fptrack.storage.db import create_engine_for, session_factory
    from tests.support.copy_site import CHAPTERS

    in_process = {**cluster.env, "FPTRACK_BROKER_URL": ""}
    cluster.fptrack("works", "add", str(WORK), env=in_process)
    settings = Settings.from_env(in_process)
    tasks.configure(settings)
    engine = create_engine_for(settings)
    try:
        sessions = session_factory(engine)
        # stored, not compared yet
        store = PageStore(sessions, job_id=None, dispatch=lambda ids: None, settings=settings)
        for number, chapter in enumerate(CHAPTERS):
            url = f"http://127.0.0.1:9/{number}.html"
            store.add(
                CrawledPage(
                    url=url,
                    final_url=url,
                    status=200,
                    encoding="utf-8",
                    title=url,
                    text=chapter,
                    content_sha256=hashlib.sha256(chapter.encode()).hexdigest(),
                    snapshot_sha256="",
                    fetched_at=datetime.now(UTC),
                )
            )
        store.flush()
        ids = sorted(store.counts.page_ids)
        cluster.postgres.stop("fast")
        back = threading.Timer(2.0, cluster.postgres.start)
        back.start()
        try:
            _Dispatcher(settings, tasks)(ids)  # refused until the database is back, then compared once
        finally:
            back.join()
        pending, (copies, _seen_down) = _pending(sessions, set(ids)), _copies(sessions, set(ids))
    finally:
        engine.dispose()
    print(
        f"\n== in-process batch started while PostgreSQL was down (back after 2 s): {len(ids)} pages, "
        f"{len(pending)} left uncompared, {len(copies)} copies found"
    )
    assert pending == [] and len(copies) == len(CHAPTERS)


def test_redis_restarted_during_a_crawl_the_sweep_hands_the_pages_on(cluster: Cluster) -> None:
    # The crawl's own stall hand-on is pushed out of the way: the workers' periodic sweep must do the work.
    cluster.env.update(FPTRACK_STALL_SECONDS="600", FPTRACK_SWEEP_EVERY="2", FPTRACK_SWEEP_AFTER="5")
    cluster.fptrack("works", "add", str(WORK), env={"FPTRACK_BROKER_URL": ""})  # indexed now, not queued
    with serve_site(_slow_site(0.05)) as base:
        crawl = cluster.start_crawl(base)
        # no worker yet: the crawl's batches pile up in Redis, then Redis goes down and comes back empty
        stored, queued = _wait_stored(cluster, at_least=2 * PAGES_PER_TASK), cluster.redis.queue_length()
        cluster.redis.restart()  # SIGKILL, no persistence: every queued message is gone
        assert crawl.process.poll() is None, "the crawl ended before Redis was restarted: make it longer"
        workers = [cluster.start_worker("w1", beat=True), cluster.start_worker("w2")]
        result = crawl.wait()
    if result.returncode != 0:  # the crawl may not hand its pages on while Redis is down: it must say so
        assert "cannot hand pages to the workers" in result.stderr, result.stderr[-3000:]
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
    _wait_compared(cluster, at_least=PAGES, timeout=90)  # the sweep gets to every page in the end
    census = cluster.census(base)
    problems = census.lost_or_duplicated(expected_copies(COPIES))
    swept = sum(worker.swept_pages() for worker in workers)  # beat sends the sweep; any worker runs it
    _report(
        "Redis restarted (no persistence) during the crawl",
        [
            (
                f"restarted Redis (SIGKILL + start) at {stored} pages stored, {queued} message(s) queued, no "
                "worker yet; then started two workers (one with beat)"
            ),
            f"crawl exit {result.returncode}: {result.stderr.strip().splitlines()[-1:] or 'ok'}",
            (
                f"pages handed on again by the sweep: {swept}; pages compared twice by the workers: "
                f"{_compared_twice(workers) or 'none'}"
            ),
        ],
        census,
        problems,
    )
    assert queued > 0, "nothing was queued when Redis went down: the test lost nothing to recover"
    assert swept > 0, "the sweep handed nothing on: who compared the lost pages?"
    assert census.pages == PAGES
    assert problems == {}
    assert _compared_twice(workers) == []
    if result.returncode == 0:
        assert f"{COPIES} page(s) copy registered works" in result.stdout, result.stdout
