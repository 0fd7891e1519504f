"""Persisting crawled pages in batches, then handing the ones to compare on (enqueue after commit).

A :class:`PageStore` is what :class:`crawler.pipelines.PersistPipeline` writes through. One transaction per
batch: the batch's sites are upserted, its pages upserted by URL (``INSERT ... ON CONFLICT (url) DO UPDATE``,
so two crawls meeting one URL at once never collide), and only after the commit are the ids of the pages that
need comparing handed to ``dispatch``.

Dedupe by content: a page fetched again with the same status and the same text keeps its fingerprints, matches
and ``compared_at`` and is not compared again ("unchanged"); a page whose text changed loses ``compared_at``
and is compared again (its matches keep their history). A page that was stored and never compared (a lost
task, a dead worker) is handed on again whatever its content.

Conditional re-crawls (:mod:`crawler.conditional`): a page's ``ETag`` and ``Last-Modified`` are stored with it
(:meth:`PageStore.site_validators` reads a site's back in bulk for the next crawl's requests); a ``304 Not
Modified`` answer keeps the page as stored (text, fingerprints, matches, ``compared_at``), moves its
``fetched_at`` and counts as unchanged.

Raw exchanges: a page handed on with its HTTP exchange (:class:`storage.exchanges.RawExchange`, captured by
:class:`crawler.pipelines.PersistPipeline`) keeps it in the same transaction when it is to be compared (its
content is new or changed) or already has matches (a match may rest on this fetch); the compare step drops the
exchanges of pages that turn out to have no match (:func:`storage.exchanges.prune_exchanges`).

Cloud-drive share links a page names (:mod:`crawler.leads`) are recorded as leads in the batch's
transaction (:func:`storage.leads.record_share_links`): one way in every run mode, since every crawl stores
through here."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from sqlalchemy import case, func, literal, null, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.dml import ReturningInsert

from fptrack.core.settings import Settings
from fptrack.crawler.leads import ShareLink
from fptrack.crawler.pages import CrawledPage
from fptrack.storage.db import retry_in_session
from fptrack.storage.exchanges import RawExchange, keep_exchanges, prune_exchanges
from fptrack.storage.leads import record_share_links
from fptrack.storage.match_life import GONE_STATUSES, keep_versions, observe_fetches, pages_with_matches
from fptrack.storage.models import Page, Site, utcnow
from fptrack.storage.sites import site_ids, site_of

__all__ = ["PageStore", "StoreCounts"]

log = logging.getLogger(__name__)

BATCH_SIZE = 32


@dataclass
class StoreCounts:
    stored: int = 0  # pages written (new or changed, with or without text)
    unchanged: int = 0  # fetched again with the same content, already compared
    to_compare: int = 0  # handed to dispatch
    page_ids: set[int] = field(default_factory=set)  # every page this crawl stored or saw unchanged
    site_ids: set[int] = field(default_factory=set)

    def add(self, other: StoreCounts) -> None:
        """Fold in the counts of one committed batch."""
        self.stored += other.stored
        self.unchanged += other.unchanged
        self.to_compare += other.to_compare
        self.page_ids |= other.page_ids
        self.site_ids |= other.site_ids


class PageStore:
    """Buffers crawled pages and writes them a batch at a time (see the module docstring)."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        job_id: int | None,
        dispatch: Callable[[list[int]], None],
        batch_size: int = BATCH_SIZE,
        executor: Executor | None = None,
        settings: Settings,
    ) -> None:
        self.sessions = sessions
        self.settings = settings  # observing matches needs the re-check cadence
        self.job_id = job_id
        self.dispatch = dispatch
        self.batch_size = batch_size
        self.counts = StoreCounts()
        self._buffer: list[CrawledPage] = []
        self._exchanges: dict[str, RawExchange] = {}  # URL -> the raw exchange of the buffered page
        self._executor = executor
        self._pending: list[Future[None]] = []

    def add(self, page: CrawledPage, exchange: RawExchange | None = None) -> bool:
        """Buffer a page (and the HTTP exchange it was read from, kept while a match may rest on it); True
        when the batch is full and should be flushed."""
        self._buffer.append(page)
        if exchange is not None:
            self._exchanges[page.url] = exchange
        else:
            self._exchanges.pop(page.url, None)
        return len(self._buffer) >= self.batch_size

    def flush(self) -> None:
        """Write the buffered pages in one transaction, then dispatch the ids that need comparing (with an
        executor: in its thread, in order, while the caller goes on; :meth:`drain` waits for them)."""
        if not self._buffer:
            return
        batch, self._buffer = self._buffer, []
        exchanges, self._exchanges = self._exchanges, {}
        if self._executor is None:
            self._store(batch, exchanges)
        else:
            self._pending = [f for f in self._pending if not f.done() or f.exception() is not None]
            self._pending.append(self._executor.submit(self._store, batch, exchanges))

    def drain(self) -> None:
        """Wait for the batches handed to the executor; raise the first failure (its pages were either not
        stored, or stored and not compared: the sweep picks those up)."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def validators(self, url: str) -> tuple[str, str]:
        """``(etag, last_modified)`` of the stored page at ``url`` (``''`` for none): what a conditional
        request sends back. Only a page stored from a 200 response has them."""

        def read(session: Session) -> tuple[str, str]:
            row = session.execute(
                select(Page.etag, Page.last_modified).where(Page.url == url[:2048], Page.status == 200)
            ).first()
            return (str(row[0] or ""), str(row[1] or "")) if row is not None else ("", "")

        return retry_in_session(self.sessions, read, what=f"reading the validators of {url}")

    def site_validators(self, site: str, limit: int) -> dict[str, tuple[str, str]] | None:
        """The stored pages of ``site`` (a site key) with validators: URL -> ``(etag, last_modified)``, in one
        query; None when the site has more than ``limit`` of them (then :meth:`validators` per page)."""

        def read(session: Session) -> dict[str, tuple[str, str]] | None:
            rows = session.execute(
                select(Page.url, Page.etag, Page.last_modified)
                .join(Site, Site.id == Page.site_id)
                .where(
                    Site.host == site,
                    Page.status == 200,
                    (Page.etag != "") | (Page.last_modified != ""),
                )
                .limit(limit + 1)
            ).all()
            if len(rows) > limit:
                return None
            return {str(url): (str(etag or ""), str(modified or "")) for url, etag, modified in rows}

        return retry_in_session(self.sessions, read, what=f"reading the validators of {site}")

    def _store(self, batch: list[CrawledPage], exchanges: Mapping[str, RawExchange] | None = None) -> None:
        # A database restarted meanwhile costs a pause, not the batch: the write is an upsert, safe to run
        # again, and the batch's counts reach the crawl's only once committed.
        def write(session: Session) -> tuple[list[int], StoreCounts]:
            counts = StoreCounts()
            return self._write(session, batch, counts, exchanges), counts

        to_compare, counts = retry_in_session(
            self.sessions, write, what=f"storing a batch of {len(batch)} page(s)"
        )
        counts.to_compare = len(to_compare)
        self.counts.add(counts)
        if to_compare:
            self.dispatch(to_compare)

    def _write(
        self,
        session: Session,
        batch: Sequence[CrawledPage],
        counts: StoreCounts,
        exchanges: Mapping[str, RawExchange] | None = None,
    ) -> list[int]:
        # one row per URL: a batch may hold a URL twice (a start URL that is also linked): the last fetch wins
        latest = {page.url: page for page in batch}
        now = utcnow()
        before = pages_with_matches(session, [url[:2048] for url in latest])
        not_modified = [p for p in latest.values() if p.not_modified]
        to_compare = self._touch_not_modified(session, not_modified, counts)
        # a 304 says the content as stored (and compared) is still what the page shows
        seen_again = [
            b.page_id
            for p in not_modified
            if (b := before.get(p.url[:2048])) is not None
            and b.status == 200
            and b.has_text
            and b.page_id not in to_compare
        ]
        latest = {url: page for url, page in latest.items() if not page.not_modified}
        if not latest:
            observe_fetches(session, seen_again, {}, self.settings, now)
            return to_compare
        # the content a match rests on is kept before the upsert replaces it
        replaced = [
            b.page_id
            for url, page in latest.items()
            if (b := before.get(url[:2048])) is not None
            and (b.status != page.status or b.content_sha256 != page.content_sha256)
        ]
        if replaced:
            keep_versions(session, replaced, now=now)
        keys = {url: site_of(page.final_url) or site_of(url) for url, page in latest.items()}
        sites = site_ids(session, keys.values())
        rows = []
        for url, page in latest.items():
            comparable = page.status == 200 and bool(page.text.strip())
            rows.append(
                {
                    "url": url[:2048],
                    "final_url": page.final_url[:2048],
                    "host": keys[url][:255],
                    "status": page.status,
                    "encoding": page.encoding[:40],
                    "title": page.title,
                    "text": page.text,
                    "content_sha256": page.content_sha256,
                    "snapshot_sha256": page.snapshot_sha256,
                    "fetched_at": page.fetched_at,
                    "gone_since": page.fetched_at if page.status in GONE_STATUSES else None,
                    "error": page.error,
                    "note": page.note,
                    "next_part_url": page.next_part_url[:2048],
                    "listing": page.listing,
                    "crawl_job_id": self.job_id,
                    "site_id": sites.get(keys[url]),
                    # nothing to compare: done as soon as stored (the sweep never waits for it)
                    "compared_at": None if comparable else now,
                    "template_masked": False,
                    "etag": page.etag,
                    "last_modified": page.last_modified,
                }
            )
        upsert = _page_upsert(session.get_bind().dialect.name)
        waiting = {row["url"] for row in rows if row["compared_at"] is None}  # stored with text to compare
        by_stored_url = {url[:2048]: page for url, page in latest.items()}
        answered: dict[int, int] = {}  # page id -> the status it answered, for pages gone or in error
        kept: list[tuple[int, RawExchange]] = []  # the exchanges a match may rest on (module docstring)
        exchanges = exchanges or {}
        share_links: list[tuple[int, datetime, Sequence[ShareLink]]] = []  # recorded as leads
        for page_id, url, compared_at in session.execute(upsert, rows):
            fetched, held = by_stored_url[url], before.get(url)
            if fetched.share_links:
                share_links.append((int(page_id), fetched.fetched_at, fetched.share_links))
            if held is not None:
                if fetched.status != 200:
                    answered[held.page_id] = fetched.status
                elif (
                    fetched.text.strip()
                    and compared_at is not None
                    and held.status == 200
                    and held.content_sha256 == fetched.content_sha256
                ):
                    seen_again.append(held.page_id)
                # a changed text is observed by its comparison; no text (a failed rendering) tells nothing
            counts.page_ids.add(int(page_id))
            exchange = exchanges.get(fetched.url)
            if exchange is not None and fetched.status == 200 and (compared_at is None or held is not None):
                kept.append((int(page_id), exchange))
            if compared_at is None:
                to_compare.append(int(page_id))
                counts.stored += 1
            elif url in waiting:
                counts.unchanged += 1
            else:
                counts.stored += 1
        counts.site_ids.update(v for v in sites.values())
        record_share_links(session, share_links)
        if kept:
            keep_exchanges(session, kept)
            # a page with matches fetched again: the exchange of the fetch it no longer shows goes, unless a
            # version kept of it records that fetch (pages to compare are pruned by their comparison)
            waiting_ids = set(to_compare)
            prune_exchanges(session, [page_id for page_id, _ in kept if page_id not in waiting_ids])
        observe_fetches(session, seen_again, answered, self.settings, now)
        return sorted(to_compare)

    def _touch_not_modified(
        self, session: Session, pages: Sequence[CrawledPage], counts: StoreCounts
    ) -> list[int]:
        """Pages answered ``304 Not Modified``: only ``fetched_at`` (and the crawl job) move; unchanged. A
        page stored and never compared (a lost task) is handed on again, as a fetch with the same content
        would be."""
        to_compare: list[int] = []
        for page in pages:
            row = session.execute(
                update(Page)
                .where(Page.url == page.url[:2048])
                .values(fetched_at=page.fetched_at, crawl_job_id=self.job_id)
                .returning(Page.id, Page.compared_at, Page.site_id)
            ).first()
            if row is None:
                continue  # a 304 for a page never stored: nothing to keep
            counts.page_ids.add(int(row[0]))
            if row[2] is not None:
                counts.site_ids.add(int(row[2]))
            if row[1] is None:
                to_compare.append(int(row[0]))
                counts.stored += 1
            else:
                counts.unchanged += 1
        return to_compare


@lru_cache(maxsize=2)
def _page_upsert(dialect: str) -> ReturningInsert[int, str, datetime | None]:
    """The upsert of a batch of pages on ``dialect`` (``INSERT ... ON CONFLICT (url) DO UPDATE``, see the
    module docstring), returning each page's id, URL and ``compared_at``. One statement for every batch, its
    rows as parameters (SQLAlchemy's "insertmanyvalues"): compiled once and cached, where a VALUES clause of
    the batch's rows was compiled anew for each batch; built once too."""
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    statement = insert(Page)
    new = statement.excluded
    unchanged = (Page.content_sha256 == new.content_sha256) & (Page.status == new.status)
    return statement.on_conflict_do_update(
        index_elements=[Page.url],
        set_={
            "final_url": new.final_url,
            "host": new.host,
            "status": new.status,
            "encoding": new.encoding,
            "title": new.title,
            "text": new.text,
            "content_sha256": new.content_sha256,
            "snapshot_sha256": new.snapshot_sha256,
            "fetched_at": new.fetched_at,
            # a page still gone keeps the time it first answered so; any other answer clears it
            "gone_since": case(
                (new.gone_since.is_(None), null()), else_=func.coalesce(Page.gone_since, new.gone_since)
            ),
            "error": new.error,
            "note": new.note,
            "next_part_url": new.next_part_url,
            "listing": new.listing,
            "crawl_job_id": new.crawl_job_id,
            "site_id": new.site_id,
            "compared_at": case(
                (new.compared_at.is_not(None), new.compared_at),
                (unchanged, Page.compared_at),
                else_=null(),
            ),
            "fingerprinted_at": case((unchanged, Page.fingerprinted_at), else_=null()),
            "template_masked": case((unchanged, Page.template_masked), else_=literal(False)),
            "etag": new.etag,
            "last_modified": new.last_modified,
        },
    ).returning(Page.id, Page.url, Page.compared_at)
