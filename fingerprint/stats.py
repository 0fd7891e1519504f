"""Corpus statistics for the weighted fingerprints: document frequencies (IDF), word-bigram counts (left and
right neighbour entropy, E-Simhash) and pinyin-initial counts (the reference distribution of pinyin DNA,
``research.pinyin_dna``).

``CorpusStats`` is a pure, immutable, mergeable value: ``update`` and ``merge`` return new objects, so the
storage layer can keep one in the database (``to_bytes``/``from_bytes``) and fold new registered works and
crawled pages into it incrementally, in batches. Merging is exact: ``a.merge(b)`` equals the statistics of
the union of both document sets, in any order.

Terms are identified by their 64-bit feature hash (``features.token_hashes`` seed 0), not by their text:
the tables are numpy arrays sorted by hash, looked up with ``searchsorted``.

Entropies follow E-Simhash (Chen et al. 2019) and the new-word-discovery literature: for a word w,
E_l(w) = -sum_a P(a | before w) log2 P(a | before w) over the words a seen right before w in the corpus,
E_r likewise after w; H(w) = (E_l(w) + E_r(w)) / 2. Neighbours are counted over all jieba tokens of a
document (stop words included: they are real neighbours), within a document.

Binary layout (``to_bytes``): an ``.npz`` archive (numpy, no pickle) with arrays ``version`` (int64, 1),
``documents`` (int64), ``df_keys`` (uint64, sorted, unique), ``df_counts`` (int64), ``bigram_left`` and
``bigram_right`` (uint64, sorted lexicographically by (left, right), unique pairs), ``bigram_counts``
(int64), ``initial_counts`` (int64, one per letter of ``PINYIN_ALPHABET``).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from fptrack.fingerprint.features import token_hashes, tokenize
from fptrack.fingerprint.pinyin import PINYIN_ALPHABET, initial_counts, pinyin_initials

__all__ = ["CorpusStats", "document_terms"]

_FORMAT_VERSION = 1


@dataclass(frozen=True)
class _DocumentTerms:
    distinct: np.ndarray  # sorted unique token hashes
    left: np.ndarray  # bigram (left, right) token hashes
    right: np.ndarray
    initials: np.ndarray  # counts per PINYIN_ALPHABET letter


def document_terms(normalized: str) -> _DocumentTerms:
    """What one normalised document contributes to the statistics."""
    hashes = token_hashes(tokenize(normalized), 0)
    return _DocumentTerms(
        distinct=np.unique(hashes),
        left=hashes[:-1].copy(),
        right=hashes[1:].copy(),
        initials=initial_counts(pinyin_initials(normalized), PINYIN_ALPHABET),
    )


def _sum_by_key(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, inverse = np.unique(keys, return_inverse=True)
    return uniq, np.bincount(inverse, weights=counts, minlength=uniq.size).astype(np.int64)


def _sum_by_pair(
    left: np.ndarray, right: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if left.size == 0:
        return left.copy(), right.copy(), counts.astype(np.int64)
    order = np.lexsort((right, left))
    left, right, counts = left[order], right[order], counts[order]
    new = np.ones(left.size, dtype=bool)
    new[1:] = (left[1:] != left[:-1]) | (right[1:] != right[:-1])
    starts = np.flatnonzero(new)
    return left[starts], right[starts], np.add.reduceat(counts.astype(np.int64), starts)


def _group_entropy(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For keys sorted into groups: (group key, Shannon entropy in bits of the group's count distribution)."""
    if keys.size == 0:
        return keys.copy(), np.zeros(0)
    new = np.ones(keys.size, dtype=bool)
    new[1:] = keys[1:] != keys[:-1]
    starts = np.flatnonzero(new)
    c = counts.astype(np.float64)
    totals = np.add.reduceat(c, starts)
    clogc = np.add.reduceat(c * np.log2(c), starts)
    return keys[starts], np.log2(totals) - clogc / totals


