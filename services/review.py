"""Review decisions: one service that the admin's buttons and ``fptrack review`` both call.

A decision sets the match's status and is kept as a :class:`storage.models.ReviewDecision` row: who (the
reviewer's account name), when (``decided_at``) and why (``note``, the reason). ``licensed`` is never set by
a person: it comes from a work's allowlist.

A confirmation may carry the reviewer's basis (:class:`Basis`): what the copy is (the whole chapter, a
substantial part, an excerpt), that fair use, quotation and licences were considered (a notice is sworn; a
copyright holder must consider fair use before sending one, Lenz v. Universal Music, 801 F.3d 1126 (9th Cir.
2015)), and a short note. It is required (:class:`BasisRequired`) when the reviewer calls the copy an excerpt
or the match's score, the share of its chapter copied, is below ``basis_below``
(``FPTRACK_REVIEW_BASIS_BELOW``, 0.8); a bulk confirmation of such a match is refused, one by one they go.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.storage.models import COPY_KINDS, Match, MatchNote, MatchStatus, ReviewDecision

__all__ = [
    "BASIS_BELOW",
    "BULK_LIMIT",
    "COPY_KIND_LABELS",
    "MAX_NOTE_LENGTH",
    "REVIEW_STATUSES",
    "Basis",
    "BasisRequired",
    "Decision",
    "HistoryEntry",
    "add_note",
    "basis_needed",
    "latest_basis",
    "match_history",
    "record_bulk_decision",
    "record_decision",
]

# What a reviewer may set by hand; ``licensed`` comes from a work's allowlist, not from a click.
REVIEW_STATUSES = (MatchStatus.CONFIRMED.value, MatchStatus.DISMISSED.value, MatchStatus.FLAGGED.value)
MAX_NOTE_LENGTH = 2000
MAX_REVIEWER_LENGTH = 200
# At most this many matches change in one bulk action: a reviewer narrows the filter to act on more.
BULK_LIMIT = 1000
BASIS_BELOW = 0.8  # the default of FPTRACK_REVIEW_BASIS_BELOW
MAX_BASIS_LENGTH = 500
COPY_KIND_LABELS = {
    "whole_chapter": "the whole chapter",
    "substantial_part": "a substantial part of the chapter",
    "excerpt": "an excerpt",
}


class BasisRequired(ValueError):
    """A confirmation refused for want of the reviewer's basis; the message says why and what to give."""


@dataclass(frozen=True)
class Basis:
    """The reviewer's basis for confirming a copy: ``copy_kind`` (one of :data:`storage.models.COPY_KINDS`,
    '' not stated), ``fair_use_considered`` (None: not stated) and ``note``."""

    copy_kind: str = ""
    fair_use_considered: bool | None = None
    note: str = ""

    @property
    def stated(self) -> bool:
        return bool(self.copy_kind or self.fair_use_considered is not None or self.note)

    def describe(self) -> str:
        """One line for the history: 'excerpt; fair use and licences considered: yes; a news quote'."""
        if not self.stated:
            return ""
        considered = {True: "yes", False: "no", None: "not stated"}[self.fair_use_considered]
        parts = [
            COPY_KIND_LABELS.get(self.copy_kind, "copy kind not stated"),
            f"fair use and licences considered: {considered}",
        ]
        return "; ".join([*parts, self.note] if self.note else parts)


@dataclass(frozen=True)
class Decision:
    match_id: int
    previous_status: str
    status: str
    recorded: bool  # False when the match already had this status and no reason was given


def basis_needed(match: Match, copy_kind: str = "", basis_below: float = BASIS_BELOW) -> str:
    """Why confirming ``match`` needs the reviewer's basis ('' when it does not): the reviewer calls it an
    excerpt, or its score (the share of its chapter copied) is below ``basis_below``."""
    if copy_kind == "excerpt":
        return "it is an excerpt"
    if match.score < basis_below:
        return f"its score {match.score:.2f} (the share of its chapter copied) is below {basis_below:g}"
    return ""


def _check_basis(match: Match, basis: Basis, basis_below: float) -> Basis:
    copy_kind = basis.copy_kind.strip()
    if copy_kind and copy_kind not in COPY_KINDS:
        raise ValueError(f"the copy kind must be one of {', '.join(COPY_KINDS)}, not {copy_kind!r}")
    note = basis.note.strip()
    if len(note) > MAX_BASIS_LENGTH:
        raise ValueError(f"the basis has {len(note)} characters; at most {MAX_BASIS_LENGTH} are kept")
    why = basis_needed(match, copy_kind, basis_below)
    if why and not (copy_kind and basis.fair_use_considered and note):
        raise BasisRequired(
            f"match {match.id} is confirmed only with the reviewer's basis, since {why}: give the copy kind "
            f"({', '.join(COPY_KINDS)}), that fair use and licences were considered, and a short note"
        )
    return Basis(copy_kind, basis.fair_use_considered, note)


