"""Review decisions: one service that the admin's buttons and ``fptrack review`` both call.

A decision sets the match's status and is kept as a :class:`storage.models.ReviewDecision` row: who (the
reviewer's account name), when (``decided_at``) and why (``note``, the reason). ``licensed`` is never set by
a person: it comes from a work's allowlist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.storage.models import Match, MatchNote, MatchStatus, ReviewDecision

__all__ = [
    "BULK_LIMIT",
    "MAX_NOTE_LENGTH",
    "REVIEW_STATUSES",
    "Decision",
    "HistoryEntry",
    "add_note",
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


@dataclass(frozen=True)
class Decision:
    match_id: int
    previous_status: str
    status: str
    recorded: bool  # False when the match already had this status and no reason was given


def record_decision(session: Session, match_id: int, status: str, reviewer: str, note: str = "") -> Decision:
    """Set match ``match_id`` to ``status`` on behalf of ``reviewer`` and keep the decision with its reason.

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
    previous = match.status
    if previous == status and not note:
        return Decision(match_id, previous, status, recorded=False)
    match.status = status
    session.add(
        ReviewDecision(match_id=match_id, decision=status, reviewer=reviewer[:MAX_REVIEWER_LENGTH], note=note)
    )
    session.flush()
    return Decision(match_id, previous, status, recorded=True)


def record_bulk_decision(
    session: Session, match_ids: Sequence[int], status: str, reviewer: str, note: str = ""
) -> list[Decision]:
    """:func:`record_decision` for each of ``match_ids`` (at most :data:`BULK_LIMIT`), each kept in the
    history with the same reason; all or nothing (the caller commits or rolls back). Ids of missing matches
    raise LookupError before anything changes."""
    ids = list(dict.fromkeys(match_ids))
    if len(ids) > BULK_LIMIT:
        raise ValueError(f"a bulk action changes at most {BULK_LIMIT} matches; {len(ids)} were asked for")
    found = {match.id for match in session.scalars(select(Match).where(Match.id.in_(ids)))} if ids else set()
    missing = [match_id for match_id in ids if match_id not in found]
    if missing:
        raise LookupError(f"there is no match with id {missing[0]}")
    return [record_decision(session, match_id, status, reviewer, note) for match_id in ids]


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


def match_history(session: Session, match_id: int) -> list[HistoryEntry]:
    """The decisions and notes on a match, oldest first."""
    entries = [
        HistoryEntry("decision", d.decided_at, d.reviewer, d.note, d.decision)
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
