"""The meaning path's gate: which compared pages may be rewrites or translations, and of which chapters.

The exact path stays first and decides most pages: a copy, or unrelated text. The meaning path costs ~15-25 ms
of CPU a sentence (the model), so a page goes on to it only when

(a) the exact compare flagged nothing on it, and
(b) cheap features say "maybe":

- a page in Chinese (``compare.meaning.detect_language`` on its first :data:`LANGUAGE_SAMPLE` characters)
  with *near misses*: registered chapters that shared codes with it and were verified by the exact compare
  but fell below its bar (``compare.service.PageOutcome.near_misses``, known at no extra cost). A synonym
  rewrite keeps runs of 8+ characters here and there; unrelated Chinese text shares none with any chapter
  (codes many chapters hold are ignored);
- a page in Chinese that shares a code with some chapter, too few to verify (``PageOutcome.faint``: a rewrite
  that changed two thirds of the words and reordered its clauses may keep only that), and whose named
  entities point at registered chapters (as for other languages, below): one unrelated Chinese page in
  several hundred shares any code, so the entity look-up (tens of milliseconds) stays off the common path;
- a page in another language with chapters whose named entities it names (``compare.entities.candidates``:
  people, places, titles matched across scripts and romanizations), through :func:`entity_candidates`.

Pages shorter than :data:`MIN_LETTERS` letters never go (a passage that short covers no chapter). The
decision and its candidates are recorded as a pending ``meaning_checks`` row in the compare's own transaction,
one a page: a task delivered twice, a restart or a crash before the check finds it there and does the work
once; the page's text changed since (a re-crawl) makes the decision again.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.compare.meaning import detect_language
from fptrack.compare.service import PageOutcome
from fptrack.core.settings import Settings
from fptrack.storage.chunks import id_chunks
from fptrack.storage.models import MeaningCheck, utcnow

__all__ = [
    "EntityCandidates",
    "FaintCandidates",
    "GateDecision",
    "decide",
    "entity_candidates",
    "faint_candidates",
    "gate_pages",
]

LANGUAGE_SAMPLE = 4000
"""Characters of a page its language is told from: a page's language shows in its first lines, and a long
page (a whole book) costs no more than a chapter."""
MIN_LETTERS = 200
"""A page with fewer letters (in its first :data:`LANGUAGE_SAMPLE` characters) is never checked: 200 letters
are ~60 Han characters of English, under a tenth of a short chapter (``COVERAGE_MIN`` is 0.3)."""

FAINT_ASKED = 6
"""Of a Chinese page's faint chapters (``PageOutcome.faint``, those sharing the most codes first), how many
its named entities are scored against: ~2.4 ms of CPU each (their postings read)."""
FAINT_MIN_SCORE = 30.0
"""The entity score (``compare.entities``) a faint chapter needs: three times the bar of a translation's, as
the codes say little here. Chosen on the tune split (220 chapters of 西游记 and 三国演义 registered): the
own chapter of 39 of 40 tune ``rewrite_reorder`` pages scored 79.6-261, the one unrelated page in 560 (news,
水浒传) whose faint chapters passed ``MIN_SCORE`` scored 11.2."""

RECHECK = "recheck"
"""The reason of a check made only because the page holds meaning matches and its text changed."""

log = logging.getLogger(__name__)

EntityCandidates = Callable[[Session, str, int], list[tuple[int, float]]]


def entity_candidates(session: Session, text: str, limit: int) -> list[tuple[int, float]]:
    """``compare.entities.candidates``: the chapters whose named entities the page names, best first. None
    while that index is not installed (the module absent or not importable): the gate then sends no
    page in another language on."""
    try:
        entities = importlib.import_module("fptrack.compare.entities")
    except ImportError:
        return []
    try:
        with session.begin_nested():  # a failure rolls back this look-up alone, never the page's compare
            found: list[tuple[int, float]] = entities.candidates(session, text, limit)
    except Exception:  # the gate must never fail the compare stage: the page stays compared, not gated
        log.warning("meaning gate: the entity index failed; page not gated", exc_info=True)
        return []
    return [(int(chapter_id), float(score)) for chapter_id, score in found]


FaintCandidates = Callable[[Session, str, Sequence[int], int], list[tuple[int, float]]]


def faint_candidates(
    session: Session, text: str, chapter_ids: Sequence[int], limit: int
) -> list[tuple[int, float]]:
    """``compare.entities.candidates_among``: which of the chapters that share a code or two with a Chinese
    page its named entities point at, best first; none while the entity index is not installed or fails."""
    try:
        entities = importlib.import_module("fptrack.compare.entities")
    except ImportError:
        return []
    try:
        with session.begin_nested():
            found: list[tuple[int, float]] = entities.candidates_among(session, text, chapter_ids, limit)
    except Exception:
        log.warning("meaning gate: the entity index failed; page not gated", exc_info=True)
        return []
    return [(int(chapter_id), float(score)) for chapter_id, score in found]


@dataclass(frozen=True)
class GateDecision:
    """Why a page goes to the meaning path (``near_miss`` or ``entities``) and its candidate chapters."""

    reason: str
    candidates: tuple[tuple[int, float], ...]


_LETTER = re.compile(r"[^\W_]")
_NOT_HAN = re.compile(r"[^\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
HAN_SHARE = 0.3
"""A page whose first :data:`LANGUAGE_SAMPLE` characters are at least this share Han characters is Chinese
without asking ``detect_language`` (a Chinese article runs 80-90 %; markup left in a page's text, less)."""


def _letters(text: str) -> int:
    return len(_LETTER.findall(text))


def decide(
    session: Session,
    outcome: PageOutcome,
    limit: int,
    *,
    entities: EntityCandidates = entity_candidates,
    among: FaintCandidates = faint_candidates,
) -> GateDecision | None:
    """The gate for one compared page (see the module docstring): None for "no"."""
    if outcome.matched_chapters or not outcome.text:
        return None
    sample = outcome.text[:LANGUAGE_SAMPLE]
    maybe = outcome.near_misses or outcome.faint
    if not maybe and len(_NOT_HAN.sub("", sample)) >= HAN_SHARE * len(sample):
        return None  # the common case, an unrelated Chinese page: one scan of its first characters
    if _letters(sample) < MIN_LETTERS:
        return None
    language = detect_language(sample)
    if language == "zh" and outcome.near_misses:
        return GateDecision("near_miss", tuple(outcome.near_misses[:limit]))
    if language == "zh":
        asked = outcome.faint[:FAINT_ASKED]
        named = tuple(c for c in among(session, outcome.text, asked, limit) if c[1] >= FAINT_MIN_SCORE)
        return GateDecision("entities", named[:limit]) if named else None
    if language == "und":
        return None
    found = tuple(entities(session, outcome.text, limit)[:limit])
    return GateDecision("entities", found) if found else None


def _with_held(decision: GateDecision | None, held: Sequence[int]) -> GateDecision:
    """A page holding meaning matches is always checked when its text changed: its matches' chapters first
    (the check observes each present or removed, as the exact compare observes an exact match), then the
    gate's own candidates, if it had any."""
    candidates = [(chapter_id, 1.0) for chapter_id in held]
    reason = RECHECK
    if decision is not None:
        candidates += [c for c in decision.candidates if c[0] not in held]
        reason = decision.reason
    return GateDecision(reason, tuple(candidates))


def gate_pages(
    session: Session,
    outcomes: Sequence[PageOutcome],
    settings: Settings,
    *,
    entities: EntityCandidates = entity_candidates,
    among: FaintCandidates = faint_candidates,
) -> list[int]:
    """Record the gate's "maybe" of each compared page as a pending meaning check (in the caller's
    transaction); the ids of the checks now pending. A page already gated at its current text keeps its
    check as it is (pending or done): the decision is made once. A page that holds meaning matches is
    checked whatever the gate says (:func:`_with_held`): a crawl that finds it changed has the meaning path
    say whether its copies are still there."""
    if not settings.meaning:
        return []
    decided: dict[int, tuple[str, GateDecision]] = {}
    for outcome in outcomes:
        decision = decide(session, outcome, settings.meaning_candidates, entities=entities, among=among)
        if outcome.meaning:
            decision = _with_held(decision, outcome.meaning)
        if decision is not None:
            digest = hashlib.sha256(outcome.text.encode("utf-8")).hexdigest()
            decided[outcome.page_id] = (digest, decision)
    if not decided:
        return []
    existing: dict[int, MeaningCheck] = {}
    for chunk in id_chunks(sorted(decided)):
        existing.update(
            (check.page_id, check)
            for check in session.scalars(select(MeaningCheck).where(MeaningCheck.page_id.in_(chunk)))
        )
    pending: list[MeaningCheck] = []
    now = utcnow()
    for page_id, (digest, decision) in decided.items():
        candidates = [[chapter_id, round(score, 4)] for chapter_id, score in decision.candidates]
        check = existing.get(page_id)
        if check is None:
            check = MeaningCheck(page_id=page_id, content_sha256=digest, matches=0)
            session.add(check)
        elif check.content_sha256 == digest:
            if check.state == "pending":
                pending.append(check)
            continue
        check.content_sha256, check.state, check.reason = digest, "pending", decision.reason
        check.candidates, check.gated_at, check.checked_at, check.cpu_seconds = candidates, now, None, None
        pending.append(check)
    session.flush()
    return sorted(check.id for check in pending)
