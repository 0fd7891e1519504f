"""Managed sites: the sites fptrack monitors, their crawl settings (:class:`SiteSpec`), their schedules and
when each is due. ``fptrack sites ...`` (cli/sites.py), the admin's site pages and the scheduler
(:func:`jobs.tasks.start_due_crawls`) call it. Running a site's crawl is :mod:`jobs.site_runs` (its claim, its
process) and :mod:`jobs.site_crawl` (the crawl itself).

A managed site is a ``sites`` row with ``managed = true``; its ``host`` is the site key of its first start URL
(:func:`storage.sites.site_of`), so pages crawled before it was added (by ``fptrack crawl``) already belong to
it.

The settings (:class:`SiteSpec`), their command-line options and defaults are tabled in docs/monitoring.md.

A schedule is seconds between crawls or a cron expression (UTC); ``sites.next_crawl_at`` says when the site is
next due, and :func:`due_sites` takes the turn of every site that is (a compare-and-set: two schedulers never
both start one), skipping a site whose claim (:func:`site_lock_name`) says it is still being crawled.

Schedules are kept on average: the due times of an interval schedule lie on a fixed grid (every ``schedule``
seconds, shifted by a per-site offset derived from its host, so that sites on one schedule do not all start on
the same tick), and the next due time is the next grid point, not "start + schedule": a crawl that starts a
little late does not push the ones after it. The scheduler's tick (``FPTRACK_SCHEDULE_EVERY``) takes every
site due within half a tick, so a due time just after a tick does not wait a whole tick more. A schedule
shorter than the tick cannot be kept, and is refused (:func:`check_schedule`).

Adaptive revisits: ``sites.quiet_crawls`` counts the scheduled crawls in a row that stored no new or changed
page (:func:`record_crawl_result`); from the third one, the site's interval stretches to ``schedule *
2 ** (quiet_crawls - 2)``, at most ``FPTRACK_SCHEDULE_BACKOFF_MAX`` times the schedule, and any crawl that
finds something brings it back to its schedule. Sites that post most are visited most, and none less often
than the user's schedule times that bound. Cron schedules are kept as written (never stretched).

Release pacing (:mod:`jobs.releases`): for ``FPTRACK_RELEASE_WINDOW`` after a release of a work a site
copied, its interval is ``FPTRACK_RELEASE_EVERY``; outside those windows it is stretched to pay for them,
and the quiet back-off applies on top (the larger factor wins). :func:`pacing_factors` gives each site's."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from fptrack.core.errors import FptrackError
from fptrack.core.settings import classify_allow_entry
from fptrack.crawler.pages import RENDER_JS_MODES, CrawlOptions
from fptrack.jobs.releases import LOOKBACK, ReleasePace, pace_factor
from fptrack.storage.models import MonitorLock, Site, as_utc, utcnow
from fptrack.storage.releases import release_activity
from fptrack.storage.sites import site_of

__all__ = [
    "QUIET_CRAWLS_BEFORE_BACKOFF",
    "SiteError",
    "SiteSpec",
    "add_site",
    "check_schedule",
    "crawl_options",
    "due_sites",
    "edit_site",
    "find_site",
    "following_due",
    "interval_factor",
    "next_due",
    "pacing_factors",
    "parse_schedule",
    "private_start_hosts",
    "record_crawl_result",
    "remove_site",
    "site_lock_name",
    "spec_of",
]

_INTERVAL = re.compile(r"^(\d+)\s*([smhd]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
QUIET_CRAWLS_BEFORE_BACKOFF = 3  # quiet scheduled crawls in a row before a site's interval stretches
DEFAULT_BACKOFF_MAX = 4.0  # FPTRACK_SCHEDULE_BACKOFF_MAX's default


class SiteError(FptrackError, ValueError):
    """A site command that cannot be done (unknown site, bad setting); the message says why, in one line."""


@dataclass(frozen=True)
class SiteSpec:
    """A managed site's settings (their meaning and defaults: docs/monitoring.md)."""

    name: str
    start_urls: tuple[str, ...]
    allowed_hosts: tuple[str, ...] = ()
    depth: int = 2
    max_pages: int = 200
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    schedule: str = ""
    rate: float | None = None
    delay: float | None = None
    concurrency: int | None = None
    obey_robots: bool = True
    render_js: str = "auto"
    allow_private: bool = False
    distributed: bool = False
    enabled: bool = True
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def validated(self) -> SiteSpec:
        """This spec, normalised; :class:`SiteError` naming the first bad setting."""
        name = self.name.strip()
        if not name or len(name) > 200 or any(c.isspace() for c in name):
            raise SiteError(
                f"site name {self.name!r}: expected a short name without spaces (e.g. pirate-books)"
            )
        urls = tuple(dict.fromkeys(u.strip() for u in self.start_urls if u.strip()))
        if not urls:
            raise SiteError(f"site {name}: give at least one start URL")
        for url in urls:
            if not site_of(url):
                raise SiteError(
                    f"site {name}: start URL {url!r} is not an http:// or https:// URL with a host"
                )
        hosts = []
        for host in self.allowed_hosts:
            key = site_of(host if "://" in host else f"http://{host.strip()}")
            if not key:
                raise SiteError(f"site {name}: allowed host {host!r} is not a host name (e.g. m.example.org)")
            hosts.append(key)
        if self.depth < 0 or self.depth > 50:
            raise SiteError(f"site {name}: depth must be between 0 and 50, got {self.depth}")
        if self.max_pages < 1:
            raise SiteError(f"site {name}: max_pages must be >= 1, got {self.max_pages}")
        for kind, patterns in (("include", self.include), ("exclude", self.exclude)):
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as error:
                    raise SiteError(f"site {name}: {kind} pattern {pattern!r}: {error}") from None
        if self.rate is not None and not self.rate > 0:
            raise SiteError(f"site {name}: rate must be > 0 requests per second, got {self.rate:g}")
        if self.delay is not None and self.delay < 0:
            raise SiteError(f"site {name}: delay must be >= 0 seconds, got {self.delay:g}")
        if self.concurrency is not None and self.concurrency < 1:
            raise SiteError(f"site {name}: concurrency must be >= 1, got {self.concurrency}")
        if self.render_js not in RENDER_JS_MODES:
            raise SiteError(f"site {name}: render_js must be one of {', '.join(RENDER_JS_MODES)}")
        schedule = parse_schedule(self.schedule) if self.schedule.strip() else ""
        return replace(
            self, name=name, start_urls=urls, allowed_hosts=tuple(dict.fromkeys(hosts)), schedule=schedule
        )


