"""Works registered while pages are compared lose no copy: on two Celery workers sharing PostgreSQL, and
in-process on both backends with the registration committed between a batch's compare and its commit.

Every page is either compared with a work, or visible to that work's retroactive look-up (docs/compare.md,
"Registering while pages are compared")."""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, event, select

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import chapter_index, service
from fptrack.compare.works import register_work, register_work_file
from fptrack.core.settings import Settings
from fptrack.crawler.pages import CrawledPage
from fptrack.crawler.store import PageStore
from fptrack.jobs.retroactive import index_and_recheck
from fptrack.storage.db import create_engine_for, session_factory
from fptrack.storage.models import Match, Page, RegistryVersion, Work
from tests.conftest import REDIS_URL
from tests.support.env import clean_environ
from tests.support.workers import worker_processes

ROUNDS = 20
CHAPTERS = 12  # per work: its indexing takes long enough for the other worker to compare pages meanwhile
CHAPTER_CHARS = 1_500
FILLER_PAGES = 24  # unrelated pages per round, stored around the copies
BATCH = 4


def _prose(rng: random.Random, length: int) -> str:
    """Random CJK text in sentences (nothing any other call writes: each round's work is its own)."""
    out = []
    while sum(map(len, out)) < length:
        out.append("".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(12, 30))) + "。")
    return "".join(out)


def _work_text(rng: random.Random, title: str) -> str:
    chapters = [f"第{n}章 {_prose(rng, 6)}\n{_prose(rng, CHAPTER_CHARS)}" for n in range(1, CHAPTERS + 1)]
    return title + "\n\n" + "\n\n".join(chapters)


def _crawled(url: str, text: str) -> CrawledPage:
    digest = uuid.uuid5(uuid.NAMESPACE_URL, url + text).hex
    return CrawledPage(
        url=url,
        final_url=url,
        status=200,
        encoding="utf-8",
        title="",
        text=text,
        content_sha256=digest,
        snapshot_sha256=digest,
        fetched_at=datetime.now(UTC),
    )


def _chapter_texts(session, work_id: int) -> dict[int, str]:
    from fptrack.storage.models import Chapter

    rows = session.execute(select(Chapter.id, Chapter.text).where(Chapter.work_id == work_id))
    return {int(i): str(t) for i, t in rows}


def _missing_copies(sessions, copies: dict[str, int]) -> list[str]:
    """The copy pages (url -> the chapter it copies) without a match for their chapter."""
    with sessions() as session:
        found = set(
            session.execute(select(Page.url, Match.chapter_id).join(Match, Match.page_id == Page.id)).all()
        )
    return sorted(url for url, chapter in copies.items() if (url, chapter) not in found)


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
def test_works_registered_while_workers_compare_pages_lose_no_copy(postgres_settings, tmp_path) -> None:
    """Each round registers a new work and sends its indexing between the batches that store its copies, so
    one worker indexes it while the other compares them; every copy ends with its match."""
    from fptrack.jobs import tasks

    queue = f"fptrack-race-{uuid.uuid4().hex[:8]}"
    settings = replace(postgres_settings, broker_url=REDIS_URL, task_queue=queue)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    env = clean_environ(
        FPTRACK_DATA_DIR=str(settings.data_dir),
        FPTRACK_DATABASE_URL=settings.database_url,
        FPTRACK_BROKER_URL=REDIS_URL,
        FPTRACK_TASK_QUEUE=queue,
    )
    engine = create_engine_for(settings)
    sessions = session_factory(engine)
    rng = random.Random(5)
    copies: dict[str, int] = {}
    results = []
    try:
        tasks.configure(settings)
        with worker_processes(env, tmp_path, 2):
            for round_ in range(ROUNDS):
                with sessions() as session:
                    work = register_work(
                        session, _work_text(rng, f"作品{round_}").encode(), source_name=f"work-{round_}.txt"
                    )
                    session.commit()
                    chapters = _chapter_texts(session, work.work_id)
                pages = [(f"https://pirate.test/{round_}/c{c}.html", text, c) for c, text in chapters.items()]
                pages += [
                    (f"https://pirate.test/{round_}/f{n}.html", _prose(rng, CHAPTER_CHARS), None)
                    for n in range(FILLER_PAGES)
                ]
                rng.shuffle(pages)
                copies.update({url: c for url, _, c in pages if c is not None})
                batches: list[list[int]] = []
                store = PageStore(
                    sessions, job_id=None, dispatch=batches.append, batch_size=BATCH, settings=settings
                )
                for url, text, _ in pages:
                    if store.add(_crawled(url, text)):
                        store.flush()
                store.flush()
                # the work's indexing goes out after the first batches: one worker takes it while the other
                # compares the rest
                for number, batch in enumerate(batches):
                    if number == 2:
                        results.append(tasks.index_work.delay(work.work_id))
                    results.append(tasks.process_pages.delay(batch))
            for result in results:
                result.get(timeout=300)
        missing = _missing_copies(sessions, copies)
        with sessions() as session:
            assert all(session.scalars(select(Work.indexed_at)))
            assert session.scalar(select(Page.id).where(Page.compared_at.is_(None))) is None
        recall = 1 - len(missing) / len(copies)
        print(f"recall {recall:.3f}: {len(copies) - len(missing)} of {len(copies)} copies in {ROUNDS} rounds")
        assert not missing, f"recall {recall:.3f}: {len(missing)} of {len(copies)} copies lost: {missing[:5]}"
    finally:
        tasks.configure(Settings(data_dir=tmp_path / "in-process"))  # back to in-process for later tests
        engine.dispose()


