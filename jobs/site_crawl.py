"""One managed site's crawl, in this process: :func:`run_site`, and :func:`main`, the process a scheduled
crawl (or the admin's "run now") runs in::

    python -m fptrack.jobs.site_crawl NAME [--scheduled]

``fptrack sites run NAME`` (cli/sites.py) calls :func:`run_site` and presents what it returns; the scheduler
starts :func:`main` through :func:`jobs.site_runs.spawn_site_crawl` (Scrapy's reactor runs once per process,
and a crawl must outlive the task that started it), whose output goes to the site's log file (``<data
dir>/logs/site-<id>.log``). What :func:`main` writes there and how it exits are those of ``fptrack sites run
NAME --quiet [--scheduled]``: a summary and the copies found on stdout, ``error: ...`` on stderr, exit 0 when
the crawl finished (or, ``--scheduled``, was skipped because it is running already or no longer scheduled), 1
when it failed or could not start, 130 when it was interrupted (SIGINT, SIGTERM).

The crawl holds the site's claim throughout (:mod:`jobs.site_runs`: at most one crawl of a site at a time); a
``distributed`` site's crawl is shared through Redis (:mod:`crawler.distributed`), and a second process joins
it instead of being skipped.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.errors import FptrackError
from fptrack.core.settings import Settings
from fptrack.crawler.guard import GUARD_REFUSAL
from fptrack.crawler.pages import CrawlError, CrawlOptions, CrawlProgress
from fptrack.crawler.render import learned_verdict
from fptrack.crawler.spiders import RENDER_ENOUGH, RENDER_NEEDED
from fptrack.jobs.crawls import CrawlOutcome, WaitProgress, job_stats, pace_line, run_crawl_job
from fptrack.jobs.releases import ReleasePace
from fptrack.jobs.site_runs import claim, kept_alive, release
from fptrack.jobs.sites import (
    SiteError,
    crawl_options,
    find_site,
    following_due,
    interval_factor,
    record_crawl_result,
    site_lock_name,
)
from fptrack.storage.db import retry_in_session, session_scope
from fptrack.storage.models import MonitorLock, Site, utcnow

if TYPE_CHECKING:
    from fptrack.crawler.distributed import SharedCrawl
    from fptrack.crawler.resume import CrawlState

__all__ = ["SiteRun", "main", "report_lines", "run_site", "waiting_lines"]

EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130
WAITING_EVERY_SECONDS = 2.0


@dataclass
class SiteRun:
    """What ``run_site`` did: the crawl's outcome, or why it did not run."""

    site_name: str
    outcome: CrawlOutcome | None = None
    skipped: str = ""


@dataclass(frozen=True)
class _Turn:
    """The site as :func:`run_site` read it, and its claim: ``token`` is None when this process joins the
    distributed crawl another process holds the claim of (``busy`` says which)."""

    site_id: int
    site_name: str
    host: str
    urls: list[str]
    depth: int
    max_pages: int
    options: CrawlOptions
    distributed: bool
    token: str | None
    busy: str = ""


class _Skipped(Exception):
    """The crawl does not run (being crawled already, no longer scheduled); the message says why."""

    def __init__(self, site_name: str, reason: str) -> None:
        super().__init__(reason)
        self.site_name = site_name


