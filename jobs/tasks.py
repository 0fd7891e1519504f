"""fptrack's Celery tasks, all of them: ids in, a service call, commit.

The app they are registered on, its routing and its schedule are :mod:`taskqueue`'s. With no broker configured
(``FPTRACK_BROKER_URL`` unset) the tasks run eagerly in the calling process; with one, on workers started by
``fptrack worker`` (the fingerprint stage) and ``fptrack crawler`` (the crawl queue: scheduled crawls and
takedown re-checks). Callers enqueue only after the commit that made the task's input visible.

The ``name=`` of every task is what earlier releases put in their messages: it never changes, whatever the
function is called, so that a message queued before an upgrade still runs after it.

- the fingerprint stage: :func:`process_pages` (a batch of pages), :func:`index_work` (retroactive
  detection), :func:`settle_site` (site templates);
- upkeep: :func:`sweep` (hands on what was left behind), :func:`maintain`;
- evidence: :func:`stamp_captures` (the captures of flagged pages time-stamped: jobs/capture_stamps.py);
- the meaning path: :func:`meaning_check` (gated pages aligned with their candidate chapters:
  jobs/meaning.py), on queue ``<FPTRACK_TASK_QUEUE>.meaning``;
- monitoring, on the crawl queue: :func:`start_due_crawls` starts every due site's crawl in a process of its
  own (:func:`jobs.site_runs.spawn_site_crawl`: Scrapy's reactor runs once per process, and a crawl must
  outlive the task that started it); :func:`recheck_takedowns`; :func:`follow_up_notices` (takedown
  notices whose copies went or stayed up: jobs/notices.py).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery
from sqlalchemy.exc import OperationalError

from fptrack import taskqueue
from fptrack.core.settings import Settings
from fptrack.jobs import PAGES_PER_TASK
from fptrack.storage.db import session_scope
from fptrack.taskqueue import celery, task_sessions, task_settings

__all__ = [
    "PAGES_PER_TASK",
    "configure",
    "discover",
    "follow_up_notices",
    "index_work",
    "maintain",
    "meaning_check",
    "process_pages",
    "recheck_takedowns",
    "settle_site",
    "stamp_captures",
    "start_due_crawls",
    "sweep",
]

log = logging.getLogger(__name__)
DISCOVERY_ENTRY = "fptrack-discover"
# A database that is briefly unreachable (a restart, a fail-over) must not lose a page: retry with back-off.
_RETRY_ON_DATABASE_ERRORS: dict[str, Any] = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "max_retries": 5,
}


def configure(settings: Settings) -> Celery:
    """Make this process ready to run and enqueue the tasks: the Celery app and the task runtime bound to
    ``settings`` (:func:`taskqueue.configure`) after the process's own set-up
    (:func:`jobs.bootstrap.prepare_process`); idempotent. Returns the app."""
    from fptrack.jobs.bootstrap import prepare_process

    prepare_process(settings)
    app = taskqueue.configure(settings)
    # discovery (jobs.discovery) runs on the beat only when FPTRACK_DISCOVERY_EVERY is set, on the crawl queue
    # (it fetches from the web)
    schedule = {k: v for k, v in app.conf.beat_schedule.items() if k != DISCOVERY_ENTRY}
    if settings.discovery_every > 0:
        schedule[DISCOVERY_ENTRY] = {"task": "fptrack.discover", "schedule": float(settings.discovery_every)}
    app.conf.update(
        beat_schedule=schedule,
        task_routes={
            **(app.conf.task_routes or {}),
            "fptrack.discover": {"queue": settings.crawl_task_queue},
            "fptrack.meaning_check": {"queue": settings.meaning_task_queue},
        },
    )
    return app


# --------------------------------------------------------------------------------- the fingerprint stage


@celery.task(name="fptrack.process_pages", **_RETRY_ON_DATABASE_ERRORS)  # type: ignore[untyped-decorator]
def process_pages(page_ids: list[int]) -> dict[str, list[int]]:
    """Fingerprint, index and compare a batch of stored pages; returns the ids done and their flagged pages.

    Idempotent: pages already compared, or being compared by another worker, are skipped; pages that are gone
    are logged and skipped."""
    from fptrack.compare import service
    from fptrack.compare.meaning_gate import gate_pages

    settings = task_settings()
    with session_scope(task_sessions()) as session:
        outcomes = service.process_pages(session, page_ids, settings)
        # the meaning path's gate, in the compare's transaction: a page compared is a page gated
        gated = gate_pages(session, outcomes, settings)
    if gated and not settings.tasks_in_process:
        _enqueue_meaning(gated, settings)
    done = {o.page_id for o in outcomes}
    if len(done) < len(set(page_ids)):
        log.info(
            "process_pages: %d of %d page(s) needed nothing (done already, taken, or gone)",
            len(set(page_ids)) - len(done),
            len(set(page_ids)),
        )
    flagged = sorted(o.page_id for o in outcomes if o.matched_chapters)
    if flagged and settings.tsa_url:
        _enqueue_stamps(flagged)
    return {"done": sorted(done), "flagged": flagged, "meaning": gated}


def _enqueue_meaning(check_ids: list[int], settings: Settings) -> None:
    """Hand the pending meaning checks on to queue ``meaning`` (jobs/meaning.py), after the commit that
    recorded them, ``FPTRACK_MEANING_PAGES_PER_TASK`` a task; a broker that fails leaves them to the sweep."""
    size = settings.meaning_pages_per_task
    try:
        for start in range(0, len(check_ids), size):
            meaning_check.delay(check_ids[start : start + size])
    except Exception:
        log.warning("meaning checks: could not hand on %s", check_ids, exc_info=True)


@celery.task(name="fptrack.meaning_check", **_RETRY_ON_DATABASE_ERRORS)  # type: ignore[untyped-decorator]
def meaning_check(check_ids: list[int]) -> dict[str, Any]:
    """Align a batch of gated pages with their candidate chapters and record the meaning matches
    (jobs/meaning.py). Idempotent: checks done, or held by another worker, are skipped."""
    from fptrack.jobs.meaning import check_pages

    with session_scope(task_sessions()) as session:
        run = check_pages(session, check_ids, task_settings())
    return run.as_json()


def _enqueue_stamps(page_ids: list[int] | None) -> None:
    """Hand the captures of flagged pages on to be time-stamped (jobs/capture_stamps.py), after the commit
    that flagged them; a broker or authority that fails leaves them to the sweep, never fails the caller."""
    try:
        stamp_captures.delay(page_ids)
    except Exception:
        log.warning("capture time-stamps: could not hand on %s", page_ids or "the sweep", exc_info=True)


@celery.task(name="fptrack.stamp_captures")  # type: ignore[untyped-decorator]
def stamp_captures(page_ids: list[int] | None = None) -> dict[str, object]:
    """Time-stamp the unstamped captures of flagged pages (``page_ids``, or all: the sweep's call)."""
    from fptrack.jobs.capture_stamps import FLAG_TIMEOUT
    from fptrack.jobs.capture_stamps import stamp_captures as stamp
    from fptrack.services.evidence.bundle import TSA_TIMEOUT

    timeout = FLAG_TIMEOUT if page_ids is not None else TSA_TIMEOUT
    with session_scope(task_sessions()) as session:
        done = stamp(session, task_settings(), page_ids, timeout=timeout)
    return {"stamped": done.stamped, "left": done.left, "error": done.error}


@celery.task(name="fptrack.index_work", **_RETRY_ON_DATABASE_ERRORS)  # type: ignore[untyped-decorator]
def index_work(work_id: int) -> int:
    """Fingerprint a newly registered work and re-compare the pages crawled before it; returns the number of
    pages now flagged against it. Two transactions: the fingerprints, committed at once (the registry is held
    while they commit: docs/compare.md), then the look-up of the pages stored before and their re-compare."""
    from fptrack.compare.service import fingerprint_work
    from fptrack.jobs.retroactive import index_and_recheck

    settings = task_settings()
    with session_scope(task_sessions()) as session:
        documents = fingerprint_work(session, work_id, settings)
    gated: list[int] = []
    with session_scope(task_sessions()) as session:
        copying = index_and_recheck(session, work_id, settings, fingerprinted=documents, gated=gated)
    if gated and not settings.tasks_in_process:  # in-process: `fptrack meaning run` does them
        _enqueue_meaning(gated, settings)
    return copying


@celery.task(name="fptrack.settle_site", **_RETRY_ON_DATABASE_ERRORS)  # type: ignore[untyped-decorator]
def settle_site(site_id: int) -> dict[str, int]:
    """Decide a site's template from all its pages and re-evaluate the pages it affects."""
    from fptrack.compare.templates import settle_site as settle

    with session_scope(task_sessions()) as session:
        settled = settle(session, site_id, task_settings())
    return {"template_codes": settled.template_codes, "recompared": settled.recompared}


# ------------------------------------------------------------------------------------------------ upkeep


@celery.task(name="fptrack.sweep", **{**_RETRY_ON_DATABASE_ERRORS, "max_retries": 3})  # type: ignore[untyped-decorator]
def sweep() -> dict[str, int]:
    """Hand on again what was left behind: pages stored and not compared, works registered and not indexed."""
    from fptrack.jobs.sweep import sweep_left_behind

    settings = task_settings()
    with session_scope(task_sessions()) as session:
        left = sweep_left_behind(session, older_than_seconds=settings.sweep_after)
    for start in range(0, len(left.pages), PAGES_PER_TASK):
        process_pages.delay(left.pages[start : start + PAGES_PER_TASK])
    for work_id in left.works:
        index_work.delay(work_id)
    for site_id in left.sites:
        settle_site.delay(site_id)
    if settings.tsa_url:  # captures an unreachable authority left unstamped
        _enqueue_stamps(None)
    checks = _meaning_left_behind(settings)
    if checks:
        _enqueue_meaning(checks, settings)
    return {
        "pages": len(left.pages),
        "works": len(left.works),
        "sites": len(left.sites),
        "meaning_checks": len(checks),
    }


def _meaning_left_behind(settings: Settings) -> list[int]:
    """Meaning checks pending for longer than ``FPTRACK_SWEEP_AFTER`` (their task lost with a broker or a
    worker): handed on again (a check done meanwhile is skipped by its task)."""
    from datetime import timedelta

    from sqlalchemy import select

    from fptrack.storage.models import MeaningCheck, utcnow

    if not settings.meaning or settings.tasks_in_process:
        return []  # in-process, the crawl's last phase and `fptrack meaning run` do them
    before = utcnow() - timedelta(seconds=settings.sweep_after)
    with session_scope(task_sessions()) as session:
        return [
            int(i)
            for i in session.scalars(
                select(MeaningCheck.id)
                .where(MeaningCheck.state == "pending", MeaningCheck.gated_at < before)
                .order_by(MeaningCheck.id)
                .limit(10_000)
            )
        ]


@celery.task(name="fptrack.maintain", **{**_RETRY_ON_DATABASE_ERRORS, "max_retries": 3})  # type: ignore[untyped-decorator]
def maintain() -> dict[str, object]:
    """Periodic upkeep (Celery beat): re-split overloaded buckets, refresh the corpus statistics."""
    from fptrack.compare.maintenance import run_maintenance

    with session_scope(task_sessions()) as session:
        return run_maintenance(session, task_settings()).as_json()


# ----------------------------------------------------------------------------- monitoring (crawl queue)


@celery.task(name="fptrack.start_due_crawls")  # type: ignore[untyped-decorator]
def start_due_crawls() -> dict[str, Any]:
    """Mark dead crawls failed, read the release feeds that are due (jobs/releases.py), then start every due
    site's crawl in a process of its own."""
    from fptrack.jobs.releases import ReleasePace, read_due_feeds
    from fptrack.jobs.site_runs import collect_finished_crawls, reap_dead_claims, spawn_site_crawl
    from fptrack.jobs.sites import due_sites

    collect_finished_crawls()
    with session_scope(task_sessions()) as session:
        failed = reap_dead_claims(session, task_settings())
    try:
        releases = read_due_feeds(task_settings(), task_sessions())
    except Exception:  # a feed must never keep the sites from their crawls
        log.exception("reading the release feeds failed")
        releases = {}
    with session_scope(task_sessions()) as session:
        due = due_sites(
            session,
            tick=task_settings().schedule_every,
            backoff_max=task_settings().schedule_backoff_max,
            pace=ReleasePace.from_settings(task_settings()),
        )
    started = []
    for site_id, name in due:
        try:
            child = spawn_site_crawl(site_id, name)
        except OSError as error:
            log.error("cannot start the crawl of site %s: %s", name, error)
            continue
        log.info("started the scheduled crawl of site %s (pid %d)", name, child.pid)
        started.append(name)
    return {"started": started, "dead_jobs_failed": failed, "release_feeds": releases}


@celery.task(name="fptrack.recheck_takedowns")  # type: ignore[untyped-decorator]
def recheck_takedowns() -> dict[str, object]:
    """Re-check the pages of flagged and confirmed matches that are due (jobs/rechecks.py): one run at a time
    (the ``recheck:takedowns`` claim); a run that finds the claim held does nothing."""
    from fptrack.jobs.rechecks import run_due_rechecks

    summary = run_due_rechecks(task_settings(), task_sessions())
    if summary.skipped:
        log.info("takedown re-checks skipped: %s", summary.skipped)
    else:
        log.info(
            "takedown re-checks: %d match(es) on %d page(s): %s",
            summary.matches,
            summary.pages,
            dict(summary.outcomes),
        )
    return summary.as_json()


@celery.task(name="fptrack.follow_up_notices", **{**_RETRY_ON_DATABASE_ERRORS, "max_retries": 3})  # type: ignore[untyped-decorator]
def follow_up_notices() -> dict[str, object]:
    """Follow up the takedown notices (jobs/notices.py): close what the re-checks found gone, and send the
    reminders and escalations that are due (through the configured SMTP relay)."""
    from fptrack.jobs.notices import follow_up

    with session_scope(task_sessions()) as session:
        summary = follow_up(session, task_settings())
    log.info("notice follow-up: %s", summary.as_json())
    return summary.as_json()


@celery.task(name="fptrack.discover")  # type: ignore[untyped-decorator]
def discover() -> dict[str, object]:
    """Discovery on the beat (``FPTRACK_DISCOVERY_EVERY``): propose candidate sites from links, search
    providers and networks, probe the new ones (jobs/discovery.py)."""
    from fptrack.jobs.discovery import run_discovery

    report = run_discovery(task_sessions(), task_settings())
    for line in [*report.errors, *report.warnings]:
        log.warning("discovery: %s", line)
    log.info(
        "discovery: %d new candidate(s), %d probed, %d request(s)",
        report.proposed,
        report.probed,
        report.requests,
    )
    return {k: v for k, v in report.as_json().items() if k != "candidates"}
