"""The embedded crawl's compare stage in a process pool (jobs/stage_process.py), on a real site on 127.0.0.1:

- the pool finds what the crawl's own thread finds (same matches, same fingerprints and index rows per page);
- the pool's process stopped, then SIGKILLed, mid-crawl (with batches submitted behind it): the crawl compares
  what it had not compared itself, every page is compared, and the database holds what one comparison of
  each page leaves (a late second delivery of every batch changes nothing);
- Ctrl+C (SIGINT to the process group, as a terminal sends it), SIGTERM to the crawl alone, or SIGKILL: no
  compare process outlives the crawl.

Each crawl runs in a process of its own (Scrapy's reactor runs once per process): this module run as
``python -m tests.integration.crawler.test_stage_process REQUEST`` (:func:`_run_one`)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA
from fptrack.core.settings import Settings
from fptrack.jobs.stage_process import compare_in_pool
from fptrack.storage.db import create_engine_for, session_factory
from fptrack.storage.models import Chapter, CodeIndexRow, Fingerprint, Match, Page, Site, Work
from testbed.sites import Page as SitePage
from testbed.sites import SiteURL, chapter_page, serve_site
from tests.support.env import TEST_SITE_RATE, clean_environ
from tests.support.pirate_site import LIGHT, NEWS, OTHER, paragraphs_of, pirate_site

REPO_ROOT = Path(__file__).resolve().parents[3]
FILLER_PAGES = (
    110  # with the pirate site's pages: 4 batches of 32 and more, so the pool process is killed mid-crawl
)


def _site(delay: float = 0.0) -> dict[str, Any]:
    """The end-to-end pirate site (copies of the demo's works beside pages that must not match) and
    :data:`FILLER_PAGES` pages of unregistered text, each its own shuffle of the demo's unregistered story and
    news, linked from the index."""
    pages, _ = pirate_site()
    rng = random.Random(20)
    sentences = [s for chapter in OTHER for s in paragraphs_of(chapter)] + [s for s in NEWS if s.strip()]
    filler = [f"/read/{n}.html" for n in range(FILLER_PAGES)]
    for path in filler:
        pages[path] = chapter_page(f"第{path}节", rng.sample(sentences, min(12, len(sentences))))
    if delay:  # a slower site: the crawl is still running when the test stops it
        pages = {path: replace(p, delay=delay) if isinstance(p, SitePage) else p for path, p in pages.items()}
    links = "".join(f'<a href="{path}">{path}</a> ' for path in filler)
    index = pages["/"].body.decode().replace("</ul>", f"</ul><p>{links}</p>")
    pages["/"] = SitePage.html(index)
    return pages


def _register(settings: Settings) -> None:
    from fptrack.compare.service import index_work
    from fptrack.compare.works import register_work_file

    engine = create_engine_for(settings)
    try:
        with session_factory(engine).begin() as session:
            for name in ("lighthouse.txt", "alley.txt"):
                work = register_work_file(session, DEMO_DATA / name)
                index_work(session, work.work_id, settings)
    finally:
        engine.dispose()


def _crawl(settings: Settings, site: SiteURL, **request: Any) -> dict[str, Any]:
    """Run :func:`_run_one` in a process of its own; its JSON answer."""
    request = {
        "database_url": settings.database_url,
        "data_dir": str(settings.data_dir),
        "url": site + "/",
        "allow": site.key,
        **request,
    }
    completed = subprocess.run(
        [sys.executable, "-m", "tests.integration.crawler.test_stage_process", json.dumps(request)],
        cwd=REPO_ROOT,
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    answer: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    answer["log"] = completed.stderr
    return answer


def _state(settings: Settings, base: str) -> dict[str, Any]:
    """What the comparisons left: matches (page, work, chapter, spans), and per page its fingerprint kinds and
    the number of its index rows; pages not compared."""
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            matches = sorted(
                (url.removeprefix(base), title, index, json.dumps(spans))
                for url, title, index, spans in session.execute(
                    select(Page.url, Work.title, Chapter.index, Match.spans)
                    .join(Match, Match.page_id == Page.id)
                    .join(Chapter, Chapter.id == Match.chapter_id)
                    .join(Work, Work.id == Match.work_id)
                )
            )
            kinds: dict[str, list[str]] = {}
            for url, kind in session.execute(
                select(Page.url, Fingerprint.kind).join(Fingerprint, Fingerprint.page_id == Page.id)
            ):
                kinds.setdefault(url.removeprefix(base), []).append(kind)
            rows = {
                url.removeprefix(base): count
                for url, count in session.execute(
                    select(Page.url, func.count(CodeIndexRow.position))
                    .join(Fingerprint, Fingerprint.page_id == Page.id)
                    .join(CodeIndexRow, CodeIndexRow.fingerprint_id == Fingerprint.id)
                    .group_by(Page.url)
                )
            }
            pending = list(session.scalars(select(Page.url).where(Page.compared_at.is_(None))))
            pages = session.scalar(select(func.count(Page.id)))
    finally:
        engine.dispose()
    return {
        "matches": matches,
        "kinds": {url: sorted(k) for url, k in kinds.items()},
        "index_rows": rows,
        "pending": pending,
        "pages": pages,
    }


@pytest.fixture
def site() -> Iterator[SiteURL]:
    with serve_site(_site()) as base:
        yield base


def test_the_pool_finds_what_the_crawls_thread_finds(settings: Settings, site: SiteURL) -> None:
    _register(settings)
    child = _crawl(settings, site, compare_process=True)
    assert child["status"] == "finished", child
    assert child["child_seen"], "no compare process ran: the test compares the thread with itself"
    # a pool that finished its work and ended did not break
    assert not [note for note in child["notes"] if note.startswith("compare process")], child["notes"]
    with_child = _state(settings, site)

    # the reference: the same site crawled again with the stage in the crawl's thread, the first crawl's pages
    # (and with them their fingerprints, index rows and matches) gone
    _forget_pages(settings)
    thread = _crawl(settings, site, compare_process=False)
    assert thread["status"] == "finished", thread
    assert not thread["child_seen"]
    in_thread = _state(settings, site)

    assert with_child["pending"] == [] and in_thread["pending"] == []
    assert len(with_child["matches"]) >= 6, with_child["matches"]  # the pirate site's copies
    assert with_child == in_thread


def _forget_pages(settings: Settings) -> None:
    """Every stored page removed (its fingerprints, index rows and matches go with it)."""
    from sqlalchemy import delete

    engine = create_engine_for(settings)
    try:
        with session_factory(engine).begin() as session:
            session.execute(delete(Page))
        assert _state(settings, "")["pages"] == 0
    finally:
        engine.dispose()


def test_a_pool_process_killed_mid_crawl_leaves_every_page_compared_once(
    settings: Settings, site: SiteURL
) -> None:
    _register(settings)
    # stopped after the first batch, so that the batches submitted after it wait (and, if it was comparing
    # one, it holds it in an open transaction), then killed
    killed = _crawl(settings, site, compare_process=True, stop_child_at=40, kill_child_at=110)
    assert killed["status"] == "finished", killed
    assert killed["killed"], "the child was not killed: the test did not test the fall-back"
    assert any("compare process: killed by SIGKILL" in note for note in killed["notes"]), killed["notes"]
    assert killed["pages_compared"] == killed["pages"] > 100, killed
    after_kill = _state(settings, site)
    assert after_kill["pending"] == []
    assert "database is locked" not in killed["log"]

    # every batch delivered once more, late: compared once already, nothing changes
    _deliver_again(settings)
    assert _state(settings, site) == after_kill

    # the reference: the same site crawled again with the stage in the crawl's thread
    _forget_pages(settings)
    reference = _crawl(settings, site, compare_process=False)
    assert reference["status"] == "finished", reference
    expected = _state(settings, site)
    assert after_kill["matches"] == expected["matches"]
    assert after_kill["kinds"] == expected["kinds"]
    assert after_kill["index_rows"] == expected["index_rows"]


def _deliver_again(settings: Settings) -> None:
    from fptrack.jobs import tasks
    from fptrack.jobs.stage_process import compare_batch

    tasks.configure(settings)
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            ids = sorted(int(i) for i in session.scalars(select(Page.id)))
    finally:
        engine.dispose()
    for start in range(0, len(ids), tasks.PAGES_PER_TASK):
        compare_batch(tasks, ids[start : start + tasks.PAGES_PER_TASK])


def _store_chapters(settings: Settings, engine: Engine, *, fillers: int = 0) -> list[int]:
    """The three chapters of LIGHT, then ``fillers`` pages of unregistered text, stored through the crawl's
    store, not compared: their page ids."""
    import hashlib
    from datetime import UTC, datetime

    from fptrack.crawler.pages import CrawledPage
    from fptrack.crawler.store import PageStore

    rng = random.Random(7)
    sentences = [s for chapter in OTHER for s in paragraphs_of(chapter)] + [s for s in NEWS if s.strip()]
    texts = [*LIGHT[:3], *("\n".join(rng.sample(sentences, min(12, len(sentences)))) for _ in range(fillers))]
    store = PageStore(session_factory(engine), job_id=None, dispatch=lambda ids: None, settings=settings)
    for number, chapter in enumerate(texts):
        url = f"http://127.0.0.1:9/{number}.html"
        digest = hashlib.sha256(chapter.encode()).hexdigest()
        page = CrawledPage(
            url=url, final_url=url, status=200, encoding="utf-8", title=url, text=chapter,
            content_sha256=digest, snapshot_sha256="", fetched_at=datetime.now(UTC),
        )  # fmt: skip
        store.add(page)
    store.flush()
    return sorted(store.counts.page_ids)


@contextmanager
def _pool(settings: Settings, **kwargs: Any) -> Iterator[Any]:
    """A started compare pool (the crawl's default fall-back unless given), stopped at the end."""
    from fptrack.jobs.stage_process import ComparePool

    pool = ComparePool(settings, **kwargs)
    pool.start()
    try:
        assert pool.pid is not None and _alive(pool.pid)
        yield pool
    finally:
        pool.stop()


def test_a_killed_pool_process_has_its_batches_compared_here(sqlite_settings: Settings) -> None:
    """The pool's process stopped (SIGSTOP) with batches submitted, then killed: every batch it had not
    compared comes back broken and is compared in the crawl's thread, as is every batch after; every page
    compared once, the three copies matched."""
    _register(sqlite_settings)
    engine = create_engine_for(sqlite_settings)
    try:
        ids = _store_chapters(sqlite_settings, engine, fillers=13)
        with _pool(sqlite_settings) as pool:
            pid = pool.pid
            os.kill(pid, signal.SIGSTOP)
            for start in range(0, 8, 4):
                pool.submit(ids[start : start + 4])
            assert pool.compared_here == 0 and pool.in_use  # submitted, waiting for the stopped process
            os.kill(pid, signal.SIGKILL)
            pool.finish()
            assert pool.died == "killed by SIGKILL", pool.died
            assert pool.compared_here == 8 and pool.compared == 0
            assert not pool.in_use
            pool.submit(ids[8:])  # after the break: here
            assert pool.compared_here == len(ids) == 16
            assert not pool.settle({1})  # broken: the crawl settles its sites itself
        assert not _alive(pid)
        with Session(engine) as session:
            assert session.scalars(select(Page.id).where(Page.compared_at.is_(None))).all() == []
            assert session.scalar(select(func.count(Match.id))) == 3  # each chapter page copies its chapter
            assert session.scalar(select(func.count(func.distinct(Fingerprint.page_id)))) == len(ids)
    finally:
        engine.dispose()


def test_a_stalled_pool_process_is_killed_and_its_batches_compared_here(sqlite_settings: Settings) -> None:
    """The pool's process stopped (SIGSTOP) and never resumed: once it has completed nothing for
    ``stall_seconds`` while the crawl waits, it is killed and its batches compared in the crawl's thread."""
    from dataclasses import replace

    settings = replace(sqlite_settings, stall_seconds=2.0)
    _register(settings)
    engine = create_engine_for(settings)
    try:
        ids = _store_chapters(settings, engine, fillers=13)
        with _pool(settings) as pool:
            pid = pool.pid
            os.kill(pid, signal.SIGSTOP)
            for start in range(0, len(ids), 4):
                pool.submit(ids[start : start + 4])
            started = time.monotonic()
            pool.finish()
            assert time.monotonic() - started >= 2.0
            assert pool.died.startswith("stalled for 2s"), pool.died
            assert pool.compared_here == len(ids) and pool.compared == 0
        assert not _alive(pid)
        with Session(engine) as session:
            assert session.scalars(select(Page.id).where(Page.compared_at.is_(None))).all() == []
            assert session.scalar(select(func.count(Match.id))) == 3
    finally:
        engine.dispose()


def test_the_pool_compares_the_batches_and_settles_the_crawls_sites(sqlite_settings: Settings) -> None:
    """Batches submitted are compared in the pool, the crawl's thread compares none; after them the crawl's
    sites settle there (the site's template decided and recorded); ended, the pool's process exits."""
    _register(sqlite_settings)
    engine = create_engine_for(sqlite_settings)
    compared_here: list[list[int]] = []
    try:
        ids = _store_chapters(sqlite_settings, engine, fillers=13)
        with Session(engine) as session:
            site_ids = set(session.scalars(select(Page.site_id).where(Page.id.in_(ids))))
        assert len(site_ids) == 1 and None not in site_ids
        with _pool(sqlite_settings, compare_here=compared_here.append) as pool:
            for start in range(0, len(ids), 4):
                pool.submit(ids[start : start + 4])
            pool.finish()
            assert pool.compared == len(ids) and compared_here == [] and pool.died == ""
            assert pool.settle(site_ids)
            with Session(engine) as session:
                assert session.scalar(select(Site.settled_at).where(Site.id.in_(site_ids))) is not None
                assert session.scalar(select(func.count(Match.id))) == 3
                assert session.scalars(select(Page.id).where(Page.compared_at.is_(None))).all() == []
            pid = pool.pid
            assert pid is not None
            pool.end()
            deadline = time.monotonic() + 30
            while _alive(pid):  # exits on its own once told there is no more work
                assert time.monotonic() < deadline, "the pool's process did not exit after end()"
                time.sleep(0.1)
    finally:
        engine.dispose()


def test_pages_submitted_while_the_pool_lags_go_to_it_as_one_batch(
    sqlite_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the pool's process holds IN_FLIGHT batches (stopped: SIGSTOP), the pages of the commits after
    wait and go as one batch, at most MAX_BATCH_PAGES; resumed, it compares every page once, the crawl's
    thread none."""
    from fptrack.jobs import stage_process

    monkeypatch.setattr(stage_process, "MAX_BATCH_PAGES", 5)
    _register(sqlite_settings)
    engine = create_engine_for(sqlite_settings)
    compared_here: list[list[int]] = []
    try:
        ids = _store_chapters(sqlite_settings, engine, fillers=13)
        with _pool(sqlite_settings, compare_here=compared_here.append) as pool:
            assert pool.pid is not None
            os.kill(pool.pid, signal.SIGSTOP)
            for start in range(0, len(ids), 4):
                pool.submit(ids[start : start + 4])
            assert pool.batches == stage_process.IN_FLIGHT == 2  # the 8 pages after them wait
            os.kill(pool.pid, signal.SIGCONT)
            pool.finish()
            assert pool.batches == 4  # 4 + 4, then the 8 that waited as 5 + 3
            assert pool.compared == len(ids) == 16 and compared_here == [] and pool.died == ""
        with Session(engine) as session:
            assert session.scalars(select(Page.id).where(Page.compared_at.is_(None))).all() == []
            assert session.scalar(select(func.count(Match.id))) == 3
            assert session.scalar(select(func.count(func.distinct(Fingerprint.page_id)))) == len(ids)
    finally:
        engine.dispose()


def test_the_pools_process_ends_with_a_crawl_killed_outright(sqlite_settings: Settings) -> None:
    """A crawl process killed outright (SIGKILL: no clean-up) leaves no compare process behind."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from fptrack.core.settings import Settings\n"
        "from fptrack.jobs.stage_process import start_early\n"
        f"settings = Settings(data_dir=Path({str(sqlite_settings.data_dir)!r}), "
        f"database_url={sqlite_settings.database_url!r})\n"
        "pool = start_early(settings)\n"
        "print(pool.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    crawl = subprocess.Popen([sys.executable, "-c", script], cwd=REPO_ROOT, env=clean_environ(),
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert crawl.stdout is not None
        pid = int(crawl.stdout.readline())
        assert _alive(pid)
        crawl.kill()
        crawl.wait()
        deadline = time.monotonic() + 30
        while _alive(pid):
            assert time.monotonic() < deadline, f"compare process {pid} outlived the crawl"
            time.sleep(0.1)
    finally:
        if crawl.poll() is None:
            crawl.kill()
            crawl.wait()


@pytest.mark.parametrize("how", ["ctrl-c to the process group", "sigterm to the crawl"])
def test_stopping_the_crawl_leaves_no_compare_process(sqlite_settings: Settings, how: str) -> None:
    _register(sqlite_settings)
    env = clean_environ(FPTRACK_DATA_DIR=str(sqlite_settings.data_dir),
                        FPTRACK_DATABASE_URL=sqlite_settings.database_url)  # fmt: skip
    with serve_site(_site(delay=0.05)) as base:
        crawl = subprocess.Popen(
            [sys.executable, "-m", "fptrack.cli", "crawl", base + "/", "--allow-private-host", base.key,
             "--quiet", "--max-pages", "400"],
            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            children = _wait_for_children(crawl.pid, timeout=60)
            assert children, "the crawl started no compare process"
            _wait_for_stored_pages(sqlite_settings, 40, timeout=60)
            if how.startswith("ctrl-c"):
                os.killpg(crawl.pid, signal.SIGINT)
            else:
                crawl.send_signal(signal.SIGTERM)
            out, err = crawl.communicate(timeout=60)
        finally:
            if crawl.poll() is None:
                os.killpg(crawl.pid, signal.SIGKILL)
                crawl.wait()
    assert crawl.returncode == 130, f"exit {crawl.returncode}\n{out}\n{err[-3000:]}"
    left = [pid for pid in children if _alive(pid)]
    assert left == [], f"compare process(es) {left} outlived the crawl"


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _wait_for_children(pid: int, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        spawned = [
            child for child in _children_of(pid) if b"multiprocessing" in _cmdline(child)
        ]  # the spawn child (the resource tracker is one too: both must go)
        if spawned:
            return spawned
        time.sleep(0.1)
    return []


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _wait_for_stored_pages(settings: Settings, count: int, timeout: float) -> None:
    engine = create_engine_for(settings)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with Session(engine) as session:
                if (session.scalar(select(func.count(Page.id))) or 0) >= count:
                    return
            time.sleep(0.1)
    finally:
        engine.dispose()
    raise AssertionError(f"fewer than {count} pages stored after {timeout} s")


def _alive(pid: int) -> bool:
    """True when ``pid`` runs (a zombie, or a pid taken by another program, does not count)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status and b"multiprocessing" in _cmdline(pid)


# ------------------------------------------------------------------------------- the crawl, in a process


def _run_one(request: dict[str, Any]) -> dict[str, Any]:
    """One ``run_crawl_job`` with the stage in a pool or not (``compare_process``); the pool's process stopped
    (SIGSTOP) once ``stop_child_at`` pages are fetched and killed (SIGKILL) at ``kill_child_at``."""
    from fptrack.crawler.pages import CrawlOptions, CrawlProgress
    from fptrack.jobs.crawls import run_crawl_job

    settings = Settings(data_dir=Path(request["data_dir"]), database_url=request["database_url"],
                        site_rate=float(TEST_SITE_RATE))  # fmt: skip
    seen: dict[str, bool] = {"child": False, "killed": False}
    stop_at, kill_at = request.get("stop_child_at"), request.get("kill_child_at")

    def progress(update: CrawlProgress) -> None:
        children = multiprocessing.active_children()  # the pool's process
        seen["child"] = seen["child"] or bool(children)
        for child in children:
            assert child.pid is not None
            if stop_at is not None and update.pages_seen == stop_at:
                os.kill(child.pid, signal.SIGSTOP)
            if kill_at is not None and update.pages_seen == kill_at:
                os.kill(child.pid, signal.SIGKILL)
                seen["killed"] = True

    engine = create_engine_for(settings)
    try:
        outcome = run_crawl_job(
            settings, session_factory(engine), [request["url"]], depth=2, max_pages=500, progress=progress,
            options=CrawlOptions(allow_private_hosts=(request["allow"],)),
            compare_process=request["compare_process"],
        )  # fmt: skip
    finally:
        engine.dispose()
    stats = outcome.stats
    return {
        "status": outcome.status,
        "error": outcome.error,
        "notes": list(stats.notes) if stats is not None else [],
        "pages_compared": outcome.pages_compared,
        "pages": outcome.pages_stored + outcome.pages_unchanged,
        "child_seen": seen["child"],
        "killed": seen["killed"],
        "left_running": [p.pid for p in multiprocessing.active_children()],
    }


if __name__ == "__main__":
    print(json.dumps(_run_one(json.loads(sys.argv[1]))))


def test_the_pool_is_used_where_another_process_can_open_the_database(sqlite_settings: Settings) -> None:
    """The rule of compare_in_pool: in-process tasks on a database file, unless FPTRACK_COMPARE_PROCESS is
    false; an in-memory SQLite database (one connection's own) and a broker never get a pool."""
    assert compare_in_pool(sqlite_settings)
    assert not compare_in_pool(replace(sqlite_settings, compare_process=False))
    assert not compare_in_pool(Settings.from_env({"FPTRACK_COMPARE_PROCESS": "false"}))
    for memory in ("sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory&uri=true"):
        assert not compare_in_pool(replace(sqlite_settings, database_url=memory)), memory
    assert not compare_in_pool(replace(sqlite_settings, broker_url="redis://127.0.0.1:6379/0"))
