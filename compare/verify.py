"""Verification and passage localisation: which characters of a page copy which characters of a chapter.

Both texts are compared in their normalised form (NFKC, Simplified, no punctuation or whitespace; see
``fingerprint.normalize``) on two channels:

- characters: every k-gram (``char_k`` characters) of the page that also occurs in the chapter;
- pinyin initials: every k-gram (``initials_k`` letters) of the page's pinyin-initial string that also occurs
  in the chapter's, so same-sound character swaps (a common dodge) keep matching. A k-gram holding a character
  without a pinyin reading (``UNKNOWN_INITIAL``: kana, Hangul, Cyrillic...) is no evidence: two unrelated
  texts in such a script share every run of placeholders, so those k-grams are left to the character channel.

A page character is *covered* when a shared k-gram spans it. Covered runs closer than ``max_gap`` characters
are merged (edits between them), runs shorter than ``min_run`` are dropped (common phrases), and each run is
paired with the chapter range its k-grams came from. Runs become spans in the ORIGINAL texts through the
offset maps. The parameters are the contract's (``fingerprint.contract.AlignParams``).

k-gram hashes are the fingerprint package's (``char_shingle_hashes``: prefix sums in numpy, no per-character
Python loop); look-ups are a sort and a binary search.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fptrack.fingerprint.contract import CONTRACT, AlignParams
from fptrack.fingerprint.features import char_shingle_hashes
from fptrack.fingerprint.pinyin import UNKNOWN_INITIAL

__all__ = ["Alignment", "align"]


@dataclass(frozen=True)
class Alignment:
    """Copied runs between a page and a chapter, in normalised offsets.

    ``runs`` holds ``(page_start, page_end, chapter_start, chapter_end)``; ``page_covered`` and
    ``chapter_covered`` count normalised characters inside runs.
    """

    runs: tuple[tuple[int, int, int, int], ...]
    page_length: int
    chapter_length: int
    page_covered: int
    chapter_covered: int

    @property
    def chapter_coverage(self) -> float:
        return self.chapter_covered / self.chapter_length if self.chapter_length else 0.0


@lru_cache(maxsize=1024)
def _sorted_shingles(text: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(first, sorted hashes) of the k-grams of a chapter, sorted once (a chapter is aligned with many pages):
    at the first index of each run of equal hashes, ``first`` holds the smallest position of that hash (the
    one a page k-gram is matched with; the rest of a run is never read). An unstable sort and a minimum per
    run: four times faster than a stable sort of ~5,000 hashes."""
    hashes = char_shingle_hashes(text, k)
    first = np.argsort(hashes)
    ordered = hashes[first]
    if len(ordered):
        runs = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        first[runs] = np.minimum.reduceat(first, runs)
    return first, ordered


