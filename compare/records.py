"""The match record as the outside world sees it (CLI JSON/CSV, the admin JSON API).

The fields are a stable interface (the README's "Match JSON": scripts and the admin rely on them); this module
is the one place that builds them.
"""

from __future__ import annotations

from typing import Any

from fptrack.storage.models import Match, as_utc

__all__ = ["MATCH_FIELDS", "match_to_dict"]

MATCH_FIELDS = (
    "page_url",
    "work_id",
    "work_title",
    "chapter_index",
    "chapter_title",
    "score",
    "methods",
    "spans",
    "first_seen",
)


def match_to_dict(match: Match) -> dict[str, Any]:
    """``{"page_url", "work_id", "work_title", "chapter_index", "chapter_title", "score", "methods", "spans",
    "first_seen"}``; spans are ``[page_start, page_end, work_start, work_end]`` in characters of the original
    page text and work text."""
    return {
        "page_url": match.page.url,
        "work_id": match.work_id,
        "work_title": match.work.title,
        "chapter_index": match.chapter.index,
        "chapter_title": match.chapter.title,
        "score": round(float(match.score), 4),
        "methods": list(match.methods or []),
        "spans": [list(map(int, span)) for span in (match.spans or [])],
        "first_seen": as_utc(match.first_seen).isoformat(timespec="seconds"),
    }
