"""Query models: the listings of matches and works (filters, ordering, paging) and the dashboard's counts, as
plain values.

Each function takes a SQLAlchemy session and returns data; no Flask, no Click: the same queries serve the
admin's HTML pages and JSON API and the command line (``fptrack matches``, ``fptrack works list``), on SQLite
and PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from math import ceil
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, func, select, text
from sqlalchemy.orm import Session, joinedload

from fptrack.analytics.rollups import status_totals, top_hosts
from fptrack.analytics.takedowns import COPY_STATES, copy_state, notice_sent_at
from fptrack.services.review import REVIEW_STATUSES
from fptrack.storage.models import Chapter, Match, MatchRollup, MatchStatus, Page, Work

__all__ = [
    "COPY_STATES",
    "MATCH_STATUSES",
    "MAX_ID",
    "MAX_PAGE_NUMBER",
    "REVIEW_STATUSES",
    "SORT_KEYS",
    "TAKEDOWN_STATES",
    "WORK_ORDERS",
    "ChapterRow",
    "HostCount",
    "MatchFilter",
    "PageOf",
    "Stats",
    "TakedownCopy",
    "TakedownFilter",
    "WorkRow",
    "chapter_rows",
    "collect_stats",
    "copy_states",
    "count_matches",
    "iter_matches",
    "list_matches",
    "list_takedown_copies",
    "match_filter_from_args",
    "matching_ids",
    "positive_int_arg",
    "takedown_filter_from_args",
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
    """The dashboard's and ``/api/stats``' counts; the match figures come from the kept roll-up table
    (``analytics.rollups``), which the database holds equal to counting the matches themselves."""
    works = session.scalar(select(func.count()).select_from(Work)) or 0
    chapters = session.scalar(select(func.count()).select_from(Chapter)) or 0
    pages = session.scalar(select(func.count()).select_from(Page)) or 0
    return Stats(
        works=works,
        chapters=chapters,
        pages=pages,
        matches_by_status={status: count for status, count in status_totals(session).items()},
        top_hosts=tuple(HostCount(row.key, row.total) for row in top_hosts(session, limit=TOP_HOSTS)),
    )


@dataclass(frozen=True)
class WorkRow:
    id: int
    title: str
    source_name: str
    chapters: int
    matches: int
    created_at: datetime
    characters: int


WORK_ORDERS = ("newest", "id")


def work_rows(session: Session, work_id: int | None = None, order: str = "newest") -> list[WorkRow]:
    """Every work (or the one ``work_id``) with its chapter and match counts and its length in characters:
    newest registration first (``order="newest"``), or by id (``order="id"``)."""
    if order not in WORK_ORDERS:
        raise ValueError(f"order must be one of {', '.join(WORK_ORDERS)}, got {order[:40]!r}")
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
            func.length(Work.text),  # characters (code points) on both databases; a work's text holds no NUL
        )
        .outerjoin(chapter_counts, chapter_counts.c.work_id == Work.id)
        .outerjoin(match_counts, match_counts.c.work_id == Work.id)
        .order_by(*((Work.created_at.desc(), Work.id.desc()) if order == "newest" else (Work.id,)))
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


SORT_KEYS = ("date", "score", "work", "site", "status")
# the steps of a copy's takedown a match list filters on (analytics.takedowns.COPY_STATES beyond the review)
TAKEDOWN_STATES = ("notice_sent", "taken_down", "back_up")
SORT_ORDERS = ("desc", "asc")
MAX_SEARCH_LENGTH = 300


@dataclass(frozen=True)
class MatchFilter:
    """What a match list shows, and in which order: the same object behind the review page, the exports,
    the bulk actions and the JSON API, so that a bulk action or an export acts on exactly the list shown.

    ``site`` is a page host (exact, lower-case); ``url`` a piece of the page URL (case-insensitive);
    ``since``/``until`` first-seen days, both included; ``min_score``/``max_score`` in 0..1; ``takedown``
    one of :data:`TAKEDOWN_STATES`; ``ids`` these matches only (the command line's ``--id``; not one of the
    query arguments).
    """

    status: str | None = None
    work_id: int | None = None
    site: str | None = None
    url: str | None = None
    since: date | None = None
    until: date | None = None
    min_score: float | None = None
    max_score: float | None = None
    takedown: str | None = None
    ids: tuple[int, ...] = ()
    sort: str = "date"
    order: str = "desc"

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in MATCH_STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {', '.join(MATCH_STATUSES)}")
        if self.takedown is not None and self.takedown not in TAKEDOWN_STATES:
            raise ValueError(
                f"unknown takedown state {self.takedown[:40]!r}; expected one of {', '.join(TAKEDOWN_STATES)}"
            )
        if self.sort not in SORT_KEYS:
            raise ValueError(f"sort must be one of {', '.join(SORT_KEYS)}, got {self.sort[:40]!r}")
        if self.order not in SORT_ORDERS:
            raise ValueError(f"order must be asc or desc, got {self.order[:40]!r}")
        if self.since is not None and self.until is not None and self.until < self.since:
            raise ValueError("the 'to' day is before the 'from' day")

    def apply(self, query: Select) -> Select:  # type: ignore[type-arg]
        if self.status is not None:
            query = query.where(Match.status == self.status)
        if self.work_id is not None:
            query = query.where(Match.work_id == self.work_id)
        if self.ids:
            query = query.where(Match.id.in_(self.ids))
        page_conditions = []
        if self.site is not None:
            page_conditions.append(Page.host == self.site)
        if self.url is not None:
            pattern = (
                "%" + self.url.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            )
            page_conditions.append(func.lower(Page.url).like(pattern, escape="\\"))
        if page_conditions:
            query = query.where(Match.page_id.in_(select(Page.id).where(*page_conditions).correlate(None)))
        if self.since is not None:
            query = query.where(Match.first_seen >= _day_start(self.since))
        if self.until is not None and self.until < date.max:  # the calendar's last day has no end to write
            query = query.where(Match.first_seen < _day_start(self.until + timedelta(days=1)))
        if self.min_score is not None:
            query = query.where(Match.score >= self.min_score)
        if self.max_score is not None:
            query = query.where(Match.score <= self.max_score)
        if self.takedown is not None:
            query = query.where(copy_state() == self.takedown)
        return query

    def ordered(self, query: Select) -> Select:  # type: ignore[type-arg]
        """``query`` (over ``Match``) in this filter's order; the match id breaks ties, so pages never
        overlap."""
        descending = self.order == "desc"
        key: Any
        if self.sort == "score":
            key = Match.score
        elif self.sort == "status":
            key = Match.status
        elif self.sort == "work":
            query = query.join(Work, Work.id == Match.work_id)
            key = Work.title
        elif self.sort == "site":
            query = query.join(Page, Page.id == Match.page_id)
            key = Page.host
        else:
            key = Match.first_seen
        keys = [key, Match.id] if self.sort == "date" else [key, Match.first_seen, Match.id]
        return query.order_by(*(k.desc() if descending else k.asc() for k in keys))

    def as_args(self) -> dict[str, str]:
        """The query arguments that rebuild this filter (defaults left out): for links, pagers and forms."""
        values = {
            "status": self.status or "",
            "work": "" if self.work_id is None else str(self.work_id),
            "site": self.site or "",
            "q": self.url or "",
            "from": self.since.isoformat() if self.since else "",
            "to": self.until.isoformat() if self.until else "",
            "min_score": "" if self.min_score is None else f"{self.min_score:g}",
            "max_score": "" if self.max_score is None else f"{self.max_score:g}",
            "takedown": self.takedown or "",
            "sort": "" if self.sort == "date" else self.sort,
            "order": "" if self.order == "desc" else self.order,
        }
        return {name: value for name, value in values.items() if value}


def _day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _date_arg(args: Mapping[str, str], name: str) -> date | None:
    raw = (args.get(name) or "").strip()
    if not raw:
        return None
    try:
        return date.fromisoformat(raw[:10]) if len(raw) == 10 else date.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"{name} must be a day as YYYY-MM-DD, got {raw[:40]!r}") from None


def _score_arg(args: Mapping[str, str], name: str) -> float | None:
    raw = (args.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number between 0 and 1, got {raw[:40]!r}") from None
    if not 0.0 <= value <= 1.0:  # also refuses nan and inf
        raise ValueError(f"{name} must be a number between 0 and 1, got {raw[:40]!r}")
    return value


def match_filter_from_args(args: Mapping[str, str]) -> MatchFilter:
    """Read a :class:`MatchFilter` from query arguments: ``status``, ``work``, ``site``, ``q`` (a piece of
    the URL), ``from``/``to`` (days), ``min_score``/``max_score``, ``takedown``, ``sort``, ``order``. Empty
    means no filter; a ValueError names the bad argument."""
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
    site = (args.get("site") or "").strip().lower() or None
    url = (args.get("q") or "").strip() or None
    for name, value in (("site", site), ("q", url)):
        if value is not None and len(value) > MAX_SEARCH_LENGTH:
            raise ValueError(f"{name} must have at most {MAX_SEARCH_LENGTH} characters")
    return MatchFilter(
        status=status,
        work_id=work_id,
        site=site,
        url=url,
        since=_date_arg(args, "from"),
        until=_date_arg(args, "to"),
        min_score=_score_arg(args, "min_score"),
        max_score=_score_arg(args, "max_score"),
        takedown=(args.get("takedown") or "").strip() or None,
        sort=(args.get("sort") or "").strip() or "date",
        order=(args.get("order") or "").strip() or "desc",
    )


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


Item = TypeVar("Item")


@dataclass(frozen=True)
class PageOf(Generic[Item]):
    """One page of a paginated list: ``number`` is 1-based."""

    items: Sequence[Item]
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


def list_matches(session: Session, match_filter: MatchFilter, number: int, per_page: int) -> PageOf[Match]:
    """One page of the matches the filter selects, in its order, with page, work and chapter loaded.

    Two steps: the page's ids (an index walk over ``matches`` alone, however deep the page), then those rows
    with their page, work and chapter, so that a deep page never joins the rows it skips."""
    if per_page < 1:
        raise ValueError(f"per_page must be at least 1, got {per_page}")
    number = max(1, number)
    total = count_matches(session, match_filter)
    ids = list(
        session.scalars(
            match_filter.ordered(match_filter.apply(select(Match.id)))
            .limit(per_page)
            .offset((number - 1) * per_page)
        )
    )
    rows = (
        {
            match.id: match
            for match in session.scalars(
                select(Match)
                .where(Match.id.in_(ids))
                # The texts (a whole novel per work) are only needed by the evidence view.
                .options(
                    joinedload(Match.page).defer(Page.text),
                    joinedload(Match.work).defer(Work.text),
                    joinedload(Match.chapter).defer(Chapter.text),
                )
            ).unique()
        }
        if ids
        else {}
    )
    return PageOf([rows[i] for i in ids if i in rows], number, per_page, total)


def iter_matches(session: Session, match_filter: MatchFilter, batch: int = 500) -> Iterator[Match]:
    """Every match the filter selects, in its order, fetched ``batch`` at a time (for exports of any size)."""
    query = (
        match_filter.ordered(match_filter.apply(select(Match)))
        .options(
            joinedload(Match.page).defer(Page.text),
            joinedload(Match.work).defer(Work.text),
            joinedload(Match.chapter).defer(Chapter.text),
        )
        .execution_options(yield_per=batch)
    )
    yield from session.scalars(query)


def matching_ids(session: Session, match_filter: MatchFilter, limit: int) -> list[int]:
    """The ids of the matches the filter selects, in its order, at most ``limit`` of them."""
    return list(session.scalars(match_filter.ordered(match_filter.apply(select(Match.id))).limit(limit)))


def count_matches(session: Session, match_filter: MatchFilter) -> int:
    """How many matches the filter selects. Filters on status, work, site and first-seen days are counted from
    the kept roll-up table (``analytics.rollups``: exact, and a few thousand rows rather than a million); a
    score range, a URL search, a takedown state or a list of ids counts the matches themselves."""
    if (
        match_filter.url is None
        and match_filter.min_score is None
        and match_filter.max_score is None
        and match_filter.takedown is None
        and not match_filter.ids
    ):
        query = select(func.coalesce(func.sum(MatchRollup.matches), 0))
        if match_filter.status is not None:
            query = query.where(MatchRollup.status == match_filter.status)
        if match_filter.work_id is not None:
            query = query.where(MatchRollup.work_id == match_filter.work_id)
        if match_filter.site is not None:
            query = query.where(MatchRollup.host == match_filter.site)
        if match_filter.since is not None:
            query = query.where(MatchRollup.day >= match_filter.since)
        if match_filter.until is not None:
            query = query.where(MatchRollup.day <= match_filter.until)
        return int(session.scalar(query) or 0)
    if match_filter.takedown is not None:
        _without_jit(session)
    return session.scalar(match_filter.apply(select(func.count()).select_from(Match))) or 0


# ----------------------------------------------------------------------------------------------- takedowns


def _without_jit(session: Session) -> None:
    """No JIT compilation for the rest of this transaction on PostgreSQL: a takedown state's subqueries make
    the planner's estimate of a scan of the matches high enough to compile it, which took 1.9 s for a
    100,000-match scan that runs in 0.2 s (EXPLAIN ANALYZE, benchmarks.admin.latency's data)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SET LOCAL jit = off"))


def copy_states(session: Session, match_ids: Sequence[int]) -> dict[int, str]:
    """Match id -> its step in ``analytics.takedowns.COPY_STATES`` (or its review status), for a listed page
    of matches."""
    if not match_ids:
        return {}
    rows = session.execute(select(Match.id, copy_state()).where(Match.id.in_(match_ids)))
    return {int(match_id): str(state) for match_id, state in rows}


@dataclass(frozen=True)
class TakedownFilter:
    """What the takedowns page lists: the flagged and confirmed matches, in one state of
    ``analytics.takedowns.COPY_STATES`` (None: any), of one work, on one page host (exact, lower-case)."""

    state: str | None = None
    work_id: int | None = None
    site: str | None = None

    def __post_init__(self) -> None:
        if self.state is not None and self.state not in COPY_STATES:
            raise ValueError(f"unknown state {self.state[:40]!r}; expected one of {', '.join(COPY_STATES)}")

    def as_args(self) -> dict[str, str]:
        """The query arguments that rebuild this filter (empty ones left out)."""
        values = {
            "state": self.state or "",
            "work": "" if self.work_id is None else str(self.work_id),
            "site": self.site or "",
        }
        return {name: value for name, value in values.items() if value}


def takedown_filter_from_args(args: Mapping[str, str]) -> TakedownFilter:
    """A :class:`TakedownFilter` from ``state``, ``work`` and ``site``; a ValueError names the bad one."""
    matches = match_filter_from_args({name: args.get(name) or "" for name in ("work", "site")})
    return TakedownFilter(
        state=(args.get("state") or "").strip() or None, work_id=matches.work_id, site=matches.site
    )


@dataclass(frozen=True)
class TakedownCopy:
    """One copy followed for takedown, as the takedowns page lists it."""

    id: int
    url: str
    host: str
    work_id: int
    work_title: str
    status: str
    state: str  # analytics.takedowns.COPY_STATES
    first_seen: datetime
    notice_sent_at: datetime | None
    taken_down_at: datetime | None
    rechecked_at: datetime | None
    recheck_state: str | None  # the latest check's outcome, None: never checked

    @property
    def seconds_to_takedown(self) -> float | None:
        """From the first notice naming the copy to the first check that found it down (0 when it was down
        before the notice went out); None without both."""
        if self.notice_sent_at is None or self.taken_down_at is None:
            return None
        sent, down = _aware(self.notice_sent_at), _aware(self.taken_down_at)
        return max(0.0, (down - sent).total_seconds())


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)  # SQLite drops the zone


