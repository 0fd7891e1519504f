"""``/``: what the tracker knows and how it is doing: counts, matches over time, by work and by site, the
review queue, detection latency and the health of the crawls; ``/charts/*.svg``: the charts it shows.

Every match figure comes from the kept roll-up table (``analytics.rollups``), so the page costs the same with
a thousand matches or a million. Period: ``?days=`` (7, 30, 90, 365 or 0 for all time; default 90) for every
panel; ``?per=day|week`` for the chart over time (default: per day up to 90 days, per week beyond)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import date, timedelta

from flask import Blueprint, Response, abort, render_template, request
from flask_babel import gettext
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from fptrack.admin.charts import CHART_CONTENT_SECURITY_POLICY, bars_svg, time_series_svg
from fptrack.admin.views.context import admin_state
from fptrack.admin.views.crawls import crawl_rows
from fptrack.admin.views.read_sessions import read_session
from fptrack.admin.vocabulary import label
from fptrack.analytics.latency import detection_latency
from fptrack.analytics.rollups import (
    STATUSES,
    PeriodCount,
    matches_per_period,
    status_totals,
    top_hosts,
    top_works,
)
from fptrack.analytics.takedowns import TakedownRow, takedown_stats, takedown_stats_stamp
from fptrack.storage.models import Chapter, CrawlJob, MatchRollup, Page, Site, Work, utcnow

__all__ = ["DAY_CHOICES", "DashboardPeriod", "blueprint", "dashboard_period", "overdue_sites", "page_count"]

blueprint = Blueprint("dashboard", __name__)

DAY_CHOICES = (7, 30, 90, 365, 0)
DEFAULT_DAYS = 90
TOP = 10
RECENT_CRAWLS = 10
# the latency shown is that of the most recent matches: an index range, whatever the size of the table
LATENCY_SAMPLE = 2_000
# The takedown figures read every flagged and confirmed match (about 1.6 s at a million on PostgreSQL): each
# admin process keeps the latest per database and computes them again only when what they count has changed
# (analytics.takedowns.takedown_stats_stamp, a few index lookups), so they are current, as `fptrack takedowns
# stats` prints them, without that cost on every page.
_takedown_figures: dict[str, tuple[tuple[object, ...], TakedownRow]] = {}
_takedown_lock = threading.Lock()


@dataclass(frozen=True)
class DashboardPeriod:
    days: int  # 0: all time
    per: str  # day or week
    since: date | None
    until: date

    @property
    def label(self) -> str:
        return str(gettext("all time") if not self.days else gettext("last %(days)d days", days=self.days))


def dashboard_period(session: Session) -> DashboardPeriod:
    """The period asked for by ``?days=`` and ``?per=``; 400 for anything else."""
    raw_days = request.args.get("days", str(DEFAULT_DAYS))
    if not raw_days.isdigit() or int(raw_days) not in DAY_CHOICES:
        abort(400, description=f"days must be one of {', '.join(map(str, DAY_CHOICES))} (0 is all time)")
    days = int(raw_days)
    until = utcnow().date()
    if days:
        since: date | None = until - timedelta(days=days - 1)
    else:
        first = session.scalar(select(func.min(MatchRollup.day)))
        since = None if first is None else min(_as_date(first), until)
    per = request.args.get("per") or ("day" if days and days <= 90 else "week")
    if per not in ("day", "week"):
        abort(400, description="per must be day or week")
    return DashboardPeriod(days=days, per=per, since=since, until=until)


def overdue_sites(session: Session, grace: timedelta) -> list[tuple[str, str, object]]:
    """(name, host, due since) of the enabled, scheduled sites whose crawl is due for longer than ``grace``
    (the scheduler looks every ``FPTRACK_SCHEDULE_EVERY`` seconds: late beyond that means it is not
    running)."""
    cutoff = utcnow() - grace
    rows = session.execute(
        select(Site.name, Site.host, Site.next_crawl_at)
        .where(
            Site.managed.is_(True),
            Site.enabled.is_(True),
            Site.schedule != "",
            Site.next_crawl_at.is_not(None),
            Site.next_crawl_at < cutoff,
        )
        .order_by(Site.next_crawl_at)
        .limit(50)
    ).all()
    return [(str(name), str(host), due) for name, host, due in rows]


# above this many pages (PostgreSQL's own estimate), the card shows the estimate: counting them is the slowest
# thing the dashboard would do
EXACT_PAGE_COUNT_BELOW = 200_000


def page_count(session: Session, exact_below: int = EXACT_PAGE_COUNT_BELOW) -> tuple[int, bool]:
    """(pages crawled, whether that is an estimate): PostgreSQL's planner estimate (``pg_class.reltuples``,
    kept by autovacuum and ANALYZE) when it is at least ``exact_below``, else an exact count."""
    if session.get_bind().dialect.name == "postgresql":
        estimate = session.scalar(
            text("SELECT reltuples::bigint FROM pg_class WHERE oid = 'pages'::regclass")
        )
        if estimate is not None and estimate >= max(exact_below, 1):
            return int(estimate), True
    return int(session.scalar(select(func.count()).select_from(Page)) or 0), False


@dataclass(frozen=True)
class Counts:
    works: int
    chapters: int
    pages: int
    pages_estimated: bool
    matches_by_status: dict[str, int]

    @property
    def matches(self) -> int:
        return sum(self.matches_by_status.values())


@blueprint.get("/")
def index() -> str:
    session = read_session()
    period = dashboard_period(session)
    settings = admin_state().settings
    window_totals = status_totals(session, since=period.since)
    pages, estimated = page_count(session)
    counts = Counts(
        works=int(session.scalar(select(func.count()).select_from(Work)) or 0),
        chapters=int(session.scalar(select(func.count()).select_from(Chapter)) or 0),
        pages=pages,
        pages_estimated=estimated,
        # all time: the window's own totals when the window is all time
        matches_by_status=window_totals if not period.days else status_totals(session),
    )
    day_ago = utcnow() - timedelta(days=1)
    failing = session.execute(
        select(CrawlJob.status, func.count())
        .where(CrawlJob.started_at >= day_ago, CrawlJob.status.in_(("failed", "interrupted")))
        .group_by(CrawlJob.status)
    ).all()
    return render_template(
        "dashboard.html",
        stats=counts,
        period=period,
        day_choices=DAY_CHOICES,
        statuses=STATUSES,
        window_totals=window_totals,
        periods=_periods(session, period),
        works=top_works(session, since=period.since, limit=TOP),
        hosts=top_hosts(session, since=period.since, limit=TOP),
        latency=detection_latency(session, recent=LATENCY_SAMPLE),
        latency_sample=LATENCY_SAMPLE,
        crawls=crawl_rows(session, limit=RECENT_CRAWLS),
        failed_last_day=sum(int(count) for _, count in failing),
        overdue=overdue_sites(session, timedelta(seconds=max(60.0, 2 * settings.schedule_every))),
        takedowns=_takedowns(session),
    )


def _takedowns(session: Session) -> TakedownRow:
    """The overall takedown figures (``analytics.takedowns.takedown_stats``, as ``fptrack takedowns stats``
    reads them), from this process's copy while their stamp is unchanged."""
    key = str(session.get_bind().engine.url)
    stamp = takedown_stats_stamp(session)
    with _takedown_lock:
        cached = _takedown_figures.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    figures = takedown_stats(session, "all")[0]
    with _takedown_lock:
        _takedown_figures[key] = (stamp, figures)
    return figures


