"""Cloud-drive share links kept as leads (``share_leads``, ``share_lead_sightings``): recorded where a crawled
page is stored, listed, reviewed.

A lead is one share, ``(platform, share_id)``, however many pages name it: its first and last sighting, its
extraction code (the first one seen), and each page it was seen on with the text around it. Recording is an
upsert keyed on those pairs, so storing the same page again (a re-crawl, a batch written twice) adds nothing.

Which work a lead is a lead of:

1. the registered work whose title the text around the link names (the longest title of two or more
   characters found in it), fixed when first named (``work_id``, basis ``title``);
2. otherwise the works of the matches (any status but dismissed) on the pages it was seen on (basis
   ``page``), read when listed: a page compared later, or a work registered later and found on the page by
   retroactive detection, counts without anything recorded again, in every run mode alike."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import case, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from fptrack.core.errors import FptrackError
from fptrack.storage.models import (
    LEAD_STATES,
    Match,
    MatchStatus,
    Page,
    ShareLead,
    ShareLeadSighting,
    Work,
    utcnow,
)

__all__ = [
    "LeadError",
    "LeadRow",
    "LeadSighting",
    "SeenLink",
    "list_leads",
    "record_share_links",
    "review_lead",
]

MIN_TITLE_CHARS = 2


class LeadError(FptrackError, ValueError):
    """A lead asked for that does not exist, or a state that is not one."""


class SeenLink(Protocol):
    """A share link as the crawler read it (:class:`crawler.leads.ShareLink`)."""

    @property
    def platform(self) -> str: ...
    @property
    def share_id(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def code(self) -> str: ...
    @property
    def context(self) -> str: ...


@dataclass(frozen=True)
class LeadSighting:
    page_id: int
    page_url: str
    context: str
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True)
class LeadRow:
    """A lead as listed: ``works`` are ``(work_id, title)`` pairs, ``basis`` says how they were found
    (``title``: named beside the link; ``page``: matched on a page it was seen on; '' when neither)."""

    id: int
    platform: str
    share_id: str
    url: str
    code: str
    state: str
    works: tuple[tuple[int, str], ...]
    basis: str
    first_seen: datetime
    last_seen: datetime
    sightings: tuple[LeadSighting, ...]

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "platform": self.platform,
            "share_id": self.share_id,
            "url": self.url,
            "code": self.code,
            "state": self.state,
            "works": [{"work_id": w, "work_title": t} for w, t in self.works],
            "basis": self.basis,
            "first_seen": self.first_seen.isoformat(),
            "last_seen": self.last_seen.isoformat(),
            "pages": [
                {
                    "page_url": s.page_url,
                    "context": s.context,
                    "first_seen": s.first_seen.isoformat(),
                    "last_seen": s.last_seen.isoformat(),
                }
                for s in self.sightings
            ],
        }


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _titled_work(titles: Sequence[tuple[int, str]], context: str) -> int | None:
    folded = _fold(context)
    named = [(len(title), work_id) for work_id, title in titles if title in folded]
    return max(named)[1] if named else None


def _insert(session: Session):  # type: ignore[no-untyped-def]
    return pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert


def record_share_links(session: Session, seen: Iterable[tuple[int, datetime, Sequence[SeenLink]]]) -> int:
    """Record the share links seen on stored pages (``(page_id, fetched_at, links)``) in the caller's
    transaction; the number of (lead, page) pairs written. Idempotent: leads and sightings are upserted, a
    sighting's ``last_seen`` moves to the latest fetch."""
    pairs = [(page_id, at, link) for page_id, at, links in seen for link in links]
    if not pairs:
        return 0
    titles = [
        (int(i), _fold(t))
        for i, t in session.execute(select(Work.id, Work.title))
        if len(_fold(t).strip()) >= MIN_TITLE_CHARS
    ]
    insert = _insert(session)
    lead_table = ShareLead.__table__
    sighting_table = ShareLeadSighting.__table__
    for page_id, now, link in pairs:
        statement = insert(lead_table).values(
            platform=link.platform[:20],
            share_id=link.share_id[:200],
            url=link.url[:2048],
            code=link.code[:20],
            work_id=_titled_work(titles, link.context),
            state="new",
            first_seen=now,
            last_seen=now,
            reviewed_by="",
        )
        excluded = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=["platform", "share_id"],
            set_={
                "last_seen": case(
                    (lead_table.c.last_seen < excluded.last_seen, excluded.last_seen),
                    else_=lead_table.c.last_seen,
                ),
                "code": case((lead_table.c.code == "", excluded.code), else_=lead_table.c.code),
                "work_id": func.coalesce(lead_table.c.work_id, excluded.work_id),
            },
        ).returning(lead_table.c.id)
        lead_id = int(session.execute(statement).scalar_one())
        seen_at = insert(sighting_table).values(
            lead_id=lead_id, page_id=page_id, context=link.context, first_seen=now, last_seen=now
        )
        session.execute(
            seen_at.on_conflict_do_update(
                index_elements=["lead_id", "page_id"],
                set_={
                    "context": seen_at.excluded.context,
                    "last_seen": case(
                        (sighting_table.c.last_seen < seen_at.excluded.last_seen, seen_at.excluded.last_seen),
                        else_=sighting_table.c.last_seen,
                    ),
                },
            )
        )
    return len(pairs)


