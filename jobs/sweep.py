"""The sweep for what was left behind: every page and work records how far it got (``pages.compared_at``,
``works.indexed_at``); anything stored and not finished after ``FPTRACK_SWEEP_AFTER`` seconds is handed on
again (:func:`sweep_left_behind`, run by ``fptrack maintain``, by Celery beat and by a crawl waiting on its
pages), with the sites ready to settle. Handing on again is always safe: the stages are idempotent."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from fptrack.jobs.settling import unsettled_sites
from fptrack.storage.models import CrawlJob, CrawlJobStatus, Page, Work, utcnow

__all__ = ["LeftBehind", "sweep_left_behind"]


@dataclass(frozen=True)
class LeftBehind:
    pages: list[int]
    works: list[int]
    sites: list[int]  # sites with pages compared since they last settled, and none pending


def sweep_left_behind(
    session: Session, *, older_than_seconds: float, limit: int = 100_000, skip_running: bool = False
) -> LeftBehind:
    """Pages stored with text and not compared, and works registered and not indexed, for longer than
    ``older_than_seconds``. With ``skip_running``, pages of crawls still running are left to them (they hand
    their pages on themselves): an explicit ``fptrack maintain`` takes what the crawls that ended left,
    however recent, while the periodic sweep waits ``FPTRACK_SWEEP_AFTER`` for everything."""
    cutoff = utcnow() - timedelta(seconds=older_than_seconds)
    query = select(Page.id).where(Page.compared_at.is_(None), Page.fetched_at <= cutoff)
    if skip_running:
        running = select(CrawlJob.id).where(CrawlJob.status == CrawlJobStatus.RUNNING.value)
        query = query.where(or_(Page.crawl_job_id.is_(None), Page.crawl_job_id.not_in(running)))
    pages = list(session.scalars(query.order_by(Page.id).limit(limit)))
    works = list(
        session.scalars(
            select(Work.id).where(Work.indexed_at.is_(None), Work.created_at <= cutoff).order_by(Work.id)
        )
    )
    return LeftBehind([int(p) for p in pages], [int(w) for w in works], unsettled_sites(session))
