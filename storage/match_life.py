"""A copy's life: what every fetch of a page tells about its matches, recorded without ever erasing one.

A match is found once and then followed. Every fetch of its page, by a crawl of the site or by the takedown
re-check, is an *observation* of each of the page's matches, one of :data:`storage.models.TAKEDOWN_OUTCOMES`:

- ``present``: the page still copies the chapter (its text may have changed: an edited copy is still a copy);
- ``gone``: the page answers 404, 410 or 451, or its host no longer exists;
- ``removed``: the page answers with a text, through the same fetch and rendering path the crawl uses, that no
  longer carries the chapter;
- ``error``: the fetch could not tell (5xx, a timeout, a challenge page, a refusal). Never a removal.

A removal is recorded only once confirmed: the first ``gone`` or ``removed`` sets ``down_seen_at`` and makes
the page due again ``FPTRACK_RECHECK_CONFIRM_AFTER`` seconds later; a second one at least that much later
confirms it, and ``taken_down_at`` becomes the time of the first (when the copy was first seen down). A
``present`` in between clears the pending removal. A copy found ``present`` after its takedown came back: it
keeps its match, its id and its first-seen, and ``taken_down_at`` is cleared (the checks keep the history).

Every observation is a ``takedown_checks`` row (with ``source``: crawl or recheck). The match carries the
latest (``rechecked_at``, ``recheck_state``) and the next time its page is due for a re-check
(``recheck_due_at``): every ``FPTRACK_RECHECK_YOUNG_EVERY`` seconds while the copy is younger than
``FPTRACK_RECHECK_YOUNG_FOR`` (hourly in its first day by default), every ``FPTRACK_RECHECK_AFTER`` after.

The text a match rests on is never overwritten either: before a fetch replaces the content of a page that has
matches resting on its current text, that content is kept as a :class:`storage.models.PageVersion` and the
matches point at it (``evidence_version_id``); a comparison that finds the copy again in the new text points
them back at the page (:func:`rest_on_page`). :func:`evidence_of` reads the text a match's spans point into.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import exists, select, update
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.chunks import id_chunks
from fptrack.storage.compressed import has_text
from fptrack.storage.models import Match, MatchStatus, Page, PageVersion, TakedownCheck, as_utc, utcnow

__all__ = [
    "COPYING_STATUSES",
    "DOWN_OUTCOMES",
    "GONE_STATUSES",
    "IMAGES_UNREAD_NOTE",
    "INFRINGING_STATUSES",
    "UNSETTLED_MARK",
    "UNSETTLED_NOTE",
    "Evidence",
    "HeldPage",
    "Observation",
    "ObserveSummary",
    "evidence_of",
    "keep_versions",
    "next_due",
    "observe",
    "observe_fetches",
    "pages_with_matches",
    "replan_due",
    "rest_on_page",
]

# the statuses of a match whose page copies its work (any but dismissed): what "pages copying a work" counts
COPYING_STATUSES = (MatchStatus.FLAGGED, MatchStatus.LICENSED, MatchStatus.CONFIRMED)
# of those, the copies made without a licence (licensed ones are the rights holder's own sites): what a crawl
# reports as the copies it found, and what takedown re-checks follow
INFRINGING_STATUSES = (MatchStatus.FLAGGED, MatchStatus.CONFIRMED)
DOWN_OUTCOMES = frozenset({"gone", "removed"})
# the answers that say a page is gone: removed, or withheld for legal reasons (451)
GONE_STATUSES = frozenset({404, 410, 451})
# A page rendered in the browser whose scripts were still fetching when it was read (its network never went
# quiet within FPTRACK_RENDER_IDLE_WAIT: a JSON waiting for the site's pace, a slow server) may show a loading
# placeholder instead of the chapter: it proves nothing about a removal. The crawl's browser marks the DOM
# with this attribute, the parser notes it on the page (pages.note), and a removal is never observed from it.
UNSETTLED_MARK = "data-fptrack-unsettled"
UNSETTLED_NOTE = "rendered while its requests were still running"
IMAGES_UNREAD_NOTE = "chapter images not read"
"""A page note: the page's chapter is drawn as images that this fetch could not read (no OCR engine, an image
failed): its text tells nothing about a removal, as an unsettled rendering's does not."""


@dataclass(frozen=True)
class Observation:
    """What one fetch of a page found for one of its matches."""

    match_id: int
    outcome: str  # one of TAKEDOWN_OUTCOMES
    http_status: int | None = None
    detail: str = ""
    source: str = "recheck"  # CHECK_SOURCES


@dataclass
class ObserveSummary:
    """What :func:`observe` changed: removals confirmed now, removals seen once (awaiting confirmation), and
    copies that came back after a takedown."""

    confirmed: int = 0
    pending: int = 0
    back: int = 0


