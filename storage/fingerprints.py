"""Writing and reading fingerprints: an owner's Simhash and code vectors with their index rows, one owner or a
batch at once, and the owners they belong to.

- Simhash: a ``fingerprints`` row (``kind = 'simhash64'``, ``value``). The permuted-prefix tables of Manku et
  al. are expression b-trees on ``value`` (see :mod:`storage.models`), so writing the row *is* writing the
  index; rows landing in re-split buckets are also filed in ``simhash_hot_index``
  (:mod:`storage.hot_buckets`). The query and the bulk loads are :mod:`storage.simhash_index`.
- Vector fingerprints (DNA codes, winnowing hashes): a ``fingerprints`` row (``payload``) plus one
  ``code_index`` row per ``(code, position)`` carrying its owner, so look-ups ask one side only
  (:mod:`storage.code_index`).

Owners are chapters (registered works) or pages (crawled). Every index row hangs off a ``fingerprints`` row by
a cascading foreign key, and fingerprints hang off their owner the same way, so deleting or re-fingerprinting
a page, chapter or work leaves nothing behind (:func:`storage.housekeeping.count_orphans` checks it)."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.orm import Session

from fptrack.storage.binary_copy import COPY_HEADER, COPY_TRAILER, binary_copy_rows
from fptrack.storage.hot_buckets import file_in_hot_buckets
from fptrack.storage.index import IndexLayout, to_signed64
from fptrack.storage.models import CODE_OWNER_CHAPTER, CODE_OWNER_PAGE, Fingerprint, Page, utcnow

__all__ = [
    "FingerprintSet",
    "Owner",
    "id_chunks",
    "is_postgres",
    "load_code_arrays",
    "load_codes",
    "owner_code",
    "owner_column",
    "replace_fingerprints",
    "write_fingerprints",
]

Owner = Literal["chapter", "page"]
CHUNK = 2000  # bound parameters per statement (SQLite allows 32,766; PostgreSQL 65,535)


def id_chunks(ids: Iterable[int], size: int = CHUNK) -> Iterator[list[int]]:
    """``ids`` distinct and sorted, in lists of at most ``size``: the bound parameters of one ``IN (...)``."""
    unique = sorted(set(ids))
    for start in range(0, len(unique), size):
        yield unique[start : start + size]


def owner_column(owner: Owner):  # type: ignore[no-untyped-def]
    if owner not in ("chapter", "page"):
        raise ValueError(f"owner must be 'chapter' or 'page', got {owner!r}")
    return Fingerprint.chapter_id if owner == "chapter" else Fingerprint.page_id


def owner_code(owner: Owner) -> int:
    """The ``code_index.owner`` value of a side."""
    owner_column(owner)
    return CODE_OWNER_CHAPTER if owner == "chapter" else CODE_OWNER_PAGE


def is_postgres(bind: Session | Connection) -> bool:
    return (
        bind.get_bind().dialect.name == "postgresql"
        if isinstance(bind, Session)
        else (bind.dialect.name == "postgresql")
    )


# ------------------------------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class FingerprintSet:
    """Everything stored for one owner: its Simhash (None: no Simhash row, for a contract that does not use
    it) and, per kind (``"dna"``, ``"winnow"``...), ``(code, position)`` pairs with distinct positions (codes
    unsigned or signed 64-bit)."""

    owner_id: int
    simhash: int | None
    codes: Mapping[str, Sequence[tuple[int, int]]]


def replace_fingerprints(
    session: Session,
    *,
    owner: Owner,
    owner_id: int,
    layout: IndexLayout,
    simhash: int | None,
    codes: Mapping[str, Sequence[tuple[int, int]]],
) -> None:
    """Store one owner's fingerprints and index rows, replacing any earlier ones (see
    :func:`write_fingerprints`)."""
    write_fingerprints(session, owner=owner, layout=layout, items=[FingerprintSet(owner_id, simhash, codes)])


def write_fingerprints(
    session: Session, *, owner: Owner, layout: IndexLayout, items: Sequence[FingerprintSet]
) -> None:
    """Store the fingerprints and index rows of many owners in a few statements, replacing earlier ones.

    One ``DELETE`` (cascading to their index rows), one multi-row ``INSERT ... RETURNING`` of the fingerprint
    rows, then the code index rows by binary ``COPY`` on PostgreSQL or one ``executemany`` on SQLite. Pages
    get ``fingerprinted_at``. Raises ``ValueError`` when a vector repeats a position."""
    column = owner_column(owner)
    if not items:
        return
    owner_ids = [item.owner_id for item in items]
    if len(set(owner_ids)) != len(owner_ids):
        raise ValueError(f"{owner} fingerprints: an owner appears twice in one batch")
    for chunk in id_chunks(owner_ids):
        session.execute(delete(Fingerprint).where(column.in_(chunk)))

    owner_key = column.key
    now = utcnow()
    rows: list[dict[str, Any]] = []
    vectors: list[tuple[int, str, np.ndarray]] = []  # (row index, kind, (n, 2) int64 array)
    for item in items:
        if item.simhash is not None:
            rows.append({owner_key: item.owner_id, "kind": layout.kind, "value": to_signed64(item.simhash),
                         "payload": None, "created_at": now})  # fmt: skip
        for kind, pairs in item.codes.items():
            array = _code_array(pairs)
            if len(np.unique(array[:, 1])) != len(array):
                raise ValueError(
                    f"{owner} {item.owner_id}: the {kind!r} codes repeat a position; positions must be "
                    "distinct"
                )
            vectors.append((len(rows), kind, array))
            rows.append({owner_key: item.owner_id, "kind": kind, "value": None,
                         "payload": array.astype("<i8").tobytes(), "created_at": now})  # fmt: skip
    ids = (
        list(
            session.scalars(insert(Fingerprint).returning(Fingerprint.id, sort_by_parameter_order=True), rows)
        )
        if rows
        else []
    )
    file_in_hot_buckets(
        session,
        layout,
        [(ids[i], int(row["value"])) for i, row in enumerate(rows) if row["value"] is not None],
    )
    side = owner_code(owner)
    batches = [
        (ids[index], kind, array, int(rows[index][owner_key])) for index, kind, array in vectors if len(array)
    ]
    if batches:
        if is_postgres(session):
            _copy_code_rows(session.connection(), batches, side)
            _keep_statistics_fresh(session.connection(), sum(len(array) for _, _, array, _ in batches))
        else:
            session.connection().exec_driver_sql(
                "INSERT INTO code_index (fingerprint_id, position, kind, code, owner, owner_id) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (fingerprint_id, int(position), kind, int(code), side, owner_id)
                    for fingerprint_id, kind, array, owner_id in batches
                    for code, position in array.tolist()
                ],
            )
    if owner == "page":
        for chunk in id_chunks(owner_ids):
            session.execute(update(Page).where(Page.id.in_(chunk)).values(fingerprinted_at=now))


_rows_since_analyze: dict[str, int] = {}


def _keep_statistics_fresh(connection: Connection, written: int) -> None:
    """``ANALYZE`` the index tables once this process has written as many rows as they held at the last check.

    Autovacuum analyses a table a minute or more after it grows; a new deployment's first crawl would
    meanwhile be planned on the statistics of an empty table. Cheap (a sample of 30,000 rows) and rare (the
    tables must double between two runs)."""
    key = connection.engine.url.render_as_string(hide_password=True)
    _rows_since_analyze[key] = _rows_since_analyze.get(key, 0) + written
    held = connection.exec_driver_sql(
        "SELECT GREATEST(reltuples, 0)::bigint FROM pg_class WHERE relname = 'code_index'"
    ).scalar()
    if _rows_since_analyze[key] >= max(int(held or 0), 20_000):
        connection.exec_driver_sql("ANALYZE code_index")
        connection.exec_driver_sql("ANALYZE fingerprints")
        _rows_since_analyze[key] = 0


def _code_array(pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """``(code, position)`` pairs as an ``(n, 2)`` int64 array with codes in the signed range."""
    if isinstance(pairs, np.ndarray):
        array = pairs.astype(np.uint64).view(np.int64) if pairs.dtype == np.uint64 else pairs
        return array.astype(np.int64, copy=False).reshape(-1, 2)
    if not len(pairs):
        return np.empty((0, 2), dtype=np.int64)
    positions = np.fromiter((p for _, p in pairs), dtype=np.int64, count=len(pairs))
    try:
        codes = np.fromiter((c for c, _ in pairs), dtype=np.uint64, count=len(pairs)).view(np.int64)
    except OverflowError:  # signed codes
        codes = np.array([to_signed64(c) for c, _ in pairs], dtype=np.int64)
    return np.column_stack((codes, positions))


def _copy_code_rows(
    connection: Connection, batches: list[tuple[int, str, np.ndarray, int]], side: int
) -> None:
    """``COPY code_index FROM STDIN (FORMAT BINARY)``, every row encoded by numpy (no per-row Python)."""
    raw = connection.connection.driver_connection
    buffer = io.BytesIO()
    buffer.write(COPY_HEADER)
    for fingerprint_id, kind, array, owner_id in batches:
        buffer.write(
            binary_copy_rows(
                len(array),
                [
                    (">i8", fingerprint_id),
                    (">i4", array[:, 1]),
                    (f"S{len(kind.encode())}", kind.encode()),
                    (">i8", array[:, 0]),
                    (">i2", side),
                    (">i8", owner_id),
                ],
            )
        )
    buffer.write(COPY_TRAILER)
    with raw.cursor() as cursor:  # type: ignore[union-attr]
        sql = (
            "COPY code_index (fingerprint_id, position, kind, code, owner, owner_id) "
            "FROM STDIN (FORMAT BINARY)"
        )
        with cursor.copy(sql) as copy:
            copy.write(buffer.getvalue())


# ------------------------------------------------------------------------------------------------- reading


def load_code_arrays(
    session: Session, *, owner: Owner, owner_ids: Sequence[int], kind: str
) -> dict[int, np.ndarray]:
    """The stored ``(n, 2)`` (code, position) arrays of many owners' ``kind`` vectors (signed codes)."""
    column = owner_column(owner)
    found: dict[int, np.ndarray] = {}
    for chunk in id_chunks(owner_ids):
        statement = select(column, Fingerprint.payload).where(column.in_(chunk), Fingerprint.kind == kind)
        for owner_id, payload in session.execute(statement):
            found[int(owner_id)] = np.frombuffer(payload or b"", dtype="<i8").reshape(-1, 2).astype(np.int64)
    return found


def load_codes(session: Session, *, owner: Owner, owner_id: int, kind: str) -> list[tuple[int, int]]:
    """The stored (code, position) pairs of an owner's vector fingerprint (signed codes)."""
    payload = session.scalar(
        select(Fingerprint.payload).where(owner_column(owner) == owner_id, Fingerprint.kind == kind)
    )
    if not payload:
        return []
    array = np.frombuffer(payload, dtype="<i8").reshape(-1, 2)
    return [(int(c), int(p)) for c, p in array]
