"""The ``match_rollups`` table kept by the database equals the roll-up recomputed from the matches, after any
sequence of writes through the real services (record_matches, record_decision) and the cascades around
them."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from fptrack.analytics.rollups import (
    kept_rollup,
    matches_per_period,
    rebuild_rollups,
    status_totals,
    top_hosts,
    top_works,
)
from fptrack.compare.service import Verdict, record_matches
from fptrack.core.settings import Settings
from fptrack.services.review import record_decision
from fptrack.storage.models import Chapter, Match, Page, Work
from tests.support.rollups import from_scratch

HOSTS = ("a.test", "b.test", "c.test:8001")
START = datetime(2026, 3, 1, 22, 30, tzinfo=UTC)  # late in the day: an hour later is another UTC day


def _seed(session: Session) -> None:
    for w in range(2):
        work = Work(title=f"书{w}", content_sha256=f"{w:064d}", text="正文" * 10)
        session.add(work)
        session.flush()
        session.add_all(
            Chapter(work_id=work.id, index=i, title=f"第{i}章", start=0, end=10, text="x") for i in range(2)
        )
    for n in range(4):
        host = HOSTS[n % len(HOSTS)]
        session.add(
            Page(url=f"http://{host}/{n}", final_url=f"http://{host}/{n}", host=host, status=200, text="t")
        )
    session.flush()


def _verdict(chapter: Chapter) -> Verdict:
    return Verdict(
        work_id=chapter.work_id,
        work_title="",
        chapter_id=chapter.id,
        chapter_index=chapter.index,
        chapter_title=chapter.title,
        score=0.9,
        copied_chars=10,
        methods=("winnow",),
        spans=((0, 1, 0, 1),),
        flagged=True,
    )


operation = st.one_of(
    # a (re-)comparison of a page: the chapters it copies now (others it copied before are dropped)
    st.tuples(st.just("compare"), st.integers(0, 9), st.sets(st.integers(0, 9), max_size=3)),
    # a match recorded with a given first-seen time (another day, another crawl)
    st.tuples(st.just("insert"), st.integers(0, 9), st.integers(0, 9), st.integers(0, 72)),
    st.tuples(st.just("review"), st.integers(0, 99), st.sampled_from(["confirmed", "dismissed", "flagged"])),
    st.tuples(st.just("delete_page"), st.integers(0, 9)),
    st.tuples(st.just("delete_work"), st.integers(0, 9)),
    st.tuples(st.just("move_host"), st.integers(0, 9), st.sampled_from(HOSTS)),
    st.tuples(st.just("delete_match"), st.integers(0, 99)),
)


def _apply(session: Session, step: tuple[object, ...]) -> None:
    pages = list(session.scalars(select(Page).order_by(Page.id)))
    chapters = list(session.scalars(select(Chapter).order_by(Chapter.id)))
    matches = list(session.scalars(select(Match).order_by(Match.id)))
    kind = step[0]
    if kind == "compare" and pages:
        page = pages[int(step[1]) % len(pages)]  # type: ignore[call-overload]
        chosen = [chapters[i % len(chapters)] for i in sorted(step[2])] if chapters else []  # type: ignore[attr-defined]
        copied = {chapter.id: chapter for chapter in chosen}
        record_matches(session, [(page.id, page.url)], [[_verdict(c) for c in copied.values()]], Settings())
    elif kind == "insert" and pages and chapters:
        page, chapter = pages[int(step[1]) % len(pages)], chapters[int(step[2]) % len(chapters)]  # type: ignore[call-overload]
        if (
            session.scalar(select(Match.id).where(Match.page_id == page.id, Match.chapter_id == chapter.id))
            is None
        ):
            seen = START + timedelta(hours=int(step[3]))  # type: ignore[call-overload]
            session.add(
                Match(
                    page_id=page.id,
                    work_id=chapter.work_id,
                    chapter_id=chapter.id,
                    score=0.8,
                    first_seen=seen,
                    last_seen=seen,
                )
            )
    elif kind == "review" and matches:
        record_decision(session, matches[int(step[1]) % len(matches)].id, str(step[2]), "rita")  # type: ignore[call-overload]
    elif kind == "delete_page" and pages:
        session.execute(delete(Page).where(Page.id == pages[int(step[1]) % len(pages)].id))  # type: ignore[call-overload]
    elif kind == "delete_work":
        works = list(session.scalars(select(Work.id).order_by(Work.id)))
        if works:
            session.execute(delete(Work).where(Work.id == works[int(step[1]) % len(works)]))  # type: ignore[call-overload]
    elif kind == "move_host" and pages:
        page_id = pages[int(step[1]) % len(pages)].id  # type: ignore[call-overload]
        session.execute(update(Page).where(Page.id == page_id).values(host=str(step[2])))
    elif kind == "delete_match" and matches:
        session.execute(delete(Match).where(Match.id == matches[int(step[1]) % len(matches)].id))  # type: ignore[call-overload]
    session.flush()
    session.expire_all()


@hypothesis_settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(operation, max_size=25))
def test_kept_rollup_equals_the_rollup_from_scratch(
    session: Session, steps: list[tuple[object, ...]]
) -> None:
    try:
        _seed(session)
        for step in steps:
            _apply(session, step)
            assert kept_rollup(session) == from_scratch(session), step
        assert all(count > 0 for count in kept_rollup(session).values())  # no row left at zero
        expected = from_scratch(session)
        rebuild_rollups(session)
        assert kept_rollup(session) == expected
    finally:
        session.rollback()


def test_dashboard_reads_of_the_rollup(session: Session) -> None:
    _seed(session)
    pages = list(session.scalars(select(Page).order_by(Page.id)))
    chapters = list(session.scalars(select(Chapter).order_by(Chapter.id)))
    # 2026-03-02 is a Monday; matches on Sunday 1st, Monday 2nd (two) and Monday 9th
    for page, chapter, seen, status in [
        (pages[0], chapters[0], datetime(2026, 3, 1, 12, tzinfo=UTC), "flagged"),
        (pages[1], chapters[0], datetime(2026, 3, 2, 0, 30, tzinfo=UTC), "confirmed"),
        (pages[1], chapters[2], datetime(2026, 3, 2, 23, 59, tzinfo=UTC), "flagged"),
        (pages[3], chapters[3], datetime(2026, 3, 9, 8, tzinfo=UTC), "dismissed"),
    ]:
        session.add(
            Match(
                page_id=page.id,
                work_id=chapter.work_id,
                chapter_id=chapter.id,
                score=0.9,
                status=status,
                first_seen=seen,
                last_seen=seen,
            )
        )
    session.flush()

    days = matches_per_period(session, "day", date(2026, 3, 1), date(2026, 3, 3))
    assert [(p.start, p.total, p.by_status["flagged"]) for p in days] == [
        (date(2026, 3, 1), 1, 1),
        (date(2026, 3, 2), 2, 1),
        (date(2026, 3, 3), 0, 0),
    ]
    weeks = matches_per_period(session, "week", date(2026, 3, 1), date(2026, 3, 10))
    assert [(p.start, p.total) for p in weeks] == [
        (date(2026, 2, 23), 1),
        (date(2026, 3, 2), 2),
        (date(2026, 3, 9), 1),
    ]
    assert status_totals(session) == {"flagged": 2, "confirmed": 1, "dismissed": 1, "licensed": 0}
    assert status_totals(session, since=date(2026, 3, 2))["flagged"] == 1

    hosts = top_hosts(session)  # pages 0 and 3 are on a.test, page 1 on b.test; ties by name
    assert [(h.label, h.total) for h in hosts] == [("a.test", 2), ("b.test", 2)]
    assert hosts[1].by_status == {"flagged": 1, "confirmed": 1, "dismissed": 0, "licensed": 0}
    assert [h.label for h in top_hosts(session, since=date(2026, 3, 2), limit=1)] == ["b.test"]
    works = top_works(session, limit=1)
    assert [(w.label, w.total) for w in works] == [("书0", 2)]  # a tie with 书1: lower id first
    assert top_works(session, since=date(2026, 3, 9))[0].label == "书1"
