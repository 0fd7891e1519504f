"""Overloaded Simhash buckets: the seed's re-split of a permuted-table bucket that holds far more than the
mean.

A re-split bucket's fingerprints are filed under k + 1 sub-keys each (:meth:`IndexLayout.split_keys`) in
``simhash_hot_index``; later writes into the bucket are filed there too, and queries falling into it read the
sub-keys only (:func:`storage.simhash_index.simhash_candidates`). Which buckets are re-split is read from the
registry (``simhash_hot_buckets``) and cached per database for the queries (:func:`hot_bucket_keys`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import Connection, func, insert, select, text
from sqlalchemy.orm import Session

from fptrack.storage.index import DEFAULT_LAYOUT, IndexLayout
from fptrack.storage.models import Fingerprint, SimhashHotBucket, SimhashHotRow, utcnow

__all__ = [
    "HOT_BUCKET_CACHE_SECONDS",
    "HOT_BUCKET_MIN_SIZE",
    "HOT_BUCKET_MU",
    "HotBucketReport",
    "bucket_sizes",
    "file_in_hot_buckets",
    "file_new_rows_in_hot_buckets",
    "forget_hot_buckets",
    "hot_bucket_keys",
    "split_hot_buckets",
]

HOT_BUCKET_MU = 2.0
"""The seed's trigger: a bucket holding more than (1 + mu) x the mean bucket size is re-split."""

HOT_BUCKET_MIN_SIZE = 1024
"""Never re-split a bucket smaller than this. At small N the seed's mean (N / 2**key_bits) is far below one
row, so the relative trigger alone would split every non-empty bucket; a bucket of ~1,000 index tuples is a
handful of b-tree leaf pages and costs well under a millisecond to scan and verify (benchmarks.scale.index
measures it)."""


@dataclass(frozen=True)
class HotBucketReport:
    """What :func:`split_hot_buckets` saw and did."""

    layout: str
    fingerprints: int
    mean_bucket_size: float
    threshold: float
    largest_bucket: int
    split: tuple[tuple[int, int, int], ...]  # (table_no, key, size) newly re-split
    rows_filed: int


def bucket_sizes(
    bind: Session | Connection, layout: IndexLayout, table_no: int, *, minimum: int = 1
) -> list[tuple[int, int]]:
    """(key, size) of table ``table_no``'s buckets holding at least ``minimum`` fingerprints, largest
    first."""
    key = layout.key_sql(table_no, "value")
    rows = bind.execute(
        text(
            f"SELECT {key} AS bucket, COUNT(*) AS size FROM fingerprints WHERE kind = '{layout.kind}' "
            f"GROUP BY {key} HAVING COUNT(*) >= :minimum ORDER BY size DESC, bucket"
        ),
        {"minimum": minimum},
    )
    return [(int(b), int(s)) for b, s in rows]


def split_hot_buckets(
    bind: Session | Connection,
    layout: IndexLayout = DEFAULT_LAYOUT,
    *,
    mu: float = HOT_BUCKET_MU,
    min_size: int = HOT_BUCKET_MIN_SIZE,
) -> HotBucketReport:
    """Re-split every bucket holding more than ``max((1 + mu) x mean, min_size)`` fingerprints.

    The mean is the seed's: stored fingerprints / 2**key_bits. A re-split bucket's fingerprints are filed
    under k + 1 sub-keys each (:meth:`IndexLayout.split_keys`); later writes into the bucket are filed there
    too, and queries falling into it read the sub-keys only. Safe to run repeatedly (a maintenance task)."""
    if mu < 0 or min_size < 1:
        raise ValueError(f"need mu >= 0 and min_size >= 1, got mu={mu} min_size={min_size}")
    connection = bind.connection() if isinstance(bind, Session) else bind
    total = int(
        connection.scalar(
            select(func.count()).select_from(Fingerprint).where(Fingerprint.kind == layout.kind)
        )
        or 0
    )
    mean = layout.expected_bucket_size(total)
    threshold = max((1.0 + mu) * mean, float(min_size))
    existing = {
        (t, k)
        for t, k in connection.execute(
            select(SimhashHotBucket.table_no, SimhashHotBucket.key).where(
                SimhashHotBucket.layout == layout.name
            )
        )
    }
    largest = 0
    new: list[tuple[int, int, int]] = []
    for t in range(layout.table_count):
        sizes = bucket_sizes(connection, layout, t, minimum=int(threshold) + 1)
        largest = max([largest, *(s for _, s in sizes)])
        new.extend((t, k, s) for k, s in sizes if (t, k) not in existing and s > threshold)
    if new:
        now = utcnow()
        connection.execute(
            insert(SimhashHotBucket),
            [{"layout": layout.name, "table_no": t, "key": k, "size": s, "split_at": now} for t, k, s in new],
        )
    filed = 0
    # every re-split bucket, old ones too: files rows a concurrent writer added while its bucket was being
    # split
    for t, k in sorted(existing | {(t, k) for t, k, _ in new}):
        filed += _file_bucket(connection, layout, t, k)
    forget_hot_buckets()
    return HotBucketReport(layout.name, total, mean, threshold, largest, tuple(new), filed)


