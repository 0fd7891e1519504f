"""The full set of fingerprints a crawled page (or a registered chapter) needs, computed in one pass.

One normalisation, one segmentation, one shingle hashing, then every fingerprint of ALGORITHMS.md:
Simhash (the scheme of ``simhash``), MinHash + LSH band keys over character shingles, pinyin DNA,
winnowing over the normalised text and over the pinyin initials, and KSentence. Parameters are one frozen
value, so writer and query always agree; defaults are the measured ones (docs/fingerprints.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fingerprint.features import char_shingle_hashes, tokenize
from fingerprint.ksentence import ksentence
from fingerprint.minhash import MinHashParams, lsh_band_keys, minhash_signature
from fingerprint.normalize import NormalizedText, normalize
from fingerprint.pinyin_dna import DnaParams, dna_codes, pinyin_initials
from fingerprint.simhash import SimhashParams, simhash_tokens
from fingerprint.stats import CorpusStats
from fingerprint.winnowing import winnow

__all__ = ["PageFingerprints", "PageParams", "fingerprint_page"]


@dataclass(frozen=True)
class PageParams:
    simhash: SimhashParams = field(default_factory=SimhashParams)
    minhash: MinHashParams = field(default_factory=MinHashParams)
    shingle_k: int = 5
    dna: DnaParams = field(default_factory=DnaParams)
    winnow_k: int = 8
    winnow_initials_k: int = 12  # 23-letter alphabet: longer k-grams for the same specificity
    winnow_w: int = 16
    ksentence_k: int = 3

    def __post_init__(self) -> None:
        if min(self.shingle_k, self.winnow_k, self.winnow_initials_k, self.winnow_w, self.ksentence_k) < 1:
            raise ValueError("shingle_k, winnow_k, winnow_initials_k, winnow_w and ksentence_k must all be >= 1")


@dataclass(frozen=True, eq=False)
class PageFingerprints:
    """Every fingerprint of one text. Ints are as documented per module: ``simhash`` unsigned (64 or 128 bits),
    everything else fits a signed 64-bit BIGINT."""

    normalized: NormalizedText
    initials: str
    simhash: int
    minhash: np.ndarray
    band_keys: tuple[int, ...]
    dna: tuple[int, ...]
    winnow_text: tuple[tuple[int, int], ...]
    winnow_initials: tuple[tuple[int, int], ...]
    ksentence: int


def fingerprint_page(text: str, params: PageParams = PageParams(), stats: CorpusStats | None = None) -> PageFingerprints:
    """All fingerprints of original ``text``; ``stats`` feeds tfidf/entropy weights and the DNA reference."""
    norm = normalize(text)
    initials = pinyin_initials(norm.text)
    sim = simhash_tokens(tokenize(norm.text), params.simhash, stats)
    signature = minhash_signature(char_shingle_hashes(norm.text, params.shingle_k), params.minhash)
    reference = stats.pinyin_reference(params.dna.alphabet) if stats is not None else None
    return PageFingerprints(
        normalized=norm,
        initials=initials,
        simhash=sim,
        minhash=signature,
        band_keys=lsh_band_keys(signature, params.minhash),
        dna=dna_codes(initials, params.dna, reference),
        winnow_text=winnow(norm.text, params.winnow_k, params.winnow_w),
        winnow_initials=winnow(initials, params.winnow_initials_k, params.winnow_w),
        ksentence=ksentence(text, params.ksentence_k, normalized=norm).fingerprint,
    )
