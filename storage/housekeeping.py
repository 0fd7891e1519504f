"""Deleting what fptrack created, and checking that nothing dangles."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, delete, exists, or_, select, text, update
from sqlalchemy.orm import Session

from fptrack.storage.chunks import id_chunks
from fptrack.storage.models import Fingerprint, Page, PageCodes, Work

__all__ = ["count_orphans", "delete_pages", "delete_works", "retire_page_fingerprints"]

RETIRE_BATCH = 5_000  # pages retired per statement group: short transactions on a large store


def delete_pages(session: Session, page_ids: Iterable[int]) -> int:
    """Delete pages with their fingerprints, ``page_codes`` rows and matches (cascading foreign keys)."""
    return _delete_by_id(session, Page, page_ids)


def delete_works(session: Session, work_ids: Iterable[int]) -> int:
    """Delete works with their chapters, fingerprints, index rows and matches (cascading foreign keys)."""
    deleted = _delete_by_id(session, Work, work_ids)
    session.expire_all()
    return deleted


def _delete_by_id(session: Session, model: type[Page | Work], ids: Iterable[int]) -> int:
    deleted = 0
    for chunk in id_chunks(ids):
        result = session.execute(delete(model).where(model.id.in_(chunk)))
        deleted += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return deleted


def retire_page_fingerprints(
    session: Session, *, gone_before: datetime | None, unseen_before: datetime | None
) -> int:
    """Drop the fingerprints (``page_codes``, a Simhash row) of pages gone for good: those that have answered
    gone (404, 410, 451) at every fetch since before ``gone_before`` (``Page.gone_since``: re-fetching the 404
    does not restart the count), and those nothing has fetched since ``unseen_before`` (None: that rule is
    off). Returns how many pages lost them.

    What a match, a review or a takedown rests on stays: the page row (URL, status, dates), its text, the kept
    versions and raw exchanges, the matches. Only what serves finding copies among stored pages goes: a newly
    registered work will not look for itself in a page that has answered 404 for a month, or that no crawl
    reaches any more. A retired page that a crawl fetches again is fingerprinted again like any new content.
    ``fingerprinted_at`` is cleared, so templates and look-ups skip it. A page whose last fetch replaced its
    text with a 404 already had ``fingerprinted_at`` cleared by the store, but its rows of the earlier text
    are still there: what is looked for is rows, not the flag."""
    conditions: list[ColumnElement[bool]] = []
    if gone_before is not None:
        conditions.append(Page.gone_since < gone_before)
    if unseen_before is not None:
        conditions.append(Page.fetched_at < unseen_before)
    if not conditions:
        return 0
    holds_rows = or_(
        Page.fingerprinted_at.is_not(None),
        exists().where(PageCodes.page_id == Page.id),
        exists().where(Fingerprint.page_id == Page.id),
    )
    retired = 0
    while True:
        ids = list(
            session.scalars(
                select(Page.id).where(or_(*conditions), holds_rows).order_by(Page.id).limit(RETIRE_BATCH)
            )
        )
        if not ids:
            return retired
        for chunk in id_chunks(ids):
            session.execute(delete(PageCodes).where(PageCodes.page_id.in_(chunk)))
            session.execute(delete(Fingerprint).where(Fingerprint.page_id.in_(chunk)))
            session.execute(update(Page).where(Page.id.in_(chunk)).values(fingerprinted_at=None))
        retired += len(ids)
        session.flush()


def count_orphans(bind: Session | Connection) -> dict[str, int]:
    """Rows that point at something that no longer exists (all zero in a healthy store)."""
    checks = {
        "code_index": "SELECT COUNT(*) FROM code_index c LEFT JOIN fingerprints f ON f.id = c.fingerprint_id "
        "WHERE f.id IS NULL",
        "simhash_hot_index": "SELECT COUNT(*) FROM simhash_hot_index h "
        "LEFT JOIN fingerprints f ON f.id = h.fingerprint_id WHERE f.id IS NULL",
        "page_codes": "SELECT COUNT(*) FROM page_codes c LEFT JOIN pages p ON p.id = c.page_id "
        "WHERE p.id IS NULL",
        "fingerprints": "SELECT COUNT(*) FROM fingerprints f LEFT JOIN pages p ON p.id = f.page_id "
        "LEFT JOIN chapters c ON c.id = f.chapter_id WHERE p.id IS NULL AND c.id IS NULL",
        "chapters": "SELECT COUNT(*) FROM chapters c LEFT JOIN works w ON w.id = c.work_id "
        "WHERE w.id IS NULL",
        "matches": "SELECT COUNT(*) FROM matches m LEFT JOIN pages p ON p.id = m.page_id "
        "LEFT JOIN chapters c ON c.id = m.chapter_id WHERE p.id IS NULL OR c.id IS NULL",
    }
    return {name: int(bind.execute(text(sql)).scalar() or 0) for name, sql in checks.items()}
