"""Review decisions: one service that the admin's buttons and ``fptrack review`` both call.

A decision sets the match's status and is kept as a :class:`storage.models.ReviewDecision` row: who (the
reviewer's account name), when (``decided_at``) and why (``note``, the reason). ``licensed`` is never set by
a person: it comes from a work's allowlist.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from storage.models import Match, MatchStatus, ReviewDecision

__all__ = ["MAX_NOTE_LENGTH", "REVIEW_STATUSES", "Decision", "record_decision"]

# What a reviewer may set by hand; ``licensed`` comes from a work's allowlist, not from a click.
REVIEW_STATUSES = (MatchStatus.CONFIRMED.value, MatchStatus.DISMISSED.value, MatchStatus.FLAGGED.value)
MAX_NOTE_LENGTH = 2000
MAX_REVIEWER_LENGTH = 200


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
