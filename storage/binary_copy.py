"""PostgreSQL's binary ``COPY`` format, encoded by numpy: the code index rows of every fingerprint write
(:mod:`storage.fingerprints`) and bulk loads of Simhashes (:mod:`storage.simhash_index`) stream through it.

A stream is :data:`COPY_HEADER`, the rows (:func:`binary_copy_rows`), then :data:`COPY_TRAILER` (PostgreSQL
docs, "COPY", binary format); a ``timestamptz`` travels as microseconds since :data:`PG_EPOCH_US`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

__all__ = ["COPY_HEADER", "COPY_TRAILER", "PG_EPOCH_US", "binary_copy_rows"]

PG_EPOCH_US = int(datetime(2000, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
COPY_TRAILER = (-1).to_bytes(2, "big", signed=True)


def binary_copy_rows(count: int, fields: Sequence[tuple[str, Any]]) -> bytes:
    """``count`` rows in PostgreSQL's binary ``COPY`` format, encoded by numpy (no per-row Python).

    ``fields``: per column, a big-endian numpy type (``">i8"``, ``">i4"``, ``">i2"``, ``"S<n>"`` for text of n
    bytes) and a value or an array of ``count`` values. Layout per row (PostgreSQL docs, "COPY", binary
    format): int16 field count, then per field an int32 length and the value."""
    dtype = np.dtype(
        [("fields", ">i2")]
        + [item for n, (kind, _) in enumerate(fields) for item in ((f"len{n}", ">i4"), (f"v{n}", kind))]
    )
    rows = np.empty(count, dtype=dtype)
    rows["fields"] = len(fields)
    for n, (kind, value) in enumerate(fields):
        rows[f"len{n}"] = np.dtype(kind).itemsize
        rows[f"v{n}"] = value
    return rows.tobytes()
