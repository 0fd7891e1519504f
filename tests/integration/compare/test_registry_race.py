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

import pytest
from sqlalchemy import select

from fptrack.compare import service
from fptrack.compare.works import register_work
from fptrack.core.settings import Settings
from fptrack.crawler.pages import CrawledPage
from fptrack.crawler.store import PageStore
from fptrack.jobs.pipeline import index_and_recheck
from fptrack.storage.db import create_engine_for, session_factory
from fptrack.storage.models import Match, Page, Work
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
                store = PageStore(sessions, job_id=None, dispatch=batches.append, batch_size=BATCH)
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
