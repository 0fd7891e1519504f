"""Scheduled monitoring as a Celery beat task: start the site crawls that are due, each in a process of its own.

``fptrack beat`` (or ``fptrack worker --beat``) sends :func:`start_due_crawls` every ``FPTRACK_SCHEDULE_EVERY``
seconds to the crawl queue (``Settings.crawl_task_queue``), so it runs on a crawler (``fptrack crawler``) or on a worker
started without ``--no-crawls``, and the crawls it starts run on that machine. The task drops
the claims of crawls that died (their jobs are marked failed), takes the turn of every due site (a compare-and-set
on ``sites.next_crawl_at``), and starts ``python -m fptrack.cli sites run NAME --scheduled`` for each: Scrapy's
reactor runs once per process, and a crawl must survive the task that started it. The child claims the site
(at most one crawl per site at a time) and records a crawl job (trigger ``schedule``) with its status, progress,
stats and errors. Its output goes to ``<data dir>/logs/site-<id>.log``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fptrack.jobs.tasks import _sessions, _settings, celery
from fptrack.storage.db import session_scope
from fptrack.core.settings import Settings

__all__ = ["recheck_takedowns", "spawn_site_crawl", "start_due_crawls"]

log = logging.getLogger(__name__)
_children: list[subprocess.Popen[bytes]] = []


def _reap_children() -> None:
    """Collect the exit status of crawls started earlier (no zombie processes under a long-lived worker)."""
    _children[:] = [child for child in _children if child.poll() is None]


def spawn_site_crawl(
    site_id: int, name: str, *, settings: Settings | None = None, scheduled: bool = True
) -> subprocess.Popen[bytes]:
    """Start ``fptrack sites run NAME`` in a process of its own and return at once (the scheduler, and the
    admin's "run now" with ``scheduled=False``, recorded as trigger ``site``). ``settings``: the caller's, or
    those of the Celery worker."""
    settings = settings or _settings()
    _reap_children()
    env = dict(os.environ)
    env.update(FPTRACK_DATA_DIR=str(settings.data_dir), FPTRACK_DATABASE_URL=settings.database_url)
    logs = Path(settings.data_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[1]
    with open(logs / f"site-{site_id}.log", "ab") as output:
        child = subprocess.Popen(
            [sys.executable, "-m", "fptrack.cli", "sites", "run", name, "--quiet", *(["--scheduled"] if scheduled else [])],
            env=env, cwd=root, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,  # a worker restart (SIGTERM to its group) does not kill the crawl
        )  # fmt: skip
    _children.append(child)
    return child


@celery.task(name="fptrack.start_due_crawls")  # type: ignore[untyped-decorator]
def start_due_crawls() -> dict[str, Any]:
    """Mark dead crawls failed, then start every due site's crawl in a process of its own."""
    from fptrack.jobs.sites import due_sites, reap_dead_claims

    _reap_children()
    with session_scope(_sessions()) as session:
        failed = reap_dead_claims(session, _settings())
    with session_scope(_sessions()) as session:
        due = due_sites(session)
    started = []
    for site_id, name in due:
        try:
            child = spawn_site_crawl(site_id, name)
        except OSError as error:
            log.error("cannot start the crawl of site %s: %s", name, error)
            continue
        log.info("started the scheduled crawl of site %s (pid %d)", name, child.pid)
        started.append(name)
    return {"started": started, "dead_jobs_failed": failed}


@celery.task(name="fptrack.recheck_takedowns")  # type: ignore[untyped-decorator]
def recheck_takedowns() -> dict[str, object]:
    """Re-check the pages of flagged and confirmed matches that are due (jobs/rechecks.py): one run at a time
    (the ``recheck:takedowns`` claim); a run that finds the claim held does nothing."""
    from fptrack.jobs.rechecks import run_due_rechecks

    summary = run_due_rechecks(_settings(), _sessions())
    if summary.skipped:
        log.info("takedown re-checks skipped: %s", summary.skipped)
    else:
        log.info("takedown re-checks: %d match(es) on %d page(s): %s", summary.matches, summary.pages,
                 dict(summary.outcomes))  # fmt: skip
    return summary.as_json()
