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

Passages line up: a k-gram the chapter repeats (a dialogue line, a stock phrase) anchors at the occurrence
nearest to the diagonal of its unique neighbours, so a verbatim copy stays on one diagonal and is one passage;
a run is cut only where its anchors jump (paragraphs moved), pieces that carry on one diagonal are joined,
each passage's chapter ends follow the diagonals of its first and last anchors, and no two passages claim the
same characters of the page or of the chapter (where two chapter ranges overlap, the one with fewer anchors
there gives the overlap up). A copy that reorders paragraphs lists its passages in page order, which is then
not the chapter's order.

k-gram hashes are the fingerprint package's (``char_shingle_hashes``: prefix sums in numpy, no per-character
Python loop); look-ups are a sort and a binary search.
"""

from __future__ import annotations

import itertools
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
def _sorted_shingles(text: str, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(positions, sorted hashes, keys, ends) of the k-grams of a chapter, sorted once (a chapter is aligned
    with many pages). The positions of equal hashes (a phrase the chapter repeats) ascend; ``keys`` is ``run *
    (len(text) + 1) + position`` with ``run`` the number of the run of equal hashes: an increasing array in
    which one binary search finds, among the occurrences of one hash, the one nearest to a wanted position
    (:func:`_match_positions`); ``ends`` holds, for each entry, the end of its run. An unstable sort of the
    hashes, then of the keys: five times faster than a stable sort of ~5,000 hashes."""
    hashes = char_shingle_hashes(text, k)
    width = np.int64(len(text) + 1)
    order = np.argsort(hashes)
    ordered = hashes[order]
    new_run = np.concatenate(([True], ordered[1:] != ordered[:-1])) if len(ordered) else np.zeros(0, bool)
    keys = np.sort((np.cumsum(new_run) - 1) * width + order)
    positions = keys % width
    ordered = hashes[positions]
    starts = np.flatnonzero(new_run)
    ends = np.repeat(np.append(starts[1:], len(ordered)), np.diff(np.append(starts, len(ordered))))
    return positions, ordered, keys, ends


