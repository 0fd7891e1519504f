"""Crawl runs as the rest of the system sees them: the claims that keep one crawl per site at a time, the sign
of life of a one-off crawl, the reaping of crawls that died, and a site's crawl started in a process of its
own.

Claims (``monitor_locks`` rows, :mod:`storage.locks`) are rows, not in-memory flags, so they hold across
processes and machines: ``site:<id>`` (:func:`jobs.sites.site_lock_name`) for a site's crawl, held by the one
process that crawls it; ``crawl:<random>`` (:func:`crawl_lock_name`) for a one-off ``fptrack crawl``, no
exclusion, only a sign of life. The crawl's process refreshes its claim's heartbeat (:func:`kept_alive`); a
claim without a heartbeat for ``FPTRACK_CRAWL_STALE_SECONDS`` (or whose process is gone, on the same machine)
belonged to a crawl that died: the next crawl or the scheduler's tick (:func:`reap_dead_claims`) marks its job
failed, and the site runs again when next due.

:func:`spawn_site_crawl` starts ``python -m fptrack.jobs.site_crawl NAME`` (:mod:`jobs.site_crawl`, the crawl
itself) and returns at once: the scheduler (:func:`jobs.tasks.start_due_crawls`) and the admin's "run now" use
it. Its output goes to ``<data dir>/logs/site-<id>.log``."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import delete
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.settings import Settings
from fptrack.jobs.sites import site_lock_name
from fptrack.storage.db import session_scope
from fptrack.storage.locks import dead_locks, drop_lock, refresh_lock, take_lock
from fptrack.storage.models import CrawlJob, CrawlJobStatus, MonitorLock, as_utc, utcnow

__all__ = [
    "SITE_CRAWL_MODULE",
    "claim",
    "collect_finished_crawls",
    "crawl_lock_name",
    "heartbeat",
    "kept_alive",
    "one_off_claim",
    "reap_dead_claims",
    "release",
    "spawn_site_crawl",
    "start_mark_name",
]

log = logging.getLogger(__name__)

SITE_CRAWL_MODULE = "fptrack.jobs.site_crawl"
"""What :func:`spawn_site_crawl` runs with ``python -m`` (:mod:`jobs.site_crawl`)."""
# the claims of crawls: a site's (jobs.sites.site_lock_name) and a one-off crawl's (crawl_lock_name)
_CRAWL_CLAIM_PREFIXES = ("site:", "crawl:")
_children: list[subprocess.Popen[bytes]] = []


def crawl_lock_name(key: str) -> str:
    """The claim a one-off crawl (``fptrack crawl``) holds while it runs: no exclusion, only a sign of life,
    so that a crawl whose process was killed is marked failed instead of staying "running" for ever."""
    return f"crawl:{key}"


# ------------------------------------------------------------------------------------------------ claims


def start_mark_name(site_id: int) -> str:
    """The mark the admin's "run now" leaves while the crawl it started has not claimed the site yet (a
    second click meanwhile is refused); the crawl's :func:`claim` removes it. Not a crawl's claim: the reaper
    leaves it alone."""
    return f"site-start:{site_id}"


def claim(session: Session, site_id: int, settings: Settings, *, now: datetime | None = None) -> str | None:
    """Claim the right to crawl a site; returns the claim's token, or None when a live crawl holds it. A claim
    whose holder died is taken over (its job is marked failed first). A "run now" mark is removed."""
    now = now or utcnow()
    name = site_lock_name(site_id)
    reap_dead_claims(session, settings, now=now, names=[name])
    token = take_lock(session, name, now)
    if token is not None:
        session.execute(delete(MonitorLock).where(MonitorLock.name == start_mark_name(site_id)))
    session.flush()
    return token


def heartbeat(session: Session, site_id: int, token: str, *, job_id: int | None = None) -> bool:
    """Refresh a site's claim (and tie it to its job); False when the claim was lost (taken over as dead)."""
    return refresh_lock(session, site_lock_name(site_id), token, job_id=job_id)


def release(session: Session, site_id: int, token: str) -> None:
    """Give up a site's claim held with ``token``."""
    drop_lock(session, site_lock_name(site_id), token)


