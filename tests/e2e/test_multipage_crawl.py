"""End to end: a chapter split over three pages ("下一页"), each part too short to match alone, is found by
``fptrack crawl`` as one copy recorded on its first page; the same matches (page, chapter, spans) in-process
on SQLite and PostgreSQL and with two Celery workers over Redis, which compare the parts in whatever order
they come."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from fptrack.cli.demo import DEMO_DATA
from fptrack.compare.multipage import MULTIPAGE_METHOD
from fptrack.core.settings import Settings
from testbed.sites import Page, chapter_page, serve_site
from tests.conftest import REDIS_URL
from tests.e2e.conftest import Fptrack
from tests.support.multipage import demo_chapter_slices, split_chapter_pages
from tests.support.workers import wait_indexed, worker_processes

pytestmark = pytest.mark.slow


def _pages() -> dict[str, Page]:
    pages: dict[str, Page] = {
        "/": Page.html(
            "<html><body><h1>书友小说网</h1><a href='/book/7.html'>第七章</a> "
            "<a href='/book/8.html'>第八章</a></body></html>"
        ),
        # the next chapter, linked with "下一章" from every part: never a part of chapter 7
        "/book/8.html": chapter_page(
            "第八章",
            ["这一章与登记的作品毫无关系，讲的是城里新开的一家面馆。", "面馆老板每天清晨五点起来和面。"],
        ),
    }
    pages.update(split_chapter_pages("/book/7.html", "第七章", demo_chapter_slices()))
    return pages


def _crawl(fptrack: Fptrack) -> list[tuple[Any, ...]]:
    with serve_site(_pages()) as base:
        fptrack.run(
            "crawl", base + "/", "--allow-private-host", base.key, "--depth", "3", "--quiet", timeout=300
        )
        return sorted(
            (
                m["page_url"].removeprefix(base),
                m["work_title"],
                m["chapter_index"],
                m["methods"][-1],
                tuple(map(tuple, m["spans"])),
                _part_spans(fptrack.settings, base),
            )
            for m in fptrack.matches()
        )


def _part_spans(settings: Settings, base: str) -> tuple[tuple[Any, ...], ...]:
    """(part URL, part number, spans) of the stored matches' later parts (not in ``fptrack matches``)."""
    from sqlalchemy import select

    from fptrack.storage.db import create_engine_for, session_factory
    from fptrack.storage.models import Match

    engine = create_engine_for(settings)
    try:
        with session_factory(engine)() as session:
            return tuple(
                (p["url"].removeprefix(base), p["part"], tuple(map(tuple, p["spans"])))
                for parts in session.scalars(select(Match.part_spans))
                for p in parts or []
            )
    finally:
        engine.dispose()


def _check(answer: list[tuple[Any, ...]]) -> None:
    [(path, title, chapter, method, spans, parts)] = answer
    assert (path, title, chapter, method) == ("/book/7.html", "灯塔守望人", 1, MULTIPAGE_METHOD)
    assert spans and all(len(span) == 4 for span in spans)  # the first page's own passages, as for any match
    assert [(url, number) for url, number, part in parts if part] == [
        ("/book/7_2.html", 2),
        ("/book/7_3.html", 3),
    ]


def test_a_chapter_split_over_pages_is_one_copy(fptrack: Fptrack) -> None:
    fptrack.run("init")
    fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
    _check(_crawl(fptrack))


@pytest.mark.redis
@pytest.mark.postgres
def test_the_same_matches_in_process_and_with_workers(
    sqlite_settings: Settings, postgres_settings: Settings, tmp_path
) -> None:
    local = Fptrack(sqlite_settings, {})
    local.run("init")
    local.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
    reference = _crawl(local)

    postgres_settings.data_dir.mkdir(parents=True, exist_ok=True)
    workers = Fptrack(
        postgres_settings,
        {"FPTRACK_BROKER_URL": REDIS_URL, "FPTRACK_TASK_QUEUE": f"fptrack-multipage-{uuid.uuid4().hex[:8]}"},
    )
    workers.run("init")
    with worker_processes(workers.env(), tmp_path, 2):
        workers.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
        wait_indexed(postgres_settings)
        answer = _crawl(workers)
    _check(reference)
    assert answer == reference