def run_site(
    settings: Settings,
    sessions: sessionmaker[Session],
    name: str,
    *,
    trigger: str = "site",
    progress: Callable[[CrawlProgress], None] | None = None,
    waiting: Callable[[WaitProgress], None] | None = None,
    join: bool = False,
) -> SiteRun:
    """Crawl a managed site now, in this process (once per process: Scrapy), holding its claim throughout:
    skipped when another crawl of the site is running. The schedule moves on to its next due time.

    A ``distributed`` site's crawl is shared (:mod:`crawler.distributed`): when another crawl of it is
    running, this process joins it instead of being skipped (not when started by the scheduler); ``join`` only
    joins (a :class:`SiteError` when no crawl of the site is running)."""
    try:
        turn = _take_turn(settings, sessions, name, trigger=trigger, join=join)
        shared = _enter_shared(settings, sessions, turn, join=join) if turn.distributed else None
    except _Skipped as skipped:
        return SiteRun(skipped.site_name, skipped=str(skipped))
    started_at = utcnow()
    with ExitStack() as stack:
        if shared is not None:
            stack.callback(shared.close)
        on_start = None
        state = None
        if turn.token is not None:  # else: joined a distributed crawl that another process holds the claim of
            on_start = stack.enter_context(
                kept_alive(sessions, settings, site_lock_name(turn.site_id), turn.token)
            )
            if shared is None:  # a distributed crawl's frontier is in Redis already
                state = _open_state(settings, turn)
        try:
            outcome = run_crawl_job(
                settings,
                sessions,
                turn.urls,
                depth=turn.depth,
                max_pages=turn.max_pages,
                progress=progress,
                waiting=waiting,
                site_id=turn.site_id,
                options=turn.options,
                trigger=trigger,
                on_start=on_start,
                shared=shared,
                state=state,
            )
        except CrawlError as error:
            raise SiteError(f"site {turn.site_name}: {error}") from None
    if turn.token is not None and outcome.ok:
        scheduled = trigger == "schedule"
        _record_result(settings, sessions, turn, outcome, scheduled=scheduled, started_at=started_at)
    return SiteRun(turn.site_name, outcome=outcome)


def _record_result(
    settings: Settings,
    sessions: sessionmaker[Session],
    turn: _Turn,
    outcome: CrawlOutcome,
    *,
    scheduled: bool,
    started_at: datetime,
) -> None:
    """The site's quiet-crawl count after a finished crawl (:func:`jobs.sites.record_crawl_result`): a crawl
    that found a new or changed text (a page handed on to be compared) keeps the site on its schedule; quiet
    ones stretch its interval. Pages without text do not count: they are stored again on every crawl. And
    what the crawl learned of the site's pages needing the browser (:func:`_record_render_verdict`)."""

    def write(session: Session) -> None:
        record_crawl_result(
            session,
            turn.site_id,
            found=outcome.pages_queued > 0,
            scheduled=scheduled,
            started_at=started_at,
            backoff_max=settings.schedule_backoff_max,
            pace=ReleasePace.from_settings(settings),
        )
        if outcome.stats is not None:
            _record_render_verdict(session, turn, outcome.stats.counters)

    retry_in_session(sessions, write, what=f"recording the crawl of site {turn.site_name}")


def _record_render_verdict(session: Session, turn: _Turn, counters: Mapping[str, int]) -> None:
    """Store whether the site's pages need the browser (``sites.render_direct``), as this crawl's pages
    told (:func:`crawler.render.learned_verdict`): the next crawl, a new process, sends its new pages to the
    browser at once instead of fetching each plainly first (crawler/known.py, crawler/spiders.py)."""
    needed = int(counters.get(RENDER_NEEDED + turn.host, 0))
    enough = int(counters.get(RENDER_ENOUGH + turn.host, 0))
    if not needed and not enough:
        return
    site = session.get(Site, turn.site_id)
    if site is None:
        return
    verdict = learned_verdict(needed, enough, bool(site.render_direct))
    if verdict != bool(site.render_direct):
        site.render_direct = verdict
        session.flush()


