from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from fptrack.analytics.rollups import match_rollup
from fptrack.storage.models import Chapter, Match, Page, Work


def _seed(session: Session) -> None:
    works = [Work(title=t, content_sha256=t * 8, text="x" * 10) for t in ("甲书", "乙书")]
    session.add_all(works)
    session.flush()
    chapters = [Chapter(work_id=w.id, index=1, title="第一章", start=0, end=10, text="x" * 10) for w in works]
    pages = [
        Page(url=f"http://{host}/{n}", final_url=f"http://{host}/{n}", host=host, status=200, text="t")
        for n, host in enumerate(["a.test", "a.test", "b.test"])
    ]
    session.add_all(chapters + pages)
    session.flush()
    day1, day2 = datetime(2026, 1, 1, 10, tzinfo=UTC), datetime(2026, 1, 2, 10, tzinfo=UTC)
    for page, chapter, status, seen in [
        (pages[0], chapters[0], "flagged", day1),
        (pages[1], chapters[0], "confirmed", day2),
        (pages[2], chapters[1], "dismissed", day2),
        (pages[2], chapters[0], "flagged", day2 + timedelta(hours=1)),
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


def test_rollups_by_work_host_and_day(session: Session) -> None:
    _seed(session)
    by_work = {r.key.split(" ")[0]: r for r in match_rollup(session, "work")}
    assert (by_work["甲书"].flagged, by_work["甲书"].confirmed, by_work["甲书"].pages) == (2, 1, 3)
    assert (by_work["乙书"].dismissed, by_work["乙书"].total) == (1, 1)
    by_host = [(r.key, r.total, r.pages) for r in match_rollup(session, "host")]
    assert by_host == [("a.test", 2, 2), ("b.test", 2, 1)]
    by_day = [(r.key, r.total) for r in match_rollup(session, "day")]
    assert by_day == [("2026-01-02", 3), ("2026-01-01", 1)]
    since = [(r.key, r.total) for r in match_rollup(session, "day", since=datetime(2026, 1, 2, tzinfo=UTC))]
    assert since == [("2026-01-02", 3)]


def test_unknown_dimension_is_a_clear_error(session: Session) -> None:
    with pytest.raises(ValueError, match="choose work, host or day"):
        match_rollup(session, "month")  # type: ignore[arg-type]