# ------------------------------------------------------------------------------------------------ in-process


@pytest.fixture(params=["memory", "database"])
def chapter_side(request: pytest.FixtureRequest):
    """Both ways the compare reads the registered chapters: this process's arrays, or the database."""
    chapter_index.configure(mode=request.param)
    yield request.param
    chapter_index.configure()


def _store_copies(sessions, settings: Settings) -> list[int]:
    """Two pages copying the lighthouse's second chapter, stored and not compared; their ids."""
    batches: list[list[int]] = []
    store = PageStore(sessions, job_id=None, dispatch=batches.append, settings=settings)
    chapter = demo_chapters("lighthouse.txt")[1]
    for n in range(2):
        store.add(
            _crawled(f"https://pirate.test/light/{n}.html", f"首页 > 小说 {n}\n{chapter}\n上一章 下一章")
        )
    store.flush()
    return [i for batch in batches for i in batch]


def _registered(sessions) -> int:
    """The lighthouse registered, its chapters not fingerprinted yet."""
    with sessions() as session:
        work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
        session.commit()
        return work.work_id


def _flagged(sessions, work_id: int) -> set[int]:
    with sessions() as session:
        return set(session.scalars(select(Match.page_id).where(Match.work_id == work_id)))


def test_a_work_registered_between_a_batchs_compare_and_its_commit_is_compared_with(
    settings: Settings, engine: Engine, chapter_side: str
) -> None:
    """Another session fingerprints and commits a work after a batch compared its pages and before the batch
    writes anything: the batch finds the registry moved when it checks before committing, compares again, and
    records the copies and the serial that holds them."""
    sessions = session_factory(engine)
    other = create_engine_for(settings)
    pages = _store_copies(sessions, settings)
    work_id = _registered(sessions)
    registered = threading.Event()

    def register_before_the_first_write(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        if registered.is_set() or not statement.lstrip().upper().startswith(("INSERT", "DELETE", "UPDATE")):
            return
        registered.set()
        with session_factory(other)() as writer:
            service.fingerprint_work(writer, work_id, settings)
            writer.commit()

    event.listen(engine, "before_cursor_execute", register_before_the_first_write)
    try:
        with sessions() as session:
            outcomes = service.process_pages(session, pages, settings)
            session.commit()
    finally:
        event.remove(engine, "before_cursor_execute", register_before_the_first_write)
        other.dispose()
    assert registered.is_set()
    assert {o.page_id for o in outcomes if o.matched_chapters} == set(pages)
    assert _flagged(sessions, work_id) == set(pages)
    with sessions() as session:
        serial = session.scalar(select(RegistryVersion.serial))
        assert serial and set(session.scalars(select(Page.registry_serial))) == {serial}


def test_a_registration_waits_for_a_batch_that_checked_the_registry_and_its_look_up_finds_the_pages(
    settings: Settings, engine: Engine
) -> None:
    """A batch compared without the work holds the registry until it commits: the work's fingerprints commit
    after it (PostgreSQL: the triggers' advisory lock; SQLite: the write lock), so the work's look-up of the
    pages stored before finds the batch's pages."""
    sessions = session_factory(engine)
    other = create_engine_for(settings)
    pages = _store_copies(sessions, settings)
    work_id = _registered(sessions)
    committed = threading.Event()
    written: list[tuple[int, Any]] = []

    def register() -> None:
        with session_factory(other)() as writer:
            written.extend(service.fingerprint_work(writer, work_id, settings))
            writer.commit()
        committed.set()

    try:
        with sessions() as session:
            assert not any(o.matched_chapters for o in service.process_pages(session, pages, settings))
            registrar = threading.Thread(target=register)
            registrar.start()
            time.sleep(1.0)
            assert not committed.is_set()  # waits for the batch
            session.commit()
        registrar.join(timeout=60)
        assert committed.is_set()
        with sessions() as session:
            assert index_and_recheck(session, work_id, settings, fingerprinted=written) == len(pages)
            session.commit()
    finally:
        other.dispose()
    assert _flagged(sessions, work_id) == set(pages)
