"""``/crawls``: every crawl run (newest first) with its site, limits and outcome, for operators;
``/crawls/<id>``: one run's progress, counters and recorded failures."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flask import Blueprint, abort, render_template
from flask_babel import gettext
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.admin.views.read_sessions import read_session
from fptrack.storage.models import CrawlJob, Match, Page, Site

__all__ = ["CrawlRow", "blueprint", "crawl_rows"]

blueprint = Blueprint("crawls", __name__, url_prefix="/crawls")
LIMIT = 200


@dataclass(frozen=True)
class CrawlRow:
    id: int
    site_id: int | None
    trigger: str
    host: str
    start_urls: tuple[str, ...]
    depth: int
    max_pages: int
    status: str
    started_at: datetime
    finished_at: datetime | None
    pages_seen: int
    pages_failed: int
    pages_matched: int
    error: str


def crawl_rows(
    session: Session, limit: int = LIMIT, *, site_id: int | None = None, job_id: int | None = None
) -> list[CrawlRow]:
    """The latest crawl jobs (of one site, with ``site_id``) with the number of their pages that copy a
    registered work: a finished job's own count, or, while it runs, its stored pages that have matches
    (counted for the unfinished jobs listed only, so the page stays cheap beside a million matches)."""
    query = (
        select(CrawlJob, Site.host)
        .outerjoin(Site, Site.id == CrawlJob.site_id)
        .order_by(CrawlJob.started_at.desc(), CrawlJob.id.desc())
        .limit(limit)
    )
    if site_id is not None:
        query = query.where(CrawlJob.site_id == site_id)
    if job_id is not None:
        query = query.where(CrawlJob.id == job_id)
    jobs = session.execute(query).all()
    unfinished = [job.id for job, _ in jobs if job.finished_at is None]
    matched: dict[int, int] = {}
    if unfinished:
        counts = (
            select(Page.crawl_job_id, func.count(func.distinct(Match.page_id)))
            .join(Match, Match.page_id == Page.id)
            .where(Page.crawl_job_id.in_(unfinished))
            .group_by(Page.crawl_job_id)
        )
        matched = {job_id: int(count) for job_id, count in session.execute(counts) if job_id is not None}
    return [_row(job, host, matched.get(job.id, 0)) for job, host in jobs]


def _row(job: CrawlJob, host: str | None, matched: Any) -> CrawlRow:
    return CrawlRow(
        id=job.id,
        site_id=job.site_id,
        trigger=job.trigger,
        host=host or "",
        start_urls=tuple(str(url) for url in job.start_urls or ()),
        depth=job.depth,
        max_pages=job.max_pages,
        status=job.status,
        started_at=job.started_at,
        finished_at=job.finished_at,
        pages_seen=job.pages_seen,
        pages_failed=job.pages_failed,
        # a finished crawl counts what it saw itself (re-crawled pages included, concurrent crawls apart); the
        # pages it last stored are only a running crawl's best guess
        pages_matched=int(job.copies_found) if job.finished_at is not None else int(matched),
        error=job.error,
    )


@blueprint.get("")
def index() -> str:
    return render_template("crawls.html", crawls=crawl_rows(read_session()), limit=LIMIT)


@blueprint.get("/<int:job_id>")
def detail(job_id: int) -> str:
    """One crawl: its progress (pages fetched of the limit), its counters and the failures it recorded."""
    session = read_session()
    job = session.get(CrawlJob, job_id)
    if job is None:
        abort(404, description=gettext("There is no crawl with id %(id)s.", id=job_id))
    site = session.get(Site, job.site_id) if job.site_id is not None else None
    row = crawl_rows(session, limit=1, job_id=job_id)[0]
    return render_template("crawl.html", crawl=row, job=job, site=site, stats=job.stats or {})