def record_decision(
    session: Session,
    match_id: int,
    status: str,
    reviewer: str,
    note: str = "",
    *,
    basis: Basis | None = None,
    basis_below: float = BASIS_BELOW,
) -> Decision:
    """Set match ``match_id`` to ``status`` on behalf of ``reviewer`` and keep the decision with its reason
    and, for a confirmation, the reviewer's ``basis`` (required, :class:`BasisRequired`, for an excerpt or
    a score below ``basis_below``: see the module docstring).

    A decision that changes nothing and gives no reason is not recorded. Raises ValueError for a status a
    person may not set or a reason that is too long, LookupError for a missing match. The caller commits.
    """
    if status not in REVIEW_STATUSES:
        raise ValueError(f"a reviewer can set the status to {', '.join(REVIEW_STATUSES)}, not {status!r}")
    note = note.strip()
    if len(note) > MAX_NOTE_LENGTH:
        raise ValueError(f"the reason has {len(note)} characters; at most {MAX_NOTE_LENGTH} are kept")
    reviewer = reviewer.strip()
    if not reviewer:
        raise ValueError("a decision needs a reviewer")
    match = session.get(Match, match_id)
    if match is None:
        raise LookupError(f"there is no match with id {match_id}")
    given = basis or Basis()
    if status == MatchStatus.CONFIRMED.value:
        given = _check_basis(match, given, basis_below)
    elif given.stated:
        raise ValueError(
            "the reviewer's basis (copy kind, fair use considered) goes with a confirmation only"
        )
    previous = match.status
    if previous == status and not note and not given.stated:
        return Decision(match_id, previous, status, recorded=False)
    match.status = status
    session.add(
        ReviewDecision(
            match_id=match_id,
            decision=status,
            reviewer=reviewer[:MAX_REVIEWER_LENGTH],
            note=note,
            copy_kind=given.copy_kind,
            fair_use_considered=given.fair_use_considered,
            basis=given.note,
        )
    )
    session.flush()
    return Decision(match_id, previous, status, recorded=True)


def record_bulk_decision(
    session: Session,
    match_ids: Sequence[int],
    status: str,
    reviewer: str,
    note: str = "",
    *,
    basis_below: float = BASIS_BELOW,
) -> list[Decision]:
    """:func:`record_decision` for each of ``match_ids`` (at most :data:`BULK_LIMIT`), each kept in the
    history with the same reason; all or nothing (the caller commits or rolls back). Ids of missing matches
    raise LookupError, and a confirmation of matches that need the reviewer's basis :class:`BasisRequired`
    (one line naming them), before anything changes."""
    ids = list(dict.fromkeys(match_ids))
    if len(ids) > BULK_LIMIT:
        raise ValueError(f"a bulk action changes at most {BULK_LIMIT} matches; {len(ids)} were asked for")
    found = (
        {match.id: match for match in session.scalars(select(Match).where(Match.id.in_(ids)))} if ids else {}
    )
    missing = [match_id for match_id in ids if match_id not in found]
    if missing:
        raise LookupError(f"there is no match with id {missing[0]}")
    if status == MatchStatus.CONFIRMED.value:
        needing = [
            match_id
            for match_id in ids
            if found[match_id].status != status and basis_needed(found[match_id], basis_below=basis_below)
        ]
        if needing:
            shown = ", ".join(str(m) for m in needing[:10]) + (", ..." if len(needing) > 10 else "")
            raise BasisRequired(
                f"{len(needing)} of these matches score below {basis_below:g} and are confirmed only one by "
                f"one with the reviewer's basis (copy kind, fair use considered, a note): {shown}; nothing "
                "was changed"
            )
    return [
        record_decision(session, match_id, status, reviewer, note, basis_below=basis_below)
        for match_id in ids
    ]


def add_note(session: Session, match_id: int, author: str, text: str) -> MatchNote:
    """Keep a reviewer's note on a match (its status does not change). ValueError for an empty or too long
    note, LookupError for a missing match. The caller commits."""
    text = text.strip()
    if not text:
        raise ValueError("a note needs some text")
    if len(text) > MAX_NOTE_LENGTH:
        raise ValueError(f"the note has {len(text)} characters; at most {MAX_NOTE_LENGTH} are kept")
    author = author.strip()
    if not author:
        raise ValueError("a note needs an author")
    if session.get(Match, match_id) is None:
        raise LookupError(f"there is no match with id {match_id}")
    note = MatchNote(match_id=match_id, author=author[:MAX_REVIEWER_LENGTH], text=text)
    session.add(note)
    session.flush()
    return note


@dataclass(frozen=True)
class HistoryEntry:
    """A decision (``kind="decision"``, ``status`` set) or a note (``kind="note"``) on a match."""

    kind: str
    at: datetime
    who: str
    text: str
    status: str | None = None
    basis: str = ""  # the reviewer's basis of a confirmation, one line (Basis.describe)


def match_history(session: Session, match_id: int) -> list[HistoryEntry]:
    """The decisions and notes on a match, oldest first."""
    entries = [
        HistoryEntry(
            "decision",
            d.decided_at,
            d.reviewer,
            d.note,
            d.decision,
            basis=Basis(d.copy_kind, d.fair_use_considered, d.basis).describe(),
        )
        for d in session.scalars(select(ReviewDecision).where(ReviewDecision.match_id == match_id))
    ]
    entries += [
        HistoryEntry("note", n.created_at, n.author, n.text)
        for n in session.scalars(select(MatchNote).where(MatchNote.match_id == match_id))
    ]
    return sorted(entries, key=lambda entry: _naive_utc(entry.at))


def _naive_utc(moment: datetime) -> datetime:
    return (
        moment.replace(tzinfo=None) if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)
    )


def latest_basis(session: Session, match_id: int) -> Basis:
    """The basis of the match's latest confirmation (empty when none was stated)."""
    decision = session.scalars(
        select(ReviewDecision)
        .where(ReviewDecision.match_id == match_id, ReviewDecision.decision == MatchStatus.CONFIRMED.value)
        .order_by(ReviewDecision.id.desc())
        .limit(1)
    ).first()
    if decision is None:
        return Basis()
    return Basis(decision.copy_kind, decision.fair_use_considered, decision.basis)
