"""Managed sites: the sites fptrack monitors, their crawl settings and schedules, and the claims that keep one
crawl per site at a time. ``fptrack sites ...`` (cli/sites.py) and the scheduler (jobs/crawl_tasks.py) call it.

A managed site is a ``sites`` row with ``managed = true``; its ``host`` is the site key of its first start URL
(:func:`storage.sites.site_of`), so pages crawled before it was added (by ``fptrack crawl``) already belong to it.

Every setting, with its default:

| setting | default | meaning |
| --- | --- | --- |
| ``start_urls`` | (required) | where each crawl starts (depth 0) |
| ``allowed_hosts`` | none | more sites (``host`` or ``host:port``) links may lead to, besides the start URLs' sites |
| ``depth`` | ``2`` | link depth followed from the start URLs |
| ``max_pages`` | ``200`` | pages per crawl at most |
| ``include`` | none | regular expressions (``re.search``) on link URLs: when given, only matching links are followed |
| ``exclude`` | none | regular expressions on link URLs: matching links are never followed |
| ``schedule`` | none (manual) | seconds between crawls (``3600``, or ``30m``, ``6h``, ``1d``) or a cron expression (``0 3 * * *``, UTC) |
| ``delay`` | ``FPTRACK_CRAWL_DELAY`` (0) | seconds at least between two requests to the site |
| ``concurrency`` | ``FPTRACK_CRAWL_CONCURRENCY_PER_SITE`` (2) | requests to the site at a time |
| ``obey_robots`` | ``true`` | obey the site's robots.txt |
| ``render_js`` | ``auto`` | ``auto`` / ``yes`` / ``no``: render pages built by scripts in Chromium (crawler.render) |
| ``allow_private`` | ``false`` | let the crawl reach the site's hosts although their addresses are private or loopback |
| ``distributed`` | ``false`` | its crawls share one frontier in Redis: ``sites run`` on more machines joins the running crawl (:mod:`crawler.distributed`) |
| ``enabled`` | ``true`` | scheduled crawls run (``sites run`` works either way) |

Claims (:class:`storage.models.MonitorLock`, ``site:<id>``) are rows, not in-memory flags: at most one crawl of a
site at a time across processes and machines. The crawl's process refreshes its claim's heartbeat; a claim without
a heartbeat for ``FPTRACK_CRAWL_STALE_SECONDS`` (or whose process is gone, on the same machine) belonged to a crawl
that died: its job is marked failed and the site runs again when next due.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, sessionmaker

from fptrack.crawler.pages import RENDER_JS_MODES, CrawlError, CrawlOptions
from fptrack.storage.db import session_scope
from fptrack.storage.models import CrawlJob, CrawlJobStatus, MonitorLock, Site, as_utc, utcnow
from fptrack.core.settings import Settings, classify_allow_entry
from fptrack.storage.sites import site_of

__all__ = [
    "SiteError",
    "SiteSpec",
    "add_site",
    "claim",
    "crawl_lock_name",
    "crawl_options",
    "due_sites",
    "edit_site",
    "find_site",
    "kept_alive",
    "next_due",
    "one_off_claim",
    "owner_is_dead",
    "parse_schedule",
    "reap_dead_claims",
    "release",
    "remove_site",
    "run_site",
    "site_lock_name",
    "spec_of",
    "take_lock",
]

log = logging.getLogger(__name__)

_INTERVAL = re.compile(r"^(\d+)\s*([smhd]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class SiteError(ValueError):
    """A site command that cannot be done (unknown site, bad setting); the message says why, in one line."""


@dataclass(frozen=True)
class SiteSpec:
    """A managed site's settings (see the module docstring for their meaning and defaults)."""

    name: str
    start_urls: tuple[str, ...]
    allowed_hosts: tuple[str, ...] = ()
    depth: int = 2
    max_pages: int = 200
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    schedule: str = ""
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
            raise SiteError(f"site name {self.name!r}: expected a short name without spaces (e.g. pirate-books)")
        urls = tuple(dict.fromkeys(u.strip() for u in self.start_urls if u.strip()))
        if not urls:
            raise SiteError(f"site {name}: give at least one start URL")
        for url in urls:
            if not site_of(url):
                raise SiteError(f"site {name}: start URL {url!r} is not an http:// or https:// URL with a host")
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
    return SiteSpec(
        name=site.name,
        start_urls=tuple(site.start_urls or ()),
        allowed_hosts=tuple(site.allowed_hosts or ()),
        depth=site.depth,
        max_pages=site.max_pages,
        include=tuple(site.include_patterns or ()),
        exclude=tuple(site.exclude_patterns or ()),
        schedule=site.schedule,
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
    site.delay = spec.delay
    site.concurrency = spec.concurrency
    site.obey_robots = spec.obey_robots
    site.render_js = spec.render_js
    site.allow_private = spec.allow_private
    site.distributed = spec.distributed
    if schedule_changed:
        site.next_crawl_at = now if spec.schedule else None  # a new schedule is due at once


def add_site(session: Session, spec: SiteSpec, *, now: datetime | None = None) -> Site:
    """Start monitoring a site. A site row made by earlier crawls of the same host is adopted (its pages are the
    site's pages); a name or host already monitored is a :class:`SiteError`."""
    spec = spec.validated()
    now = now or utcnow()
    host = site_of(spec.start_urls[0])
    clash = session.scalar(select(Site).where(Site.managed.is_(True), Site.name == spec.name))
    if clash is not None:
        raise SiteError(f"a site called {spec.name!r} is monitored already ({clash.host}); choose another name")
    site = session.scalar(select(Site).where(Site.host == host))
    if site is not None and site.managed:
        raise SiteError(f"{host} is monitored already as {site.name!r}; change it with `fptrack sites edit {site.name}`")
    if site is None:
        site = Site(host=host, name=spec.name)
        session.add(site)
    _apply(site, spec, now)
    session.flush()
    return site


def edit_site(session: Session, name: str, /, *, now: datetime | None = None, **changes: Any) -> Site:
    """Change settings of a managed site (``changes`` are :class:`SiteSpec` fields, ``name=`` renames it: hence
    ``name`` is positional-only); a new schedule is due now."""
    site = find_site(session, name)
    known = {f.name for f in fields(SiteSpec)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise SiteError(f"unknown site setting(s): {', '.join(unknown)}")
    spec = replace(spec_of(site), **changes).validated()
    if spec.name != site.name:
        clash = session.scalar(select(Site).where(Site.managed.is_(True), Site.name == spec.name, Site.id != site.id))
        if clash is not None:
            raise SiteError(f"a site called {spec.name!r} is monitored already ({clash.host})")
    _apply(site, spec, now or utcnow())
    session.flush()
    return site


def remove_site(session: Session, name: str) -> Site:
    """Stop monitoring a site: it is no longer scheduled and leaves ``sites list``. Its pages, matches and crawl
    history stay: they are evidence, and a plain ``fptrack crawl`` may have made them."""
    site = find_site(session, name)
    site.managed = False
    site.enabled = False
    site.schedule = ""
    site.next_crawl_at = None
    session.flush()
    return site


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


# ----------------------------------------------------------------------------------------------- claims


def site_lock_name(site_id: int) -> str:
    """The monitor_locks row a crawl of the site holds (the scheduler, the CLI and the admin all read it)."""
    return f"site:{site_id}"


def crawl_lock_name(key: str) -> str:
    """The monitor_locks row a one-off crawl (``fptrack crawl``) holds while it runs: no exclusion, only a sign of
    life, so that a crawl whose process was killed is marked failed instead of staying "running" for ever."""
    return f"crawl:{key}"


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_is_dead(owner: str) -> bool:
    """True when ``owner`` (``host:pid``) is a process of this machine that no longer runs."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def claim(session: Session, site_id: int, settings: Settings, *, now: datetime | None = None) -> str | None:
    """Claim the right to crawl a site; returns the claim's token, or None when a live crawl holds it. A claim
    whose holder died is taken over (its job is marked failed first)."""
    now = now or utcnow()
    name = site_lock_name(site_id)
    reap_dead_claims(session, settings, now=now, names=[name])
    token = take_lock(session, name, now)
    session.flush()
    return token


def take_lock(session: Session, name: str, now: datetime) -> str | None:
    """Insert the ``monitor_locks`` row ``name`` for this process unless one exists (one statement, so two
    processes never both get it); the new token, or None when the lock is held."""
    token = uuid.uuid4().hex
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    inserted = session.execute(
        insert(MonitorLock)
        .values(name=name, token=token, owner=_owner(), acquired_at=now, heartbeat_at=now)
        .on_conflict_do_nothing(index_elements=[MonitorLock.name])
        .returning(MonitorLock.token)
    ).scalar()
    return token if inserted == token else None


def heartbeat(session: Session, site_id: int, token: str, *, job_id: int | None = None) -> bool:
    """Refresh a site's claim (and tie it to its job); False when the claim was lost (taken over as dead)."""
    return _refresh(session, site_lock_name(site_id), token, job_id=job_id)


def release(session: Session, site_id: int, token: str) -> None:
    _drop(session, site_lock_name(site_id), token)


def _refresh(session: Session, name: str, token: str, *, job_id: int | None = None) -> bool:
    values: dict[str, Any] = {"heartbeat_at": utcnow()}
    if job_id is not None:
        values["job_id"] = job_id
    result = session.execute(
        update(MonitorLock).where(MonitorLock.name == name, MonitorLock.token == token).values(**values)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def _drop(session: Session, name: str, token: str) -> None:
    session.execute(delete(MonitorLock).where(MonitorLock.name == name, MonitorLock.token == token))


@contextmanager
def kept_alive(
    sessions: sessionmaker[Session], settings: Settings, name: str, token: str
) -> Iterator[Callable[[int], None]]:
    """Keep the claim ``name`` alive while the body runs (a thread refreshes its heartbeat a few times per
    ``FPTRACK_CRAWL_STALE_SECONDS``) and release it after. Yields ``started(job_id)``, which ties the claim to the
    crawl job once the job exists: a claim that stops beating marks that job failed (:func:`reap_dead_claims`)."""
    stop = threading.Event()
    job_ids: list[int] = []

    def beat() -> None:
        every = max(1.0, min(10.0, settings.crawl_stale_seconds / 4))
        while not stop.wait(every):
            try:
                with session_scope(sessions) as session:
                    if not _refresh(session, name, token, job_id=job_ids[0] if job_ids else None):
                        log.error("the claim %s was lost (taken over as dead)", name)
            except Exception:  # a missed beat is retried; the crawl goes on
                log.exception("cannot refresh the claim %s", name)

    def started(job_id: int) -> None:
        job_ids.append(job_id)
        with session_scope(sessions) as session:
            _refresh(session, name, token, job_id=job_id)

    thread = threading.Thread(target=beat, name=f"claim-{name}", daemon=True)
    thread.start()
    try:
        yield started
    finally:
        stop.set()
        thread.join(timeout=5)
        with session_scope(sessions) as session:
            _drop(session, name, token)


@contextmanager
def one_off_claim(sessions: sessionmaker[Session], settings: Settings) -> Iterator[Callable[[int], None]]:
    """The sign of life of a one-off crawl (see :func:`crawl_lock_name`), kept while the body runs; yields the
    ``started(job_id)`` of :func:`kept_alive`. Taking it first reaps the claims of crawls that died."""
    now = utcnow()
    name = crawl_lock_name(uuid.uuid4().hex)
    with session_scope(sessions) as session:
        failed = reap_dead_claims(session, settings, now=now)
        if failed:
            log.warning("marked failed the crawl job(s) %s, whose process died", ", ".join(f"#{j}" for j in failed))
        token = take_lock(session, name, now)
    if token is None:  # a fresh random name is never held
        raise RuntimeError(f"cannot take the claim {name}")
    with kept_alive(sessions, settings, name, token) as started:
        yield started


def reap_dead_claims(
    session: Session, settings: Settings, *, now: datetime | None = None, names: Sequence[str] | None = None
) -> list[int]:
    """Drop the claims of crawls that died (no heartbeat for ``FPTRACK_CRAWL_STALE_SECONDS``, or their process is
    gone): a site's crawl or a one-off crawl; mark their jobs failed and return those job ids."""
    now = now or utcnow()
    stale_before = now - timedelta(seconds=settings.crawl_stale_seconds)
    query = select(MonitorLock).where(or_(MonitorLock.name.like("site:%"), MonitorLock.name.like("crawl:%")))
    if names is not None:
        query = query.where(MonitorLock.name.in_(list(names)))
    failed: list[int] = []
    for lock in session.scalars(query.with_for_update(skip_locked=True)):
        heartbeat_at = as_utc(lock.heartbeat_at)
        if heartbeat_at >= stale_before and not owner_is_dead(lock.owner):
            continue
        if lock.job_id is not None:
            job = session.get(CrawlJob, lock.job_id)
            if job is not None and job.status == CrawlJobStatus.RUNNING.value:
                job.status = CrawlJobStatus.FAILED.value
                again = "run the crawl again" if lock.name.startswith("crawl:") else "the site runs again when next due"
                job.error = (
                    f"the crawl process ({lock.owner}) died: no sign of life since "
                    f"{heartbeat_at.isoformat(timespec='seconds')}; {again}"
                )
                job.finished_at = now
                failed.append(int(job.id))
        log.warning("dropping the claim %s of a crawl that died (%s)", lock.name, lock.owner)
        session.delete(lock)
    session.flush()
    return failed


def due_sites(session: Session, *, now: datetime | None = None) -> list[tuple[int, str]]:
    """(id, name) of the enabled managed sites that are due, in due order, and take their turn: each site's
    ``next_crawl_at`` moves to its next due time (a compare-and-set, so two schedulers never both start it)."""
    now = now or utcnow()
    candidates = session.execute(
        select(Site.id, Site.name, Site.schedule, Site.next_crawl_at)
        .where(
            Site.managed.is_(True), Site.enabled.is_(True), Site.schedule != "", Site.next_crawl_at.is_not(None),
            Site.next_crawl_at <= now,
        )
        .order_by(Site.next_crawl_at)
    ).all()  # fmt: skip
    running = {name for name in session.scalars(select(MonitorLock.name))}
    due = []
    for site_id, name, schedule, was_due in candidates:
        if site_lock_name(site_id) in running:
            continue  # still crawling: it runs again when next due after that
        result = session.execute(
            update(Site)
            .where(Site.id == site_id, Site.next_crawl_at == was_due)
            .values(next_crawl_at=next_due(schedule, now))
        )
        if result.rowcount == 1:  # type: ignore[attr-defined]
            due.append((int(site_id), str(name)))
    session.flush()
    return due


# -------------------------------------------------------------------------------------------------- run


@dataclass
class SiteRun:
    """What ``run_site`` did: the crawl's outcome, or why it did not run."""

    site_name: str
    outcome: Any = None  # jobs.crawls.CrawlOutcome
    skipped: str = ""


def run_site(
    settings: Settings,
    sessions: sessionmaker[Session],
    name: str,
    *,
    trigger: str = "site",
    progress: Callable[[Any], None] | None = None,
    waiting: Callable[[Any], None] | None = None,
    join: bool = False,
) -> SiteRun:
    """Crawl a managed site now, in this process (once per process: Scrapy), holding its claim throughout:
    skipped when another crawl of the site is running. The schedule moves on to its next due time.

    A ``distributed`` site's crawl is shared (:mod:`crawler.distributed`): when another crawl of it is running, this
    process joins it instead of being skipped (not when started by the scheduler); ``join`` only joins (a
    :class:`SiteError` when no crawl of the site is running)."""
    from fptrack.crawler.resume import CrawlState, state_key
    from fptrack.jobs.crawls import run_crawl_job

    with session_scope(sessions) as session:
        site = find_site(session, name)
        site_id, site_name, host = int(site.id), site.name, site.host
        urls, depth, max_pages = list(site.start_urls or ()), site.depth, site.max_pages
        options = crawl_options(site)
        distributed = bool(site.distributed)
        if not urls:
            raise SiteError(f"site {site_name} has no start URL; add one with `fptrack sites edit {site_name}`")
        if join and not distributed:
            raise SiteError(f"site {site_name} is not distributed; make it so with "
                            f"`fptrack sites edit {site_name} --distributed`")  # fmt: skip
        if trigger == "schedule" and not (site.enabled and site.schedule):
            # disabled (or unscheduled) between the scheduler's look and this process's start
            return SiteRun(site_name, skipped=f"site {site_name} is no longer scheduled")
        token = None if join else claim(session, site_id, settings)
        if token is None:
            holder = session.get(MonitorLock, site_lock_name(site_id))
            job = f"job #{holder.job_id}" if holder is not None and holder.job_id else "a crawl"
            busy = f"site {site_name} is being crawled already ({job})"
            if not distributed or trigger == "schedule":
                return SiteRun(site_name, skipped=busy)
        elif site.schedule:
            site.next_crawl_at = next_due(site.schedule, utcnow())
    shared = None
    if distributed:
        from fptrack.crawler.distributed import DistributedError, SharedCrawl

        try:
            shared = SharedCrawl.connect(settings, host)
            shared.enter(depth=depth, max_pages=max_pages, mode="new" if token is not None else "join")
        except DistributedError as error:
            if token is not None:
                with session_scope(sessions) as session:
                    release(session, site_id, token)
            if shared is not None and token is None and not join:
                return SiteRun(site_name, skipped=f"{busy}; {error}")
            raise SiteError(f"site {site_name}: {error}") from None
    if token is None:  # joined a distributed crawl that another process started (and holds the claim of)
        try:
            outcome = run_crawl_job(
                settings, sessions, urls, depth=depth, max_pages=max_pages, progress=progress, waiting=waiting,
                site_id=site_id, options=options, trigger=trigger, shared=shared,
            )  # fmt: skip
        except CrawlError as error:
            raise SiteError(f"site {site_name}: {error}") from None
        finally:
            if shared is not None:
                shared.close()
        return SiteRun(site_name, outcome=outcome)
    try:
        with kept_alive(sessions, settings, site_lock_name(site_id), token) as started:
            state = None
            if shared is None:  # a distributed crawl's frontier is in Redis already
                try:
                    state = CrawlState.open(settings.data_dir, site_id, state_key(urls, depth, options))
                except (OSError, sqlite3.Error) as error:
                    raise SiteError(f"site {site_name}: cannot keep the crawl's state under {settings.data_dir}: "
                                    f"{error}") from None  # fmt: skip
            outcome = run_crawl_job(
                settings, sessions, urls, depth=depth, max_pages=max_pages, progress=progress, waiting=waiting,
                site_id=site_id, options=options, trigger=trigger, on_start=started, shared=shared, state=state,
            )  # fmt: skip
    except CrawlError as error:
        raise SiteError(f"site {site_name}: {error}") from None
    finally:
        if shared is not None:
            shared.close()
    return SiteRun(site_name, outcome=outcome)
