"""The permuted-prefix index for Hamming search (Manku, Jain, Das Sarma, "Detecting near-duplicates for web
crawling", WWW 2007).

Split an f-bit fingerprint into ``blocks`` blocks. If two fingerprints differ in at most k bits and ``blocks >
k``, then at least ``blocks - k`` of their blocks are identical (pigeonhole). For every choice of ``blocks -
k`` blocks (C(blocks, blocks - k) tables) the fingerprint is filed under the key made of those blocks; a query
computes its own keys, looks each up by exact match, and verifies ``popcount(a ^ b) <= k``.

Overloaded buckets (simhash-optimization seed): a bucket ``(table t, key p)`` that holds far more than the
mean is re-split. Its fingerprints agree with a near neighbour on the blocks of table t, so they differ in at
most k of the *remaining* bits; cutting those remaining bits into k + 1 sub-blocks, at least one sub-block is
identical (pigeonhole again). Each fingerprint of the bucket is therefore filed under k + 1 sub-keys ``(p <<
width(sub-block s)) | sub-block s``, and a query whose own key falls in the bucket looks up its k + 1 sub-keys
instead of the whole bucket. With the default layout (64 bits, k = 3, 4 blocks) a key is 16 bits and the
remaining 48 bits give four 12-bit sub-blocks: the seed's "re-split by 12 more bits".

One description of the layout derives everything: :meth:`IndexLayout.keys` / :meth:`IndexLayout.split_keys`
compute keys in Python (the query, the writer of re-split rows) and :meth:`IndexLayout.key_sql` /
:meth:`IndexLayout.split_key_sql` render the *same* bit gathering as a SQL expression that PostgreSQL and
SQLite evaluate identically (the expression indexes of the store). Keys are signed 64-bit so they fit a
BIGINT."""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations

__all__ = [
    "DEFAULT_LAYOUT",
    "IndexLayout",
    "to_signed64",
    "to_unsigned64",
]

_MASK64 = (1 << 64) - 1

Span = tuple[int, int]  # (shift, width): the bits (value >> shift) & (2**width - 1)


def to_signed64(value: int) -> int:
    """Map an unsigned 64-bit fingerprint to the signed range of a BIGINT column."""
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def to_unsigned64(value: int) -> int:
    return value & _MASK64


class IndexLayout:
    """f bits in ``blocks`` blocks, found within k bits: C(blocks, blocks - k) tables.

    Block i covers bits ``[edges[i], edges[i+1])`` counted from the most significant end, edges spread as
    evenly as integer widths allow. Table t keys on the t-th combination (in :func:`itertools.combinations`
    order) of ``blocks - k`` blocks, concatenated most significant first.
    """

    __slots__ = ("_splits", "_tables", "bits", "blocks", "k")

    def __init__(self, bits: int = 64, k: int = 3, blocks: int = 4) -> None:
        if not 0 <= k < blocks <= bits:
            raise ValueError(f"need 0 <= k < blocks <= bits, got bits={bits} k={k} blocks={blocks}")
        if bits > 64:
            raise ValueError(f"the store indexes fingerprints of at most 64 bits, got bits={bits}")
        self.bits, self.k, self.blocks = bits, k, blocks
        self._tables = _table_spans(bits, blocks, k)
        self._splits = tuple(_split_spans(bits, spans, k) for spans in self._tables)

    # ------------------------------------------------------------------------------------------- shape

    @property
    def table_count(self) -> int:
        return len(self._tables)

    @property
    def name(self) -> str:
        """A short identifier used in index names and in the hot-bucket registry, e.g. ``f64k3b4``."""
        return f"f{self.bits}k{self.k}b{self.blocks}"

    @property
    def kind(self) -> str:
        """The ``fingerprints.kind`` of the Simhashes this layout indexes."""
        return f"simhash{self.bits}"

    def key_bits(self, table_no: int) -> int:
        """Width in bits of table ``table_no``'s key."""
        return sum(width for _, width in self._tables[table_no])

    def expected_bucket_size(self, count: int, table_no: int = 0) -> float:
        """Mean bucket size of ``count`` uniformly random fingerprints: count / 2**key_bits (the seed's
        mean)."""
        return count / float(1 << self.key_bits(table_no))

    # -------------------------------------------------------------------------------------------- keys

    def keys(self, fingerprint: int) -> list[tuple[int, int]]:
        """(table number, key) for every table."""
        fingerprint &= (1 << self.bits) - 1
        return [(t, to_signed64(_gather(fingerprint, spans))) for t, spans in enumerate(self._tables)]

    def split_keys(self, fingerprint: int, table_no: int) -> list[tuple[int, int]]:
        """(sub-table number, sub-key) for the k + 1 sub-tables of table ``table_no`` (re-split buckets)."""
        fingerprint &= (1 << self.bits) - 1
        return [
            (s, to_signed64(_gather(fingerprint, spans))) for s, spans in enumerate(self._splits[table_no])
        ]

    def key_sql(self, table_no: int, column: str) -> str:
        """SQL expression computing :meth:`keys`' key of table ``table_no`` from a BIGINT ``column``."""
        return _gather_sql(self._tables[table_no], column, self.bits)

    def split_key_sql(self, table_no: int, sub_no: int, column: str) -> str:
        """SQL expression computing :meth:`split_keys`' sub-key ``sub_no`` of table ``table_no``."""
        return _gather_sql(self._splits[table_no][sub_no], column, self.bits)

    # ------------------------------------------------------------------------------------------ values

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexLayout) and (self.bits, self.k, self.blocks) == (
            other.bits,
            other.k,
            other.blocks,
        )

    def __hash__(self) -> int:
        return hash((self.bits, self.k, self.blocks))

    def __repr__(self) -> str:
        return f"IndexLayout(bits={self.bits}, k={self.k}, blocks={self.blocks})"

    @classmethod
    def from_name(cls, name: str) -> IndexLayout:
        """Inverse of :attr:`name` (``"f64k3b4"``)."""
        import re

        found = re.fullmatch(r"f(\d+)k(\d+)b(\d+)", name)
        if not found:
            raise ValueError(f"{name!r} is not an index layout name like 'f64k3b4'")
        bits, k, blocks = (int(g) for g in found.groups())
        return cls(bits, k, blocks)