def parse_schedule(text: str) -> str:
    """A schedule, normalised: seconds between crawls (``'3600'``; ``30m``, ``6h``, ``1d`` accepted) or a cron
    expression of five fields (UTC). :class:`SiteError` for anything else."""
    value = text.strip().lower()
    interval = _INTERVAL.match(value)
    if interval:
        seconds = int(interval.group(1)) * _UNIT_SECONDS[interval.group(2)]
        if seconds < 1:
            raise SiteError(f"schedule {text!r}: an interval must be at least 1 second")
        return str(seconds)
    from croniter import croniter

    if len(value.split()) == 5 and croniter.is_valid(value):
        return " ".join(value.split())
    raise SiteError(
        f"schedule {text!r}: expected seconds between crawls (3600, 30m, 6h, 1d) or a cron expression "
        "('0 3 * * *')"
    )


def next_due(schedule: str, after: datetime) -> datetime | None:
    """When a site with ``schedule`` is next due after ``after`` (None: no schedule)."""
    if not schedule:
        return None
    if schedule.isdigit():
        return after + timedelta(seconds=int(schedule))
    from croniter import croniter

    moment = after.astimezone(UTC)
    result: datetime = croniter(schedule, moment).get_next(datetime)
    return result


def check_schedule(schedule: str, tick: float) -> None:
    """:class:`SiteError` for an interval schedule shorter than the scheduler's tick
    (``FPTRACK_SCHEDULE_EVERY`` seconds): sites are looked at once a tick, so such a schedule would silently
    run once a tick."""
    if schedule.isdigit() and int(schedule) < tick:
        raise SiteError(
            f"schedule {schedule}s is shorter than the scheduler's tick (FPTRACK_SCHEDULE_EVERY={tick:g}s): "
            f"give --schedule {math.ceil(tick)} or more, or lower FPTRACK_SCHEDULE_EVERY"
        )