def next_due(settings: Settings, first_seen: datetime, now: datetime) -> datetime:
    """When a copy first seen at ``first_seen`` is due for its next re-check after one at ``now``: often while
    it is young, then less often."""
    young = as_utc(now) - as_utc(first_seen) < timedelta(seconds=settings.recheck_young_for)
    every = settings.recheck_young_every if young else settings.recheck_after
    return now + timedelta(seconds=every)


def replan_due(session: Session, settings: Settings, now: datetime) -> int:
    """Bring forward the stored due times the current cadence no longer allows: a copy whose
    ``recheck_due_at`` lies further from its last check than ``FPTRACK_RECHECK_YOUNG_EVERY`` (while young) or
    ``FPTRACK_RECHECK_AFTER`` says (a shorter cadence set after it was planned) is due at its last check plus
    the current interval. A pending removal (``down_seen_at``) keeps its confirmation time. Only late due
    times are read: none unless the cadence was shortened. Returns how many were moved; the caller commits."""
    young_since = now - timedelta(seconds=settings.recheck_young_for)
    followed = (
        Match.status.in_([s.value for s in INFRINGING_STATUSES]),
        Match.down_seen_at.is_(None),
        Match.rechecked_at.is_not(None),
    )
    late = [
        # young copies planned further than the young interval from now, and older ones past the long one
        (Match.first_seen > young_since, now + timedelta(seconds=settings.recheck_young_every)),
        (Match.first_seen <= young_since, now + timedelta(seconds=settings.recheck_after)),
    ]
    moved = 0
    for age, horizon in late:
        rows = session.execute(
            select(Match.id, Match.first_seen, Match.rechecked_at, Match.recheck_due_at)
            .where(*followed, age, Match.recheck_due_at > horizon)
            .order_by(Match.id)
        ).all()
        for match_id, first_seen, rechecked_at, due_at in rows:
            if rechecked_at is None or due_at is None:  # excluded by the query
                continue
            due = next_due(settings, first_seen, as_utc(rechecked_at))
            if due < as_utc(due_at):
                session.execute(update(Match).where(Match.id == match_id).values(recheck_due_at=due))
                moved += 1
    return moved


def observe(
    session: Session,
    observations: Sequence[Observation],
    settings: Settings,
    *,
    now: datetime | None = None,
) -> ObserveSummary:
    """Record ``observations`` (see the module docstring); the caller commits."""
    now = now or utcnow()
    summary = ObserveSummary()
    ids = sorted({o.match_id for o in observations})
    matches: dict[int, Match] = {}
    for chunk in id_chunks(ids):
        # rows locked in id order: a crawl and a re-check observing the same matches never deadlock
        for row in session.scalars(
            select(Match).where(Match.id.in_(chunk)).order_by(Match.id).with_for_update()
        ):
            matches[row.id] = row
    confirm_after = timedelta(seconds=settings.recheck_confirm_after)
    for observation in observations:
        match = matches.get(observation.match_id)
        if match is None:
            continue  # deleted with its work meanwhile: nothing left to follow
        session.add(
            TakedownCheck(
                match_id=match.id,
                checked_at=now,
                outcome=observation.outcome,
                http_status=observation.http_status,
                detail=observation.detail[:2000],
                source=observation.source,
            )
        )
        match.rechecked_at = now
        match.recheck_state = observation.outcome
        due = next_due(settings, match.first_seen, now)
        if observation.outcome == "present":
            if match.taken_down_at is not None:
                summary.back += 1
            match.taken_down_at = None
            match.down_seen_at = None
            match.last_seen = now
        elif observation.outcome in DOWN_OUTCOMES:
            if match.taken_down_at is None:
                if match.down_seen_at is None:
                    match.down_seen_at = now
                    summary.pending += 1
                    due = now + confirm_after
                elif now - as_utc(match.down_seen_at) >= confirm_after:
                    match.taken_down_at = match.down_seen_at
                    match.down_seen_at = None
                    summary.confirmed += 1
                else:
                    # seen down again too soon to confirm: wait for the confirming fetch
                    due = as_utc(match.down_seen_at) + confirm_after
        else:  # error: the fetch could not tell; a pending removal still waits for its confirmation
            if match.down_seen_at is not None:
                due = now + confirm_after
        match.recheck_due_at = due
    session.flush()
    return summary


@dataclass(frozen=True)
class HeldPage:
    """A stored page with matches, as it is before a batch of fetches is written over it."""

    page_id: int
    status: int
    content_sha256: str
    has_text: bool


def pages_with_matches(session: Session, urls: Sequence[str]) -> dict[str, HeldPage]:
    """The stored pages among ``urls`` that have matches, as they are now (URL -> page): what a crawl about to
    store new fetches of them must keep (:func:`keep_versions`) and observe (:func:`observe_fetches`)."""
    found: dict[str, HeldPage] = {}
    has_matches = exists().where(Match.page_id == Page.id)
    for start in range(0, len(urls), 500):
        rows = session.execute(
            # the text is stored compressed: SQL tells only an empty one, which is what the crawler stores
            # for a page without text (parse.py keeps no line of spaces alone)
            select(Page.url, Page.id, Page.status, Page.content_sha256, has_text(Page.text)).where(
                Page.url.in_(urls[start : start + 500]), has_matches
            )
        )
        for url, page_id, status, sha, with_text in rows:
            found[str(url)] = HeldPage(int(page_id), int(status), str(sha or ""), bool(with_text))
    return found


