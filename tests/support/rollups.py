"""The roll-up of the matches recomputed in Python, the reference the database's kept ``match_rollups`` must
equal (tests/integration/analytics/test_kept_rollups.py, and ``fptrack analytics rebuild`` in the CLI's
tests)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date

from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.storage.models import Match, Page


def from_scratch(session: Session) -> dict[tuple[date, int, str, str], int]:
    """The reference: every match counted once, keyed in Python from its own row."""
    rows = session.execute(
        select(Match.first_seen, Match.work_id, Page.host, Match.status).join(Page, Page.id == Match.page_id)
    )
    counts: Counter[tuple[date, int, str, str]] = Counter()
    for first_seen, work_id, host, status in rows:
        seen = first_seen.replace(tzinfo=UTC) if first_seen.tzinfo is None else first_seen.astimezone(UTC)
        counts[(seen.date(), work_id, host, status)] += 1
    return dict(counts)