@lru_cache(maxsize=64)
def _page_shingles(text: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(order, sorted hashes) of the k-grams of a page, kept while it is aligned with each of its candidate
    chapters: ``order`` sorts the hashes (equal hashes in any order: each k-gram is answered on its own)."""
    hashes = char_shingle_hashes(text, k)
    order = np.argsort(hashes)
    return order, hashes[order]


def _match_positions(
    page: tuple[np.ndarray, np.ndarray], chapter: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """For each page k-gram, the position of the same k-gram in the chapter (first occurrence), or -1.

    ``page`` is :func:`_page_shingles`'s, ``chapter`` :func:`_sorted_shingles`'s. The page's hashes are looked
    up in their sorted order, where numpy starts each binary search where the last one ended (three times
    faster than in text order), and the answers put back in text order."""
    page_order, page_sorted = page
    first, sorted_hashes = chapter
    positions = np.full(len(page_sorted), -1, dtype=np.int64)
    if not len(page_sorted) or not len(sorted_hashes):
        return positions
    found = np.minimum(np.searchsorted(sorted_hashes, page_sorted), len(sorted_hashes) - 1)
    hit = sorted_hashes[found] == page_sorted
    positions[page_order[hit]] = first[found[hit]]
    return positions


def _grams_holding(text: str, char: str, k: int) -> np.ndarray:
    """For each k-gram start of ``text``, whether the k-gram holds ``char`` (length ``max(0, len - k +
    1)``)."""
    if len(text) < k:
        return np.zeros(0, dtype=bool)
    marks = np.frombuffer(text.encode("ascii"), dtype=np.uint8) == ord(char)
    counts = np.concatenate(([0], np.cumsum(marks)))
    held: np.ndarray = (counts[k:] - counts[:-k]) > 0
    return held


def align(
    page_text: str,
    chapter_text: str,
    page_initials: str = "",
    chapter_initials: str = "",
    *,
    ignore: np.ndarray | None = None,
    params: AlignParams = CONTRACT.align,
) -> Alignment:
    """Align a page with a chapter (both normalised; initials, when given, have the same lengths).

    ``ignore`` (a boolean mask over the page's normalised characters, e.g. boilerplate) drops every page
    k-gram that starts inside it, on both channels.
    """
    char_k, initials_k = params.char_k, params.initials_k
    if ignore is not None and len(ignore) != len(page_text):
        raise ValueError(f"ignore mask has length {len(ignore)}, the page text {len(page_text)}")
    n_page, n_chapter = len(page_text), len(chapter_text)
    # chapter position of each page character's k-gram start, from the best channel available
    targets = np.full(n_page, -1, dtype=np.int64)
    spans: list[tuple[np.ndarray, np.ndarray, int]] = []
    char_pos = _match_positions(_page_shingles(page_text, char_k), _sorted_shingles(chapter_text, char_k))
    if ignore is not None and len(char_pos):
        char_pos[ignore[: len(char_pos)]] = -1
    spans.append((np.nonzero(char_pos >= 0)[0], char_pos[char_pos >= 0], char_k))
    if page_initials and chapter_initials:
        ini_pos = _match_positions(
            _page_shingles(page_initials, initials_k), _sorted_shingles(chapter_initials, initials_k)
        )
        if ignore is not None and len(ini_pos):
            ini_pos[ignore[: len(ini_pos)]] = -1
        ini_pos[_grams_holding(page_initials, UNKNOWN_INITIAL, initials_k)[: len(ini_pos)]] = -1
        spans.append((np.nonzero(ini_pos >= 0)[0], ini_pos[ini_pos >= 0], initials_k))

    covered = np.zeros(n_page + 1, dtype=np.int64)
    for starts, chapter_starts, k in spans:
        np.add.at(covered, starts, 1)
        np.add.at(covered, starts + k, -1)
        targets_slice = targets[starts]
        targets[starts] = np.where(targets_slice >= 0, targets_slice, chapter_starts)
    is_covered = np.cumsum(covered[:n_page]) > 0

    runs = _runs(
        is_covered, params.max_gap, params.min_run, _digit_prefix(page_text), params.max_gap_digit_share
    )
    result: list[tuple[int, int, int, int]] = []
    chapter_mask = np.zeros(n_chapter, dtype=bool)
    page_covered = 0
    for run_start, run_end in runs:
        anchors = targets[run_start:run_end]
        anchor_at = np.nonzero(anchors >= 0)[0]
        if not len(anchor_at):
            continue
        for start, end, pages, chapter_starts in _split_by_diagonal(
            run_start, run_end, run_start + anchor_at, anchors[anchor_at], params
        ):
            # A repeated phrase can anchor far away from the copied place. Anchors of one copied passage lie
            # near one diagonal (chapter position - page position), drifting only with the edits inside it.
            diagonals = chapter_starts - pages
            slack = max(params.diagonal_slack, 0.2 * (end - start))
            near = np.abs(diagonals - np.median(diagonals)) <= slack
            if not near.any():
                # anchors split evenly between distant diagonals (phrases repeated all over both texts) leave
                # the median between them, near none: the diagonal that most anchors agree with stands for the
                # passage
                votes = (np.abs(diagonals[:, None] - diagonals[None, :]) <= slack).sum(axis=1)
                near = np.abs(diagonals - diagonals[int(np.argmax(votes))]) <= slack
            kept_pages, kept_chapters = pages[near], chapter_starts[near]
            # extend from the first and last anchors to the passage's ends, along their diagonals
            c_start = int(max(0, kept_chapters.min() - (kept_pages[np.argmin(kept_chapters)] - start)))
            c_end = int(min(n_chapter, kept_chapters.max() + (end - kept_pages[np.argmax(kept_chapters)])))
            result.append((start, end, c_start, c_end))
            page_covered += end - start
            chapter_mask[c_start:c_end] = True
    return Alignment(
        runs=tuple(result),
        page_length=n_page,
        chapter_length=n_chapter,
        page_covered=page_covered,
        chapter_covered=int(chapter_mask.sum()),
    )


def _split_by_diagonal(
    start: int, end: int, pages: np.ndarray, chapters: np.ndarray, params: AlignParams
) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """Cut a covered page run where its anchors jump to another diagonal: paragraphs copied out of order
    (shuffled, or two chapters' passages interleaved) are separate passages with their own chapter ranges.

    The diagonal sequence is smoothed by a running median of ``params.smoothing`` anchors, so one stray anchor
    (a phrase repeated elsewhere in the chapter) does not cut; a cut needs a jump of more than
    ``params.diagonal_slack`` characters. Pieces shorter than ``params.min_run`` or with fewer than three
    anchors are dropped."""
    diagonals = chapters - pages
    smoothing = params.smoothing
    if len(diagonals) >= smoothing:
        pad = smoothing // 2
        padded = np.concatenate((np.full(pad, diagonals[0]), diagonals, np.full(pad, diagonals[-1])))
        smooth = np.median(np.lib.stride_tricks.sliding_window_view(padded, smoothing), axis=1)
    else:
        smooth = diagonals.astype(np.float64)
    cuts = np.flatnonzero(np.abs(np.diff(smooth)) > params.diagonal_slack) + 1
    if not len(cuts):
        return [(start, end, pages, chapters)]
    pieces = []
    bounds = [0, *cuts.tolist(), len(pages)]
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        if hi - lo < 3:
            continue
        piece_start = start if i == 0 else int(pages[lo])
        piece_end = end if hi == len(pages) else int(pages[hi])
        if piece_end - piece_start >= params.min_run:
            pieces.append((piece_start, piece_end, pages[lo:hi], chapters[lo:hi]))
    return pieces


def _digit_prefix(text: str) -> np.ndarray:
    """Prefix counts of ASCII digits in a normalised text (NFKC has made full-width digits ASCII)."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    prefix = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum((codes >= 48) & (codes <= 57), out=prefix[1:])
    return prefix


def _runs(
    mask: np.ndarray, max_gap: int, min_run: int, digits: np.ndarray, max_digit_share: float
) -> list[tuple[int, int]]:
    """Covered runs merged over gaps of at most ``max_gap`` characters, except gaps that are mostly digits
    (more than ``max_digit_share``): two texts on one template with other numbers (market reports, price
    lists) share their fixed words, and the numbers between them are what differs, not an edit of a copy.
    ``digits`` is the page's digit prefix count (:func:`_digit_prefix`)."""
    if not mask.any():
        return []
    padded = np.concatenate(([False], mask, [False]))
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    starts, ends = edges[0::2], edges[1::2]
    merged: list[list[int]] = [[int(starts[0]), int(ends[0])]]
    for s, e in zip(starts[1:], ends[1:]):
        gap = s - merged[-1][1]
        if gap <= max_gap and digits[s] - digits[merged[-1][1]] <= max_digit_share * gap:
            merged[-1][1] = int(e)
        else:
            merged.append([int(s), int(e)])
    return [(s, e) for s, e in merged if e - s >= min_run]
