"""Roll-ups of matches per work, per host and per day: what anti-piracy teams report on.

Each row counts the matches by review status and the distinct pages involved. Pure queries over the store;
the same code runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from storage.models import Match, MatchStatus, Page, Work

__all__ = ["ROLLUP_COLUMNS", "Dimension", "RollupRow", "match_rollup"]

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
        return {"key": self.key, **{s: getattr(self, s) for s in STATUSES}, "pages": self.pages, "total": self.total}


def match_rollup(session: Session, by: Dimension, *, since: datetime | None = None) -> list[RollupRow]:
    """Match counts grouped ``by`` work title, page host or first-seen day, largest first (days: newest first)."""
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
    rows = [
        RollupRow(_text(k), int(f or 0), int(c or 0), int(d or 0), int(lic or 0), int(p or 0))
        for k, f, c, d, lic, p in session.execute(statement)
    ]
    if by == "day":
        return sorted(rows, key=lambda r: r.key, reverse=True)
    return sorted(rows, key=lambda r: (-r.total, r.key))


def _text(value: object) -> str:
    if isinstance(value, (date, datetime)):
        return value.isoformat()[:10]
    return "" if value is None else str(value)