# ------------------------------------------------------------------------------------------------ helpers


def _block_spans(bits: int, blocks: int) -> list[Span]:
    edges = [round(i * bits / blocks) for i in range(blocks + 1)]
    return [(bits - edges[i + 1], edges[i + 1] - edges[i]) for i in range(blocks)]


@lru_cache(maxsize=32)
def _table_spans(bits: int, blocks: int, k: int) -> tuple[tuple[Span, ...], ...]:
    spans = _block_spans(bits, blocks)
    return tuple(tuple(spans[i] for i in chosen) for chosen in combinations(range(blocks), blocks - k))


def _split_spans(bits: int, table: tuple[Span, ...], k: int) -> tuple[tuple[Span, ...], ...]:
    """For each of the k + 1 sub-blocks of the bits outside ``table``: the table's spans plus that
    sub-block."""
    used = {shift + i for shift, width in table for i in range(width)}
    rest = [p for p in range(bits - 1, -1, -1) if p not in used]  # most significant first
    parts = k + 1
    edges = [round(i * len(rest) / parts) for i in range(parts + 1)]
    result = []
    for s in range(parts):
        positions = rest[edges[s] : edges[s + 1]]
        result.append(table + _positions_to_spans(positions))
    return tuple(result)


def _positions_to_spans(positions: list[int]) -> tuple[Span, ...]:
    """Bit positions (descending) to (shift, width) runs of consecutive bits."""
    spans: list[Span] = []
    for p in positions:
        if spans and spans[-1][0] == p + 1:
            _shift, width = spans[-1]
            spans[-1] = (p, width + 1)
        else:
            spans.append((p, 1))
    return tuple(spans)


def _gather(fingerprint: int, spans: tuple[Span, ...]) -> int:
    key = 0
    for shift, width in spans:
        key = (key << width) | ((fingerprint >> shift) & ((1 << width) - 1))
    return key


def _gather_sql(spans: tuple[Span, ...], column: str, bits: int) -> str:
    # Both PostgreSQL (BIGINT) and SQLite (64-bit INTEGER) shift right arithmetically; masking after the shift
    # removes the sign bits, so a key narrower than 64 bits is non-negative and identical on both backends.
    total = sum(width for _, width in spans)
    if total >= 64:
        if spans != ((0, 64),):
            raise ValueError("a 64-bit key must be the whole fingerprint")
        return column
    parts = []
    remaining = total
    for shift, width in spans:
        remaining -= width
        part = (
            f"(({column} >> {shift}) & {(1 << width) - 1})" if shift else f"({column} & {(1 << width) - 1})"
        )
        parts.append(f"({part} << {remaining})" if remaining else part)
    return "(" + " | ".join(parts) + ")"


DEFAULT_LAYOUT = IndexLayout(64, 3, 4)
"""Chosen by measurement (docs/storage.md): 4 tables of 16-bit keys are the smallest index that answers a k =
3 query at 10M fingerprints well inside the latency target; more blocks multiply the disk for no useful
gain."""
