"""Boilerplate suppression, licensed sites and retroactive detection on a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from admin.demo import DEMO_DATA, demo_chapters
from compare import service
from compare.licensing import add_licensed_site
from compare.works import register_work_file
from storage.models import Match, Page
from storage.settings import Settings

_POOL = "春夏秋冬东南西北山川河流草木花鸟风雨雷电日月星辰城市乡村道路桥梁学校医院工厂商店朋友家人老师学生早晚快慢高低"


def _filler(rng: random.Random, length: int) -> str:
    """Generated prose-like text that shares nothing with the demo works."""
    sentences = []
    while sum(map(len, sentences)) < length:
        sentences.append("".join(rng.choice(_POOL) for _ in range(rng.randint(8, 20))) + "。")
    return "".join(sentences)


def _page(session: Session, url: str, text: str) -> Page:
    page = Page(
        url=url,
        final_url=url,
        host=url.split("/")[2].split(":")[0],
        status=200,
        encoding="utf-8",
        title="t",
        text=text,
    )
    session.add(page)
    session.flush()
    return page


def _flagged(session: Session, page: Page) -> list[tuple[int, str]]:
    return [
        (m.chapter.index, m.status) for m in session.scalars(select(Match).where(Match.page_id == page.id))
    ]


def test_site_template_quoting_a_work_is_boilerplate_but_a_copy_on_that_site_is_not(
    session: Session, settings: Settings
) -> None:
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    service.index_work(session, work.work_id, settings)
    chapters = demo_chapters("lighthouse.txt")
    slogan = chapters[1][100:400]  # a 300-character passage every page of the site carries in its template
    rng = random.Random(3)
    site_pages = []
    for n in range(8):
        text = f"本站推荐：{slogan}\n" + _filler(rng, 700)
        site_pages.append(_page(session, f"http://news.test:8000/{n}.html", text))
        service.fingerprint_page(session, site_pages[-1].id, settings)
        if n == 0:  # alone, the passage is an excerpt like any other
            assert _flagged(session, site_pages[0]) == [(2, "flagged")]
    # once the site shows the passage on enough other pages, it is the site's template, not a copy
    assert _flagged(session, site_pages[-1]) == []
    # a real copy on the same site is still found (its text is not on the other pages)
    copy = _page(session, "http://news.test:8000/copy.html", f"本站推荐：{slogan}\n" + chapters[0])
    service.fingerprint_page(session, copy.id, settings)
    assert _flagged(session, copy) == [(1, "flagged")]
    # the first pages, flagged before the template was known, were compared again when it showed: all clear
    assert [_flagged(session, page) for page in site_pages] == [[]] * len(site_pages)
    # the same passage on another site, inside an article, is an excerpt: flagged
    other = _page(session, "http://blog.test/post.html", _filler(rng, 300) + slogan + _filler(rng, 300))
    service.fingerprint_page(session, other.id, settings)
    assert _flagged(session, other) == [(2, "flagged")]
    session.commit()


def test_copies_on_a_licensed_site_are_recorded_as_licensed(session: Session, settings: Settings) -> None:
    work = register_work_file(session, DEMO_DATA / "alley.txt")
    service.index_work(session, work.work_id, settings)
    chapter = demo_chapters("alley.txt")[0]
    pirate = _page(session, "http://pirate.test/1.html", chapter)
    partner = _page(session, "http://m.partner.test/1.html", chapter)
    service.fingerprint_page(session, pirate.id, settings)
    service.fingerprint_page(session, partner.id, settings)
    assert _flagged(session, partner) == [(1, "flagged")]

    assert add_licensed_site(session, work.work_id, "partner.test") == 1  # the existing match is relabelled
    assert _flagged(session, partner) == [(1, "licensed")]
    service.recompare_page(session, partner.id, settings)  # and stays licensed when the page is seen again
    assert _flagged(session, partner) == [(1, "licensed")]
    assert _flagged(session, pirate) == [(1, "flagged")]
    with pytest.raises(LookupError, match="no work"):
        add_licensed_site(session, 999_999, "partner.test")
    session.commit()


def test_registering_a_work_finds_pages_crawled_before(session: Session, settings: Settings) -> None:
    chapter = demo_chapters("lighthouse.txt")[2]
    page = _page(session, "http://early.test/3.html", "首页 目录\n" + chapter)
    assert service.fingerprint_page(session, page.id, settings) == []  # nothing registered yet
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    assert service.index_work(session, work.work_id, settings) == [page.id]
    matches = service.recompare_page(session, page.id, settings)
    assert [(m.work_id, m.chapter.index) for m in matches] == [(work.work_id, 3)]
    session.commit()
