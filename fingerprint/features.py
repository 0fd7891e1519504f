"""Features of normalised text: words (jieba tokens, stop words removed), word and character k-shingles,
and the 64-bit hashes every fingerprint is built from (ALGORITHMS.md 2).

Hashing. A feature (a word, a k-gram of characters or of words) is hashed by a polynomial over its code
points modulo 2^64 (prefix sums, so all features of a text are hashed in a few numpy passes, no Python
loop per feature), finished with the MurmurHash3 64-bit finaliser ``fmix64`` so that every output bit
depends on every input bit: Simhash blocks and MinHash bins use the high and the low bits alike
(ALGORITHMS.md 3.1). ``seed`` selects an independent hash function (a different odd base and
finaliser key); 128-bit features are the pair (seed 0, seed 1). The polynomial is not collision-proof
against an adversary who controls strings of thousands of characters (Thue-Morse strings collide modulo
2^64); features here are words and k-grams of a few characters, where that attack does not apply.

Segmentation uses rjieba (the Rust port of jieba: same dictionary, algorithm and tokens, ~20x faster) in
precise mode with HMM for unknown words.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

__all__ = [
    "STOP_WORDS",
    "char_shingle_hashes",
    "fmix64",
    "hash_strings",
    "segment",
    "token_hashes",
    "tokenize",
]

_U64 = np.uint64
_MASK64 = (1 << 64) - 1

# Function words that carry no content (seed lsh-content-similarity: "noise reduction" of 的/地/得,
# particles, pronouns, common adverbs and conjunctions). Written for this project.
STOP_WORDS: frozenset[str] = frozenset(
    [
        "的",
        "地",
        "得",
        "了",
        "着",
        "过",
        "吗",
        "呢",
        "吧",
        "啊",
        "呀",
        "哦",
        "嘛",
        "么",
        "哈",
        "之",
        "乎",
        "者",
        "也",
        "矣",
        "焉",
        "哉",
        "兮",
        "耳",
        "尔",
        "是",
        "在",
        "和",
        "与",
        "及",
        "或",
        "而",
        "且",
        "并",
        "但",
        "却",
        "就",
        "都",
        "又",
        "也",
        "还",
        "才",
        "很",
        "太",
        "更",
        "最",
        "已",
        "已经",
        "曾",
        "将",
        "把",
        "被",
        "让",
        "给",
        "对",
        "向",
        "从",
        "自",
        "于",
        "以",
        "为",
        "因",
        "因为",
        "所以",
        "如果",
        "虽然",
        "但是",
        "而且",
        "并且",
        "或者",
        "然后",
        "于是",
        "可是",
        "不过",
        "只是",
        "只",
        "仅",
        "不",
        "没",
        "没有",
        "无",
        "非",
        "别",
        "勿",
        "我",
        "你",
        "他",
        "她",
        "它",
        "我们",
        "你们",
        "他们",
        "她们",
        "它们",
        "自己",
        "这",
        "那",
        "此",
        "其",
        "这个",
        "那个",
        "这些",
        "那些",
        "这样",
        "那样",
        "这里",
        "那里",
        "哪",
        "哪里",
        "什么",
        "怎么",
        "如何",
        "一",
        "一个",
        "个",
        "些",
        "每",
        "各",
        "某",
        "所",
        "等",
        "等等",
        "之后",
        "之前",
        "以后",
        "以前",
        "其中",
        "其他",
        "其它",
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "and",
        "or",
        "but",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "this",
        "that",
        "as",
    ]
)

# Polynomial bases (odd, so invertible mod 2^64) and finaliser keys, one pair per seed.
_BASES = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)
_KEYS = (0x243F6A8885A308D3, 0x13198A2E03707344, 0xA4093822299F31D0, 0x082EFA98EC4E6C89)


def fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser (a bijection with full avalanche), vectorised over uint64."""
    return _fmix64_in_place(np.asarray(x, dtype=_U64).copy())


def _fmix64_in_place(x: np.ndarray) -> np.ndarray:
    """:func:`fmix64` of a uint64 array this module owns, written over it (no copy)."""
    x ^= x >> _U64(33)
    x *= _U64(0xFF51AFD7ED558CCD)
    x ^= x >> _U64(33)
    x *= _U64(0xC4CEB9FE1A85EC53)
    x ^= x >> _U64(33)
    return x


