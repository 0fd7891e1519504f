"""What a re-crawl knows already: the pages stored for the crawl's sites, read once in bulk when it starts.

Only the crawl of a managed site (its crawl job's trigger is :data:`SITE_TRIGGERS`: ``fptrack sites run``,
a scheduled crawl, every process of a distributed one) is incremental; ``fptrack crawl URL`` fetches
everything it meets, as asked. A site crawl (crawler/spiders.py) follows a link to a known page only when
fetching it again can tell something new: a start URL, a listing (an entry page, a table of contents: it may
list new chapters), a page not stored successfully (an error, a status other than 200), or a page whose
flagged or confirmed match is due for a re-check (``matches.recheck_due_at`` NULL or past: a brand-new match
counts as due), or a page whose copy was seen down (a removal pending or recorded: a copy put back and linked
again is fetched, and recorded back, by the next crawl). Every other known page (a chapter page, fetched
already) is left to the re-check cadence (jobs/rechecks.py), not fetched by every crawl. Links the crawl has
not seen are followed as always.

A known copy (a flagged or confirmed match, not seen down) that the crawl never meets as a link has left its
listing: ``copies`` names them, and the spider fetches those it did not meet once its listings are read
(crawler/spiders.py), so a chapter taken off its table of contents is re-checked by the crawl that saw it go,
not an interval later. A removal seen once and awaiting its confirming fetch is among them too (the next crawl
confirms it); a removal recorded is not (a copy taken down and off its listing costs no request per crawl).

A site none of whose known pages is a listing (pages stored by earlier releases were never told apart) has all
its pages fetched again once, which sorts them.

Read in the same look: the sites an earlier crawl found built by scripts (``sites.render_direct``,
:mod:`crawler.render`), whose pages this crawl sends to the browser at once, and their known listings, which
were read without it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, exists, or_, select
from sqlalchemy.orm import Session, sessionmaker

from fptrack.storage.db import retry_in_session
from fptrack.storage.match_life import UNSETTLED_NOTE
from fptrack.storage.models import CrawlJob, Match, MatchStatus, Page, Site

__all__ = ["SITE_TRIGGERS", "KnownPages", "load_known_pages"]

_RECHECKED = (MatchStatus.FLAGGED.value, MatchStatus.CONFIRMED.value)
SITE_TRIGGERS = ("site", "schedule")  # crawl_jobs.trigger of a managed site's crawl (jobs.site_crawl)


@dataclass(frozen=True)
class KnownPages:
    """The known URLs of a crawl's sites that it does not fetch again (``settled``); any other URL is fetched.
    ``total`` counts every known URL (for the crawl's stats)."""

    settled: frozenset[str] = frozenset()
    total: int = 0
    # site keys whose pages earlier crawls found built by scripts (sites.render_direct)
    render_hosts: frozenset[str] = frozenset()
    # known listings (entry pages, tables of contents): read plainly even on those sites
    listings: frozenset[str] = frozenset()
    # settled pages holding a followed copy, and pages whose removal awaits its confirming fetch: fetched by
    # the crawl when it no longer links them
    copies: frozenset[str] = frozenset()

    def fetch(self, url: str) -> bool:
        """Whether a link to ``url`` is worth a request in this crawl."""
        return url not in self.settled


def load_known_pages(
    sessions: sessionmaker[Session], hosts: Iterable[str], now: datetime, *, job_id: int | None = None
) -> KnownPages:
    """The pages stored for the sites ``hosts`` (site keys, :func:`storage.sites.site_of`), sorted into those
    to fetch again and the rest (see the module docstring), in one query. With ``job_id``: nothing (every page
    is fetched) unless that crawl job is a managed site's (its trigger)."""
    keys = sorted({host for host in hosts if host})
    if not keys:
        return KnownPages()
    due = exists().where(
        Match.page_id == Page.id,
        Match.status.in_(_RECHECKED),
        or_(Match.recheck_due_at.is_(None), Match.recheck_due_at <= now),
    )
    # a copy seen down (pending or recorded): fetched whenever linked, so that one put back is seen back
    down = exists().where(
        Match.page_id == Page.id,
        Match.status.in_(_RECHECKED),
        or_(Match.down_seen_at.is_not(None), Match.taken_down_at.is_not(None)),
    )
    followed = exists().where(Match.page_id == Page.id, Match.status.in_(_RECHECKED))
    pending = exists().where(
        Match.page_id == Page.id,
        Match.status.in_(_RECHECKED),
        Match.down_seen_at.is_not(None),
        Match.taken_down_at.is_(None),
    )

    def read(session: Session) -> KnownPages:
        trigger = select(CrawlJob.trigger).where(CrawlJob.id == job_id)
        if job_id is not None and session.scalar(trigger) not in SITE_TRIGGERS:
            return KnownPages()  # not a site crawl
        render_hosts = frozenset(
            str(host)
            for host in session.scalars(
                select(Site.host).where(Site.host.in_(keys), Site.render_direct.is_(True))
            )
        )
        rows = session.execute(
            select(
                Page.site_id,
                Page.url,
                Page.listing,
                and_(
                    Page.status == 200,
                    Page.error == "",
                    Page.listing.is_(False),
                    # read by the browser before its scripts were done: its text may be a placeholder
                    ~Page.note.contains(UNSETTLED_NOTE),
                    ~due,
                    ~down,
                ).label("settled"),
                followed.label("copy"),
                pending.label("pending"),
            )
            .join(Site, Site.id == Page.site_id)
            .where(Site.host.in_(keys))
        )
        total = 0
        listings: set[str] = set()
        settled: dict[int, set[str]] = {}
        copies: set[str] = set()  # removals pending their confirmation
        settled_copies: set[str] = set()
        sorted_sites: set[int] = set()  # sites with a listing among their pages: their pages were sorted
        for site_id, url, listing, is_settled, is_copy, is_pending in rows:
            total += 1
            if is_pending:
                copies.add(str(url))
            if listing:
                sorted_sites.add(int(site_id or 0))
                listings.add(str(url))
            if is_settled:
                settled.setdefault(int(site_id or 0), set()).add(str(url))
                if is_copy:
                    settled_copies.add(str(url))
        kept = frozenset(url for site_id in sorted_sites for url in settled.get(site_id, ()))
        return KnownPages(
            settled=kept,
            total=total,
            render_hosts=render_hosts,
            listings=frozenset(listings),
            copies=frozenset(copies) | (frozenset(settled_copies) & kept),
        )

    return retry_in_session(sessions, read, what="reading the pages the crawl knows")