def interval_factor(quiet_crawls: int, backoff_max: float = DEFAULT_BACKOFF_MAX) -> float:
    """How many times its schedule a site waits between crawls after ``quiet_crawls`` quiet ones in a row: 1
    until :data:`QUIET_CRAWLS_BEFORE_BACKOFF`, then doubling, at most ``backoff_max``."""
    if quiet_crawls < QUIET_CRAWLS_BEFORE_BACKOFF:
        return 1.0
    return float(min(2.0 ** min(quiet_crawls - 2, 30), max(1.0, backoff_max)))


def _offset(host: str, step: float) -> float:
    """The site's place on its schedule's grid: seconds in [0, step), the same on every machine."""
    digest = int.from_bytes(hashlib.sha256(host.encode("utf-8")).digest()[:8], "big")
    return float(digest % max(1, int(step)))


def following_due(
    schedule: str, was_due: datetime, now: datetime, *, host: str = "", factor: float = 1.0
) -> datetime | None:
    """The due time after ``was_due`` (the one a crawl just served), never before ``now``: for an interval
    schedule the next point of the site's grid (``schedule * factor`` apart, offset by :func:`_offset` of
    ``host``) at least half an interval after ``was_due``, so that the crawls keep the schedule on average
    however late each one starts; for a cron expression, its next time after ``now``."""
    if not schedule:
        return None
    if not schedule.isdigit():
        return next_due(schedule, max(was_due, now))
    step = int(schedule) * factor
    offset = _offset(host, step)
    earliest = max(was_due.timestamp() + step / 2, now.timestamp())
    slots = math.floor((earliest - offset) / step) + 1
    return datetime.fromtimestamp(offset + slots * step, UTC)


# ---------------------------------------------------------------------------------------------- the rows


def find_site(session: Session, name: str) -> Site:
    """The managed site called ``name`` (or whose host is ``name``); :class:`SiteError` when there is none."""
    site = session.scalar(select(Site).where(Site.managed.is_(True), Site.name == name))
    if site is None:
        site = session.scalar(select(Site).where(Site.managed.is_(True), Site.host == name.lower()))
    if site is None:
        raise SiteError(f"no monitored site called {name!r}; see `fptrack sites list`")
    return site


def spec_of(site: Site) -> SiteSpec:
    """The settings of ``site``, as a :class:`SiteSpec`."""
    return SiteSpec(
        name=site.name,
        start_urls=tuple(site.start_urls or ()),
        allowed_hosts=tuple(site.allowed_hosts or ()),
        depth=site.depth,
        max_pages=site.max_pages,
        include=tuple(site.include_patterns or ()),
        exclude=tuple(site.exclude_patterns or ()),
        schedule=site.schedule,
        rate=site.rate,
        delay=site.delay,
        concurrency=site.concurrency,
        obey_robots=site.obey_robots,
        render_js=site.render_js,
        allow_private=site.allow_private,
        distributed=site.distributed,
        enabled=site.enabled,
    )


def _apply(site: Site, spec: SiteSpec, now: datetime) -> None:
    schedule_changed = site.schedule != spec.schedule or not site.managed
    site.name = spec.name
    site.managed = True
    site.enabled = spec.enabled
    site.start_urls = list(spec.start_urls)
    site.allowed_hosts = list(spec.allowed_hosts)
    site.depth = spec.depth
    site.max_pages = spec.max_pages
    site.include_patterns = list(spec.include)
    site.exclude_patterns = list(spec.exclude)
    site.schedule = spec.schedule
    site.rate = spec.rate
    site.delay = spec.delay
    site.concurrency = spec.concurrency
    site.obey_robots = spec.obey_robots
    site.render_js = spec.render_js
    site.allow_private = spec.allow_private
    site.distributed = spec.distributed
    if schedule_changed:
        site.next_crawl_at = now if spec.schedule else None  # a new schedule is due at once
        site.quiet_crawls = 0  # and learns the site's pace afresh


def add_site(
    session: Session, spec: SiteSpec, *, now: datetime | None = None, tick: float | None = None
) -> Site:
    """Start monitoring a site. A site row made by earlier crawls of the same host is adopted (its pages are
    the site's pages); a name or host already monitored is a :class:`SiteError`, and so is a schedule shorter
    than the scheduler's ``tick`` when given (:func:`check_schedule`)."""
    spec = spec.validated()
    if tick is not None:
        check_schedule(spec.schedule, tick)
    now = now or utcnow()
    host = site_of(spec.start_urls[0])
    clash = session.scalar(select(Site).where(Site.managed.is_(True), Site.name == spec.name))
    if clash is not None:
        raise SiteError(
            f"a site called {spec.name!r} is monitored already ({clash.host}); choose another name"
        )
    site = session.scalar(select(Site).where(Site.host == host))
    if site is not None and site.managed:
        raise SiteError(
            f"{host} is monitored already as {site.name!r}; change it with `fptrack sites edit {site.name}`"
        )
    if site is None:
        site = Site(host=host, name=spec.name)
        session.add(site)
    _apply(site, spec, now)
    session.flush()
    return site