@contextmanager
def kept_alive(
    sessions: sessionmaker[Session], settings: Settings, name: str, token: str
) -> Iterator[Callable[[int], None]]:
    """Keep the claim ``name`` alive while the body runs (a thread refreshes its heartbeat a few times per
    ``FPTRACK_CRAWL_STALE_SECONDS``) and release it after. Yields ``started(job_id)``, which ties the claim to
    the crawl job once the job exists: a claim that stops beating marks that job failed
    (:func:`reap_dead_claims`)."""
    stop = threading.Event()
    job_ids: list[int] = []

    def beat() -> None:
        every = max(1.0, min(10.0, settings.crawl_stale_seconds / 4))
        while not stop.wait(every):
            try:
                with session_scope(sessions) as session:
                    if not refresh_lock(session, name, token, job_id=job_ids[0] if job_ids else None):
                        log.error("the claim %s was lost (taken over as dead)", name)
            except Exception:  # a missed beat is retried; the crawl goes on
                log.exception("cannot refresh the claim %s", name)

    def started(job_id: int) -> None:
        job_ids.append(job_id)
        with session_scope(sessions) as session:
            refresh_lock(session, name, token, job_id=job_id)

    thread = threading.Thread(target=beat, name=f"claim-{name}", daemon=True)
    thread.start()
    try:
        yield started
    finally:
        stop.set()
        thread.join(timeout=5)
        with session_scope(sessions) as session:
            drop_lock(session, name, token)


@contextmanager
def one_off_claim(sessions: sessionmaker[Session], settings: Settings) -> Iterator[Callable[[int], None]]:
    """The sign of life of a one-off crawl (see :func:`crawl_lock_name`), kept while the body runs; yields the
    ``started(job_id)`` of :func:`kept_alive`. Taking it first reaps the claims of crawls that died."""
    now = utcnow()
    name = crawl_lock_name(uuid.uuid4().hex)
    with session_scope(sessions) as session:
        failed = reap_dead_claims(session, settings, now=now)
        if failed:
            log.warning(
                "marked failed the crawl job(s) %s, whose process died", ", ".join(f"#{j}" for j in failed)
            )
        token = take_lock(session, name, now)
    if token is None:  # a fresh random name is never held
        raise RuntimeError(f"cannot take the claim {name}")
    with kept_alive(sessions, settings, name, token) as started:
        yield started


def reap_dead_claims(
    session: Session, settings: Settings, *, now: datetime | None = None, names: Sequence[str] | None = None
) -> list[int]:
    """Drop the claims of crawls that died (no heartbeat for ``FPTRACK_CRAWL_STALE_SECONDS``, or their process
    is gone): a site's crawl or a one-off crawl; mark their jobs failed and return those job ids."""
    now = now or utcnow()
    stale_before = now - timedelta(seconds=settings.crawl_stale_seconds)
    failed: list[int] = []
    for lock in dead_locks(session, prefixes=_CRAWL_CLAIM_PREFIXES, stale_before=stale_before, names=names):
        job = session.get(CrawlJob, lock.job_id) if lock.job_id is not None else None
        if job is not None and job.status == CrawlJobStatus.RUNNING.value:
            again = (
                "run the crawl again"
                if lock.name.startswith("crawl:")
                else "the site runs again when next due"
            )
            job.status = CrawlJobStatus.FAILED.value
            job.error = (
                f"the crawl process ({lock.owner}) died: no sign of life since "
                f"{as_utc(lock.heartbeat_at).isoformat(timespec='seconds')}; {again}"
            )
            job.finished_at = now
            failed.append(int(job.id))
        log.warning("dropping the claim %s of a crawl that died (%s)", lock.name, lock.owner)
        session.delete(lock)
    session.flush()
    return failed


# ------------------------------------------------------------------------------------ in its own process


def collect_finished_crawls() -> None:
    """Collect the exit status of the crawls this process started (no zombie processes under a long-lived
    worker; a zombie would also pass for alive in :func:`storage.locks.owner_is_dead`)."""
    _children[:] = [child for child in _children if child.poll() is None]


def spawn_site_crawl(
    site_id: int, name: str, *, settings: Settings | None = None, scheduled: bool = True
) -> subprocess.Popen[bytes]:
    """Start the crawl of the site ``name`` in a process of its own (:mod:`jobs.site_crawl`) and return at
    once: the scheduler's (trigger ``schedule``), or the admin's "run now" with ``scheduled=False`` (trigger
    ``site``). ``settings``: the caller's, or those of the Celery worker. The child's output goes to ``<data
    dir>/logs/site-<id>.log``."""
    from fptrack.taskqueue import task_settings

    settings = settings or task_settings()
    collect_finished_crawls()
    env = dict(os.environ)
    env.update(FPTRACK_DATA_DIR=str(settings.data_dir), FPTRACK_DATABASE_URL=settings.database_url)
    logs = Path(settings.data_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[1]
    with open(logs / f"site-{site_id}.log", "ab") as output:
        child = subprocess.Popen(
            [sys.executable, "-m", SITE_CRAWL_MODULE, name, *(["--scheduled"] if scheduled else [])],
            env=env,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a worker restart (SIGTERM to its group) does not kill the crawl
        )
    _children.append(child)
    return child
