"""The fingerprint stage as Celery tasks: ids in, a service call, commit.

With no broker configured (``FPTRACK_BROKER_URL`` unset) the same tasks run eagerly in the calling process;
with one, on workers started by ``fptrack worker``. Callers enqueue only after the commit that made the task's
input visible.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from fptrack.compare import service
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.core.settings import Settings

__all__ = [
    "PAGES_PER_TASK",
    "celery",
    "configure",
    "index_work",
    "maintain",
    "process_one_page",
    "process_pages",
    "settle_site",
    "sweep",
    "workers_answering",
]

log = logging.getLogger(__name__)
celery = Celery("fptrack")
PAGES_PER_TASK = 32
"""Pages per ``process_pages`` task: one transaction, one candidate query per code kind for all of them."""
# A database that is briefly unreachable (a restart, a fail-over) must not lose a page: retry with back-off.
_RETRY_ON_DATABASE_ERRORS: dict[str, Any] = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "max_retries": 5,
}
_runtime: dict[str, Any] = {}


def configure(settings: Settings) -> Celery:
    """Bind the Celery app and the task runtime (database sessions) to ``settings``; idempotent."""
    from fptrack.fingerprint.normalize import use_table_cache

    use_table_cache(settings.cache_dir)
    backend = settings.result_backend
    if backend is None and settings.broker_url and settings.broker_url.startswith(("redis://", "rediss://")):
        backend = settings.broker_url
    celery.conf.update(
        broker_url=settings.broker_url or "memory://localhost/",
        result_backend=backend,
        task_always_eager=settings.tasks_in_process,
        task_default_queue=settings.task_queue,
        task_eager_propagates=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        result_expires=3600,
        broker_connection_retry_on_startup=True,
        beat_schedule={
            "fptrack-maintain": {"task": "fptrack.maintain", "schedule": float(settings.maintain_every)},
            "fptrack-sweep": {"task": "fptrack.sweep", "schedule": float(settings.sweep_every)},
            # monitoring: due site crawls (jobs/crawl_tasks.py), each in a process of its own
            "fptrack-monitor": {"task": "fptrack.start_due_crawls", "schedule": float(settings.schedule_every)},
            # takedown verification: the pages of flagged and confirmed matches fetched again (jobs/rechecks.py)
            "fptrack-recheck": {"task": "fptrack.recheck_takedowns", "schedule": float(settings.recheck_every)},
        },
        # the scheduler's crawl tasks go to their own queue (jobs/crawl_tasks.py; `fptrack crawler`)
        task_routes={
            "fptrack.start_due_crawls": {"queue": settings.crawl_task_queue},
            "fptrack.recheck_takedowns": {"queue": settings.crawl_task_queue},
        },
        include=["fptrack.jobs.crawl_tasks"],
    )
    if _runtime.get("settings") != settings:
        old = _runtime.get("engine")
        if old is not None:
            old.dispose()
        engine = create_engine_for(settings)
        _runtime.update(settings=settings, engine=engine, sessions=session_factory(engine))
    return celery


def workers_answering(timeout: float, queue: str | None = None, host: str | None = None) -> dict[str, list[str]]:
    """The workers that answer over the broker within ``timeout`` seconds, by node name, with the queues each
    consumes; only those consuming ``queue`` and running on ``host`` (the part after ``@``) when given.

    Broker errors propagate: a caller that must tell "no broker" from "no worker" can."""
    # a connection of its own to the broker configured now (the app's pooled one may predate a reconfigure)
    with celery.connection_for_write() as connection:
        replies = celery.control.inspect(timeout=timeout, connection=connection).active_queues() or {}
    answering = {name: sorted(q.get("name", "") for q in queues or ()) for name, queues in replies.items()}
    return {
        name: queues
        for name, queues in answering.items()
        if (queue is None or queue in queues) and (host is None or name.partition("@")[2] == host)
    }


def _settings() -> Settings:
    if "settings" not in _runtime:
        raise RuntimeError("jobs.tasks.configure(settings) was not called in this process")
    settings: Settings = _runtime["settings"]
    return settings


def _sessions() -> sessionmaker[Session]:
    _settings()
    sessions: sessionmaker[Session] = _runtime["sessions"]
    return sessions


@celery.task(name="fptrack.process_pages", **_RETRY_ON_DATABASE_ERRORS)  # type: ignore[untyped-decorator]
def process_pages(page_ids: list[int]) -> dict[str, list[int]]:
    """Fingerprint, index and compare a batch of stored pages; returns the ids done and their flagged pages.

    Idempotent: pages already compared, or being compared by another worker, are skipped; pages that are gone
    are logged and skipped."""
    with session_scope(_sessions()) as session:
        outcomes = service.process_pages(session, page_ids, _settings())
    done = {o.page_id for o in outcomes}
    if len(done) < len(set(page_ids)):
        log.info("process_pages: %d of %d page(s) needed nothing (done already, taken, or gone)",
                 len(set(page_ids)) - len(done), len(set(page_ids)))  # fmt: skip
    return {"done": sorted(done), "flagged": sorted(o.page_id for o in outcomes if o.matched_chapters)}


# Registered under the name earlier releases enqueued ("fptrack.fingerprint_page"), so their messages still run;
# it does more than fingerprint: the whole crawl stage for one page, like process_pages for a batch.
@celery.task(name="fptrack.fingerprint_page", **_RETRY_ON_DATABASE_ERRORS)  # type: ignore[untyped-decorator]
def process_one_page(page_id: int) -> int:
    """Fingerprint, index and compare one stored page; returns the number of chapters it copies."""
    with session_scope(_sessions()) as session:
        outcomes = service.process_pages(session, [page_id], _settings())
    return sum(len(o.matched_chapters) for o in outcomes)


@celery.task(name="fptrack.index_work", **_RETRY_ON_DATABASE_ERRORS)  # type: ignore[untyped-decorator]
def index_work(work_id: int) -> int:
    """Fingerprint a newly registered work and re-compare the pages crawled before it; returns the number of
    pages now flagged against it."""
    from fptrack.jobs.pipeline import index_and_recheck

    with session_scope(_sessions()) as session:
        return index_and_recheck(session, work_id, _settings())


@celery.task(name="fptrack.settle_site", **_RETRY_ON_DATABASE_ERRORS)  # type: ignore[untyped-decorator]
def settle_site(site_id: int) -> dict[str, int]:
    """Decide a site's template from all its pages and re-evaluate the pages it affects."""
    from fptrack.compare.templates import settle_site as settle

    with session_scope(_sessions()) as session:
        settled = settle(session, site_id, _settings())
    return {"template_codes": settled.template_codes, "recompared": settled.recompared}