@dataclass(frozen=True, eq=False)
class CorpusStats:
    """Mergeable corpus statistics (see the module docstring). Build with
    ``CorpusStats.empty().update(texts)``."""

    documents: int
    df_keys: np.ndarray
    df_counts: np.ndarray
    bigram_left: np.ndarray
    bigram_right: np.ndarray
    bigram_counts: np.ndarray
    initial_counts: np.ndarray

    @classmethod
    def empty(cls) -> CorpusStats:
        u = np.zeros(0, dtype=np.uint64)
        i = np.zeros(0, dtype=np.int64)
        return cls(0, u, i, u, u, i, np.zeros(len(PINYIN_ALPHABET), dtype=np.int64))

    @classmethod
    def from_documents(cls, normalized_texts: Iterable[str]) -> CorpusStats:
        return cls.empty().update(normalized_texts)

    def update(self, normalized_texts: Iterable[str]) -> CorpusStats:
        """A new CorpusStats with the given normalised documents added (one batch, one merge)."""
        terms = [document_terms(t) for t in normalized_texts]
        if not terms:
            return self
        distinct = np.concatenate([t.distinct for t in terms])
        left = np.concatenate([t.left for t in terms])
        right = np.concatenate([t.right for t in terms])
        df_keys, df_counts = _sum_by_key(distinct, np.ones(distinct.size, dtype=np.int64))
        bl, br, bc = _sum_by_pair(left, right, np.ones(left.size, dtype=np.int64))
        batch = CorpusStats(
            len(terms),
            df_keys,
            df_counts,
            bl,
            br,
            bc,
            np.sum([t.initials for t in terms], axis=0).astype(np.int64),
        )
        return self.merge(batch)

    def merge(self, other: CorpusStats) -> CorpusStats:
        """Statistics of the union of both corpora (documents are assumed distinct)."""
        if other.documents == 0:
            return self
        if self.documents == 0:
            return other
        df_keys, df_counts = _sum_by_key(
            np.concatenate([self.df_keys, other.df_keys]), np.concatenate([self.df_counts, other.df_counts])
        )
        bl, br, bc = _sum_by_pair(
            np.concatenate([self.bigram_left, other.bigram_left]),
            np.concatenate([self.bigram_right, other.bigram_right]),
            np.concatenate([self.bigram_counts, other.bigram_counts]),
        )
        return CorpusStats(
            self.documents + other.documents,
            df_keys,
            df_counts,
            bl,
            br,
            bc,
            self.initial_counts + other.initial_counts,
        )

    # -- lookups -----------------------------------------------------------------------------------

    def document_frequency(self, hashes: np.ndarray) -> np.ndarray:
        """df(t) for each term hash (0 for unseen terms)."""
        return _lookup(self.df_keys, self.df_counts.astype(np.float64), hashes).astype(np.int64)

    def idf(self, hashes: np.ndarray) -> np.ndarray:
        """idf(t) = max(0, ln(|D| / (df(t) + 1))) per term hash; 1.0 everywhere for an empty corpus."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        if self.documents == 0:
            return np.ones(hashes.size)
        df = self.document_frequency(hashes)
        return np.maximum(0.0, np.log(self.documents / (df + 1.0)))

    @functools.cached_property
    def _entropy_table(self) -> tuple[np.ndarray, np.ndarray]:
        right_keys, right_h = _group_entropy(self.bigram_left, self.bigram_counts)  # sorted by left already
        order = np.lexsort((self.bigram_left, self.bigram_right))
        left_keys, left_h = _group_entropy(self.bigram_right[order], self.bigram_counts[order])
        keys = np.union1d(left_keys, right_keys)
        h = (_lookup(left_keys, left_h, keys) + _lookup(right_keys, right_h, keys)) / 2.0
        return keys, h

    def entropy(self, hashes: np.ndarray) -> np.ndarray:
        """H(w) = (E_l(w) + E_r(w)) / 2 in bits per term hash (0 for unseen terms)."""
        keys, h = self._entropy_table
        return _lookup(keys, h, np.asarray(hashes, dtype=np.uint64))

    def pinyin_reference(self, alphabet: str = PINYIN_ALPHABET) -> np.ndarray | None:
        """Relative frequency of each ``alphabet`` letter among pinyin initials; None before any text."""
        counts = dict(zip(PINYIN_ALPHABET, self.initial_counts.tolist()))
        vector = np.array([counts.get(c, 0) for c in alphabet], dtype=np.float64)
        total = vector.sum()
        return vector / total if total > 0 else None

    # -- serialisation -----------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez_compressed(
            buffer,
            version=np.array([_FORMAT_VERSION], dtype=np.int64),
            documents=np.array([self.documents], dtype=np.int64),
            df_keys=self.df_keys,
            df_counts=self.df_counts,
            bigram_left=self.bigram_left,
            bigram_right=self.bigram_right,
            bigram_counts=self.bigram_counts,
            initial_counts=self.initial_counts,
        )
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> CorpusStats:
        try:
            archive = np.load(io.BytesIO(data), allow_pickle=False)
        except Exception as exc:  # numpy raises several types for damaged archives
            raise ValueError(f"not a serialised CorpusStats: {exc}") from exc
        with archive:
            version = int(archive["version"][0])
            if version != _FORMAT_VERSION:
                raise ValueError(
                    f"CorpusStats format version {version} is not supported (expected {_FORMAT_VERSION})"
                )
            return cls(
                int(archive["documents"][0]),
                archive["df_keys"].astype(np.uint64),
                archive["df_counts"].astype(np.int64),
                archive["bigram_left"].astype(np.uint64),
                archive["bigram_right"].astype(np.uint64),
                archive["bigram_counts"].astype(np.int64),
                archive["initial_counts"].astype(np.int64),
            )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CorpusStats):
            return NotImplemented
        return self.documents == other.documents and all(
            np.array_equal(getattr(self, f), getattr(other, f))
            for f in (
                "df_keys",
                "df_counts",
                "bigram_left",
                "bigram_right",
                "bigram_counts",
                "initial_counts",
            )
        )

    __hash__ = None  # type: ignore[assignment]


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[keys == q] for each q in query, 0 where q is not among the (sorted, unique) keys."""
    query = np.asarray(query, dtype=np.uint64)
    if keys.size == 0:
        return np.zeros(query.size)
    idx = np.minimum(np.searchsorted(keys, query), keys.size - 1)
    found = keys[idx] == query
    return np.where(found, values[idx], 0.0)