def list_takedown_copies(
    session: Session, takedown_filter: TakedownFilter, number: int, per_page: int
) -> tuple[PageOf[TakedownCopy], dict[str, int]]:
    """One page of the flagged and confirmed matches the filter selects, newest first, and how many there
    are in each state (under the filter's work and site, whatever its state: the page's summary)."""
    if per_page < 1:
        raise ValueError(f"per_page must be at least 1, got {per_page}")
    number = max(1, number)
    _without_jit(session)
    state = copy_state().label("state")
    conditions: list[Any] = [Match.status.in_((MatchStatus.FLAGGED.value, MatchStatus.CONFIRMED.value))]
    if takedown_filter.work_id is not None:
        conditions.append(Match.work_id == takedown_filter.work_id)
    if takedown_filter.site is not None:
        conditions.append(Match.page_id.in_(select(Page.id).where(Page.host == takedown_filter.site)))
    counts = dict.fromkeys(COPY_STATES, 0)
    for name, count in session.execute(select(state, func.count()).where(*conditions).group_by(state)):
        counts[str(name)] = int(count)
    if takedown_filter.state is not None:
        conditions.append(copy_state() == takedown_filter.state)
    total = counts[takedown_filter.state] if takedown_filter.state else sum(counts.values())
    rows = session.execute(
        select(
            Match.id,
            Page.url,
            Page.host,
            Match.work_id,
            Work.title,
            Match.status,
            state,
            Match.first_seen,
            notice_sent_at(),
            Match.taken_down_at,
            Match.rechecked_at,
            Match.recheck_state,
        )
        .join(Page, Page.id == Match.page_id)
        .join(Work, Work.id == Match.work_id)
        .where(*conditions)
        .order_by(Match.first_seen.desc(), Match.id.desc())
        .limit(per_page)
        .offset((number - 1) * per_page)
    )
    copies = [TakedownCopy(*row) for row in rows]
    return PageOf(copies, number, per_page, total), counts
