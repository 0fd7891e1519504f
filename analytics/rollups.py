"""Roll-ups of matches per work, per host and per day: what anti-piracy teams report on.

Two kinds: :func:`match_rollup` counts the matches themselves (with the distinct pages involved, which cannot
be added up from smaller counts) for ``fptrack report`` and the reports page; the dashboard's functions read
the ``match_rollups`` table that the database keeps in step with every match write (see
``storage.models.MatchRollup``), so their cost follows the number of (day, work, host, status) groups, not the
number of matches. Same code and same answers on SQLite and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import SQLColumnExpression, case, delete, func, select, text
from sqlalchemy.orm import Session

from fptrack.storage.models import Match, MatchRollup, MatchStatus, Page, Work

__all__ = [
    "ROLLUP_COLUMNS",
    "STATUSES",
    "Dimension",
    "KeyCount",
    "Period",
    "PeriodCount",
    "RollupRow",
    "kept_rollup",
    "match_rollup",
    "matches_per_period",
    "rebuild_rollups",
    "status_totals",
    "top_hosts",
    "top_works",
]

Dimension = Literal["work", "host", "day"]
STATUSES = tuple(s.value for s in MatchStatus)
# the fields of RollupRow.as_json, in order (CSV columns of `fptrack report --format csv`)
ROLLUP_COLUMNS = ("key", *STATUSES, "pages", "total")


@dataclass(frozen=True)
class RollupRow:
    key: str
    flagged: int
    confirmed: int
    dismissed: int
    licensed: int
    pages: int

    @property
    def total(self) -> int:
        return self.flagged + self.confirmed + self.dismissed + self.licensed

    def as_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            **{s: getattr(self, s) for s in STATUSES},
            "pages": self.pages,
            "total": self.total,
        }


def match_rollup(session: Session, by: Dimension, *, since: datetime | None = None) -> list[RollupRow]:
    """Match counts grouped ``by`` work title, page host or first-seen day, largest first (days: newest
    first)."""
    key: SQLColumnExpression[str]
    if by == "work":
        key = Work.title + " (#" + func.cast(Work.id, Work.title.type) + ")"
    elif by == "host":
        key = Page.host
    elif by == "day":
        key = func.date(Match.first_seen)
    else:
        raise ValueError(f"unknown roll-up dimension {by!r}; choose work, host or day")
    counts = [func.sum(case((Match.status == status, 1), else_=0)) for status in STATUSES]
    statement = (
        select(key.label("key"), *counts, func.count(func.distinct(Match.page_id)))
        .select_from(Match)
        .join(Work, Work.id == Match.work_id)
        .join(Page, Page.id == Match.page_id)
        .group_by(key)
    )
    if since is not None:
        statement = statement.where(Match.first_seen >= since)
    # each row: the key, one count per status (STATUSES' order), the distinct pages
    rows = [
        RollupRow(_text(row[0]), *(int(count or 0) for count in row[1:]))
        for row in session.execute(statement)
    ]
    if by == "day":
        return sorted(rows, key=lambda r: r.key, reverse=True)
    return sorted(rows, key=lambda r: (-r.total, r.key))


def _text(value: object) -> str:
    if isinstance(value, (date, datetime)):
        return value.isoformat()[:10]
    return "" if value is None else str(value)


# ------------------------------------------------------------------------------------- the kept roll-up table
#
# ``match_rollups`` (storage.models.MatchRollup) holds the count of matches per (first-seen day, work, host,
# status), kept by the database's own triggers in the transaction of every write. The functions below read it
# (a dashboard over a million matches reads a few thousand rows) and rebuild it from the matches.

RollupKey = tuple[date, int, str, str]
Period = Literal["day", "week"]


@dataclass(frozen=True)
class PeriodCount:
    """Matches first seen in the period starting ``start`` (a day, or the Monday of an ISO week), by
    status."""

    start: date
    by_status: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.by_status.values())


@dataclass(frozen=True)
class KeyCount:
    """Matches of one work or host, by status (``label``: the work's title, or the host)."""

    key: str
    label: str
    by_status: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.by_status.values())


def kept_rollup(session: Session) -> dict[RollupKey, int]:
    """The ``match_rollups`` table as ``{(day, work_id, host, status): matches}``."""
    rows = session.execute(
        select(
            MatchRollup.day, MatchRollup.work_id, MatchRollup.host, MatchRollup.status, MatchRollup.matches
        )
    )
    return {(_as_date(d), int(w), h, s): int(n) for d, w, h, s, n in rows}