def edit_site(
    session: Session, name: str, /, *, now: datetime | None = None, tick: float | None = None, **changes: Any
) -> Site:
    """Change settings of a managed site (``changes`` are :class:`SiteSpec` fields, ``name=`` renames it:
    hence ``name`` is positional-only); a new schedule is due now. With ``tick``, a new schedule shorter than
    the scheduler's tick is a :class:`SiteError` (:func:`check_schedule`)."""
    site = find_site(session, name)
    known = {f.name for f in fields(SiteSpec)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise SiteError(f"unknown site setting(s): {', '.join(unknown)}")
    spec = replace(spec_of(site), **changes).validated()
    if tick is not None and spec.schedule != site.schedule:
        check_schedule(spec.schedule, tick)
    if spec.name != site.name:
        clash = session.scalar(
            select(Site).where(Site.managed.is_(True), Site.name == spec.name, Site.id != site.id)
        )
        if clash is not None:
            raise SiteError(f"a site called {spec.name!r} is monitored already ({clash.host})")
    _apply(site, spec, now or utcnow())
    session.flush()
    return site


def remove_site(session: Session, name: str) -> Site:
    """Stop monitoring a site: it is no longer scheduled and leaves ``sites list``. Its pages, matches and
    crawl history stay: they are evidence, and a plain ``fptrack crawl`` may have made them."""
    site = find_site(session, name)
    site.managed = False
    site.enabled = False
    site.schedule = ""
    site.next_crawl_at = None
    session.flush()
    return site


def private_start_hosts(site: Site) -> list[str]:
    """The hosts of the site's start URLs that the private-address guard refuses to crawl unless the site
    allows private addresses: loopback, private and other non-public IP addresses, and ``localhost``. Told
    without a DNS look-up (a name that resolves to a private address is found by the crawl itself)."""
    from urllib.parse import urlsplit

    from fptrack.crawler.guard import address_kind, parse_address

    if site.allow_private:
        return []
    found = []
    for url in site.start_urls or ():
        host = (urlsplit(url).hostname or "").lower()
        address = parse_address(host)
        local_name = host == "localhost" or host.endswith(".localhost")
        if local_name or (address is not None and address_kind(address) is not None):
            found.append(host)
    return list(dict.fromkeys(found))


def crawl_options(site: Site) -> CrawlOptions:
    """The :class:`CrawlOptions` of a crawl of ``site``."""
    private: tuple[str, ...] = ()
    if site.allow_private:
        hosts = [site_of(url) for url in site.start_urls or ()] + list(site.allowed_hosts or ())
        private = tuple(classify_allow_entry(h)[1] for h in dict.fromkeys(hosts) if h)
    return CrawlOptions(
        allowed_hosts=tuple(site.allowed_hosts or ()),
        include=tuple(site.include_patterns or ()),
        exclude=tuple(site.exclude_patterns or ()),
        allow_private_hosts=private,
        delay=site.delay,
        concurrency=site.concurrency,
        obey_robots=site.obey_robots,
        render_js=site.render_js,
    )


# ---------------------------------------------------------------------------------------------- schedule


def site_lock_name(site_id: int) -> str:
    """The claim (``monitor_locks`` row) a crawl of the site holds while it runs (:mod:`jobs.site_runs`); the
    scheduler, the CLI and the admin read it to tell a site being crawled."""
    return f"site:{site_id}"


def pacing_factors(
    session: Session,
    sites: list[tuple[int, str, int]],
    *,
    now: datetime,
    backoff_max: float = DEFAULT_BACKOFF_MAX,
    pace: ReleasePace | None = None,
) -> list[float]:
    """The factor on the interval schedule of each of ``sites`` (``(id, schedule, quiet_crawls)``) at ``now``,
    in order:
    the release pace within a release window of a work the site copied, else the larger of the quiet-site
    back-off (:func:`interval_factor`) and the release back-off (:func:`jobs.releases.pace_factor`)."""
    interval = [site for site in sites if site[1].isdigit()]
    activity = (
        release_activity(session, [site[0] for site in interval], since=now - LOOKBACK, now=now)
        if pace is not None and pace.on and interval
        else {}
    )
    factors = []
    for site_id, schedule, quiet in sites:
        quiet_factor = interval_factor(quiet, backoff_max)
        seen = activity.get(site_id)
        if seen is None or pace is None or not schedule.isdigit():
            factors.append(quiet_factor)
            continue
        release = pace_factor(float(schedule), now, seen.latest, seen.count, pace, reposted=seen.reposted)
        factors.append(release if release < 1 else max(release, quiet_factor))
    return factors


def due_sites(
    session: Session,
    *,
    now: datetime | None = None,
    tick: float = 0.0,
    backoff_max: float = DEFAULT_BACKOFF_MAX,
    pace: ReleasePace | None = None,
) -> list[tuple[int, str]]:
    """(id, name) of the enabled managed sites that are due, in due order, and take their turn: each site's
    ``next_crawl_at`` moves to its next due time (:func:`following_due`, on the grid of its pacing factor,
    :func:`pacing_factors`: stretched for a quiet site, shortened after a release with ``pace``; a
    compare-and-set, so two schedulers never both start it). With ``tick`` (the scheduler's period, seconds),
    a site due within half a tick counts as due: the tick nearest its due time starts it."""
    now = now or utcnow()
    horizon = now + timedelta(seconds=max(0.0, tick) / 2)
    candidates = session.execute(
        select(Site.id, Site.name, Site.schedule, Site.next_crawl_at, Site.host, Site.quiet_crawls)
        .where(
            Site.managed.is_(True),
            Site.enabled.is_(True),
            Site.schedule != "",
            Site.next_crawl_at.is_not(None),
            Site.next_crawl_at <= horizon,
        )
        .order_by(Site.next_crawl_at)
    ).all()
    running = {name for name in session.scalars(select(MonitorLock.name))}
    factors = pacing_factors(
        session,
        [(int(row.id), str(row.schedule), int(row.quiet_crawls or 0)) for row in candidates],
        now=now,
        backoff_max=backoff_max,
        pace=pace,
    )
    due = []
    for (site_id, name, schedule, was_due, host, _quiet), factor in zip(candidates, factors, strict=True):
        if site_lock_name(site_id) in running or was_due is None:
            continue  # still crawling: it runs again when next due after that
        following = following_due(schedule, as_utc(was_due), now, host=str(host), factor=factor)
        result = session.execute(
            update(Site)
            .where(Site.id == site_id, Site.next_crawl_at == was_due)
            .values(next_crawl_at=following)
        )
        if result.rowcount == 1:  # type: ignore[attr-defined]
            due.append((int(site_id), str(name)))
    session.flush()
    return due


def record_crawl_result(
    session: Session,
    site_id: int,
    *,
    found: bool,
    scheduled: bool,
    started_at: datetime,
    now: datetime | None = None,
    backoff_max: float = DEFAULT_BACKOFF_MAX,
    pace: ReleasePace | None = None,
) -> None:
    """After a crawl of the site that ended: ``found`` (it stored a new or changed page) makes the site
    active again (``quiet_crawls`` 0), a ``scheduled`` crawl that found nothing counts one quiet crawl more (a
    manual one that found nothing counts for nothing). When that changes the site's interval
    (:func:`pacing_factors`, with ``pace`` for release pacing), its next due time moves to the new interval,
    counted from ``started_at`` (about the due time the crawl served)."""
    site = session.get(Site, site_id)
    if site is None:
        return
    now = now or utcnow()
    quiet = int(site.quiet_crawls or 0)
    after = 0 if found else quiet + 1 if scheduled else quiet
    if after == quiet:
        return
    site.quiet_crawls = after
    before, factor = pacing_factors(
        session, [(site.id, site.schedule, quiet), (site.id, site.schedule, after)], now=now,
        backoff_max=backoff_max, pace=pace,
    )  # fmt: skip
    if factor != before and site.schedule.isdigit() and site.enabled and site.next_crawl_at is not None:
        site.next_crawl_at = following_due(site.schedule, started_at, now, host=site.host, factor=factor)
    session.flush()
