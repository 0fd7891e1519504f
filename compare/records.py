"""The match record as the outside world sees it (CLI JSON/CSV, the admin JSON API).

The fields are a stable interface (the README's "Match JSON": scripts and the admin rely on them); this module
is the one place that builds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy.orm import Session

from fptrack.fingerprint.containers import members_at
from fptrack.storage.models import Match, as_utc

__all__ = ["DOWNLOAD_NOTE", "MATCH_FIELDS", "copied_characters", "match_files", "match_to_dict"]

DOWNLOAD_NOTE = "download: "
"""How the note of a downloaded file's page begins (crawler.parse): only such a page has members."""

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
    "kind",
    "alignment",
)


def copied_characters(spans: Iterable[Sequence[int]]) -> int:
    """How many characters of the page its copied passages cover: the union of the spans' page ranges
    (``[page_start, page_end, ...]``), a character in two spans counted once, as the page has them
    (punctuation and spaces included). The one number ``fptrack check`` and the admin's match page show."""
    covered = reach = 0
    for start, end in sorted((int(span[0]), int(span[1])) for span in spans):
        if end > max(start, reach):
            covered += end - max(start, reach)
            reach = end
    return covered


def match_to_dict(match: Match) -> dict[str, Any]:
    """``{"page_url", "work_id", "work_title", "chapter_index", "chapter_title", "score", "methods", "spans",
    "first_seen", "kind", "alignment"}``; spans are ``[page_start, page_end, work_start, work_end]`` in
    characters of the original page text and work text. ``kind`` is null for an exact copy, ``rewrite`` or
    ``translation:<language>`` for a copy the meaning path found, whose ``alignment`` holds its sentences
    aligned in order (``{"coverage", "pairs": [[page_start, page_end, chapter_start, chapter_end,
    similarity], ...], "page_sentences", "chapter_sentences", "model"}``; null on an exact match)."""
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
        "kind": match.kind,
        "alignment": match.alignment,
    }


def match_files(session: Session, match: Match) -> list[str]:
    """The files of the downloaded archive (or e-book) ``match``'s passages are in (``第一卷/003.txt``), in
    the order of the text, from the text its spans point into (:func:`storage.match_life.evidence_of`);
    ``[]`` for a match on a page, whose text is never read for it."""
    from fptrack.storage.match_life import evidence_of

    if not (match.page.note or "").startswith(DOWNLOAD_NOTE):
        return []
    text = evidence_of(session, match).text
    return members_at(text, (int(span[0]) for span in match.spans or [] if span))
