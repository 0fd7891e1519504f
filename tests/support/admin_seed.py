"""The rows the admin's tests (and the CLI's, which show the same matches) start from: two works, four pages,
four matches, one in each review status, with hostile markup in every crawled string.

Seeded through the ORM with texts written for these tests. ``seed`` returns the ids (a frozen ``Seeded``) and
closes the session, so that a test reads the rows back as the app does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from fptrack.storage.models import Chapter, Match, Page, Work

SCRIPT = "<script>alert(1)</script>"
ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"

CHAPTER_ONE = "第一章 山中\n山中有一座小庙，庙里住着一位老和尚。每天清晨他都去溪边挑水。\n"
CHAPTER_TWO = "第二章 下山\n小和尚长大以后决定下山看看外面的世界，他带着一把旧伞出发了。\n"
WORK_TEXT = CHAPTER_ONE + CHAPTER_TWO
COPIED_ONE = "庙里住着一位老和尚"
COPIED_TWO = "他带着一把旧伞出发了"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Seeded:
    work_id: int
    other_work_id: int
    chapter_ids: tuple[int, int]
    hostile_match_id: int
    plain_match_id: int
    javascript_match_id: int
    match_ids_newest_first: tuple[int, ...]


def _work(title: str, text: str, chapters: list[str], sha: str) -> Work:
    work = Work(title=title, source_name=f"{title}.txt", content_sha256=sha, text=text)
    position = 0
    for index, chapter_text in enumerate(chapters, start=1):
        start = text.index(chapter_text, position)
        position = start + len(chapter_text)
        work.chapters.append(
            Chapter(
                index=index,
                title=chapter_text.split("\n", 1)[0],
                start=start,
                end=position,
                text=chapter_text,
            )
        )
    return work


def passage_span(page_text: str, passage: str) -> list[int]:
    """The span ``[page start, page end, work start, work end]`` of ``passage``, as a match stores it."""
    page_start = page_text.index(passage)
    work_start = WORK_TEXT.index(passage)
    return [page_start, page_start + len(passage), work_start, work_start + len(passage)]


def seed(session: Session) -> Seeded:
    work = _work("山中故事", WORK_TEXT, [CHAPTER_ONE, CHAPTER_TWO], "a" * 64)
    other = _work(f"Other {SCRIPT}", "Chapter 1\nA quiet text.\n", ["Chapter 1\nA quiet text.\n"], "b" * 64)
    session.add_all([work, other])

    hostile_text = f"导航 首页 {SCRIPT} 正文：{COPIED_ONE}，然后 {COPIED_TWO}。<b>bold</b> 广告"
    hostile = Page(
        url='http://pirate.example/book/1.html?q="><script>alert(1)</script>',
        final_url="http://pirate.example/book/1.html",
        host="pirate.example",
        status=200,
        title=f"盗版 {SCRIPT}",
        text=hostile_text,
    )
    plain_text = f"另一个网站转载：{COPIED_TWO}。"
    plain = Page(
        url="https://copy.example/ch2",
        final_url="https://copy.example/ch2",
        host="copy.example",
        status=200,
        title="转载",
        text=plain_text,
    )
    javascript = Page(
        url="javascript:alert(1)",
        final_url="javascript:alert(1)",
        host=SCRIPT,
        status=200,
        title="js",
        text=f"{COPIED_ONE}",
    )
    other_page = Page(
        url="http://pirate.example/other.html",
        final_url="http://pirate.example/other.html",
        host="pirate.example",
        status=200,
        title="other",
        text="A quiet text.",
    )
    session.add_all([hostile, plain, javascript, other_page])
    session.flush()
    chapter_one, chapter_two = work.chapters

    hostile_match = Match(
        page=hostile,
        work=work,
        chapter=chapter_one,
        score=0.9312,
        methods=["simhash64", "winnowing"],
        spans=[passage_span(hostile_text, COPIED_ONE), passage_span(hostile_text, COPIED_TWO)],
        status="flagged",
        first_seen=T0,
        last_seen=T0,
    )
    plain_match = Match(
        page=plain,
        work=work,
        chapter=chapter_two,
        score=0.8,
        methods=["dna"],
        spans=[passage_span(plain_text, COPIED_TWO)],
        status="licensed",
        first_seen=T0 + timedelta(hours=1),
        last_seen=T0 + timedelta(hours=1),
    )
    javascript_match = Match(
        page=javascript,
        work=work,
        chapter=chapter_one,
        score=0.7,
        methods=["winnowing"],
        spans=[[0, len(COPIED_ONE), *passage_span(WORK_TEXT, COPIED_ONE)[2:]]],
        status="dismissed",
        first_seen=T0 + timedelta(hours=2),
        last_seen=T0 + timedelta(hours=2),
    )
    other_match = Match(
        page=other_page,
        work=other,
        chapter=other.chapters[0],
        score=0.99,
        methods=["simhash64"],
        spans=[[0, 13, 10, 23]],
        status="confirmed",
        first_seen=T0 + timedelta(hours=3),
        last_seen=T0 + timedelta(hours=3),
    )
    session.add_all([hostile_match, plain_match, javascript_match, other_match])
    session.commit()
    seeded = Seeded(
        work_id=work.id,
        other_work_id=other.id,
        chapter_ids=(chapter_one.id, chapter_two.id),
        hostile_match_id=hostile_match.id,
        plain_match_id=plain_match.id,
        javascript_match_id=javascript_match.id,
        match_ids_newest_first=(other_match.id, javascript_match.id, plain_match.id, hostile_match.id),
    )
    session.close()
    return seeded
