"""Retroactive detection: a newly registered work indexed, and the pages crawled before it that may copy it
compared again, site by site (``jobs.tasks.index_work``, ``fptrack works add``). Idempotent: a work whose
``works.indexed_at`` is unset is handed on again by the sweep (:mod:`jobs.sweep`)."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from fptrack.compare.service import ChapterDocuments, Recomparison, index_work, recompare_pages
from fptrack.compare.templates import settle_pages
from fptrack.core.settings import Settings
from fptrack.storage.chunks import id_chunks
from fptrack.storage.match_life import COPYING_STATUSES
from fptrack.storage.models import Match, Page, Work, utcnow

__all__ = ["RECHECK_BATCH", "index_and_recheck"]

RECHECK_BATCH = 64


def index_and_recheck(
    session: Session,
    work_id: int,
    settings: Settings,
    *,
    fingerprinted: ChapterDocuments | None = None,
    gated: list[int] | None = None,
) -> int:
    """Index a registered work (``fingerprinted``: its chapters' fingerprints as
    :func:`compare.service.fingerprint_work` wrote and committed them), compare again the pages crawled before
    it that may copy it, each with its site's settled template (:func:`compare.templates.settle_pages`: a
    site's other pages keep their verdicts, a site never settled or changed since is settled whole); returns
    the number of pages now copying the work. The pages that copy none of it go through the meaning path's
    gate (:func:`jobs.meaning.gate_retroactive`); the ids of the checks it left pending are added to
    ``gated``."""
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
    if settings.meaning:
        from fptrack.jobs.meaning import gate_retroactive

        checks = gate_retroactive(session, candidates, work_id, settings)
        if gated is not None:
            gated.extend(checks)
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
