"""Read models of the admin: the counts, lists and pages the views show, as plain frozen values.

Each function takes a SQLAlchemy session and returns data; no Flask here, so the same queries serve the HTML
pages and the JSON API, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from math import ceil

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, joinedload

from admin.review import REVIEW_STATUSES
from storage.models import Chapter, Match, MatchStatus, Page, Work

__all__ = [
    "MATCH_STATUSES",
    "MAX_ID",
    "MAX_PAGE_NUMBER",
    "REVIEW_STATUSES",
    "ChapterRow",
    "HostCount",
    "MatchFilter",
    "PageOf",
    "Stats",
    "WorkRow",
    "chapter_rows",
    "collect_stats",
    "list_matches",
    "match_filter_from_args",
    "positive_int_arg",
    "work_choices",
    "work_rows",
]

MATCH_STATUSES = tuple(s.value for s in MatchStatus)
# Largest id a database column holds (signed 64-bit) and largest page number a listing accepts: anything
# bigger is a 400 (or a 404 for an id in a path), never an OverflowError deep in a driver.
MAX_ID = 2**63 - 1
MAX_PAGE_NUMBER = 2**31 - 1
TOP_HOSTS = 10


@dataclass(frozen=True)
class HostCount:
    host: str
    matches: int


@dataclass(frozen=True)
class Stats:
    works: int
    chapters: int
    pages: int
    matches_by_status: dict[str, int]
    top_hosts: tuple[HostCount, ...]

    @property
    def matches(self) -> int:
        return sum(self.matches_by_status.values())

    def as_json(self) -> dict[str, object]:
        return {
            "works": self.works,
            "chapters": self.chapters,
            "pages": self.pages,
            "matches": self.matches,
            "matches_by_status": dict(self.matches_by_status),
            "top_hosts": [{"host": h.host, "matches": h.matches} for h in self.top_hosts],
        }


def collect_stats(session: Session) -> Stats:
    works = session.scalar(select(func.count()).select_from(Work)) or 0
    chapters = session.scalar(select(func.count()).select_from(Chapter)) or 0
    pages = session.scalar(select(func.count()).select_from(Page)) or 0
    by_status = {status: 0 for status in MATCH_STATUSES}
    for status, count in session.execute(select(Match.status, func.count()).group_by(Match.status)):
        by_status[status] = by_status.get(status, 0) + count
    match_count = func.count(Match.id).label("matches")
    hosts = session.execute(
        select(Page.host, match_count)
        .join(Match, Match.page_id == Page.id)
        .group_by(Page.host)
        .order_by(match_count.desc(), Page.host)
        .limit(TOP_HOSTS)
    )
    return Stats(
        works=works,
        chapters=chapters,
        pages=pages,
        matches_by_status=by_status,
        top_hosts=tuple(HostCount(host or "", count) for host, count in hosts),
    )


@dataclass(frozen=True)
class WorkRow:
    id: int
    title: str
    source_name: str
    chapters: int
    matches: int
    created_at: datetime


def work_rows(session: Session, work_id: int | None = None) -> list[WorkRow]:
    """Every work (or the one ``work_id``) with its chapter and match counts, newest registration first."""
    chapter_counts = (
        select(Chapter.work_id, func.count().label("n")).group_by(Chapter.work_id).subquery("chapter_counts")
    )
    match_counts = (
        select(Match.work_id, func.count().label("n")).group_by(Match.work_id).subquery("match_counts")
    )
    query = (
        select(
            Work.id,
            Work.title,
            Work.source_name,
            func.coalesce(chapter_counts.c.n, 0),
            func.coalesce(match_counts.c.n, 0),
            Work.created_at,
        )
        .outerjoin(chapter_counts, chapter_counts.c.work_id == Work.id)
        .outerjoin(match_counts, match_counts.c.work_id == Work.id)
        .order_by(Work.created_at.desc(), Work.id.desc())
    )
    if work_id is not None:
        query = query.where(Work.id == work_id)
    return [WorkRow(*row) for row in session.execute(query)]


@dataclass(frozen=True)
class ChapterRow:
    id: int
    index: int
    title: str
    length: int
    matches: int


def chapter_rows(session: Session, work_id: int) -> list[ChapterRow]:
    match_counts = (
        select(Match.chapter_id, func.count().label("n"))
        .where(Match.work_id == work_id)
        .group_by(Match.chapter_id)
        .subquery("match_counts")
    )
    query = (
        select(
            Chapter.id,
            Chapter.index,
            Chapter.title,
            Chapter.end - Chapter.start,
            func.coalesce(match_counts.c.n, 0),
        )
        .outerjoin(match_counts, match_counts.c.chapter_id == Chapter.id)
        .where(Chapter.work_id == work_id)
        .order_by(Chapter.index)
    )
    return [ChapterRow(*row) for row in session.execute(query)]


def work_choices(session: Session) -> list[tuple[int, str]]:
    """``(id, title)`` of every work, for the matches filter."""
    return [(id_, title) for id_, title in session.execute(select(Work.id, Work.title).order_by(Work.title))]


@dataclass(frozen=True)
class MatchFilter:
    status: str | None = None
    work_id: int | None = None

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in MATCH_STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {', '.join(MATCH_STATUSES)}")

    def apply(self, query: Select) -> Select:  # type: ignore[type-arg]
        if self.status is not None:
            query = query.where(Match.status == self.status)
        if self.work_id is not None:
            query = query.where(Match.work_id == self.work_id)
        return query


def match_filter_from_args(args: Mapping[str, str]) -> MatchFilter:
    """Read ``status`` and ``work`` from query arguments (empty means no filter); ValueError names the bad one."""
    status = (args.get("status") or "").strip() or None
    raw_work = (args.get("work") or "").strip()
    work_id: int | None = None
    if raw_work:
        try:
            work_id = int(raw_work)
        except ValueError:
            raise ValueError(f"work must be a work id (an integer), got {raw_work[:40]!r}") from None
        if not 1 <= work_id <= MAX_ID:
            raise ValueError(f"work must be a work id between 1 and {MAX_ID}")
    return MatchFilter(status=status, work_id=work_id)


def positive_int_arg(args: Mapping[str, str], name: str, default: int, maximum: int | None = None) -> int:
    """An integer query argument >= 1 (capped at ``maximum``); ValueError names the argument."""
    raw = (args.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a positive integer, got {raw[:40]!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    if maximum is None and value > MAX_PAGE_NUMBER:
        raise ValueError(f"{name} must be at most {MAX_PAGE_NUMBER}")
    return min(value, maximum) if maximum is not None else value


@dataclass(frozen=True)
class PageOf:
    """One page of a paginated list: ``number`` is 1-based."""

    items: Sequence[Match]
    number: int
    per_page: int
    total: int

    @property
    def pages(self) -> int:
        return max(1, ceil(self.total / self.per_page))

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number < self.pages


def list_matches(session: Session, match_filter: MatchFilter, number: int, per_page: int) -> PageOf:
    """Matches newest first (first seen, then id), with page, work and chapter loaded."""
    if per_page < 1:
        raise ValueError(f"per_page must be at least 1, got {per_page}")
    number = max(1, number)
    total = session.scalar(match_filter.apply(select(func.count()).select_from(Match))) or 0
    query = (
        match_filter.apply(select(Match))
        # The texts (a whole novel per work) are only needed by the evidence view.
        .options(
            joinedload(Match.page).defer(Page.text),
            joinedload(Match.work).defer(Work.text),
            joinedload(Match.chapter).defer(Chapter.text),
        )
        .order_by(Match.first_seen.desc(), Match.id.desc())
        .limit(per_page)
        .offset((number - 1) * per_page)
    )
    return PageOf(list(session.scalars(query).unique()), number, per_page, total)
