"""Boilerplate suppression, licensed sites and retroactive detection on a real database (SQLite and
PostgreSQL)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import service
from fptrack.compare.licensing import add_licensed_site
from fptrack.compare.templates import settle_site, site_template
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.jobs.retroactive import index_and_recheck
from fptrack.storage.models import Match, Page, Site
from fptrack.storage.sites import site_ids, site_of

_POOL = (
    "春夏秋冬东南西北山川河流草木花鸟风雨雷电日月星辰"
    "城市乡村道路桥梁学校医院工厂商店朋友家人老师学生早晚快慢高低"
)


def _filler(rng: random.Random, length: int) -> str:
    """Generated prose-like text that shares nothing with the demo works."""
    sentences = []
    while sum(map(len, sentences)) < length:
        sentences.append("".join(rng.choice(_POOL) for _ in range(rng.randint(8, 20))) + "。")
    return "".join(sentences)


def _page(session: Session, url: str, text: str) -> Page:
    key = site_of(url)
    page = Page(
        url=url,
        final_url=url,
        host=key,
        status=200,
        encoding="utf-8",
        title="t",
        text=text,
        site_id=site_ids(session, [key])[key],
    )
    session.add(page)
    session.flush()
    return page


def _process(session: Session, settings: Settings, *pages: Page) -> None:
    service.process_pages(session, [p.id for p in pages], settings)


def _settle(session: Session, settings: Settings, page: Page) -> None:
    assert page.site_id is not None
    settle_site(session, page.site_id, settings)


def _flagged(session: Session, page: Page) -> list[tuple[int, str]]:
    return [
        (m.chapter.index, m.status) for m in session.scalars(select(Match).where(Match.page_id == page.id))
    ]


def _template_site(session: Session, rng: random.Random, slogan: str, host: str, n: int) -> list[Page]:
    return [
        _page(session, f"http://{host}/{i}.html", f"本站推荐：{slogan}\n" + _filler(rng, 700))
        for i in range(n)
    ]


def test_site_template_quoting_a_work_is_set_aside_once_the_site_settles(
    session: Session, settings: Settings
) -> None:
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    service.index_work(session, work.work_id, settings)
    chapters = demo_chapters("lighthouse.txt")
    slogan = chapters[1][100:400]  # a 300-character passage every page of the site carries in its template
    rng = random.Random(3)
    site_pages = _template_site(session, rng, slogan, "news.test:8000", 8)
    copy = _page(session, "http://news.test:8000/copy.html", f"本站推荐：{slogan}\n" + chapters[0])
    other = _page(session, "http://blog.test/post.html", _filler(rng, 300) + slogan + _filler(rng, 300))
    _process(session, settings, *site_pages, copy, other)
    # before the site settles, each page is judged alone: the passage is an excerpt like any other
    assert _flagged(session, site_pages[0]) == [(2, "flagged")]
    _settle(session, settings, site_pages[0])
    _settle(session, settings, other)
    # the site shows the passage on many different pages: it is the site's template, not a copy
    assert [_flagged(session, page) for page in site_pages] == [[]] * len(site_pages)
    # a real copy on the same site is still found (its text is not on the other pages)
    assert _flagged(session, copy) == [(1, "flagged")]
    # the same passage on another site, inside an article, is an excerpt: flagged
    assert _flagged(session, other) == [(2, "flagged")]
    # settling again changes nothing
    _settle(session, settings, site_pages[0])
    assert [_flagged(session, page) for page in (*site_pages, copy)] == [[]] * len(site_pages) + [
        [(1, "flagged")]
    ]
    session.commit()


def test_one_chapter_under_many_urls_of_a_site_is_copied_everywhere(
    session: Session, settings: Settings
) -> None:
    """Desktop, mobile, print, AMP...: versions of one text are never the site's template."""
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    service.index_work(session, work.work_id, settings)
    chapter = demo_chapters("lighthouse.txt")[2]
    rng = random.Random(5)
    mirrors = [
        _page(session, f"http://mirror.test/{kind}/3.html", f"{kind} 本站首页\n" + chapter)
        for kind in ("www", "m", "print", "amp", "wap", "txt", "old")
    ]
    others = _template_site(session, rng, "欢迎光临本站", "mirror.test", 6)
    _process(session, settings, *others, *mirrors)
    _settle(session, settings, mirrors[0])
    assert [_flagged(session, page) for page in mirrors] == [[(3, "flagged")]] * len(mirrors)
    session.commit()


