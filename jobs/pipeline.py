"""The stages around the compare service that span many pages: retroactive checks of a newly registered work,
settling the sites a batch of work touched, and the sweep for what was left behind.

Every page and work records how far it got (``pages.compared_at``, ``works.indexed_at``); anything stored and
not finished after ``FPTRACK_SWEEP_AFTER`` seconds is handed on again (:func:`sweep_left_behind`, run by
``fptrack maintain``, by Celery beat and by a crawl waiting on its pages). Handing on again is always safe:
the stages are idempotent."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from fptrack.compare.networks import page_simhash
from fptrack.compare.service import Recomparison, compare_document, index_work, recompare_pages
from fptrack.compare.templates import settle_pages, settle_site
from fptrack.core.settings import Settings
from fptrack.fingerprint.text_fingerprints import fingerprint_text
from fptrack.storage.chunks import id_chunks
from fptrack.storage.db import retry_in_session, session_scope
from fptrack.storage.match_life import COPYING_STATUSES
from fptrack.storage.models import CrawlJob, CrawlJobStatus, Match, Page, Site, Work, utcnow

__all__ = [
    "WARM_UP_PAGE",
    "LeftBehind",
    "index_and_recheck",
    "settle_crawled_sites",
    "settle_sites",
    "sweep_left_behind",
    "unsettled_sites",
    "warm_up",
]

log = logging.getLogger(__name__)

RECHECK_BATCH = 64
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def settle_sites(session: Session, site_ids: Iterable[int], settings: Settings) -> int:
    """Settle every site in ``site_ids``; returns the number of pages compared again."""
    return sum(settle_site(session, site_id, settings).recompared for site_id in sorted(set(site_ids)))


def settle_crawled_sites(
    sessions: sessionmaker[Session], site_ids: Iterable[int], settings: Settings
) -> None:
    """Settle a crawl's sites in a transaction of their own, tried again while the database is unreachable
    (settling is idempotent): in the crawl's process, or in its compare process (jobs.stage_process)."""
    retry_in_session(sessions, lambda session: settle_sites(session, site_ids, settings),
                     what="settling the crawl's sites")  # fmt: skip


WARM_UP_PAGE = "青石巷里的老槐树下，住着一位修伞的老人。他说 Chapter 1 的故事要从 2026 年讲起。" * 8
"""Han, Latin and digits; longer than a page must be to get a Simhash (``networks.MIN_PAGE_CHARS``)."""


def warm_up(sessions: sessionmaker[Session], settings: Settings) -> None:
    """Load in this process what comparing its first page would load: the normaliser's and the pinyin
    initials' per-code-point tables, rjieba's dictionary (the page Simhash), and the registry's codes
    (:mod:`compare.chapter_index`, read by comparing a sample page; reads only). A registry that cannot be
    read now is left to the first page, which says why."""
    document = fingerprint_text(WARM_UP_PAGE)
    page_simhash(WARM_UP_PAGE)
    try:
        with session_scope(sessions) as session:
            compare_document(session, document, settings)
    except Exception:  # the first page loads it, and reports what fails
        log.debug("reading the registry ahead of the first page failed", exc_info=True)


def index_and_recheck(
    session: Session, work_id: int, settings: Settings, *, fingerprinted: bool = False
) -> int:
    """Index a registered work (``fingerprinted``: its fingerprints are written and committed already:
    :func:`compare.service.fingerprint_work`), compare again the pages crawled before it that may copy it,
    each with its site's settled template (:func:`compare.templates.settle_pages`: a site's other pages keep
    their verdicts, a site never settled or changed since is settled whole); returns the number of pages now
    copying the work."""
    candidates = index_work(session, work_id, settings, fingerprinted=fingerprinted)
    by_site: dict[int | None, list[int]] = defaultdict(list)
    for chunk in id_chunks(candidates):
        for page_id, site_id in session.execute(select(Page.id, Page.site_id).where(Page.id.in_(chunk))):
            by_site[site_id].append(int(page_id))
    recomparison = Recomparison()  # a text on many pages (mirrors) is compared once
    for site_id, page_ids in sorted(by_site.items(), key=lambda item: item[0] or 0):
        if site_id is None:
            for start in range(0, len(page_ids), RECHECK_BATCH):
                chunk = page_ids[start : start + RECHECK_BATCH]
                recompare_pages(session, chunk, settings, recomparison=recomparison)
        else:
            settle_pages(session, site_id, sorted(page_ids), settings, recomparison=recomparison)
    session.execute(update(Work).where(Work.id == work_id).values(indexed_at=utcnow()))
    return _pages_copying(session, candidates, work_id)


def _pages_copying(session: Session, page_ids: list[int], work_id: int) -> int:
    found: set[int] = set()
    for chunk in id_chunks(page_ids):
        found.update(
            session.scalars(
                select(Match.page_id).where(
                    Match.page_id.in_(chunk),
                    Match.work_id == work_id,
                    Match.status.in_(COPYING_STATUSES),
                )
            )
        )
    return len(found)


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


def unsettled_sites(session: Session) -> list[int]:
    """Sites with pages compared after the site last settled and no page waiting to be compared: ready to
    settle (a crawl settles its own sites; this catches pages compared by a sweep or a crawl that died)."""
    changed = (
        select(Page.id)
        .where(Page.site_id == Site.id, Page.compared_at > func.coalesce(Site.settled_at, _EPOCH))
        .exists()
    )
    waiting = select(Page.id).where(Page.site_id == Site.id, Page.compared_at.is_(None)).exists()
    return [int(s) for s in session.scalars(select(Site.id).where(changed, ~waiting).order_by(Site.id))]