def _take_turn(
    settings: Settings, sessions: sessionmaker[Session], name: str, *, trigger: str, join: bool
) -> _Turn:
    """Read the site and claim it (unless only joining); the schedule moves on when the claim is taken.
    :class:`_Skipped` when the crawl does not run, :class:`SiteError` when it cannot."""
    with session_scope(sessions) as session:
        site = find_site(session, name)
        site_id, site_name = int(site.id), site.name
        if not site.start_urls:
            raise SiteError(
                f"site {site_name} has no start URL; add one with `fptrack sites edit {site_name}`"
            )
        if join and not site.distributed:
            raise SiteError(
                f"site {site_name} is not distributed; make it so with "
                f"`fptrack sites edit {site_name} --distributed`"
            )
        if trigger == "schedule" and not (site.enabled and site.schedule):
            # disabled (or unscheduled) between the scheduler's look and this process's start
            raise _Skipped(site_name, f"site {site_name} is no longer scheduled")
        token = None if join else claim(session, site_id, settings)
        busy = ""
        if token is None:
            holder = session.get(MonitorLock, site_lock_name(site_id))
            job = f"job #{holder.job_id}" if holder is not None and holder.job_id else "a crawl"
            busy = f"site {site_name} is being crawled already ({job})"
            if not site.distributed or trigger == "schedule":
                raise _Skipped(site_name, busy)
        elif site.schedule and trigger != "schedule":
            # a crawl run by hand: the next scheduled one comes a schedule later (a scheduled crawl's next due
            # time was set by the scheduler, on the site's grid: jobs.sites.due_sites)
            now = utcnow()
            factor = interval_factor(int(site.quiet_crawls or 0), settings.schedule_backoff_max)
            site.next_crawl_at = following_due(site.schedule, now, now, host=site.host, factor=factor)
        return _Turn(
            site_id=site_id,
            site_name=site_name,
            host=site.host,
            urls=list(site.start_urls),
            depth=site.depth,
            max_pages=site.max_pages,
            options=crawl_options(site),
            distributed=bool(site.distributed),
            token=token,
            busy=busy,
        )


def _enter_shared(
    settings: Settings, sessions: sessionmaker[Session], turn: _Turn, *, join: bool
) -> SharedCrawl:
    """Start the distributed crawl of ``turn``'s site (it holds the claim) or join the running one. When Redis
    fails us the claim is given back, and the crawl is skipped (a crawl runs already) or a
    :class:`SiteError`."""
    from fptrack.crawler.distributed import DistributedError, SharedCrawl

    shared = None
    try:
        shared = SharedCrawl.connect(settings, turn.host)
        shared.enter(
            depth=turn.depth, max_pages=turn.max_pages, mode="new" if turn.token is not None else "join"
        )
    except DistributedError as error:
        if turn.token is not None:
            with session_scope(sessions) as session:
                release(session, turn.site_id, turn.token)
        if shared is not None and turn.token is None and not join:
            raise _Skipped(turn.site_name, f"{turn.busy}; {error}") from None
        raise SiteError(f"site {turn.site_name}: {error}") from None
    return shared


def _open_state(settings: Settings, turn: _Turn) -> CrawlState:
    """The site crawl's frontier on disk (:mod:`crawler.resume`): continued when an earlier crawl was
    killed."""
    from fptrack.crawler.resume import CrawlState, state_key

    try:
        return CrawlState.open(
            settings.data_dir, turn.site_id, state_key(turn.urls, turn.depth, turn.options)
        )
    except (OSError, sqlite3.Error) as error:
        raise SiteError(
            f"site {turn.site_name}: cannot keep the crawl's state under {settings.data_dir}: {error}"
        ) from None


