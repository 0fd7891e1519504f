"""Takedown figures on both backends: counts, rate and the median / 90th percentile of the time to takedown,
the same numbers on SQLite (numpy over the durations) and PostgreSQL (percentile_cont in the database)."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy.orm import Session

from fptrack.analytics.takedowns import takedown_stats
from fptrack.storage.models import Chapter, Match, Page, Work

T0 = datetime(2026, 3, 1, 8, tzinfo=UTC)
# (host, status, recheck_state, hours from first seen to taken down or None)
SEEDS = [
    ("a.test", "flagged", "gone", 5.0),
    ("a.test", "flagged", "removed", 30.0),
    ("a.test", "confirmed", "gone", 2.5),
    ("a.test", "flagged", "present", None),
    ("a.test", "flagged", None, None),
    ("b.test", "confirmed", "removed", 100.0),
    ("b.test", "flagged", "error", None),
    ("b.test", "dismissed", "gone", 1.0),  # dismissed: not a copy to take down, never counted
]


def _seed(session: Session) -> int:
    work = Work(title="甲书", content_sha256="a" * 64, text="x" * 10)
    session.add(work)
    session.flush()
    chapter = Chapter(work_id=work.id, index=1, title="第一章", start=0, end=10, text="x" * 10)
    session.add(chapter)
    for n, (host, status, state, hours) in enumerate(SEEDS):
        page = Page(url=f"http://{host}/{n}", final_url=f"http://{host}/{n}", host=host, status=200, text="t")
        session.add(page)
        session.flush()
        seen = T0 + timedelta(minutes=17 * n)
        down = seen + timedelta(hours=hours) if hours is not None else None
        session.add(
            Match(
                page_id=page.id,
                work_id=work.id,
                chapter_id=chapter.id,
                score=0.9,
                status=status,
                first_seen=seen,
                last_seen=seen,
                recheck_state=state,
                taken_down_at=down,
                rechecked_at=down or (seen if state else None),
            )
        )
    session.flush()
    return int(work.id)


def _expected(hours: list[float]) -> tuple[float, float]:
    median, p90 = np.percentile(np.array(hours) * 3600, [50, 90])
    return round(float(median), 1), round(float(p90), 1)


def test_takedown_rate_and_times_overall_per_host_and_per_work(session: Session) -> None:
    work_id = _seed(session)
    (overall,) = takedown_stats(session, "all")
    assert (overall.key, overall.matches, overall.checked, overall.taken_down) == ("all", 7, 6, 4)
    assert overall.rate == pytest.approx(4 / 6, abs=1e-4)
    assert (overall.median_seconds, overall.p90_seconds) == _expected([5.0, 30.0, 2.5, 100.0])
    by_host = {r.key: r for r in takedown_stats(session, "host")}
    assert [r.key for r in takedown_stats(session, "host")] == ["a.test", "b.test"]  # most matches first
    assert (by_host["a.test"].checked, by_host["a.test"].taken_down) == (4, 3)
    assert (by_host["a.test"].median_seconds, by_host["a.test"].p90_seconds) == _expected([5.0, 30.0, 2.5])
    assert (by_host["b.test"].matches, by_host["b.test"].taken_down, by_host["b.test"].rate) == (2, 1, 0.5)
    assert by_host["b.test"].median_seconds == 100 * 3600
    (per_work,) = takedown_stats(session, "work")
    assert per_work.key == f"甲书 (#{work_id})" and per_work.as_json()["taken_down"] == 4


def test_no_matches_yet(session: Session) -> None:
    (overall,) = takedown_stats(session, "all")
    assert (overall.matches, overall.rate, overall.median_seconds) == (0, None, None)
    assert takedown_stats(session, "host") == []
    with pytest.raises(ValueError, match="choose all, host or work"):
        takedown_stats(session, "day")  # type: ignore[arg-type]