def rebuild_rollups(session: Session) -> int:
    """Recompute ``match_rollups`` from the matches (after a restore, a bulk load that bypassed the triggers,
    or to check them); returns the number of rows. On PostgreSQL the matches are locked against writes
    (``SHARE`` mode: reads go on) until the caller commits, so no change slips between the delete and the
    insert."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        session.execute(text("LOCK TABLE matches IN SHARE MODE"))
        day = "(m.first_seen AT TIME ZONE 'UTC')::date"
    else:
        day = "date(m.first_seen)"
    session.execute(delete(MatchRollup))
    session.execute(
        text(
            "INSERT INTO match_rollups (day, work_id, host, status, matches) "
            f"SELECT {day}, m.work_id, p.host, m.status, count(*) "
            "FROM matches m JOIN pages p ON p.id = m.page_id GROUP BY 1, 2, 3, 4"
        )
    )
    return int(session.scalar(select(func.count()).select_from(MatchRollup)) or 0)


def status_totals(session: Session, *, since: date | None = None) -> dict[str, int]:
    """Matches by status (every status present, zero included), first seen on or after ``since``."""
    statement = select(MatchRollup.status, func.sum(MatchRollup.matches)).group_by(MatchRollup.status)
    if since is not None:
        statement = statement.where(MatchRollup.day >= since)
    totals = dict.fromkeys(STATUSES, 0)
    for status, count in session.execute(statement):
        totals[status] = totals.get(status, 0) + int(count or 0)
    return totals


def matches_per_period(session: Session, period: Period, since: date, until: date) -> list[PeriodCount]:
    """Matches first seen per day or per ISO week (Monday first) from ``since`` to ``until`` (both included),
    oldest first; periods without matches are there with zeros, so a chart's axis has no gaps."""
    if period not in ("day", "week"):
        raise ValueError(f"unknown period {period!r}; choose day or week")
    if since > until:
        raise ValueError(f"the period starts ({since}) after it ends ({until})")

    statement = (
        select(MatchRollup.day, MatchRollup.status, func.sum(MatchRollup.matches))
        .where(MatchRollup.day >= since, MatchRollup.day <= until)
        .group_by(MatchRollup.day, MatchRollup.status)
    )
    rows = [(_as_date(day), status, int(count or 0)) for day, status, count in session.execute(statement)]
    return _bucketed(period, since, until, rows)


def top_works(session: Session, *, since: date | None = None, limit: int = 10) -> list[KeyCount]:
    """The works with most matches (first seen on or after ``since``), most first."""
    rows = _top(session, MatchRollup.work_id, since=since, limit=limit)
    wanted = [key for key, _ in rows]
    titles = {
        id_: title for id_, title in session.execute(select(Work.id, Work.title).where(Work.id.in_(wanted)))
    }
    return [KeyCount(str(k), titles.get(k, f"work #{k}"), counts) for k, counts in rows]


def top_hosts(session: Session, *, since: date | None = None, limit: int = 10) -> list[KeyCount]:
    """The hosts (sites) with most matches (first seen on or after ``since``), most first."""
    return [KeyCount(k, k, counts) for k, counts in _top(session, MatchRollup.host, since=since, limit=limit)]


def _bucketed(period: Period, since: date, until: date, rows: Any) -> list[PeriodCount]:
    """(day, status, count) rows summed per day or ISO week from ``since`` to ``until``, gaps as zeros."""

    def start_of(day: date) -> date:
        return day - timedelta(days=day.weekday()) if period == "week" else day

    step = timedelta(days=7 if period == "week" else 1)
    buckets: dict[date, dict[str, int]] = {}
    cursor = start_of(since)
    while cursor <= until:
        buckets[cursor] = dict.fromkeys(STATUSES, 0)
        cursor += step
    for day, status, count in rows:
        if since <= day <= until:
            bucket = buckets[start_of(day)]
            bucket[status] = bucket.get(status, 0) + int(count or 0)
    return [PeriodCount(start, counts) for start, counts in buckets.items()]


def _top(
    session: Session, column: Any, *, since: date | None, limit: int
) -> list[tuple[Any, dict[str, int]]]:
    total = func.sum(MatchRollup.matches).label("total")
    leaders = select(column.label("key"), total).group_by(column).order_by(total.desc(), column).limit(limit)
    if since is not None:
        leaders = leaders.where(MatchRollup.day >= since)
    keys = [key for key, _ in session.execute(leaders)]
    if not keys:
        return []
    detail = (
        select(column, MatchRollup.status, func.sum(MatchRollup.matches))
        .where(column.in_(keys))
        .group_by(column, MatchRollup.status)
    )
    if since is not None:
        detail = detail.where(MatchRollup.day >= since)
    counts: dict[Any, dict[str, int]] = {key: dict.fromkeys(STATUSES, 0) for key in keys}
    for key, status, count in session.execute(detail):
        counts[key][status] = counts[key].get(status, 0) + int(count or 0)
    return [(key, counts[key]) for key in keys]


def _as_date(value: object) -> date:
    """SQLite hands a ``date()`` back as text when it bypasses the column type."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])
