"""MinHash (Broder 1997) with LSH banding, and the exact Jaccard / containment it estimates (ALGORITHMS.md
5-6).

On the research shelf, not in the product: on chapter-level piracy the winnowing finds every copy it finds,
and for grouping pirate sites into networks MinHash LSH over each site's set of page-Simhash keys lost to
counting close Simhash pairs (precision 0.93-0.94 against 1.0, ``benchmarks.accuracy.discovery``,
docs/discovery.md), so no job of the product uses it.

Input is a set of 64-bit shingle hashes (``features.char_shingle_hashes``), so nothing is hashed twice.

Two signature schemes, both unbiased estimators of Jaccard similarity J(A, B) = |A n B| / |A u B|:

- ``"oph"`` (default): one permutation hashing (Li, Owen, Zhang, NIPS 2012; the seed's "scheme 2") with
  rotation densification (Shrivastava & Li, ICML 2014). The (already uniformly mixed) 64-bit hash is the
  permutation; its top log2(n) bits choose one of n bins and each signature value is the minimum hash that
  falls into its bin. An empty bin (only for sets of a few hundred elements or fewer) borrows the value of
  the next non-empty bin to its right, circularly, plus a per-distance offset, which keeps
  P(sig_i(A) = sig_i(B)) = J. Cost: one pass over the sorted distinct hashes, independent of n.
- ``"affine"``: n classical hash functions h_i(x) = (a_i x + b_i) mod 2^64 over the fmix64-mixed hash, each
  signature value min_x h_i(x) (``num_perm`` x ``len(set)`` work). Kept as the textbook reference.

Estimate: the fraction of equal positions; standard error sqrt(J (1 - J) / n).

Banding (Indyk & Motwani; Leskovec, Rajaraman, Ullman ch. 3): b bands of r rows; two sets become
candidates when all r values of at least one band agree: P(candidate) = 1 - (1 - s^r)^b
(``candidate_probability``). Band keys are hashes of (band number, the band's values), signed 64-bit so
they go into a BIGINT column directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fptrack.fingerprint.features import fmix64

__all__ = [
    "MinHashParams",
    "candidate_probability",
    "containment",
    "estimate_jaccard",
    "jaccard",
    "lsh_band_keys",
    "minhash_signature",
    "threshold_for",
]

_U64 = np.uint64
_SCHEMES = ("oph", "affine")


@dataclass(frozen=True)
class MinHashParams:
    """MinHash configuration; ``bands * rows`` must equal ``num_perm``. Defaults: 128 = 32 bands x 4 rows."""

    num_perm: int = 128
    scheme: str = "oph"
    bands: int = 32
    rows: int = 4
    seed: int = 1

    def __post_init__(self) -> None:
        if self.scheme not in _SCHEMES:
            raise ValueError(f"unknown MinHash scheme {self.scheme!r}; choose one of {', '.join(_SCHEMES)}")
        if self.num_perm < 1:
            raise ValueError(f"num_perm must be >= 1, got {self.num_perm}")
        if self.scheme == "oph" and self.num_perm & (self.num_perm - 1):
            raise ValueError(f"one-permutation MinHash needs a power-of-two num_perm, got {self.num_perm}")
        if self.bands * self.rows != self.num_perm:
            raise ValueError(
                f"bands x rows must equal num_perm: {self.bands} x {self.rows} != {self.num_perm}"
            )


def _affine_coefficients(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64) * _U64(2) + _U64(1)  # odd multipliers
    b = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64)
    return a, b


def _distinct_sorted(values: np.ndarray) -> np.ndarray:
    values = np.sort(values)
    if values.size > 1:
        keep = np.empty(values.size, dtype=bool)
        keep[0] = True
        np.not_equal(values[1:], values[:-1], out=keep[1:])
        values = values[keep]
    return values


def minhash_signature(shingle_hashes: np.ndarray, params: MinHashParams = MinHashParams()) -> np.ndarray:
    """The MinHash signature (uint64, length ``num_perm``) of the set of ``shingle_hashes``.

    The empty set gets a signature of all 2^64 - 1, which matches nothing but another empty set.
    """
    raw = np.asarray(shingle_hashes)
    values = raw.view(_U64) if raw.dtype == np.int64 else raw.astype(_U64, copy=False)
    n = params.num_perm
    empty = np.full(n, np.iinfo(_U64).max, dtype=_U64)
    if values.size == 0:
        return empty
    if params.scheme == "affine":
        a, b = _affine_coefficients(n, params.seed)
        mixed = _distinct_sorted(fmix64(values ^ _U64(params.seed)))
        with np.errstate(over="ignore"):
            out = np.empty(n, dtype=_U64)
            chunk = max(1, (1 << 22) // n)  # bound the temporary (chunk x n) matrix
            out[:] = empty
            for start in range(0, mixed.size, chunk):
                part = mixed[start : start + chunk]
                np.minimum(out, (part[:, None] * a[None, :] + b[None, :]).min(axis=0), out=out)
        return out
    # one permutation hashing: mix with the seed so different seeds give independent permutations
    # fmix64 is a bijection, so distinct inputs stay distinct: sort and drop repeats once
    mixed = _distinct_sorted(fmix64(values ^ _U64(params.seed)))
    shift = 64 - int(math.log2(n))
    bins = (mixed >> _U64(shift)).astype(np.int64) if shift < 64 else np.zeros(mixed.size, dtype=np.int64)
    first = np.searchsorted(bins, np.arange(n), side="left")
    present = np.zeros(n, dtype=bool)
    in_range = first < bins.size
    present[in_range] = bins[first[in_range]] == np.arange(n)[in_range]
    low_mask = _U64((1 << shift) - 1) if shift < 64 else _U64(np.iinfo(_U64).max)
    sig = empty.copy()
    sig[present] = mixed[first[present]] & low_mask
    if not present.all():
        # rotation densification: borrow from the next non-empty bin to the right (circular),
        # offset by the distance so borrowed values differ from the donor's own
        idx = np.flatnonzero(present)
        positions = np.arange(n)
        nxt = np.searchsorted(idx, positions, side="left")
        donor = idx[nxt % idx.size]
        distance = (donor - positions) % n
        borrowed = ~present
        with np.errstate(over="ignore"):
            sig[borrowed] = sig[donor[borrowed]] + distance[borrowed].astype(_U64) * _U64(
                1 << shift if shift < 64 else 1
            )
    return sig


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """Fraction of equal positions of two signatures made with the same parameters."""
    if sig_a.shape != sig_b.shape:
        raise ValueError(f"signatures of different lengths: {sig_a.shape} vs {sig_b.shape}")
    return float(np.mean(sig_a == sig_b)) if sig_a.size else 0.0


def lsh_band_keys(signature: np.ndarray, params: MinHashParams = MinHashParams()) -> tuple[int, ...]:
    """One signed 64-bit key per band: a hash of (band number, the band's ``rows`` values)."""
    sig = np.asarray(signature, dtype=_U64)
    if sig.size != params.num_perm:
        raise ValueError(f"signature has {sig.size} values, params expect {params.num_perm}")
    rows = sig.reshape(params.bands, params.rows)
    with np.errstate(over="ignore"):
        acc = fmix64(np.arange(params.bands, dtype=_U64) + _U64(0x9E3779B97F4A7C15))
        for j in range(params.rows):
            acc = fmix64(acc * _U64(0xBF58476D1CE4E5B9) + rows[:, j])
    return tuple(acc.view(np.int64).tolist())


def candidate_probability(s: float, r: int, b: int) -> float:
    """P(two sets of Jaccard similarity s share at least one band) = 1 - (1 - s^r)^b."""
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"similarity s must be in [0, 1], got {s}")
    if r < 1 or b < 1:
        raise ValueError(f"rows r and bands b must be >= 1, got r={r}, b={b}")
    return 1.0 - (1.0 - s**r) ** b


def threshold_for(r: int, b: int) -> float:
    """The similarity where the banding S-curve is steepest, about (1/b)^(1/r)."""
    return float((1.0 / b) ** (1.0 / r))


def _as_set(values: np.ndarray) -> np.ndarray:
    return np.unique(np.asarray(values))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact |A n B| / |A u B| of two collections of hashes (as sets); 1.0 for two empty sets."""
    sa, sb = _as_set(a), _as_set(b)
    union = np.union1d(sa, sb).size
    if union == 0:
        return 1.0
    return np.intersect1d(sa, sb, assume_unique=True).size / union


def containment(a: np.ndarray, b: np.ndarray) -> float:
    """Exact |A n B| / |A|: the share of A found in B (a partial copy A inside a long page B scores 1)."""
    sa, sb = _as_set(a), _as_set(b)
    if sa.size == 0:
        return 0.0
    return np.intersect1d(sa, sb, assume_unique=True).size / sa.size
