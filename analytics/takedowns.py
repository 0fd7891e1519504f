"""Takedown figures: how many copies were taken down once found, and how fast, overall and per site or work.

Read by the admin dashboard and ``fptrack takedowns``; the re-checks that feed them are :mod:`jobs.rechecks`.
Over the flagged and confirmed matches (the copies that should come down):

- ``checked``: matches re-checked at least once (``recheck_state`` set);
- ``taken_down``: matches whose copy is down now (``taken_down_at`` set: gone or removed, not back since);
- ``rate``: ``taken_down / checked`` (None before any check);
- ``median_seconds`` / ``p90_seconds``: time from first seen to the first check that found the copy down, over
  the taken-down matches; percentiles by linear interpolation between the two nearest ranks (PostgreSQL's
  ``percentile_cont``, which computes them in the database; on SQLite numpy does the same over the durations).

One grouped query whatever the number of matches on PostgreSQL (on SQLite a second one reads the durations of
the matches taken down); the same answers on both (durations rounded to 0.1 s).

Time to detect (:func:`detection_times`): how long after a copy went up fptrack first saw it, where the site
says when the page appeared: its ``Last-Modified`` (``pages.last_modified``, an HTTP date), counted only when
it is before the match's first-seen (a page edited since says nothing about its first appearance). Median and
90th percentile (the same interpolation as above) over the flagged and confirmed matches whose page says it;
``known`` is how many those are.

Time to removal after a notice (:func:`notice_removal_times`): per sent takedown notice, or per recipient
(its address), how many copies it named, how many were taken down since, and the median and 90th percentile
of the time from the notice being sent to each copy being found down (``notice_items.closed_at``, from the
re-checks: :mod:`jobs.notices`); a copy already down when the notice went out counts as 0."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import numpy as np
from sqlalchemy import and_, case, exists, func, literal, or_, select, text
from sqlalchemy.orm import Session

from fptrack.storage.models import (
    TAKEDOWN_DOWN_CHECK,
    Match,
    MatchRollup,
    MatchStatus,
    Notice,
    NoticeItem,
    Page,
    ReviewDecision,
    TakedownCheck,
    Work,
    as_utc,
    iso_utc,
)

__all__ = [
    "COPY_STATES",
    "DETECTION_COLUMNS",
    "NOTICE_REMOVAL_COLUMNS",
    "RECORD_COLUMNS",
    "STATES",
    "TAKEDOWN_COLUMNS",
    "DetectionRow",
    "Grouping",
    "NoticeRemovalRow",
    "TakedownRow",
    "copy_state",
    "detection_delays",
    "detection_times",
    "notice_removal_times",
    "notice_sent_at",
    "takedown_records",
    "takedown_stats",
    "takedown_stats_stamp",
]

# the states a listing filters on: a match's latest re-check outcome, never checked, or down now (gone or
# removed)
STATES = ("present", "gone", "removed", "error", "unchecked", "down")
# the fields of each record of takedown_records, in order (the CSV columns of `fptrack takedowns`)
RECORD_COLUMNS = (
    "id",
    "page_url",
    "work_id",
    "work_title",
    "status",
    "state",
    "first_seen",
    "rechecked_at",
    "taken_down_at",
    "time_to_takedown_seconds",
)

Grouping = Literal["all", "host", "work"]
STATUSES = (MatchStatus.FLAGGED.value, MatchStatus.CONFIRMED.value)
TAKEDOWN_COLUMNS = ("key", "matches", "checked", "taken_down", "rate", "median_seconds", "p90_seconds")
# the time to detect, added after TAKEDOWN_COLUMNS by `fptrack takedowns stats` (detection_times)
DETECTION_COLUMNS = ("detect_known", "detect_median_seconds", "detect_p90_seconds")


# Where a copy stands on its way down, the furthest step it reached: its review (flagged, confirmed), a sent
# notice naming it, taken down (down now, confirmed), back up (present again after a check found it down).
# Dismissed and licensed matches keep their review status.
COPY_STATES = ("flagged", "confirmed", "notice_sent", "taken_down", "back_up")


def notice_sent_at() -> Any:
    """When the first sent notice naming the match went out (NULL: none), as a correlated SQL value."""
    return (
        select(func.min(Notice.sent_at))
        .join(NoticeItem, NoticeItem.notice_id == Notice.id)
        .where(NoticeItem.match_id == Match.id, Notice.sent_at.is_not(None))
        .scalar_subquery()
    )


def copy_state() -> Any:
    """The match's step in :data:`COPY_STATES` (or its review status when dismissed or licensed), as SQL:
    one definition for the takedowns page, its counts and the match list's filter. Whether a present copy was
    seen down before is asked of the checks that found copies down (a partial index: few rows, whatever the
    size of the history); the copies named by a sent notice are read once, as a set."""
    seen_down = exists().where(TakedownCheck.match_id == Match.id, text(TAKEDOWN_DOWN_CHECK))
    noticed = (
        select(NoticeItem.match_id)
        .join(Notice, Notice.id == NoticeItem.notice_id)
        .where(Notice.sent_at.is_not(None), NoticeItem.match_id.is_not(None))
    )
    return case(
        (Match.taken_down_at.is_not(None), literal("taken_down")),
        (and_(Match.recheck_state == "present", seen_down), literal("back_up")),
        (Match.id.in_(noticed), literal("notice_sent")),
        else_=Match.status,
    )


@dataclass(frozen=True)
class TakedownRow:
    key: str  # "all", a page host, or "title (#id)"
    matches: int
    checked: int
    taken_down: int
    median_seconds: float | None
    p90_seconds: float | None

    @property
    def rate(self) -> float | None:
        return round(self.taken_down / self.checked, 4) if self.checked else None

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in TAKEDOWN_COLUMNS}


def _key(by: Grouping) -> Any:
    if by == "all":
        return literal("all")
    if by == "host":
        return Page.host
    if by == "work":
        return Work.title + " (#" + func.cast(Work.id, Work.title.type) + ")"
    raise ValueError(f"unknown takedown grouping {by!r}; choose all, host or work")


def _joined(statement: Any, by: Grouping) -> Any:
    if by == "host":
        return statement.join(Page, Page.id == Match.page_id)
    if by == "work":
        return statement.join(Work, Work.id == Match.work_id)
    return statement


def _seconds(session: Session) -> Any:
    """Seconds from first seen to taken down, as SQL (NULL when not taken down)."""
    if session.get_bind().dialect.name == "postgresql":
        return func.extract("epoch", Match.taken_down_at - Match.first_seen)
    return (func.julianday(Match.taken_down_at) - func.julianday(Match.first_seen)) * 86400.0


def _round(value: object) -> float | None:
    return None if value is None else round(float(value), 1)  # type: ignore[arg-type]


def takedown_stats(session: Session, by: Grouping = "all") -> list[TakedownRow]:
    """Takedown counts, rate and time to takedown, overall (``by='all'``: one row, also with no match) or per
    page host or per work (most matches first)."""
    postgres = session.get_bind().dialect.name == "postgresql"
    # grouping sorts by the key (percentile_cont needs sorted groups): byte order, not the locale's collation
    key = (_key(by).collate("C") if postgres and by != "all" else _key(by)).label("key")
    counts: list[Any] = [func.count(), func.count(Match.recheck_state), func.count(Match.taken_down_at)]
    if postgres:  # one pass: percentile_cont skips the NULL durations of matches not taken down
        seconds = _seconds(session)
        counts += [
            func.percentile_cont(0.5).within_group(seconds),
            func.percentile_cont(0.9).within_group(seconds),
        ]
    statement = _joined(select(key, *counts).select_from(Match), by).where(Match.status.in_(STATUSES))
    if by != "all":
        statement = statement.group_by(key)
    rows = session.execute(statement).all()
    if postgres:
        result = [
            TakedownRow(str(k), int(n), int(c), int(t), _round(m), _round(p)) for k, n, c, t, m, p in rows
        ]
    else:
        times = _sqlite_times(session, by, key)
        result = [
            TakedownRow(str(k), int(n), int(c), int(t), *times.get(str(k), (None, None)))
            for k, n, c, t in rows
        ]
    return sorted(result, key=lambda r: (-r.matches, r.key))


def takedown_stats_stamp(session: Session) -> tuple[object, ...]:
    """What :func:`takedown_stats` depends on, read in a few index lookups: equal stamps, equal figures. A
    re-check or a crawl's observation moves its match's ``rechecked_at``; a review decision, a new match, a
    removed one or a status set by the comparison moves the decisions' or matches' last id or the kept
    flagged and confirmed totals (``match_rollups``). For a cache of the figures that is never stale."""
    latest_checks = [
        select(func.max(Match.rechecked_at)).where(Match.status == status).scalar_subquery()
        for status in STATUSES
    ]
    totals = (
        select(func.coalesce(func.sum(MatchRollup.matches), 0))
        .where(MatchRollup.status.in_(STATUSES))
        .scalar_subquery()
    )
    row = session.execute(
        select(
            select(func.max(Match.id)).scalar_subquery(),
            select(func.max(ReviewDecision.id)).scalar_subquery(),
            totals,
            *latest_checks,
        )
    ).one()
    return tuple(row)


def _sqlite_times(session: Session, by: Grouping, key: Any) -> dict[str, tuple[float | None, float | None]]:
    seconds = _seconds(session)
    taken = (Match.status.in_(STATUSES), Match.taken_down_at.is_not(None))
    durations: dict[str, list[float]] = defaultdict(list)
    for k, value in session.execute(_joined(select(key, seconds).select_from(Match), by).where(*taken)):
        durations[str(k)].append(float(value))
    found: dict[str, tuple[float | None, float | None]] = {}
    for k, values in durations.items():
        median, p90 = np.percentile(np.asarray(values), [50, 90])
        found[k] = (_round(median), _round(p90))
    return found


def takedown_records(
    session: Session,
    *,
    state: str | None = None,
    work_id: int | None = None,
    domain: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """The matches followed for takedown (flagged and confirmed, and any match re-checked before), oldest
    first, each a dict of :data:`RECORD_COLUMNS`; ``state`` one of :data:`STATES`, ``domain`` a page host."""
    if state is not None and state not in STATES:
        raise ValueError(f"unknown takedown state {state!r}; choose one of {', '.join(STATES)}")
    query = (
        select(Match, Page.url, Work.title)
        .join(Page, Page.id == Match.page_id)
        .join(Work, Work.id == Match.work_id)
        .where(or_(Match.status.in_(STATUSES), Match.recheck_state.is_not(None)))
    )
    if state == "unchecked":
        query = query.where(Match.recheck_state.is_(None))
    elif state == "down":
        query = query.where(Match.taken_down_at.is_not(None))
    elif state is not None:
        query = query.where(Match.recheck_state == state)
    if work_id is not None:
        query = query.where(Match.work_id == work_id)
    if domain:
        query = query.where(Page.host == domain.strip().lower())
    query = query.order_by(Match.first_seen, Match.id).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    records = []
    for match, url, title in session.execute(query):
        first_seen = as_utc(match.first_seen)
        down = as_utc(match.taken_down_at) if match.taken_down_at is not None else None
        records.append(
            {
                "id": match.id,
                "page_url": url,
                "work_id": match.work_id,
                "work_title": title,
                "status": match.status,
                "state": match.recheck_state or "unchecked",
                "first_seen": iso_utc(first_seen),
                "rechecked_at": iso_utc(match.rechecked_at),
                "taken_down_at": iso_utc(down),
                "time_to_takedown_seconds": (
                    round((down - first_seen).total_seconds(), 1) if down is not None and first_seen else None
                ),
            }
        )
    return records


# ------------------------------------------------------------------------------------------- time to detect


@dataclass(frozen=True)
class DetectionRow:
    """Time to detect for one group: how many of its matches' pages say when they appeared (``known``), and
    the median and 90th percentile of first seen less that time, in seconds (None when none says it)."""

    key: str
    known: int
    median_seconds: float | None
    p90_seconds: float | None

    def as_json(self) -> dict[str, Any]:
        return {
            "detect_known": self.known,
            "detect_median_seconds": self.median_seconds,
            "detect_p90_seconds": self.p90_seconds,
        }


def _http_date(value: str) -> datetime | None:
    """An HTTP date (``Last-Modified``) as an aware datetime, or None when it is missing or unreadable."""
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return as_utc(parsed) if parsed is not None else None


def detection_delays(rows: Iterable[tuple[str, datetime, str]]) -> dict[str, list[float]]:
    """Group key -> the seconds from each page's ``Last-Modified`` to its match's first-seen, for the rows
    ``(key, first_seen, last_modified)`` whose page says a time before the first-seen."""
    delays: dict[str, list[float]] = defaultdict(list)
    for key, first_seen, last_modified in rows:
        appeared = _http_date(last_modified)
        seen = as_utc(first_seen)
        if appeared is None or seen is None or appeared >= seen:
            continue
        delays[str(key)].append((seen - appeared).total_seconds())
    return delays


def detection_times(session: Session, by: Grouping = "all") -> dict[str, DetectionRow]:
    """Time to detect (see the module docstring), overall (``by='all'``: key ``all``, also with no match)
    or per page host or per work, keyed as :func:`takedown_stats` keys its rows."""
    key = _key(by).label("key")
    statement = (
        select(key, Match.first_seen, Page.last_modified)
        .select_from(Match)
        .join(Page, Page.id == Match.page_id)
        .where(Match.status.in_(STATUSES), Page.last_modified != "")
    )
    if by == "work":
        statement = statement.join(Work, Work.id == Match.work_id)
    delays = detection_delays(
        (str(k), seen, str(modified)) for k, seen, modified in session.execute(statement)
    )
    found: dict[str, DetectionRow] = {}
    for group, values in delays.items():
        median, p90 = np.percentile(np.asarray(values), [50, 90])
        found[group] = DetectionRow(group, len(values), _round(median), _round(p90))
    if by == "all" and "all" not in found:
        found["all"] = DetectionRow("all", 0, None, None)
    return found


NOTICE_REMOVAL_COLUMNS = ("key", "notices", "copies", "removed", "median_seconds", "p90_seconds")


@dataclass(frozen=True)
class NoticeRemovalRow:
    """Time to removal after notices (:func:`notice_removal_times`): ``key`` is ``notice <id>`` or a recipient
    address; ``copies`` the items named, ``removed`` those found down since."""

    key: str
    notices: int
    copies: int
    removed: int
    median_seconds: float | None
    p90_seconds: float | None

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in NOTICE_REMOVAL_COLUMNS}


def notice_removal_times(
    session: Session, by: Literal["notice", "recipient"] = "notice"
) -> list[NoticeRemovalRow]:
    """Time from a notice being sent to each copy it named being found down, per notice or per recipient
    (the module docstring); sent notices only, most copies first."""
    if by not in ("notice", "recipient"):
        raise ValueError(f"unknown notice grouping {by!r}; choose notice or recipient")
    rows = session.execute(
        select(Notice.id, Notice.recipient_address, Notice.sent_at, NoticeItem.closed_at)
        .join(NoticeItem, NoticeItem.notice_id == Notice.id)
        .where(Notice.sent_at.is_not(None))
    )
    notices: dict[str, set[int]] = defaultdict(set)
    copies: dict[str, int] = defaultdict(int)
    seconds: dict[str, list[float]] = defaultdict(list)
    for notice_id, recipient, sent_at, closed_at in rows:
        key = f"notice {notice_id}" if by == "notice" else (recipient or "(no address)")
        notices[key].add(notice_id)
        copies[key] += 1
        if closed_at is not None and sent_at is not None:
            seconds[key].append(max(0.0, (as_utc(closed_at) - as_utc(sent_at)).total_seconds()))
    found = []
    for key, named in notices.items():
        values = seconds.get(key, [])
        median = p90 = None
        if values:
            median, p90 = (_round(v) for v in np.percentile(np.asarray(values), [50, 90]))
        found.append(NoticeRemovalRow(key, len(named), copies[key], len(values), median, p90))
    return sorted(found, key=lambda r: (-r.copies, r.key))