@celery.task(name="fptrack.sweep", **{**_RETRY_ON_DATABASE_ERRORS, "max_retries": 3})  # type: ignore[untyped-decorator]
def sweep() -> dict[str, int]:
    """Hand on again what was left behind: pages stored and not compared, works registered and not indexed."""
    from fptrack.jobs.pipeline import sweep_left_behind

    settings = _settings()
    with session_scope(_sessions()) as session:
        left = sweep_left_behind(session, older_than_seconds=settings.sweep_after)
    for start in range(0, len(left.pages), PAGES_PER_TASK):
        process_pages.delay(left.pages[start : start + PAGES_PER_TASK])
    for work_id in left.works:
        index_work.delay(work_id)
    for site_id in left.sites:
        settle_site.delay(site_id)
    return {"pages": len(left.pages), "works": len(left.works), "sites": len(left.sites)}


@celery.task(name="fptrack.maintain", **{**_RETRY_ON_DATABASE_ERRORS, "max_retries": 3})  # type: ignore[untyped-decorator]
def maintain() -> dict[str, object]:
    """Periodic upkeep (Celery beat): re-split overloaded buckets, refresh the corpus statistics."""
    from fptrack.compare.maintenance import run_maintenance

    with session_scope(_sessions()) as session:
        return run_maintenance(session, _settings()).as_json()