@blueprint.get("/charts/matches-over-time.svg")
def chart_over_time() -> Response:
    session = read_session()
    period = dashboard_period(session)
    title = gettext("Matches first seen per %(per)s", per=label(period.per))
    return _svg(
        time_series_svg(_periods(session, period), per=period.per, title=title, status_names=_names())
    )


@blueprint.get("/charts/works.svg")
def chart_works() -> Response:
    session = read_session()
    period = dashboard_period(session)
    rows = top_works(session, since=period.since, limit=TOP)
    return _svg(
        bars_svg(
            gettext("Works with most matches, %(period)s", period=period.label), rows, status_names=_names()
        )
    )


@blueprint.get("/charts/hosts.svg")
def chart_hosts() -> Response:
    session = read_session()
    period = dashboard_period(session)
    rows = top_hosts(session, since=period.since, limit=TOP)
    return _svg(
        bars_svg(
            gettext("Sites with most matches, %(period)s", period=period.label), rows, status_names=_names()
        )
    )


def _periods(session: Session, period: DashboardPeriod) -> list[PeriodCount]:
    if period.since is None:
        return []
    return matches_per_period(session, period.per, period.since, period.until)  # type: ignore[arg-type]


def _svg(body: bytes) -> Response:
    response = Response(body, mimetype="image/svg+xml")
    response.headers["Content-Security-Policy"] = CHART_CONTENT_SECURITY_POLICY
    return response


def _as_date(value: object) -> date:
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


def _names() -> dict[str, str]:
    """The statuses in the page's language, for the charts' legends."""
    return {status: label(status) for status in STATUSES}