def test_final_matches_do_not_depend_on_processing_order(session: Session, settings: Settings) -> None:
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    service.index_work(session, work.work_id, settings)
    chapters = demo_chapters("lighthouse.txt")
    rng = random.Random(11)
    pages = _template_site(session, rng, chapters[1][50:350], "order.test", 7)
    pages += [_page(session, f"http://order.test/copy{i}.html", "目录\n" + chapters[0]) for i in range(3)]
    pages.append(_page(session, "http://order.test/part.html", _filler(rng, 200) + chapters[2][:600]))
    answers = []
    for seed in (1, 2, 3):
        order = list(pages)
        random.Random(seed).shuffle(order)
        for page in order:  # one page at a time, settling after each: the worst interleaving
            page.compared_at = None
            session.flush()
            _process(session, settings, page)
            _settle(session, settings, page)
        answers.append([_flagged(session, page) for page in pages])
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][:7] == [[]] * 7
    assert answers[0][7:] == [[(1, "flagged")]] * 3 + [[(3, "flagged")]]
    session.commit()


def test_copies_on_a_licensed_site_are_recorded_as_licensed(session: Session, settings: Settings) -> None:
    work = register_work_file(session, DEMO_DATA / "alley.txt")
    service.index_work(session, work.work_id, settings)
    chapter = demo_chapters("alley.txt")[0]
    pirate = _page(session, "http://pirate.test/1.html", chapter)
    partner = _page(session, "http://m.partner.test/1.html", chapter)
    _process(session, settings, pirate, partner)
    assert _flagged(session, partner) == [(1, "flagged")]

    assert add_licensed_site(session, work.work_id, "partner.test") == 1  # the existing match is relabelled
    assert _flagged(session, partner) == [(1, "licensed")]
    service.recompare_pages(session, [partner.id], settings)  # and stays licensed when the page is seen again
    assert _flagged(session, partner) == [(1, "licensed")]
    assert _flagged(session, pirate) == [(1, "flagged")]
    with pytest.raises(LookupError, match="no work"):
        add_licensed_site(session, 999_999, "partner.test")
    session.commit()


def test_registering_a_work_finds_pages_crawled_before(session: Session, settings: Settings) -> None:
    chapter = demo_chapters("lighthouse.txt")[2]
    page = _page(session, "http://early.test/3.html", "首页 目录\n" + chapter)
    _process(session, settings, page)  # nothing registered yet
    assert _flagged(session, page) == []
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    assert index_and_recheck(session, work.work_id, settings) == 1
    assert _flagged(session, page) == [(3, "flagged")]
    session.commit()


def _settled_web(session: Session, settings: Settings) -> dict[str, Page]:
    """A site whose template carries a passage of a work not registered yet, a real copy on it, the passage
    quoted on another site, all compared and settled before the work is registered."""
    chapters = demo_chapters("lighthouse.txt")
    slogan = chapters[1][100:400]
    rng = random.Random(7)
    pages = {f"site{i}": p for i, p in enumerate(_template_site(session, rng, slogan, "later.test", 8))}
    pages["copy"] = _page(session, "http://later.test/copy.html", f"本站推荐：{slogan}\n" + chapters[0])
    pages["other"] = _page(
        session, "http://elsewhere.test/a.html", _filler(rng, 300) + slogan + _filler(rng, 300)
    )
    _process(session, settings, *pages.values())
    _settle(session, settings, pages["site0"])
    _settle(session, settings, pages["other"])
    return pages


def _answer(session: Session, pages: dict[str, Page]) -> dict[str, list[tuple[int, str]]]:
    return {name: _flagged(session, page) for name, page in pages.items() if _flagged(session, page)}


@pytest.mark.parametrize("stored", [True, False], ids=["stored-template", "settled-whole"])
def test_a_work_registered_after_sites_settled_gets_the_answer_of_settling_them_whole(
    session: Session, settings: Settings, stored: bool
) -> None:
    """Registering a work compares the stored pages that may copy it with their site's template as the site
    last settled (compare.templates.settle_pages), the template quoting the new work included; a site without
    a stored template is settled whole. Both give the same matches."""
    pages = _settled_web(session, settings)
    assert not any(_flagged(session, page) for page in pages.values())
    if not stored:
        session.execute(update(Site).values(template_codes=None))
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    assert index_and_recheck(session, work.work_id, settings) == 2
    # the site's template is the passage, whichever way: the copy and the quote elsewhere are flagged
    assert _answer(session, pages) == {"copy": [(1, "flagged")], "other": [(2, "flagged")]}
    site = session.get(Site, pages["copy"].site_id)
    assert site is not None and site.template_codes  # stored, by the settling of either way
    session.commit()