# --------------------------------------------------------------------------------------- the process entry


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fptrack.jobs.site_crawl NAME [--scheduled]``: crawl the site NAME with the settings of the
    environment (``FPTRACK_*``, as ``fptrack``), print what the crawl did and return the exit status (see the
    module docstring). ``--scheduled`` records the job as the scheduler's (trigger ``schedule``) and makes a
    skipped crawl a success."""
    parser = argparse.ArgumentParser(
        prog="python -m fptrack.jobs.site_crawl",
        description="Crawl a monitored site now, in this process (what a scheduled crawl runs).",
    )
    parser.add_argument("name", help="the monitored site (its name or host)")
    parser.add_argument(
        "--scheduled", action="store_true", help="started by the scheduler (trigger 'schedule')"
    )
    arguments = parser.parse_args(argv)
    try:
        return _crawl_and_report(Settings.from_env(), arguments.name, scheduled=arguments.scheduled)
    except _known_errors() as error:
        return _fail(str(error))
    except KeyboardInterrupt:
        return _fail("interrupted")
    except Exception as error:
        if os.environ.get("FPTRACK_DEBUG"):
            raise
        return _fail(f"unexpected {type(error).__name__}: {error} (set FPTRACK_DEBUG=1 to see the traceback)")


def _known_errors() -> tuple[type[BaseException], ...]:
    """The errors a person can act on: one line, no traceback (the command line's list, and every
    :class:`FptrackError`)."""
    from fptrack.fingerprint.encoding import UndecodableError

    # WorkError, CrawlError, SiteError, ConfigurationError and the database's errors derive from FptrackError
    return (FptrackError, UndecodableError)


def _crawl_and_report(settings: Settings, name: str, *, scheduled: bool) -> int:
    from fptrack.jobs.bootstrap import open_sessions, prepare_process

    prepare_process(settings)
    sessions = open_sessions(settings)
    result = run_site(
        settings,
        sessions,
        name,
        trigger="schedule" if scheduled else "site",
        waiting=waiting_lines(lambda line: _say(line, error=True)),
    )
    if result.skipped:
        if scheduled:  # the scheduler's tick found it running, or no longer scheduled: nothing went wrong
            _say(result.skipped)
            return 0
        return _fail(result.skipped)
    assert result.outcome is not None  # a run that was not skipped has an outcome
    for line in report_lines(result.site_name, result.outcome):
        _say(line)
    if result.outcome.ok:
        return 0
    outcome = result.outcome
    _fail(outcome.error or f"crawl #{outcome.job_id} {outcome.status}")
    return EXIT_INTERRUPTED if outcome.status == "interrupted" else EXIT_FAILURE


def waiting_lines(emit: Callable[[str], None]) -> Callable[[WaitProgress], None]:
    """A ``waiting`` callback for :func:`run_site` that emits how many pages the workers compared: every
    :data:`WAITING_EVERY_SECONDS` and when all are (this entry and ``fptrack sites run`` share it)."""
    last_shown = [-1.0]

    def waiting(update: WaitProgress) -> None:
        now = time.monotonic()
        if now - last_shown[0] >= WAITING_EVERY_SECONDS or update.compared == update.queued:
            last_shown[0] = now
            emit(f"workers: {update.compared}/{update.queued} page(s) compared")

    return waiting


def report_lines(site_name: str, outcome: CrawlOutcome) -> list[str]:
    """The crawl's summary, its first failures, its notes, the pages that copy registered works and, apart,
    the crawl's pages whose copies are seen down (``down:``: a 404, a removal notice), as this entry and
    ``fptrack sites run`` print them."""
    lines = []
    stats = outcome.stats
    if stats is not None:
        part = (
            "" if outcome.whole_job else " (this process's part; the last process to finish records the job)"
        )
        lines.append(
            f"crawl #{outcome.job_id} of {site_name}{part}: {stats.pages_seen} page(s) in "
            f"{outcome.elapsed_seconds:.1f}s, {outcome.pages_unchanged} unchanged, {len(stats.failures)} "
            "failed"
        )
        recorded = job_stats(stats)
        pace = pace_line(recorded)
        if pace:
            lines.append(f"  {pace}")
        skipped = int(stats.counters.get("fptrack/known_pages_skipped", 0))
        if skipped:
            lines.append(f"  known pages not fetched again: {skipped} (left to the re-check cadence)")
        unlinked = int(stats.counters.get("fptrack/unlinked_copies_fetched", 0))
        if unlinked:
            lines.append(f"  known copies no longer linked, fetched again: {unlinked}")
        lines.extend(f"  failed: {url}: {reason}" for url, reason in stats.failures[:10])
        if any(reason.startswith(GUARD_REFUSAL) for _, reason in stats.failures):
            lines.append(
                f"  hint: to crawl a site on private or loopback addresses, allow them with "
                f"`fptrack sites edit {site_name} --allow-private`"
            )
        lines.extend(f"  note: {note}" for note in stats.notes)
    lines.extend(
        f"  copy: {url} ({count} chapter match{'es' if count != 1 else ''})" for url, count in outcome.copies
    )
    lines.extend(
        f"  down: {url} ({count} chapter match{'es' if count != 1 else ''} no longer copied: a removal)"
        for url, count in outcome.down
    )
    return lines


def _say(line: str, *, error: bool = False) -> None:
    # flushed line by line: stdout and stderr share the site's log file, in the order things happened
    print(line, file=sys.stderr if error else sys.stdout, flush=True)


def _fail(message: str) -> int:
    _say(f"error: {message}", error=True)
    return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover - the process spawn_site_crawl starts
    sys.exit(main())
