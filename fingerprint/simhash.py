"""Simhash (Charikar 2002) with the weightings of ALGORITHMS.md 3: tf, tfidf, entropy (E-Simhash), termlen,
and E-Simhash's position option.

For f-bit fingerprints: every feature hash h (f bits) with weight w adds +w to V[i] where bit i of h is
1 and -w where it is 0; bit i of the fingerprint is 1 iff V[i] > 0. Similar documents have fingerprints
at small Hamming distance (Manku, Jain, Das Sarma, WWW 2007: k = 3 at f = 64).

Weightings (``SimhashParams.scheme``), for a term t of document d with n(t, d) occurrences:

- ``tf``      w = n(t, d)  (classic Simhash).
- ``tfidf``   w = tf(t, d) * idf(t), tf = n(t, d) / sum_i n(i, d) (``tf_mode="relative"``, the spec) or
              n(t, d) (``tf_mode="raw"``); idf(t) = max(0, ln(|D| / (df(t) + 1))) from ``CorpusStats``
              (no statistics: idf = 1).
- ``entropy`` E-Simhash (Chen et al., "基于信息熵加权的Simhash算法", Computer Engineering and Applications
              2019): H(t) = (E_l(t) + E_r(t)) / 2, the mean of the left and right neighbour entropies from
              ``CorpusStats``; w = sqrt((tfidf^2 + H^2) / 2), and a weight above W_t is replaced by W'_t
              (paper: W_t = 90) so that no single term decides the fingerprint.
- ``termlen`` (simhash-optimization seed) w = tfidf * exp(-(len(t) - mu)^2 / (2 sigma^2)), mu = 4.51,
              sigma = 2.207: the normal density of the term length, scaled to peak 1.

``position=True`` (E-Simhash) XORs each term's hash with a code of where the term first occurs in
document order, so that "能力比学历重要性高" and "学历比能力重要性高" no longer hash alike. The paper uses
the term's rank; ``position_buckets=b`` uses the coarser bucket floor(b * first_index / n) instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from fptrack.fingerprint.features import STOP_WORDS, fmix64, stop_word_hashes, token_hashes, tokenize

if TYPE_CHECKING:
    from fptrack.fingerprint.stats import CorpusStats

__all__ = ["SCHEMES", "SimhashParams", "hamming", "simhash", "simhash_text", "simhash_tokens", "term_weights"]

Scheme = Literal["tf", "tfidf", "entropy", "termlen"]
SCHEMES: tuple[str, ...] = ("tf", "tfidf", "entropy", "termlen")
_POSITION_KEY = np.uint64(0x5851F42D4C957F2D)


@dataclass(frozen=True)
class SimhashParams:
    """Which Simhash to compute. Defaults: 64 bits, tf weights (no corpus statistics needed)."""

    bits: int = 64
    scheme: str = "tf"
    position: bool = False
    position_buckets: int | None = None
    tf_mode: str = "relative"
    weight_cap: float = 90.0
    weight_cap_value: float = 90.0
    termlen_mu: float = 4.51
    termlen_sigma: float = 2.207

    def __post_init__(self) -> None:
        if self.bits not in (64, 128):
            raise ValueError(f"Simhash bits must be 64 or 128, got {self.bits}")
        if self.scheme not in SCHEMES:
            raise ValueError(f"unknown Simhash weighting {self.scheme!r}; choose one of {', '.join(SCHEMES)}")
        if self.tf_mode not in ("relative", "raw"):
            raise ValueError(f"tf_mode must be 'relative' or 'raw', got {self.tf_mode!r}")
        if self.position_buckets is not None and self.position_buckets < 1:
            raise ValueError(f"position_buckets must be >= 1 or None, got {self.position_buckets}")
        if self.weight_cap <= 0 or self.weight_cap_value <= 0:
            raise ValueError("weight_cap and weight_cap_value must be positive")


def hamming(a: int, b: int) -> int:
    """Number of differing bits of two fingerprints (unsigned or signed ints of the same width)."""
    x = a ^ b
    if x < 0:
        x &= (1 << 128) - 1 if max(a.bit_length(), b.bit_length()) > 64 else (1 << 64) - 1
    return x.bit_count()


def _as_hash_matrix(features: Sequence[str] | np.ndarray, bits: int) -> np.ndarray:
    """(n, bits // 64) uint64 matrix of feature hashes."""
    if isinstance(features, np.ndarray):
        arr = np.asarray(features)
        if arr.dtype == np.int64:
            arr = arr.view(np.uint64)
        if arr.dtype != np.uint64:
            raise ValueError(f"feature hashes must be uint64 (or int64), got {arr.dtype}")
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2 or arr.shape[1] != bits // 64:
            raise ValueError(f"{bits}-bit Simhash needs hashes of shape (n, {bits // 64}), got {arr.shape}")
        return arr
    words = list(features)
    cols = [token_hashes(words, seed) for seed in range(bits // 64)]
    return np.stack(cols, axis=1) if cols[0].size else np.zeros((0, bits // 64), dtype=np.uint64)


def simhash(
    features: Sequence[str] | np.ndarray, weights: Sequence[float] | np.ndarray | None = None, bits: int = 64
) -> int:
    """Weighted Simhash of ``features`` as an unsigned ``bits``-bit int.

    ``features`` are strings (hashed with ``features.token_hashes``; seed 0 gives bits 0-63, seed 1 bits
    64-127) or precomputed uint64 hashes of shape (n,) for 64 bits or (n, 2) for 128 bits. ``weights``
    default to 1 per feature, so repeated features count as often as they occur (tf). An empty feature
    list gives 0.
    """
    if bits not in (64, 128):
        raise ValueError(f"Simhash bits must be 64 or 128, got {bits}")
    hashes = _as_hash_matrix(features, bits)
    n = hashes.shape[0]
    if weights is None:
        w = np.ones(n, dtype=np.float64)
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (n,):
            raise ValueError(f"got {w.shape[0] if w.ndim else 'scalar'} weights for {n} features")
    if n == 0:
        return 0
    # Column j of `bit_matrix` is bit j of the fingerprint (little-endian bytes, little bit order).
    as_bytes = np.ascontiguousarray(hashes).view(np.uint8).reshape(n, bits // 8)
    bit_matrix = np.unpackbits(as_bytes, axis=1, bitorder="little")
    positive = w @ bit_matrix  # sum of the weights of features with bit j set
    negative = w @ (1 - bit_matrix)
    packed = np.packbits(positive > negative, bitorder="little")
    return int.from_bytes(packed.tobytes(), "little")


def term_weights(
    unique_hashes: np.ndarray,
    counts: np.ndarray,
    term_lengths: np.ndarray,
    params: SimhashParams,
    stats: CorpusStats | None,
) -> np.ndarray:
    """The weight of each distinct term under ``params.scheme`` (see the module docstring)."""
    counts = counts.astype(np.float64)
    if params.scheme == "tf":
        return counts
    total = counts.sum()
    tf = counts / total if params.tf_mode == "relative" and total > 0 else counts
    idf = np.ones_like(tf) if stats is None else stats.idf(unique_hashes)
    tfidf: np.ndarray = tf * idf
    if params.scheme == "tfidf":
        return tfidf
    if params.scheme == "termlen":
        z = (term_lengths.astype(np.float64) - params.termlen_mu) / params.termlen_sigma
        weighted: np.ndarray = tfidf * np.exp(-0.5 * z * z)
        return weighted
    # entropy (E-Simhash)
    h = np.zeros_like(tf) if stats is None else stats.entropy(unique_hashes)
    w = np.sqrt((tfidf * tfidf + h * h) / 2.0)
    return np.where(w > params.weight_cap, params.weight_cap_value, w)


def simhash_tokens(
    tokens: Sequence[str], params: SimhashParams = SimhashParams(), stats: CorpusStats | None = None
) -> int:
    """Simhash of a token sequence (all jieba tokens; stop words are removed here)."""
    if params.bits == 64 and not params.position and params.scheme == "tf":
        return _tf_simhash(tokens)
    h0 = token_hashes(tokens, 0)
    stops = stop_word_hashes(0)
    if params.bits == 64 and not params.position and params.scheme != "termlen":
        # Nothing below needs where terms occur: count distinct terms first, then drop the stop words among
        # them (a few hundred look-ups instead of one per token). Same terms, same counts, same fingerprint.
        uniq, counts = np.unique(h0, return_counts=True)
        content = stops[np.minimum(np.searchsorted(stops, uniq), stops.size - 1)] != uniq
        if not content.any():
            return 0
        uniq, counts = uniq[content], counts[content]
        if params.scheme == "tf":
            return _majority_simhash(uniq, counts)
        weights = term_weights(uniq, counts, np.zeros(uniq.size, dtype=np.int64), params, stats)
        return simhash(uniq, weights, 64)
    content = stops[np.minimum(np.searchsorted(stops, h0), stops.size - 1)] != h0
    h0 = h0[content]
    if h0.size == 0:
        return 0
    uniq, first, counts = np.unique(h0, return_index=True, return_counts=True)
    cols = [uniq]
    content_idx = np.flatnonzero(content)
    if params.bits == 128:
        cols.append(token_hashes([tokens[i] for i in content_idx[first].tolist()], 1))
    # only this scheme looks at term lengths: skip the per-token pass otherwise
    if params.scheme == "termlen":
        lengths = np.fromiter(
            (len(tokens[i]) for i in content_idx[first].tolist()), dtype=np.int64, count=first.size
        )
    else:
        lengths = np.zeros(first.size, dtype=np.int64)
    weights = term_weights(uniq, counts, lengths, params, stats)
    matrix = np.stack(cols, axis=1)
    if params.position:
        if params.position_buckets is None:
            # rank of the term's first occurrence in document order (the paper's position)
            code = np.empty(first.size, dtype=np.uint64)
            code[np.argsort(first, kind="stable")] = np.arange(first.size, dtype=np.uint64)
        else:
            code = (first * params.position_buckets // h0.size).astype(np.uint64)
        matrix = matrix ^ fmix64(code ^ _POSITION_KEY)[:, None]
    return simhash(matrix, weights, params.bits)


def _tf_simhash(tokens: Sequence[str]) -> int:
    """The 64-bit tf Simhash of ``tokens`` (the contract's page Simhash): the distinct tokens counted as
    strings (``Counter``, in C), the stop words dropped among them, and only the distinct ones hashed. The
    same terms and counts as hashing every token and counting the hashes (a page of ~3,000 tokens has ~1,000
    distinct ones), so the same fingerprint (the majority's sums are exact in any order): 0.98 -> 0.82 ms of
    CPU a page of the throughput site."""
    counted = Counter(tokens)
    for word in STOP_WORDS & counted.keys():
        del counted[word]
    if not counted:
        return 0
    words = list(counted)
    counts = np.fromiter(counted.values(), dtype=np.int64, count=len(words))
    return _majority_simhash(token_hashes(words, 0), counts)


def _majority_simhash(hashes: np.ndarray, counts: np.ndarray) -> int:
    """:func:`simhash` of distinct uint64 ``hashes`` weighted by their integer ``counts`` (tf): a bit is set
    when the counts of the hashes holding it outweigh the others', i.e. exceed the total minus them. Float
    sums of integer counts are exact, so this is the same comparison as summing both sides, with one product
    instead of two."""
    bit_matrix = np.unpackbits(hashes.view(np.uint8).reshape(hashes.size, 8), axis=1, bitorder="little")
    weights = counts.astype(np.float64)
    positive = weights @ bit_matrix
    packed = np.packbits(positive > weights.sum() - positive, bitorder="little")
    return int.from_bytes(packed.tobytes(), "little")


def simhash_text(
    normalized: str,
    bits: int = 64,
    scheme: str = "tf",
    stats: CorpusStats | None = None,
    params: SimhashParams | None = None,
) -> int:
    """Segment normalised text, weight its content words, and return the unsigned Simhash.

    ``params`` (when given) overrides ``bits`` and ``scheme``. Schemes other than ``tf`` use ``stats``
    (idf, neighbour entropy) when given; see ``term_weights`` for what happens without them.
    """
    if params is None:
        params = SimhashParams(bits=bits, scheme=scheme)
    return simhash_tokens(tokenize(normalized), params, stats)
