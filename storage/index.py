"""The permuted-prefix index for Hamming search (Manku, Jain, Das Sarma, WWW 2007).

Split an f-bit fingerprint into ``blocks`` equal blocks. If two fingerprints differ in at most k bits and
``blocks > k``, then at least ``blocks - k`` of their blocks are identical (pigeonhole). For every choice of
``blocks - k`` blocks (C(blocks, blocks - k) tables) we store the fingerprint under the key made of those blocks;
a query computes its own keys, looks each up by exact match, and verifies ``popcount(a ^ b) <= k``.

:func:`permuted_prefix_keys` is the one function that derives the keys; the writer and the query both use it.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations

__all__ = ["IndexLayout", "hamming", "permuted_prefix_keys", "to_signed64", "to_unsigned64"]

_MASK64 = (1 << 64) - 1


def to_signed64(value: int) -> int:
    """Map an unsigned 64-bit fingerprint to the signed range of a BIGINT column."""
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def to_unsigned64(value: int) -> int:
    return value & _MASK64


def hamming(a: int, b: int) -> int:
    return ((a ^ b) & _MASK64).bit_count()


class IndexLayout:
    """f bits in ``blocks`` blocks, found within k bits: C(blocks, blocks - k) tables."""

    __slots__ = ("bits", "blocks", "k", "_tables")

    def __init__(self, bits: int = 64, k: int = 3, blocks: int = 4) -> None:
        if not 0 <= k < blocks <= bits:
            raise ValueError(f"need 0 <= k < blocks <= bits, got bits={bits} k={k} blocks={blocks}")
        self.bits, self.k, self.blocks = bits, k, blocks
        self._tables = _table_masks(bits, blocks, k)

    @property
    def table_count(self) -> int:
        return len(self._tables)

    def keys(self, fingerprint: int) -> list[tuple[int, int]]:
        """(table number, key) for every table; keys are signed 64-bit so they fit a BIGINT."""
        fingerprint &= (1 << self.bits) - 1
        return [(t, to_signed64(_gather(fingerprint, spans))) for t, spans in enumerate(self._tables)]

    def __repr__(self) -> str:
        return f"IndexLayout(bits={self.bits}, k={self.k}, blocks={self.blocks})"


def permuted_prefix_keys(fingerprint: int, layout: IndexLayout | None = None) -> list[tuple[int, int]]:
    """The index keys of ``fingerprint`` under ``layout`` (default: 64 bits, k = 3, 4 blocks)."""
    return (layout or _DEFAULT_LAYOUT).keys(fingerprint)


@lru_cache(maxsize=32)
def _table_masks(bits: int, blocks: int, k: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    # block i covers bits [edges[i], edges[i+1]) counted from the most significant end
    edges = [round(i * bits / blocks) for i in range(blocks + 1)]
    spans = [(bits - edges[i + 1], edges[i + 1] - edges[i]) for i in range(blocks)]  # (shift, width)
    return tuple(tuple(spans[i] for i in chosen) for chosen in combinations(range(blocks), blocks - k))


def _gather(fingerprint: int, spans: tuple[tuple[int, int], ...]) -> int:
    key = 0
    for shift, width in spans:
        key = (key << width) | ((fingerprint >> shift) & ((1 << width) - 1))
    return key


_DEFAULT_LAYOUT = IndexLayout()
