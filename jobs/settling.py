"""Settling sites: once a site's pages are compared, its template (the text every page shares) is set aside
and the chapters split over pages are joined (:mod:`compare.templates`), so that the matches are a function
of the set of pages, whatever the order or the number of workers. A crawl settles its own sites; the sweep
(:mod:`jobs.sweep`) finds those left unsettled."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from fptrack.compare.templates import settle_site
from fptrack.core.settings import Settings
from fptrack.storage.db import retry_in_session
from fptrack.storage.models import Page, Site

__all__ = ["settle_crawled_sites", "settle_sites", "unsettled_sites"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def settle_sites(session: Session, site_ids: Iterable[int], settings: Settings) -> int:
    """Settle every site in ``site_ids``; returns the number of pages compared again."""
    return sum(settle_site(session, site_id, settings).recompared for site_id in sorted(set(site_ids)))


def settle_crawled_sites(
    sessions: sessionmaker[Session], site_ids: Iterable[int], settings: Settings
) -> None:
    """Settle a crawl's sites in a transaction of their own, tried again while the database is unreachable
    (settling is idempotent): in the crawl's process, or in its compare process (jobs.stage_process)."""
    retry_in_session(
        sessions, lambda session: settle_sites(session, site_ids, settings), what="settling the crawl's sites"
    )


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