def test_a_site_changed_since_it_settled_is_settled_whole(session: Session, settings: Settings) -> None:
    """Pages compared after their site settled may change its template: the stored one is not used (by a
    newly registered work, by the takedown re-check) until the site settles again."""
    pages = _settled_web(session, settings)
    site_id = pages["copy"].site_id
    assert site_id is not None
    stored = site_template(session, site_id)
    rng = random.Random(9)
    notice = "本站新域名已启用，请收藏新地址以免迷路，旧域名将于下月停用，感谢各位书友一路以来的支持与厚爱"
    late = [_page(session, f"http://later.test/new{i}.html", notice + _filler(rng, 700)) for i in range(7)]
    _process(session, settings, *late)
    changed = site_template(session, site_id)
    assert stored < changed  # the notice on seven new pages is template now
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    assert index_and_recheck(session, work.work_id, settings) == 2
    assert _answer(session, pages) == {"copy": [(1, "flagged")], "other": [(2, "flagged")]}
    site = session.get(Site, site_id)
    assert site is not None and site.template_codes is not None
    assert frozenset(np.frombuffer(site.template_codes, dtype="<i8").tolist()) == changed
    session.commit()


def test_a_site_quoting_a_new_work_on_every_page_sends_only_its_copies_to_be_compared_again(
    session: Session, settings: Settings
) -> None:
    """A sidebar quoting a work on every page of a site: registering the work compares again the site's copy
    and the quote on another site, not the site's every page (the codes more than
    RETRO_SITE_TEMPLATE_TEXTS texts of one site hold are its template); the answer is the same."""
    chapters = demo_chapters("lighthouse.txt")
    slogan = chapters[1][100:400]
    rng = random.Random(11)
    many = _template_site(session, rng, slogan, "sidebar.test", service.RETRO_SITE_TEMPLATE_TEXTS + 5)
    copy = _page(session, "http://sidebar.test/copy.html", f"本站推荐：{slogan}\n" + chapters[0])
    other = _page(session, "http://elsewhere.test/a.html", _filler(rng, 300) + slogan + _filler(rng, 300))
    _process(session, settings, *many, copy, other)
    _settle(session, settings, many[0])
    _settle(session, settings, other)
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    candidates = set(service.index_work(session, work.work_id, settings))
    # the copy and the quote elsewhere; of the site's own pages only a few, whose sample windows reaching past
    # the quote into their own text kept codes of the quote that too few pages hold to count as the template
    assert {copy.id, other.id} <= candidates
    assert len(candidates) <= 2 + len(many) // 10, sorted(candidates)
    assert index_and_recheck(session, work.work_id, settings) == 2
    pages = {"copy": copy, "other": other} | {f"site{i}": page for i, page in enumerate(many)}
    assert _answer(session, pages) == {"copy": [(1, "flagged")], "other": [(2, "flagged")]}
    session.commit()


@pytest.mark.parametrize("stored", [True, False], ids=["template-unchanged", "settled-whole"])
def test_a_site_settled_again_with_its_template_unchanged_compares_only_its_new_pages(
    session: Session, settings: Settings, stored: bool
) -> None:
    """A re-crawl that adds pages to a settled site whose template quotes a work: the pages compared ignoring
    that template at the last settling keep their verdicts (comparing them again would give the same), only
    the new ones are compared again; the answer is the one of settling the site whole."""
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    service.index_work(session, work.work_id, settings)
    chapters = demo_chapters("lighthouse.txt")
    slogan = chapters[1][100:400]
    rng = random.Random(13)
    site_pages = _template_site(session, rng, slogan, "again.test", 8)
    copy = _page(session, "http://again.test/copy.html", f"本站推荐：{slogan}\n" + chapters[0])
    _process(session, settings, *site_pages, copy)
    site_id = copy.site_id
    assert site_id is not None
    first = settle_site(session, site_id, settings)
    assert (first.recompared, first.masked) == (9, 9)  # every page holds the quote and was flagged for it

    late = _page(session, "http://again.test/late.html", f"本站推荐：{slogan}\n" + _filler(rng, 700))
    late_copy = _page(session, "http://again.test/copy3.html", f"本站推荐：{slogan}\n" + chapters[2])
    _process(session, settings, late, late_copy)
    assert _flagged(session, late) == [(2, "flagged")]  # judged alone until the site settles again
    if not stored:
        session.execute(update(Site).where(Site.id == site_id).values(template_codes=None))
    again = settle_site(session, site_id, settings)
    assert again.template_codes == first.template_codes
    assert again.recompared == (2 if stored else 11)
    pages = {f"site{i}": page for i, page in enumerate(site_pages)} | {
        "late": late,
        "copy": copy,
        "late_copy": late_copy,
    }
    assert _answer(session, pages) == {"copy": [(1, "flagged")], "late_copy": [(3, "flagged")]}
    session.commit()
