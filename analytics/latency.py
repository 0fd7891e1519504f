"""Detection latency: how long after a copy could first be seen did fptrack flag it.

For a match, the clock starts at the later of the page's fetch and the work's registration (a page crawled
before the work was registered is found by the retroactive comparison, which cannot start before the work
exists) and stops at the match's ``first_seen``. The store keeps a page's *latest* fetch only: a page fetched
again after the match was first seen no longer tells when it was first fetched, so such matches are counted as
``unknown`` rather than given a made-up latency.

Percentiles are nearest-rank (the smallest latency with at least p% of the matches at or below it), the same
definition as PostgreSQL's ``percentile_disc``; latencies are whole seconds, so both backends agree exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.storage.models import Match, Page, Work, as_utc

__all__ = ["LatencySummary", "detection_latency", "nearest_rank"]


@dataclass(frozen=True)
class LatencySummary:
    """Detection latency of ``matches`` matches, in seconds (``None`` when there are none); ``unknown``:
    matches left out because their page was fetched again after they were first seen."""

    matches: int
    unknown: int
    median_seconds: int | None
    p90_seconds: int | None

    def as_json(self) -> dict[str, object]:
        return {
            "matches": self.matches,
            "unknown": self.unknown,
            "median_seconds": self.median_seconds,
            "p90_seconds": self.p90_seconds,
        }


def nearest_rank(sorted_values: list[int], fraction: float) -> int | None:
    """The nearest-rank percentile of an ascending list (``fraction`` in 0..1)."""
    if not sorted_values:
        return None
    if not 0 < fraction <= 1:
        raise ValueError(f"a percentile is a fraction in (0, 1], not {fraction}")
    return sorted_values[max(0, math.ceil(fraction * len(sorted_values)) - 1)]


def detection_latency(
    session: Session, *, since: datetime | None = None, recent: int | None = None
) -> LatencySummary:
    """Median and 90th percentile of the detection latency of the matches first seen on or after ``since``;
    with ``recent``, of the ``recent`` most recently first seen of them only (what the dashboard shows: an
    index range on ``first_seen``, so its cost does not grow with the table)."""
    if recent is not None and recent < 1:
        raise ValueError(f"recent must be a positive number of matches, not {recent}")
    chosen = select(Match.id, Match.page_id, Match.work_id, Match.first_seen)
    if since is not None:
        chosen = chosen.where(Match.first_seen >= since)
    if recent is not None:
        chosen = chosen.order_by(Match.first_seen.desc()).limit(recent)
    window = chosen.subquery("window")
    statement = (
        select(window.c.first_seen, Page.fetched_at, Work.created_at)
        .select_from(window)
        .join(Page, Page.id == window.c.page_id)
        .join(Work, Work.id == window.c.work_id)
    )
    if session.get_bind().dialect.name == "postgresql":
        return _on_postgresql(session, statement.subquery("timed"))
    latencies, unknown = [], 0
    for first_seen, fetched_at, registered_at in session.execute(statement):
        seen, fetched, registered = as_utc(first_seen), as_utc(fetched_at), as_utc(registered_at)
        if fetched > seen:
            unknown += 1
            continue
        latencies.append(_whole_seconds(seen - max(fetched, registered)))
    latencies.sort()
    return LatencySummary(len(latencies), unknown, nearest_rank(latencies, 0.5), nearest_rank(latencies, 0.9))


def _on_postgresql(session: Session, timed: object) -> LatencySummary:
    # floor of the exact difference in microseconds, as _whole_seconds does in Python
    start = func.greatest(timed.c.fetched_at, timed.c.created_at)  # type: ignore[attr-defined]
    seconds = func.floor(func.extract("epoch", timed.c.first_seen - start))  # type: ignore[attr-defined]
    known = timed.c.fetched_at <= timed.c.first_seen  # type: ignore[attr-defined]
    row = session.execute(
        select(
            func.count().filter(known),
            func.count().filter(~known),
            func.percentile_disc(0.5).within_group(seconds).filter(known),
            func.percentile_disc(0.9).within_group(seconds).filter(known),
        ).select_from(timed)  # type: ignore[arg-type]
    ).one()
    matches, unknown, median, p90 = row
    return LatencySummary(
        int(matches), int(unknown), None if median is None else int(median), None if p90 is None else int(p90)
    )


def _whole_seconds(delta: timedelta) -> int:
    # floor division of integer microseconds: exact, no float rounding
    return delta // timedelta(seconds=1)