def _sub_rows_select(layout: IndexLayout, t: int, where: str) -> str:
    return " UNION ALL ".join(
        f"SELECT f.id, '{layout.name}', {t}, {s}, {layout.split_key_sql(t, s, 'f.value')}, f.value "
        f"FROM fingerprints f {where}"
        for s in range(layout.k + 1)
    )


def _file_bucket(connection: Connection, layout: IndexLayout, t: int, key: int) -> int:
    where = f"WHERE f.kind = '{layout.kind}' AND {layout.key_sql(t, 'f.value')} = :key"
    # ON CONFLICT on the primary key rather than NOT EXISTS: the planner believes a bucket holds ~N / 2**bits
    # rows, and for a hot one an anti-join planned on that belief goes quadratic
    result = connection.execute(
        text(
            "INSERT INTO simhash_hot_index (fingerprint_id, layout, table_no, sub_no, key, value) "
            f"SELECT * FROM ({_sub_rows_select(layout, t, where)}) AS rows WHERE true ON CONFLICT DO NOTHING"
        ),
        {"key": key},
    )
    return int(result.rowcount or 0)


def file_new_rows_in_hot_buckets(connection: Connection, layout: IndexLayout, *, after_id: int) -> None:
    for t in range(layout.table_count):
        where = (
            f"JOIN simhash_hot_buckets b ON b.layout = '{layout.name}' AND b.table_no = {t} "
            f"AND b.key = {layout.key_sql(t, 'f.value')} WHERE f.kind = '{layout.kind}' AND f.id > :after"
        )
        connection.execute(
            text(
                "INSERT INTO simhash_hot_index (fingerprint_id, layout, table_no, sub_no, key, value) "
                + _sub_rows_select(layout, t, where)
            ),
            {"after": after_id},
        )


def file_in_hot_buckets(session: Session, layout: IndexLayout, rows: list[tuple[int, int]]) -> None:
    """File freshly written Simhashes ``(fingerprint id, signed value)`` under sub-keys where their bucket is
    hot.

    Reads the registry of re-split buckets once (not the cache of :func:`hot_bucket_keys`: a row must never
    miss a bucket split a moment ago, since queries falling into a re-split bucket read its sub-keys only).
    """
    if not rows:
        return
    hot = set(
        session.execute(
            select(SimhashHotBucket.table_no, SimhashHotBucket.key).where(
                SimhashHotBucket.layout == layout.name
            )
        )
    )
    if not hot:
        return
    entries: list[dict[str, int | str]] = []
    for fingerprint_id, value in rows:
        for t, key in layout.keys(value):
            if (t, key) in hot:
                entries.extend(
                    {
                        "fingerprint_id": fingerprint_id,
                        "layout": layout.name,
                        "table_no": t,
                        "sub_no": s,
                        "key": sub,
                        "value": value,
                    }
                    for s, sub in layout.split_keys(value, t)
                )
    if entries:
        session.execute(insert(SimhashHotRow), entries)


# --------------------------------------------------------------------------- the registry as queries read it


HOT_BUCKET_CACHE_SECONDS = 30.0
_hot_cache: dict[tuple[str, str], tuple[float, frozenset[tuple[int, int]]]] = {}


def hot_bucket_keys(session: Session, layout: IndexLayout) -> frozenset[tuple[int, int]]:
    """The re-split buckets of ``layout``, cached per database for :data:`HOT_BUCKET_CACHE_SECONDS`.

    A stale answer costs speed, never answers: a re-split bucket's fingerprints stay in the expression index
    too (reading it whole finds the same neighbours), and a bucket believed re-split is read through a
    statement that checks the registry (:func:`storage.simhash_index.simhash_candidates`)."""
    bind = session.get_bind()
    engine = bind.engine if isinstance(bind, Connection) else bind
    cache_key = (engine.url.render_as_string(hide_password=True), layout.name)
    now = time.monotonic()
    cached = _hot_cache.get(cache_key)
    if cached is not None and cached[0] > now:
        return cached[1]
    buckets = frozenset(
        (int(t), int(k))
        for t, k in session.execute(
            select(SimhashHotBucket.table_no, SimhashHotBucket.key).where(
                SimhashHotBucket.layout == layout.name
            )
        )
    )
    _hot_cache[cache_key] = (now + HOT_BUCKET_CACHE_SECONDS, buckets)
    return buckets


def forget_hot_buckets() -> None:
    """Drop the cached re-split bucket sets (after :func:`split_hot_buckets`, or in tests)."""
    _hot_cache.clear()
