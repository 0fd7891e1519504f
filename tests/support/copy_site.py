"""A generated pirate site of known copies, for the tests that crawl it through workers and count what came
out.

::

    pages = copy_site(150, others=30)       # /c/<n>.html copies CHAPTERS[n % 3]; /o/<n>.html copies nothing
    expected = expected_copies(150)         # {'/c/0.html': 0, '/c/1.html': 1, ...}: path -> chapter index
    with serve_site(pages) as base: ...
    pipeline_counts(settings)               # (pages, pages not compared, matches) in a database

The registered work is the demo's ``lighthouse.txt`` (:data:`WORK`), whose first three chapters are
:data:`CHAPTERS`.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Match, Page
from testbed.sites import Page as SitePage
from testbed.sites import chapter_page

__all__ = ["CHAPTERS", "WORK", "copy_site", "expected_copies", "pipeline_counts"]

WORK = DEMO_DATA / "lighthouse.txt"
CHAPTERS = demo_chapters("lighthouse.txt")


def copy_site(copies: int, others: int = 0) -> dict[str, SitePage]:
    """``copies`` pages each copying one of the three chapters (with a distinct header line), ``others`` pages
    of unrelated generated text, and an index linking them all."""
    pages: dict[str, SitePage] = {}
    for n in range(copies):
        chapter = CHAPTERS[n % 3]
        pages[f"/c/{n}.html"] = chapter_page(f"第{n}页", [f"第{n}页 本站地址", *chapter.split("\n")])
    for n in range(others):
        pages[f"/o/{n}.html"] = chapter_page(
            "杂记", [f"第{n}篇。" + "今天天气晴朗，我们去公园散步。" * (5 + n % 7)]
        )
    links = "".join(f'<a href="{path}">{path}</a> ' for path in pages)
    pages["/"] = SitePage.html(f"<html><body>{links}</body></html>")
    return pages


def expected_copies(copies: int) -> dict[str, int]:
    """What :func:`copy_site` copies: path -> index (0-based) of the chapter of :data:`WORK` the page
    holds."""
    return {f"/c/{n}.html": n % 3 for n in range(copies)}


def pipeline_counts(settings: Settings) -> tuple[int, int, int]:
    """(pages, pages not compared, matches)."""
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            pages = session.scalar(select(func.count()).select_from(Page)) or 0
            pending = (
                session.scalar(select(func.count()).select_from(Page).where(Page.compared_at.is_(None))) or 0
            )
            matches = session.scalar(select(func.count()).select_from(Match)) or 0
            return int(pages), int(pending), int(matches)
    finally:
        engine.dispose()