def observe_fetches(
    session: Session, seen_again: Sequence[int], answered: dict[int, int], settings: Settings, now: datetime
) -> None:
    """Record what a crawl's fetches tell about the matches of ``seen_again`` (pages showing the content they
    were compared at: ``present``, or still ``removed``) and ``answered`` (page id -> an answer other than
    200: ``gone`` or ``error``). A page whose text changed is observed by its comparison instead."""
    page_ids = sorted({*seen_again, *answered})
    if not page_ids:
        return
    again = set(seen_again)
    observations: list[Observation] = []
    for chunk in id_chunks(page_ids):
        rows = session.execute(
            select(Match.id, Match.page_id, Match.evidence_version_id, Match.recheck_state)
            .where(Match.page_id.in_(chunk))
            .order_by(Match.id)
        )
        for match_id, page_id, version_id, state in rows:
            status = answered.get(page_id)
            if status is not None:
                outcome = "gone" if status in GONE_STATUSES else "error"
                observations.append(
                    Observation(match_id, outcome, status, f"HTTP {status} (crawl)", source="crawl")
                )
            elif page_id in again and version_id is None:
                observations.append(
                    Observation(match_id, "present", 200, "unchanged (crawl)", source="crawl")
                )
            elif page_id in again and state == "removed":
                # the page still shows the text compared before, which no longer carried the chapter
                observations.append(
                    Observation(match_id, "removed", 200, "still without the chapter (crawl)", source="crawl")
                )
    if observations:
        observe(session, observations, settings, now=now)


def keep_versions(session: Session, page_ids: Iterable[int], *, now: datetime | None = None) -> int:
    """Before the content of ``page_ids`` is replaced: keep, as a version, the current content of each page
    that has a match resting on it (``evidence_version_id`` NULL), and point those matches at the version.
    Returns how many matches were pointed. A page whose content is already kept as a version (same hash)
    reuses it."""
    now = now or utcnow()
    pointed = 0
    for chunk in id_chunks(sorted(set(page_ids))):
        resting = exists().where(Match.page_id == Page.id, Match.evidence_version_id.is_(None))
        pages = session.execute(
            select(
                Page.id,
                Page.status,
                Page.final_url,
                Page.title,
                Page.text,
                Page.content_sha256,
                Page.snapshot_sha256,
                Page.encoding,
                Page.fetched_at,
            ).where(Page.id.in_(chunk), resting)
        ).all()
        for page in pages:
            version_id = session.scalar(
                select(PageVersion.id).where(
                    PageVersion.page_id == page.id, PageVersion.content_sha256 == page.content_sha256
                )
            )
            if version_id is None:
                version = PageVersion(
                    page_id=page.id,
                    status=page.status,
                    final_url=page.final_url,
                    title=page.title,
                    text=page.text,
                    content_sha256=page.content_sha256,
                    snapshot_sha256=page.snapshot_sha256,
                    encoding=page.encoding,
                    fetched_at=page.fetched_at,
                    replaced_at=now,
                )
                session.add(version)
                session.flush()
                version_id = version.id
            result = session.execute(
                update(Match)
                .where(Match.page_id == page.id, Match.evidence_version_id.is_(None))
                .values(evidence_version_id=version_id)
            )
            pointed += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return pointed


def rest_on_page(session: Session, match_ids: Iterable[int]) -> None:
    """The copy was found again in its page's current text (with fresh spans): the matches rest on the page,
    no longer on a kept version (the version stays, as the record of the earlier copy)."""
    for chunk in id_chunks(sorted(set(match_ids))):
        session.execute(update(Match).where(Match.id.in_(chunk)).values(evidence_version_id=None))


@dataclass(frozen=True)
class Evidence:
    """The text a match's spans point into, and where it came from."""

    text: str
    title: str
    final_url: str
    status: int
    content_sha256: str
    snapshot_sha256: str
    fetched_at: datetime
    version_id: int | None  # None: the page's current content


def evidence_of(session: Session, match: Match) -> Evidence:
    """The content ``match`` rests on: its kept version when it names one, else its page's current
    content."""
    if match.evidence_version_id is not None:
        version = session.get(PageVersion, match.evidence_version_id)
        if version is not None:
            return Evidence(
                version.text,
                version.title,
                version.final_url,
                version.status,
                version.content_sha256,
                version.snapshot_sha256,
                as_utc(version.fetched_at),
                version.id,
            )
    page = match.page
    return Evidence(
        page.text,
        page.title,
        page.final_url,
        page.status,
        page.content_sha256,
        page.snapshot_sha256,
        as_utc(page.fetched_at),
        None,
    )