@functools.cache
def _powers(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(B^i, B^-i) mod 2^64 for i < n, for the base of ``seed``; grown in powers of two and cached."""
    base = _BASES[seed]
    inverse = pow(base, -1, 1 << 64)
    with np.errstate(over="ignore"):
        pw = np.full(n, base, dtype=_U64)
        pw[0] = 1
        pw = np.cumprod(pw, dtype=_U64)
        inv = np.full(n, inverse, dtype=_U64)
        inv[0] = 1
        inv = np.cumprod(inv, dtype=_U64)
    return pw, inv


def _power_tables(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    size = 1 << max(10, (n - 1).bit_length())
    return _powers(seed, size)


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(_U64)


def _span_hashes(cps: np.ndarray, starts: np.ndarray, ends: np.ndarray, seed: int) -> np.ndarray:
    """Hashes of the code-point spans ``cps[starts[i]:ends[i]]`` (uint64), independent of position."""
    if seed not in range(len(_BASES)):
        raise ValueError(f"seed must be in 0..{len(_BASES) - 1}, got {seed}")
    n = len(cps)
    pw, inv = _power_tables(seed, n + 1)
    with np.errstate(over="ignore"):
        prefix = np.zeros(n + 1, dtype=_U64)
        np.cumsum(cps * inv[:n], out=prefix[1:])
        # sum_{j in [s, e)} cp[j] * B^(e-1-j) = B^(e-1) * (P[e] - P[s]); well defined because B is odd.
        raw = (prefix[ends] - prefix[starts]) * pw[np.maximum(ends - 1, 0)]
        lengths = (ends - starts).astype(_U64)
        raw ^= lengths * _U64(_KEYS[seed] | 1)
        raw += _U64(_KEYS[seed])
    return _fmix64_in_place(raw)


def hash_strings(strings: Sequence[str], seed: int = 0) -> np.ndarray:
    """The feature hash (uint64) of each string; the same function ``token_hashes`` uses."""
    if len(strings) == 0:
        return np.zeros(0, dtype=_U64)
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    return _span_hashes(_code_points("".join(strings)), starts, ends, seed)


def token_hashes(tokens: Sequence[str], seed: int = 0) -> np.ndarray:
    """uint64 hash per token (see the module docstring); ``seed`` picks an independent hash function."""
    return hash_strings(tokens, seed)


@functools.cache
def _jieba():  # type: ignore[no-untyped-def]
    import rjieba

    return rjieba


def tokenize(text: str) -> list[str]:
    """All jieba tokens of ``text`` (precise mode, HMM on), stop words kept; normalised text expected."""
    if not text:
        return []
    return list(_jieba().cut(text))


def segment(text: str) -> list[str]:
    """Content words of normalised ``text``: jieba tokens with ``STOP_WORDS`` removed."""
    return [t for t in tokenize(text) if t not in STOP_WORDS]


@functools.cache
def stop_word_hashes(seed: int = 0) -> np.ndarray:
    """Sorted hashes of ``STOP_WORDS`` (for vectorised stop-word masks)."""
    return np.sort(hash_strings(sorted(STOP_WORDS), seed))


def char_shingle_hashes(text: str, k: int, seed: int = 0) -> np.ndarray:
    """uint64 hash of every character k-gram of ``text``, in order (``len(text) - k + 1`` of them, none if
    shorter); equal to ``hash_strings`` of the k-grams."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    n = len(text) - k + 1
    if n <= 0:
        return np.zeros(0, dtype=_U64)
    if seed not in range(len(_BASES)):
        raise ValueError(f"seed must be in 0..{len(_BASES) - 1}, got {seed}")
    # _span_hashes of the spans [i, i + k), with the gathers of equal-length spans done as slices
    cps = _code_points(text)
    pw, inv = _power_tables(seed, len(cps) + 1)
    with np.errstate(over="ignore"):
        prefix = np.zeros(len(cps) + 1, dtype=_U64)
        np.cumsum(cps * inv[: len(cps)], out=prefix[1:])
        raw = prefix[k:] - prefix[:n]
        raw *= pw[k - 1 : k - 1 + n]
        raw ^= _U64((k * (_KEYS[seed] | 1)) & _MASK64)
        raw += _U64(_KEYS[seed])
    return _fmix64_in_place(raw)
