"""``/crawls``: every crawl run (newest first) with its site, limits and outcome, for operators."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flask import Blueprint, render_template
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from admin.views.context import db_session
from storage.models import CrawlJob, Match, Page, Site

__all__ = ["CrawlRow", "blueprint", "crawl_rows"]

blueprint = Blueprint("crawls", __name__, url_prefix="/crawls")
LIMIT = 200


@dataclass(frozen=True)
class CrawlRow:
    id: int
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


def crawl_rows(session: Session, limit: int = LIMIT) -> list[CrawlRow]:
    """The latest crawl jobs with the number of their pages that copy a registered work."""
    matched = (
        select(Page.crawl_job_id, func.count(func.distinct(Match.page_id)).label("n"))
        .join(Match, Match.page_id == Page.id)
        .group_by(Page.crawl_job_id)
        .subquery("matched")
    )
    query = (
        select(CrawlJob, Site.host, func.coalesce(matched.c.n, 0))
        .outerjoin(Site, Site.id == CrawlJob.site_id)
        .outerjoin(matched, matched.c.crawl_job_id == CrawlJob.id)
        .order_by(CrawlJob.started_at.desc(), CrawlJob.id.desc())
        .limit(limit)
    )
    return [_row(job, host, count) for job, host, count in session.execute(query)]


def _row(job: CrawlJob, host: str | None, matched: Any) -> CrawlRow:
    return CrawlRow(
        id=job.id,
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
    return render_template("crawls.html", crawls=crawl_rows(db_session()), limit=LIMIT)
