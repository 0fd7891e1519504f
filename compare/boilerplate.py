"""Boilerplate suppression: text that repeats across pages of one site, or across many registered chapters, is
never evidence of copying.

Two sources of "text everybody has":

- **Site templates.** Navigation, ads, disclaimers and slogans that a site puts on every page. A winnowing hash
  of a page is *site boilerplate* when at least :data:`SITE_MIN_PAGES` other pages of the same site (same host
  and port) hold it. Pages that are near-copies of this one (they share more than :data:`DUPLICATE_SHARE` of its
  hashes: the same chapter on a mirror URL, or another edit of it) do not count, so a site that publishes one
  chapter five times does not hide it.
- **Formulas.** A hash held by at least :data:`COMMON_MIN_CHAPTERS` registered chapters (chapter-closing
  formulas, a publisher's banner in every chapter of a registered text) says nothing about which chapter a
  page copies.

Winnowing (Schleimer, Wilkerson and Aiken, SIGMOD 2003) keeps at least one hash in every window of ``w``
consecutive k-grams, so consecutive selected positions inside a shared region are at most ``w`` apart: the
region a set of boilerplate hashes stands for is rebuilt by merging their k-gram extents over gaps of up to
``w`` (:func:`mask_from_positions`). The alignment then ignores page k-grams that start inside the mask.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from compare.documents import WINNOW_CHARS, Document
from storage.index import to_signed64
from storage.models import CodeIndexRow, Fingerprint, Page

__all__ = [
    "COMMON_MIN_CHAPTERS",
    "DUPLICATE_SHARE",
    "SITE_MIN_PAGES",
    "TEMPLATE_MIN_QUOTE",
    "Boilerplate",
    "boilerplate_mask",
    "find_boilerplate",
    "mask_from_positions",
    "site_key",
]

SITE_MIN_PAGES = 5
DUPLICATE_SHARE = 0.5
COMMON_MIN_CHAPTERS = 5
TEMPLATE_MIN_QUOTE = 50
"""A site template quoting fewer normalised characters of a work than a match needs (``compare.scoring``'s
``min_copied``) cannot have made a match, so it never triggers re-comparing the site's pages."""
_KIND = "winnow"
_CHUNK = 500


def site_key(url: str) -> str:
    """The site a URL belongs to for boilerplate purposes: lower-cased host and port (``example.com:8080``)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    return f"{host}:{parts.port}" if parts.port else host


def mask_from_positions(length: int, positions: Iterable[int], k: int, w: int) -> np.ndarray:
    """Boolean mask over ``length`` normalised characters covering the k-grams at ``positions`` and the gaps of
    at most ``w`` characters between consecutive ones."""
    mask = np.zeros(length, dtype=bool)
    ordered = sorted({int(p) for p in positions if 0 <= p < length})
    if not ordered:
        return mask
    start = end = ordered[0]
    for position in ordered[1:]:
        if position - end > w:
            mask[start : min(length, end + k)] = True
            start = position
        end = position
    mask[start : min(length, end + k)] = True
    return mask


def _chunks(values: list[int]) -> Iterable[list[int]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


def _site_codes(session: Session, codes: list[int], page_id: int, page_url: str) -> tuple[set[int], set[int]]:
    """(site boilerplate codes of this page, the other pages of the site that hold some of them)."""
    key = site_key(page_url)
    host = urlsplit(page_url).hostname or ""
    holders: dict[int, set[int]] = defaultdict(set)  # other page -> codes it shares with this one
    for chunk in _chunks(codes):
        statement = (
            select(CodeIndexRow.code, Page.id, Page.url)
            .join(Fingerprint, Fingerprint.id == CodeIndexRow.fingerprint_id)
            .join(Page, Page.id == Fingerprint.page_id)
            .where(
                CodeIndexRow.kind == _KIND,
                CodeIndexRow.code.in_(chunk),
                Page.host == host,
                Page.id != page_id,
            )
        )
        for code, other_id, other_url in session.execute(statement):
            if site_key(other_url) == key:
                holders[other_id].add(code)
    limit = DUPLICATE_SHARE * len(codes)
    per_code: dict[int, int] = defaultdict(int)
    for shared in holders.values():
        if len(shared) <= limit:
            for code in shared:
                per_code[code] += 1
    boiler = {code for code, count in per_code.items() if count >= SITE_MIN_PAGES}
    return boiler, {other for other, shared in holders.items() if shared & boiler}


@dataclass(frozen=True)
class Boilerplate:
    """The boilerplate of one document: ``mask`` over its normalised characters (``None``: nothing), the site
    boilerplate codes that registered chapters also hold (a site template quoting a work), and the other pages
    of the site that carry those codes (compared before the template was known, they may hold stale matches)."""

    mask: np.ndarray | None
    quoting_codes: frozenset[int] = frozenset()
    pages_with_template: frozenset[int] = frozenset()


def find_boilerplate(
    session: Session, document: Document, *, page_id: int | None = None, page_url: str | None = None
) -> Boilerplate:
    """The boilerplate of ``document`` (see the module docstring). Site boilerplate needs the stored page
    (``page_id`` and ``page_url``)."""
    if not document.winnow_chars:
        return Boilerplate(None)
    signed = [(to_signed64(code), position) for code, position in document.winnow_chars]
    codes = sorted({code for code, _ in signed})
    common = _chapter_codes(session, codes, min_chapters=COMMON_MIN_CHAPTERS)
    boiler = set(common)
    site: set[int] = set()
    holders: set[int] = set()
    if page_id is not None and page_url:
        site, holders = _site_codes(session, codes, page_id, page_url)
        boiler |= site
    if not boiler:
        return Boilerplate(None)
    k, w = WINNOW_CHARS
    mask = mask_from_positions(len(document.text), (p for c, p in signed if c in boiler), k, w)
    quoting = _chapter_codes(session, sorted(site - common)) if site - common else set()
    # Only a template that quotes a long stretch of a work could have made matches on its own; chapter formulas
    # that every page of a novel site repeats (short, and common across chapters anyway) never could.
    quoted = mask_from_positions(len(document.text), (p for c, p in signed if c in quoting), k, w)
    if int(quoted.sum()) < TEMPLATE_MIN_QUOTE:
        return Boilerplate(mask)
    return Boilerplate(mask, frozenset(quoting), frozenset(holders))


def _chapter_codes(session: Session, codes: list[int], *, min_chapters: int = 1) -> set[int]:
    """The ``codes`` held by at least ``min_chapters`` registered chapters."""
    found: set[int] = set()
    for chunk in _chunks(codes):
        statement = (
            select(CodeIndexRow.code)
            .join(Fingerprint, Fingerprint.id == CodeIndexRow.fingerprint_id)
            .where(
                CodeIndexRow.kind == _KIND, CodeIndexRow.code.in_(chunk), Fingerprint.chapter_id.is_not(None)
            )
            .group_by(CodeIndexRow.code)
        )
        if min_chapters > 1:
            statement = statement.having(func.count(func.distinct(Fingerprint.chapter_id)) >= min_chapters)
        found.update(session.scalars(statement))
    return found


def boilerplate_mask(
    session: Session, document: Document, *, page_id: int | None = None, page_url: str | None = None
) -> np.ndarray | None:
    """Mask of the normalised characters of ``document`` that are boilerplate, or ``None`` when nothing is."""
    return find_boilerplate(session, document, page_id=page_id, page_url=page_url).mask