@lru_cache(maxsize=64)
def _page_shingles(text: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(order, sorted hashes) of the k-grams of a page, kept while it is aligned with each of its candidate
    chapters: ``order`` sorts the hashes (equal hashes in any order: each k-gram is answered on its own)."""
    hashes = char_shingle_hashes(text, k)
    order = np.argsort(hashes)
    return order, hashes[order]


def _match_positions(
    page: tuple[np.ndarray, np.ndarray], chapter: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
) -> np.ndarray:
    """For each page k-gram, the position of the same k-gram in the chapter, or -1.

    ``page`` is :func:`_page_shingles`'s, ``chapter`` :func:`_sorted_shingles`'s. A k-gram the chapter holds
    once is matched there (an *unique* anchor). A k-gram the chapter repeats (a dialogue line, a stock phrase)
    is matched with the occurrence nearest to where the copy is: the diagonal (chapter position - page
    position) of the nearest unique anchor before it or after it on the page, whichever one of its
    occurrences lies closer to. Matching it with its first occurrence instead sent whole stretches of a
    verbatim copy to an earlier diagonal, cutting it into passages that overlapped in the chapter.

    The page's hashes are looked up in their sorted order, where numpy starts each binary search where the
    last one ended (three times faster than in text order), and the answers put back in text order."""
    page_order, page_sorted = page
    chapter_positions, sorted_hashes, keys, ends = chapter
    n_page = len(page_sorted)
    positions = np.full(n_page, -1, dtype=np.int64)
    if not n_page or not len(sorted_hashes):
        return positions
    found = np.minimum(np.searchsorted(sorted_hashes, page_sorted), len(sorted_hashes) - 1)
    hit = sorted_hashes[found] == page_sorted
    at, lo = page_order[hit], found[hit]
    positions[at] = chapter_positions[lo]
    many = ends[lo] - lo > 1
    if not many.any():
        return positions
    repeated, lo, hi = at[many], lo[many], ends[lo[many]]
    if len(repeated) < len(at):
        unique = np.zeros(n_page, dtype=bool)
        unique[at[~many]] = True
        index = np.arange(n_page)
        before = np.maximum.accumulate(np.where(unique, index, -1))[repeated]
        after = np.minimum.accumulate(np.where(unique, index, n_page)[::-1])[::-1][repeated]
        wanted_diagonals = [
            (before >= 0, positions[np.maximum(before, 0)] - before),
            (after < n_page, positions[np.minimum(after, n_page - 1)] - after),
        ]
    else:  # a text that repeats itself throughout: the diagonal through the page's own positions
        wanted_diagonals = [(np.ones(len(repeated), dtype=bool), np.zeros(len(repeated), dtype=np.int64))]
    run_base = keys[lo] - chapter_positions[lo]
    best = np.full(len(repeated), -1, dtype=np.int64)
    best_distance = np.full(len(repeated), np.iinfo(np.int64).max, dtype=np.int64)
    for has, diagonal in wanted_diagonals:
        wanted = np.maximum(repeated + diagonal, 0)
        nearest = np.searchsorted(keys, run_base + wanted)
        for candidate in (nearest - 1, nearest):
            chapter_at = chapter_positions[np.clip(candidate, lo, hi - 1)]
            distance = np.abs(chapter_at - wanted)
            better = has & (distance < best_distance)
            best[better], best_distance[better] = chapter_at[better], distance[better]
    chosen = best >= 0
    positions[repeated[chosen]] = best[chosen]
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
    pieces: list[_Piece] = []
    for run_start, run_end in runs:
        anchors = targets[run_start:run_end]
        anchor_at = np.nonzero(anchors >= 0)[0]
        if not len(anchor_at):
            continue
        run_pieces: list[_Piece] = []
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
            piece = _Piece.of(start, end, pages[near], chapter_starts[near], n_chapter)
            if piece is None:
                continue
            if run_pieces and run_pieces[-1].continued_by(piece, params):
                run_pieces[-1] = run_pieces[-1].joined(piece)
            else:
                run_pieces.append(piece)
        pieces += run_pieces
    pieces = _without_overlaps(
        [p for p in pieces if min(p.end - p.start, p.c_end - p.c_start) >= params.min_run], params.min_run
    )
    chapter_mask = np.zeros(n_chapter, dtype=bool)
    for piece in pieces:
        chapter_mask[piece.c_start : piece.c_end] = True
    return Alignment(
        runs=tuple((p.start, p.end, p.c_start, p.c_end) for p in pieces),
        page_length=n_page,
        chapter_length=n_chapter,
        page_covered=sum(p.end - p.start for p in pieces),
        chapter_covered=int(chapter_mask.sum()),
    )


@dataclass(frozen=True)
class _Piece:
    """A passage being built: page ``[start, end)`` copies chapter ``[c_start, c_end)``; ``anchors`` are the
    chapter positions of its anchors (for deciding overlaps), ``head`` and ``tail`` the diagonals (chapter
    position - page position) at its two ends."""

    start: int
    end: int
    c_start: int
    c_end: int
    anchors: np.ndarray
    head: int
    tail: int

    @classmethod
    def of(
        cls, start: int, end: int, pages: np.ndarray, chapters: np.ndarray, n_chapter: int
    ) -> _Piece | None:
        """Extend a piece's ends along the diagonals of its first and last few anchors (a median, so one
        stray anchor does not move an end); None when nothing of the chapter is left."""
        diagonals = chapters - pages
        head = int(np.median(diagonals[:_END_ANCHORS]))
        tail = int(np.median(diagonals[-_END_ANCHORS:]))
        c_start, c_end = max(0, start + head), min(n_chapter, end + tail)
        start, end = start + (c_start - start - head), end - (end + tail - c_end)
        if c_end <= c_start or end <= start:
            return None
        return cls(start, end, c_start, c_end, chapters, head, tail)

    def continued_by(self, other: _Piece, params: AlignParams) -> bool:
        """True when ``other`` carries on this piece's diagonal right after it (a cut in between came from
        anchors that were dropped): the two are one passage."""
        return (
            0 <= other.start - self.end <= params.diagonal_slack
            and abs(other.head - self.tail) <= params.diagonal_slack
            and other.c_start >= self.c_end - params.diagonal_slack
        )

    def joined(self, other: _Piece) -> _Piece:
        return _Piece(
            self.start,
            other.end,
            self.c_start,
            max(self.c_end, other.c_end),
            np.concatenate((self.anchors, other.anchors)),
            self.head,
            other.tail,
        )

    def support(self, c_start: int, c_end: int) -> int:
        """How many of this piece's anchors fall in the chapter range ``[c_start, c_end)``."""
        return int(np.count_nonzero((self.anchors >= c_start) & (self.anchors < c_end)))

    def trimmed(self, c_start: int, c_end: int) -> _Piece:
        """The piece cut to the chapter range ``[c_start, c_end)``, its page range cut by as many characters
        at the same end (the passage runs along its diagonal)."""
        cut_head, cut_tail = max(0, c_start - self.c_start), max(0, self.c_end - c_end)
        return _Piece(
            self.start + cut_head,
            self.end - cut_tail,
            self.c_start + cut_head,
            self.c_end - cut_tail,
            self.anchors,
            self.head,
            self.tail,
        )


_END_ANCHORS = 5


def _without_overlaps(pieces: list[_Piece], min_run: int) -> list[_Piece]:
    """No two passages claim the same chapter characters (their page ranges are disjoint already).

    Where two passages' chapter ranges overlap (a page that copies a paragraph twice, or the ends of two
    pieces extended into the same stretch), the one with fewer anchors in the overlap gives it up: it is cut
    at that end, on both sides, or dropped when it lies inside the other or falls under ``min_run``
    characters on either side. Passages keep their page order."""
    kept = list(pieces)
    changed = True
    while changed:
        changed = False
        by_chapter = sorted(range(len(kept)), key=lambda i: (kept[i].c_start, -kept[i].c_end))
        for left, right in itertools.pairwise(by_chapter):
            a, b = kept[left], kept[right]
            if b.c_start >= a.c_end:
                continue
            lo, hi = b.c_start, min(a.c_end, b.c_end)
            a_wins = a.support(lo, hi) >= b.support(lo, hi)
            if b.c_end <= a.c_end:  # b inside a
                if a_wins:
                    kept[right] = b.trimmed(b.c_start, b.c_start)
                else:
                    kept[left] = a.trimmed(a.c_start, lo)
            elif a_wins:
                kept[right] = b.trimmed(hi, b.c_end)
            else:
                kept[left] = a.trimmed(a.c_start, lo)
            kept = [p for p in kept if min(p.end - p.start, p.c_end - p.c_start) >= min_run]
            changed = True
            break
    return kept


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
