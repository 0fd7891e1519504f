"""The compare service: fingerprint pages and chapters, find candidates in the store, verify, record matches.

Every function takes an open :class:`~sqlalchemy.orm.Session` and leaves committing to the caller (a task, a CLI
command, a test), so one unit of work either lands whole or not at all.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from compare.boilerplate import Boilerplate, find_boilerplate
from compare.documents import Document, analyse
from compare.licensing import is_licensed, licensed_hosts
from compare.scoring import Evidence, decide_with, evidence_of
from compare.verify import align
from storage.index import IndexLayout
from storage.models import Chapter, Match, Page, Work, utcnow
from storage.repository import Owner, code_candidates, replace_fingerprints, simhash_candidates
from storage.settings import Settings

__all__ = [
    "Verdict",
    "compare_document",
    "fingerprint_page",
    "index_work",
    "layout_for",
    "recompare_page",
    "record_matches",
]

MAX_CANDIDATES = 12
MIN_SHARED = {"dna": 2, "winnow": 2, "winnow_py": 2}
METHOD_NAMES = {"dna": "pinyin_dna", "winnow": "winnowing", "winnow_py": "winnowing_pinyin"}


@dataclass(frozen=True)
class Verdict:
    """How a document relates to one chapter; ``spans`` are ``(doc_start, doc_end, work_start, work_end)`` in
    characters of the original document and the original work text."""

    work_id: int
    work_title: str
    chapter_id: int
    chapter_index: int
    chapter_title: str
    score: float
    copied_chars: int
    methods: tuple[str, ...]
    spans: tuple[tuple[int, int, int, int], ...]
    flagged: bool
    evidence: Evidence = field(default=Evidence(0, 0.0, 0), compare=False)


def layout_for(settings: Settings) -> IndexLayout:
    return IndexLayout(64, settings.simhash_k, settings.simhash_blocks)


def find_candidates(
    session: Session,
    document: Document,
    layout: IndexLayout,
    *,
    owner: Owner,
    exclude_id: int | None = None,
    limit: int | None = MAX_CANDIDATES,
) -> dict[int, set[str]]:
    """Owner ids that share fingerprints with ``document``, each with the methods that found it."""
    found: dict[int, set[str]] = defaultdict(set)
    for hit in simhash_candidates(session, document.simhash, layout, owner=owner, exclude_id=exclude_id):
        found[hit.owner_id].add("simhash")
    votes: dict[int, int] = defaultdict(int)
    for kind, pairs in document.index_codes().items():
        counts = code_candidates(session, kind, (code for code, _ in pairs), owner=owner)
        for owner_id, shared in counts.items():
            if owner_id != exclude_id and shared >= MIN_SHARED[kind]:
                found[owner_id].add(METHOD_NAMES[kind])
                votes[owner_id] += shared
    ranked = sorted(found, key=lambda o: ("simhash" not in found[o], -votes[o], o))
    return {o: found[o] for o in ranked[:limit]}


@lru_cache(maxsize=4096)
def chapter_document(text: str) -> Document:
    """A chapter's analysis, kept per process: chapters are verified against many pages and never change."""
    return analyse(text)


def verify(
    document: Document,
    chapter: Chapter,
    chapter_doc: Document,
    methods: set[str],
    ignore: np.ndarray | None = None,
) -> Verdict:
    alignment = align(document.text, chapter_doc.text, document.initials, chapter_doc.initials, ignore=ignore)
    evidence = evidence_of(alignment)
    decision = decide_with(evidence)
    spans = []
    for p_start, p_end, c_start, c_end in alignment.runs:
        page_span = document.normalized.original_span(p_start, p_end)
        chapter_span = chapter_doc.normalized.original_span(c_start, c_end)
        spans.append((*page_span, chapter.start + chapter_span[0], chapter.start + chapter_span[1]))
    return Verdict(
        work_id=chapter.work_id,
        work_title=chapter.work.title,
        chapter_id=chapter.id,
        chapter_index=chapter.index,
        chapter_title=chapter.title,
        score=decision.score,
        copied_chars=decision.copied_chars,
        methods=tuple(sorted(methods)),
        spans=tuple(spans),
        flagged=decision.flagged,
        evidence=evidence,
    )


