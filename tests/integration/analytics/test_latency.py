"""Detection latency: the same median and p90 on SQLite and PostgreSQL, against a hand-computed answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from fptrack.analytics.latency import detection_latency, nearest_rank
from fptrack.storage.models import Chapter, Match, Page, Work

T0 = datetime(2026, 5, 1, 8, tzinfo=UTC)


def _seed(session: Session) -> None:
    old = Work(title="旧作", content_sha256="a" * 64, text="x", created_at=T0 - timedelta(days=30))
    new = Work(title="新作", content_sha256="b" * 64, text="x", created_at=T0 + timedelta(hours=5))
    session.add_all([old, new])
    session.flush()
    chapters = [Chapter(work_id=w.id, index=0, title="一", start=0, end=1, text="x") for w in (old, new)]
    session.add_all(chapters)
    # pages fetched at T0 + n minutes; matched at T0 + n minutes + (n * 10 + 0.9) seconds
    for n in range(10):
        page = Page(
            url=f"http://p.test/{n}",
            final_url=f"http://p.test/{n}",
            host="p.test",
            status=200,
            fetched_at=T0 + timedelta(minutes=n),
        )
        session.add(page)
        session.flush()
        seen = T0 + timedelta(minutes=n, seconds=n * 10, milliseconds=900)
        session.add(
            Match(
                page_id=page.id,
                work_id=old.id,
                chapter_id=chapters[0].id,
                score=1.0,
                first_seen=seen,
                last_seen=seen,
            )
        )
    # a page crawled before the new work was registered: the clock starts at the registration (+5 h), 1 h
    # before
    early = Page(
        url="http://p.test/early",
        final_url="http://p.test/early",
        host="p.test",
        status=200,
        fetched_at=T0 - timedelta(days=2),
    )
    # a page fetched again after its match was first seen: its first fetch is unknown
    refetched = Page(
        url="http://p.test/again",
        final_url="http://p.test/again",
        host="p.test",
        status=200,
        fetched_at=T0 + timedelta(days=3),
    )
    session.add_all([early, refetched])
    session.flush()
    for page, seen in ((early, T0 + timedelta(hours=6)), (refetched, T0 + timedelta(days=1))):
        session.add(
            Match(
                page_id=page.id,
                work_id=new.id,
                chapter_id=chapters[1].id,
                score=1.0,
                first_seen=seen,
                last_seen=seen,
            )
        )
    session.flush()


def test_detection_latency(session: Session) -> None:
    _seed(session)
    summary = detection_latency(session)
    # latencies 0, 10, ..., 90 s (the .9 s floored) and 3600 s: 11 known, one unknown
    assert (summary.matches, summary.unknown) == (11, 1)
    assert summary.median_seconds == 50  # 6th of 11
    assert summary.p90_seconds == 90  # ceil(9.9) = 10th of 11
    assert detection_latency(session, since=T0 + timedelta(minutes=7)).as_json() == {
        "matches": 5,
        "unknown": 1,
        "median_seconds": 80,
        "p90_seconds": 3600,  # n = 6..9 and the 6 h one
    }
    recent = detection_latency(session, recent=2)  # the refetched page (day 1) and the new work's match (6 h)
    assert (recent.matches, recent.unknown, recent.median_seconds) == (1, 1, 3600)


def test_no_matches_and_bad_input(session: Session) -> None:
    assert detection_latency(session).as_json() == {
        "matches": 0,
        "unknown": 0,
        "median_seconds": None,
        "p90_seconds": None,
    }
    with pytest.raises(ValueError, match="positive number"):
        detection_latency(session, recent=0)
    assert nearest_rank([1, 2, 3, 4], 0.5) == 2 and nearest_rank([1, 2, 3, 4], 1.0) == 4