def _page_works(session: Session, lead_ids: Sequence[int]) -> dict[int, set[tuple[int, str]]]:
    rows = session.execute(
        select(ShareLeadSighting.lead_id, Work.id, Work.title)
        .join(Match, Match.page_id == ShareLeadSighting.page_id)
        .join(Work, Work.id == Match.work_id)
        .where(ShareLeadSighting.lead_id.in_(lead_ids), Match.status != MatchStatus.DISMISSED.value)
        .distinct()
    )
    works: dict[int, set[tuple[int, str]]] = {}
    for lead_id, work_id, title in rows:
        works.setdefault(int(lead_id), set()).add((int(work_id), title))
    return works


def list_leads(
    session: Session,
    *,
    work_id: int | None = None,
    platform: str | None = None,
    state: str | None = None,
    lead_ids: Sequence[int] | None = None,
) -> list[LeadRow]:
    """The leads, latest seen first, filtered by the work they are a lead of, platform and state."""
    if state is not None and state not in LEAD_STATES:
        raise LeadError(f"unknown lead state {state!r} (one of: {', '.join(LEAD_STATES)})")
    query = select(ShareLead).order_by(ShareLead.last_seen.desc(), ShareLead.id.desc())
    if platform:
        query = query.where(ShareLead.platform == platform)
    if state:
        query = query.where(ShareLead.state == state)
    if lead_ids is not None:
        query = query.where(ShareLead.id.in_(lead_ids))
    leads = list(session.scalars(query))
    ids = [lead.id for lead in leads]
    named = {lead.work_id for lead in leads if lead.work_id is not None}
    titled = {int(i): t for i, t in session.execute(select(Work.id, Work.title).where(Work.id.in_(named)))}
    by_page = _page_works(session, ids) if ids else {}
    sightings: dict[int, list[LeadSighting]] = {}
    if ids:
        for lead_id, page_id, url, context, first, last in session.execute(
            select(
                ShareLeadSighting.lead_id,
                ShareLeadSighting.page_id,
                Page.url,
                ShareLeadSighting.context,
                ShareLeadSighting.first_seen,
                ShareLeadSighting.last_seen,
            )
            .join(Page, Page.id == ShareLeadSighting.page_id)
            .where(ShareLeadSighting.lead_id.in_(ids))
            .order_by(ShareLeadSighting.first_seen, ShareLeadSighting.id)
        ):
            sighting = LeadSighting(int(page_id), url, context, first, last)
            sightings.setdefault(int(lead_id), []).append(sighting)
    rows: list[LeadRow] = []
    for lead in leads:
        works: tuple[tuple[int, str], ...]
        if lead.work_id is not None and lead.work_id in titled:
            works, basis = ((lead.work_id, titled[lead.work_id]),), "title"
        elif lead.id in by_page:
            works, basis = tuple(sorted(by_page[lead.id])), "page"
        else:
            works, basis = (), ""
        if work_id is not None and work_id not in {w for w, _ in works}:
            continue
        rows.append(
            LeadRow(
                id=lead.id,
                platform=lead.platform,
                share_id=lead.share_id,
                url=lead.url,
                code=lead.code,
                state=lead.state,
                works=works,
                basis=basis,
                first_seen=lead.first_seen,
                last_seen=lead.last_seen,
                sightings=tuple(sightings.get(lead.id, ())),
            )
        )
    return rows


def review_lead(session: Session, lead_id: int, state: str, *, by: str = "") -> ShareLead:
    """A reviewer's decision on a lead: ``confirmed`` (it may go into a notice), ``dismissed`` or back to
    ``new``. Nothing is deleted."""
    if state not in LEAD_STATES:
        raise LeadError(f"unknown lead state {state!r} (one of: {', '.join(LEAD_STATES)})")
    lead = session.get(ShareLead, lead_id)
    if lead is None:
        raise LeadError(f"no lead {lead_id} (fptrack leads lists them)")
    lead.state = state
    lead.reviewed_at = utcnow()
    lead.reviewed_by = by[:200]
    return lead