def compare_document(
    session: Session,
    document: Document,
    settings: Settings,
    *,
    page: Page | None = None,
    boilerplate: Boilerplate | None = None,
) -> list[Verdict]:
    """Verdicts for every candidate chapter of ``document``, best first (flagged or not).

    With the stored ``page`` the document comes from, text repeated across pages of its site is ignored too
    (see :mod:`compare.boilerplate`); formulas shared by many registered chapters always are.
    """
    candidates = find_candidates(session, document, layout_for(settings), owner="chapter")
    if not candidates:
        return []
    if boilerplate is None:
        boilerplate = find_boilerplate(
            session,
            document,
            page_id=page.id if page is not None else None,
            page_url=page.url if page else None,
        )
    ignore = boilerplate.mask
    chapters = session.scalars(select(Chapter).where(Chapter.id.in_(list(candidates)))).all()
    verdicts = [verify(document, c, chapter_document(c.text), candidates[c.id], ignore) for c in chapters]
    return sorted(verdicts, key=lambda v: (-v.flagged, -v.score, v.chapter_id))


def fingerprint_page(session: Session, page_id: int, settings: Settings) -> list[Match]:
    """Fingerprint a stored page, index it, compare it with every registered chapter and record the matches."""
    page = session.get(Page, page_id)
    if page is None:
        raise LookupError(f"no page with id {page_id}")
    document = analyse(page.text)
    replace_fingerprints(
        session,
        owner="page",
        owner_id=page.id,
        layout=layout_for(settings),
        simhash=document.simhash,
        codes=document.index_codes(),
    )
    return _compare_and_record(session, page, document, settings)


def recompare_page(session: Session, page_id: int, settings: Settings) -> list[Match]:
    """Compare an already fingerprinted page again (after new works were registered)."""
    page = session.get(Page, page_id)
    if page is None:
        raise LookupError(f"no page with id {page_id}")
    return _compare_and_record(session, page, analyse(page.text), settings)


def _compare_and_record(
    session: Session, page: Page, document: Document, settings: Settings, *, recheck_site: bool = True
) -> list[Match]:
    if not document.text:
        return record_matches(session, page, [])
    boilerplate = find_boilerplate(session, document, page_id=page.id, page_url=page.url)
    verdicts = compare_document(session, document, settings, page=page, boilerplate=boilerplate)
    matches = record_matches(session, page, verdicts)
    if recheck_site and boilerplate.pages_with_template:
        # This page revealed a site template that quotes a registered work; the site's pages compared before
        # it was known may hold matches made of that template alone: compare them again, now knowing it.
        stale = session.scalars(
            select(Match.page_id)
            .where(Match.page_id.in_(sorted(boilerplate.pages_with_template)), Match.status == "flagged")
            .distinct()
        ).all()
        for other_id in stale:
            other = session.get(Page, other_id)
            if other is not None:
                _compare_and_record(session, other, analyse(other.text), settings, recheck_site=False)
    return matches


def record_matches(session: Session, page: Page, verdicts: list[Verdict]) -> list[Match]:
    """Upsert the flagged verdicts of a page as matches; drop flagged matches that no longer hold.

    A match keeps its ``first_seen`` and its review status across re-crawls.
    """
    existing = {m.chapter_id: m for m in session.scalars(select(Match).where(Match.page_id == page.id))}
    now = utcnow()
    kept: list[Match] = []
    licensed: dict[int, bool] = {}
    for verdict in verdicts:
        if not verdict.flagged:
            continue
        if verdict.work_id not in licensed:
            licensed[verdict.work_id] = is_licensed(page.url, licensed_hosts(session, verdict.work_id))
        status = "licensed" if licensed[verdict.work_id] else "flagged"
        match = existing.pop(verdict.chapter_id, None)
        if match is None:
            match = Match(
                page_id=page.id,
                work_id=verdict.work_id,
                chapter_id=verdict.chapter_id,
                first_seen=now,
                status=status,
            )
            session.add(match)
        elif match.status in ("flagged", "licensed"):
            match.status = status  # a reviewer's decision (confirmed, dismissed) stands
        match.score = verdict.score
        match.methods = list(verdict.methods)
        match.spans = [list(span) for span in verdict.spans]
        match.last_seen = now
        kept.append(match)
    stale = [m.id for m in existing.values() if m.status in ("flagged", "licensed")]
    if stale:
        session.execute(delete(Match).where(Match.id.in_(stale)))
    session.flush()
    return kept


def index_work(session: Session, work_id: int, settings: Settings) -> list[int]:
    """Fingerprint and index every chapter of a work; returns the ids of already-crawled pages that share
    fingerprints with it (retroactive detection re-compares those pages)."""
    work = session.get(Work, work_id)
    if work is None:
        raise LookupError(f"no work with id {work_id}")
    layout = layout_for(settings)
    pages: set[int] = set()
    for chapter in work.chapters:
        document = chapter_document(chapter.text)
        replace_fingerprints(
            session,
            owner="chapter",
            owner_id=chapter.id,
            layout=layout,
            simhash=document.simhash,
            codes=document.index_codes(),
        )
        pages.update(find_candidates(session, document, layout, owner="page", limit=None))
    return sorted(pages)
