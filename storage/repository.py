"""Fingerprint storage and candidate look-ups: the one store compare asks for every kind of candidate.

- Simhash: a ``fingerprints`` row (``kind = 'simhash64'``, ``value``). The permuted-prefix tables of Manku et al.
  are expression b-trees on ``value`` (see :mod:`storage.models`), so writing the row *is* writing the index.
  :func:`simhash_candidates` looks up the query's key in every table (exact match), verifies the Hamming distance
  on the index tuples, and maps survivors to owners. Buckets re-split by :func:`split_hot_buckets` are looked up
  in ``simhash_hot_index`` under their k + 1 sub-keys instead.
- Vector fingerprints (DNA codes, winnowing hashes): a ``fingerprints`` row (``payload``) plus one ``code_index``
  row per ``(code, position)``; :func:`code_candidates` counts distinct shared codes per owner.
- Bulk loading: :func:`bulk_load_simhashes` (COPY ... FORMAT BINARY through psycopg 3 on PostgreSQL, batched
  INSERTs on SQLite).

Owners are chapters (registered works) or pages (crawled); a query asks for one side. Every index row hangs off a
``fingerprints`` row by a cascading foreign key, and fingerprints hang off their owner the same way, so deleting
or re-fingerprinting a page, chapter or work leaves nothing behind (:func:`count_orphans` checks it).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from sqlalchemy import BigInteger, Connection, any_, bindparam, delete, func, insert, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from storage.index import DEFAULT_LAYOUT, IndexLayout, hamming, to_signed64, to_unsigned64
from storage.models import (
    CodeIndexRow,
    CorpusStatistics,
    Fingerprint,
    Page,
    SimhashHotBucket,
    SimhashHotRow,
    Site,
    Work,
    simhash_index_ddl,
    simhash_index_names,
    utcnow,
)

__all__ = [
    "HOT_BUCKET_MIN_SIZE",
    "HOT_BUCKET_MU",
    "HotBucketReport",
    "Owner",
    "SimhashHit",
    "StoredCorpusStats",
    "bucket_sizes",
    "bulk_load_simhashes",
    "code_candidates",
    "count_orphans",
    "count_rows",
    "delete_pages",
    "delete_works",
    "ensure_simhash_indexes",
    "forget_hot_buckets",
    "latest_corpus_stats",
    "load_codes",
    "replace_fingerprints",
    "save_corpus_stats",
    "simhash_candidates",
    "site_for_host",
    "split_hot_buckets",
]

Owner = Literal["chapter", "page"]
_CHUNK = 2000  # bound parameters per statement (SQLite allows 32,766; PostgreSQL 65,535)
_PG_ARRAY_CHUNK = 20_000  # codes per ``= ANY(:codes)`` statement on PostgreSQL

HOT_BUCKET_MU = 2.0
"""The seed's trigger: a bucket holding more than (1 + mu) x the mean bucket size is re-split."""

HOT_BUCKET_MIN_SIZE = 1024
"""Never re-split a bucket smaller than this. At small N the seed's mean (N / 2**key_bits) is far below one row,
so the relative trigger alone would split every non-empty bucket; a bucket of ~1,000 index tuples is a handful of
b-tree leaf pages and costs well under a millisecond to scan and verify (benchmarks/index_scale.py measures it)."""


@dataclass(frozen=True)
class SimhashHit:
    owner_id: int
    distance: int


def _owner_column(owner: Owner):  # type: ignore[no-untyped-def]
    if owner not in ("chapter", "page"):
        raise ValueError(f"owner must be 'chapter' or 'page', got {owner!r}")
    return Fingerprint.chapter_id if owner == "chapter" else Fingerprint.page_id


def _is_postgres(bind: Session | Connection) -> bool:
    return bind.get_bind().dialect.name == "postgresql" if isinstance(bind, Session) else (
        bind.dialect.name == "postgresql"
    )


# ------------------------------------------------------------------------------------------------- writing


def replace_fingerprints(
    session: Session,
    *,
    owner: Owner,
    owner_id: int,
    layout: IndexLayout,
    simhash: int,
    codes: dict[str, Sequence[tuple[int, int]]],
) -> None:
    """Store an owner's fingerprints and index rows, replacing any earlier ones.

    ``codes`` maps a kind (``"dna"``, ``"winnow"``) to ``(code, position)`` pairs with distinct positions; codes
    are unsigned or signed 64-bit integers.
    """
    column = _owner_column(owner)
    session.execute(delete(Fingerprint).where(column == owner_id))
    session.flush()
    owner_kw = {"chapter_id": owner_id} if owner == "chapter" else {"page_id": owner_id}

    simhash_row = Fingerprint(kind=layout.kind, value=to_signed64(simhash), **owner_kw)
    session.add(simhash_row)
    vector_rows = {}
    for kind, pairs in codes.items():
        array = np.array([[to_signed64(c), p] for c, p in pairs], dtype=np.int64).reshape(-1, 2)
        if len(np.unique(array[:, 1])) != len(array):
            raise ValueError(f"{owner} {owner_id}: the {kind!r} codes repeat a position; positions must be distinct")
        vector_rows[kind] = Fingerprint(kind=kind, payload=array.astype("<i8").tobytes(), **owner_kw)
        session.add(vector_rows[kind])
    session.flush()

    _file_in_hot_buckets(session, layout, [(simhash_row.id, to_signed64(simhash))])
    for kind, pairs in codes.items():
        rows = [
            {"fingerprint_id": vector_rows[kind].id, "kind": kind, "code": to_signed64(c), "position": p}
            for c, p in pairs
        ]
        for start in range(0, len(rows), _CHUNK * 4):
            session.execute(insert(CodeIndexRow), rows[start : start + _CHUNK * 4])
    if owner == "page":
        page = session.get(Page, owner_id)
        if page is not None:
            page.fingerprinted_at = utcnow()


def bulk_load_simhashes(
    bind: Session | Connection,
    items: Iterable[tuple[int, int]] | np.ndarray,
    *,
    owner: Owner,
    layout: IndexLayout = DEFAULT_LAYOUT,
    rebuild_indexes: bool = False,
    batch_size: int = 200_000,
) -> int:
    """Load ``(owner_id, simhash)`` pairs as Simhash fingerprints; returns the number of rows loaded.

    For owners that have no ``layout.kind`` fingerprint yet (a unique constraint refuses duplicates: use
    :func:`replace_fingerprints` to replace one). ``items`` may be an ``(n, 2)`` integer array (fastest).

    PostgreSQL: ``COPY fingerprints (...) FROM STDIN (FORMAT BINARY)`` through psycopg 3, the rows encoded with
    numpy. ``rebuild_indexes=True`` drops the layout's expression indexes and the owner foreign keys and unique
    constraints first and adds them back afterwards, as pg_restore does: one sort per index and one anti-join per
    foreign key instead of per-row b-tree inserts and trigger checks (about 4x faster; for initial loads and
    re-imports: it holds an exclusive lock on ``fingerprints`` until the transaction ends, and a violation
    found when adding a constraint back rolls the whole load back). SQLite: batched ``INSERT`` statements.
    Fingerprints landing in re-split buckets are filed in ``simhash_hot_index`` too.
    """
    if layout.bits != 64:
        raise ValueError(f"bulk loading indexes 64-bit Simhashes, got a layout of {layout.bits} bits")
    _owner_column(owner)
    connection = bind.connection() if isinstance(bind, Session) else bind
    pairs = _as_pairs(items)
    if len(pairs) == 0:
        return 0
    before = int(connection.scalar(select(func.coalesce(func.max(Fingerprint.id), 0))) or 0)
    owner_column = "chapter_id" if owner == "chapter" else "page_id"
    if connection.dialect.name == "postgresql":
        if rebuild_indexes:
            connection.exec_driver_sql(f"SET LOCAL maintenance_work_mem = '{_REBUILD_MAINTENANCE_WORK_MEM}'")
            for name in simhash_index_names(layout):
                connection.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
            for name, _ in _REBUILT_CONSTRAINTS:
                connection.exec_driver_sql(f"ALTER TABLE fingerprints DROP CONSTRAINT {name}")
        _copy_simhashes(connection, pairs, owner_column, layout.kind, batch_size)
        if rebuild_indexes:
            # one sort per unique constraint and index, one anti-join per foreign key: what pg_restore does
            for name, definition in _REBUILT_CONSTRAINTS:
                connection.exec_driver_sql(f"ALTER TABLE fingerprints ADD CONSTRAINT {name} {definition}")
            ensure_simhash_indexes(connection, layout)
            connection.exec_driver_sql("ANALYZE fingerprints")  # estimates for the new rows before autovacuum
    else:
        now = datetime.now(UTC)
        statement = text(
            f"INSERT INTO fingerprints ({owner_column}, kind, value, created_at) VALUES (:o, :k, :v, :t)"
        )
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start : start + batch_size]
            connection.execute(
                statement, [{"o": int(o), "k": layout.kind, "v": int(v), "t": now} for o, v in chunk.tolist()]
            )
    _file_new_rows_in_hot_buckets(connection, layout, after_id=before)
    return len(pairs)


# Constraints of ``fingerprints`` that a rebuilding bulk load drops and adds back (names and definitions as in
# storage.models / the migrations); primary key and CHECK stay.
_REBUILT_CONSTRAINTS = (
    ("fk_fingerprints_page_id_pages", "FOREIGN KEY (page_id) REFERENCES pages (id) ON DELETE CASCADE"),
    ("fk_fingerprints_chapter_id_chapters", "FOREIGN KEY (chapter_id) REFERENCES chapters (id) ON DELETE CASCADE"),
    ("uq_fingerprints_page_id_kind", "UNIQUE (page_id, kind)"),
    ("uq_fingerprints_chapter_id_kind", "UNIQUE (chapter_id, kind)"),
)
_REBUILD_MAINTENANCE_WORK_MEM = "1GB"


def _as_pairs(items: Iterable[tuple[int, int]] | np.ndarray) -> np.ndarray:
    if isinstance(items, np.ndarray):
        array = items
    else:
        array = np.array([(o, to_signed64(v)) for o, v in items], dtype=np.int64).reshape(-1, 2)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"expected (owner_id, simhash) pairs, got an array of shape {array.shape}")
    if array.dtype == np.uint64:
        array = array.view(np.int64)
    return array.astype(np.int64, copy=False)


_PG_EPOCH_US = int(datetime(2000, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
_COPY_TRAILER = (-1).to_bytes(2, "big", signed=True)


def _copy_rows_binary(owner_ids: np.ndarray, values: np.ndarray, kind: str, created_us: int) -> bytes:
    """PostgreSQL binary COPY rows ``(owner bigint, kind text, value bigint, created_at timestamptz)``.

    Layout per row (PostgreSQL docs, "COPY", binary format): int16 field count, then per field an int32 length
    and the big-endian value.
    """
    kind_bytes = kind.encode()
    dtype = np.dtype(
        [
            ("fields", ">i2"),
            ("owner_len", ">i4"), ("owner", ">i8"),
            ("kind_len", ">i4"), ("kind", f"S{len(kind_bytes)}"),
            ("value_len", ">i4"), ("value", ">i8"),
            ("time_len", ">i4"), ("time", ">i8"),
        ]
    )  # fmt: skip
    rows = np.empty(len(owner_ids), dtype=dtype)
    rows["fields"] = 4
    rows["owner_len"], rows["owner"] = 8, owner_ids
    rows["kind_len"], rows["kind"] = len(kind_bytes), kind_bytes
    rows["value_len"], rows["value"] = 8, values
    rows["time_len"], rows["time"] = 8, created_us
    return rows.tobytes()


def _copy_simhashes(connection: Connection, pairs: np.ndarray, owner_column: str, kind: str, batch: int) -> None:
    raw = connection.connection.driver_connection  # the psycopg 3 connection, inside SQLAlchemy's transaction
    created_us = int(datetime.now(UTC).timestamp() * 1_000_000) - _PG_EPOCH_US
    with raw.cursor() as cursor:  # type: ignore[union-attr]
        sql = f"COPY fingerprints ({owner_column}, kind, value, created_at) FROM STDIN (FORMAT BINARY)"
        with cursor.copy(sql) as copy:
            copy.write(_COPY_HEADER)
            for start in range(0, len(pairs), batch):
                chunk = pairs[start : start + batch]
                copy.write(_copy_rows_binary(chunk[:, 0], chunk[:, 1], kind, created_us))
            copy.write(_COPY_TRAILER)


def ensure_simhash_indexes(connection: Connection, layout: IndexLayout) -> list[str]:
    """Create the expression indexes of ``layout`` if they are missing; returns their names.

    The migrations create the default layout's; a deployment that configures another layout gets its indexes
    here (``storage.db.migrate`` calls this). Indexes of other layouts are left alone (drop them by name).
    """
    dialect = connection.dialect.name
    created = []
    for name, ddl in simhash_index_ddl(layout, dialect):
        connection.exec_driver_sql(ddl)
        created.append(name)
    if dialect == "postgresql" and (connection.dialect.server_version_info or (0,)) >= (14,):
        # PostgreSQL ignores the statistics of *partial* expression indexes when estimating; without these it
        # guesses 0.5 % of the table per key, and at 10M rows that estimate switches on JIT compilation (~100 ms
        # per look-up). Extended statistics on the same expressions give it the real ~N / 2**key_bits.
        for t in range(layout.table_count):
            connection.exec_driver_sql(
                f"CREATE STATISTICS IF NOT EXISTS st_fingerprints_{layout.name}_t{t} "
                f"ON ({layout.key_sql(t, 'value')}) FROM fingerprints"
            )
    return created


# ------------------------------------------------------------------------------------------------- reading


def load_codes(session: Session, *, owner: Owner, owner_id: int, kind: str) -> list[tuple[int, int]]:
    """The stored (code, position) pairs of an owner's vector fingerprint (signed codes)."""
    payload = session.scalar(
        select(Fingerprint.payload).where(_owner_column(owner) == owner_id, Fingerprint.kind == kind)
    )
    if not payload:
        return []
    array = np.frombuffer(payload, dtype="<i8").reshape(-1, 2)
    return [(int(c), int(p)) for c, p in array]


def _distance_sql(postgres: bool) -> str:
    # PostgreSQL 14+ has bit_count(bit); SQLite gets fp_hamming from storage.db's connection hook.
    return "bit_count((value # :q)::bit(64))" if postgres else "fp_hamming(value, :q)"


def _candidate_sql(layout: IndexLayout, postgres: bool, hot_tables: frozenset[int] = frozenset()) -> str:
    """One statement: per table, the exact-key look-up in its expression index; for a table whose bucket of the
    query is (believed) re-split, the k + 1 sub-key look-ups in ``simhash_hot_index`` instead, guarded by the
    registry so that a stale belief still reads the right place. The Hamming distance is verified in the scans."""
    distance = _distance_sql(postgres)
    branches = []
    for t in range(layout.table_count):
        whole = (
            f"SELECT id, value FROM fingerprints WHERE kind = '{layout.kind}' "
            f"AND {layout.key_sql(t, 'value')} = :k{t} AND {distance} <= :maxd"
        )
        if t not in hot_tables:
            branches.append(whole)
            continue
        registered = f"SELECT 1 FROM simhash_hot_buckets WHERE layout = :layout AND table_no = {t} AND key = :k{t}"
        branches.append(f"{whole} AND NOT EXISTS ({registered})")
        for s in range(layout.k + 1):
            branches.append(
                f"SELECT fingerprint_id, value FROM simhash_hot_index WHERE layout = :layout AND table_no = {t} "
                f"AND sub_no = {s} AND key = :s{t}_{s} AND {distance} <= :maxd AND EXISTS ({registered})"
            )
    return " UNION ".join(branches)


def _candidate_params(fingerprint: int, layout: IndexLayout, hot_tables: frozenset[int] = frozenset()) -> dict[
    str, Any
]:
    params: dict[str, Any] = {"q": to_signed64(fingerprint), "maxd": layout.k}
    if hot_tables:
        params["layout"] = layout.name
    for t, key in layout.keys(fingerprint):
        params[f"k{t}"] = key
        if t in hot_tables:
            for s, sub_key in layout.split_keys(fingerprint, t):
                params[f"s{t}_{s}"] = sub_key
    return params


HOT_BUCKET_CACHE_SECONDS = 30.0
_hot_cache: dict[tuple[str, str], tuple[float, frozenset[tuple[int, int]]]] = {}


def _hot_buckets(session: Session, layout: IndexLayout) -> frozenset[tuple[int, int]]:
    """The re-split buckets of ``layout``, cached per database for :data:`HOT_BUCKET_CACHE_SECONDS`.

    A stale answer costs speed, never answers: a re-split bucket's fingerprints stay in the expression index too
    (reading it whole finds the same neighbours), and a bucket believed re-split is read through a statement that
    checks the registry (:func:`_candidate_sql`).
    """
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
            select(SimhashHotBucket.table_no, SimhashHotBucket.key).where(SimhashHotBucket.layout == layout.name)
        )
    )
    _hot_cache[cache_key] = (now + HOT_BUCKET_CACHE_SECONDS, buckets)
    return buckets


def forget_hot_buckets() -> None:
    """Drop the cached re-split bucket sets (after :func:`split_hot_buckets`, or in tests)."""
    _hot_cache.clear()


def simhash_candidates(
    session: Session, fingerprint: int, layout: IndexLayout, *, owner: Owner, exclude_id: int | None = None
) -> list[SimhashHit]:
    """Owners whose Simhash is within ``layout.k`` bits of ``fingerprint``, nearest first."""
    column = _owner_column(owner)
    postgres = _is_postgres(session)
    hot = _hot_buckets(session, layout)
    hot_tables = frozenset(t for t, key in layout.keys(fingerprint) if (t, key) in hot) if hot else frozenset()
    # owners through a correlated primary-key look-up per verified candidate: a join here invites a hash join
    # over the whole table whenever the planner overestimates the candidates
    owner_sql = f"SELECT f.{column.key} FROM fingerprints f WHERE f.id = c.id"
    statement = text(f"SELECT ({owner_sql}) AS owner_id, c.value FROM ({_candidate_sql(layout, postgres, hot_tables)}) AS c")
    best: dict[int, int] = {}
    for owner_id, stored in session.execute(statement, _candidate_params(fingerprint, layout, hot_tables)):
        if owner_id is None or owner_id == exclude_id:
            continue
        distance = hamming(to_unsigned64(stored), fingerprint)
        if distance <= layout.k and distance < best.get(owner_id, layout.k + 1):
            best[owner_id] = distance
    return sorted((SimhashHit(o, d) for o, d in best.items()), key=lambda h: (h.distance, h.owner_id))


def code_candidates(
    session: Session, kind: str, codes: Iterable[int], *, owner: Owner, max_owners_per_code: int = 0
) -> Counter[int]:
    """Number of distinct ``codes`` each owner shares with the query.

    ``max_owners_per_code`` > 0 ignores codes held by more owners than that (boilerplate, common phrases).
    """
    column = _owner_column(owner)
    unique = sorted({to_signed64(c) for c in codes})
    per_code: dict[int, set[int]] = {}
    postgres = _is_postgres(session)
    chunk_size = _PG_ARRAY_CHUNK if postgres else _CHUNK
    for start in range(0, len(unique), chunk_size):
        chunk = unique[start : start + chunk_size]
        # PostgreSQL: one array parameter, so the statement text (and its prepared plan) is the same every time
        condition = (
            CodeIndexRow.code == any_(bindparam("codes", chunk, type_=ARRAY(BigInteger)))
            if postgres
            else CodeIndexRow.code.in_(chunk)
        )
        statement = (
            select(CodeIndexRow.code, column)
            .join(Fingerprint, Fingerprint.id == CodeIndexRow.fingerprint_id)
            .where(CodeIndexRow.kind == kind, condition, column.is_not(None))
            .distinct()
        )
        for code, owner_id in session.execute(statement):
            per_code.setdefault(code, set()).add(owner_id)
    counts: Counter[int] = Counter()
    for owners in per_code.values():
        if max_owners_per_code and len(owners) > max_owners_per_code:
            continue
        counts.update(owners)
    return counts


# ------------------------------------------------------------------------------------ overloaded buckets


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


def bucket_sizes(bind: Session | Connection, layout: IndexLayout, table_no: int, *, minimum: int = 1) -> list[
    tuple[int, int]
]:
    """(key, size) of table ``table_no``'s buckets holding at least ``minimum`` fingerprints, largest first."""
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

    The mean is the seed's: stored fingerprints / 2**key_bits. A re-split bucket's fingerprints are filed under
    k + 1 sub-keys each (:meth:`IndexLayout.split_keys`); later writes into the bucket are filed there too, and
    queries falling into it read the sub-keys only. Safe to run repeatedly (a maintenance task).
    """
    if mu < 0 or min_size < 1:
        raise ValueError(f"need mu >= 0 and min_size >= 1, got mu={mu} min_size={min_size}")
    connection = bind.connection() if isinstance(bind, Session) else bind
    total = int(
        connection.scalar(select(func.count()).select_from(Fingerprint).where(Fingerprint.kind == layout.kind))
        or 0
    )
    mean = layout.expected_bucket_size(total)
    threshold = max((1.0 + mu) * mean, float(min_size))
    existing = {
        (t, k)
        for t, k in connection.execute(
            select(SimhashHotBucket.table_no, SimhashHotBucket.key).where(SimhashHotBucket.layout == layout.name)
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
    # every re-split bucket, old ones too: files rows a concurrent writer added while its bucket was being split
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


def _file_new_rows_in_hot_buckets(connection: Connection, layout: IndexLayout, *, after_id: int) -> None:
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


def _file_in_hot_buckets(session: Session, layout: IndexLayout, rows: list[tuple[int, int]]) -> None:
    """File freshly written Simhashes ``(fingerprint id, signed value)`` under sub-keys where their bucket is hot."""
    for fingerprint_id, value in rows:
        keys = layout.keys(value)
        hot = session.execute(
            select(SimhashHotBucket.table_no, SimhashHotBucket.key).where(
                SimhashHotBucket.layout == layout.name,
                SimhashHotBucket.key.in_({k for _, k in keys}),
            )
        )
        hot_tables = {t for t, k in hot if (t, k) in keys}
        entries = [
            {"fingerprint_id": fingerprint_id, "layout": layout.name, "table_no": t, "sub_no": s, "key": sub,
             "value": value}
            for t in sorted(hot_tables)
            for s, sub in layout.split_keys(value, t)
        ]  # fmt: skip
        if entries:
            session.execute(insert(SimhashHotRow), entries)


# ------------------------------------------------------------------------------------ deleting, checking


def delete_pages(session: Session, page_ids: Iterable[int]) -> int:
    """Delete pages with their fingerprints, index rows and matches (cascading foreign keys)."""
    return _delete_by_id(session, Page, page_ids)


def delete_works(session: Session, work_ids: Iterable[int]) -> int:
    """Delete works with their chapters, fingerprints, index rows and matches (cascading foreign keys)."""
    deleted = _delete_by_id(session, Work, work_ids)
    session.expire_all()
    return deleted


def _delete_by_id(session: Session, model: type[Page | Work], ids: Iterable[int]) -> int:
    unique = sorted(set(ids))
    deleted = 0
    for start in range(0, len(unique), _CHUNK):
        result = session.execute(delete(model).where(model.id.in_(unique[start : start + _CHUNK])))
        deleted += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return deleted


def count_orphans(bind: Session | Connection) -> dict[str, int]:
    """Rows that point at something that no longer exists (all zero in a healthy store)."""
    checks = {
        "code_index": "SELECT COUNT(*) FROM code_index c LEFT JOIN fingerprints f ON f.id = c.fingerprint_id "
        "WHERE f.id IS NULL",
        "simhash_hot_index": "SELECT COUNT(*) FROM simhash_hot_index h "
        "LEFT JOIN fingerprints f ON f.id = h.fingerprint_id WHERE f.id IS NULL",
        "fingerprints": "SELECT COUNT(*) FROM fingerprints f LEFT JOIN pages p ON p.id = f.page_id "
        "LEFT JOIN chapters c ON c.id = f.chapter_id WHERE p.id IS NULL AND c.id IS NULL",
        "chapters": "SELECT COUNT(*) FROM chapters c LEFT JOIN works w ON w.id = c.work_id WHERE w.id IS NULL",
        "matches": "SELECT COUNT(*) FROM matches m LEFT JOIN pages p ON p.id = m.page_id "
        "LEFT JOIN chapters c ON c.id = m.chapter_id WHERE p.id IS NULL OR c.id IS NULL",
    }
    return {name: int(bind.execute(text(sql)).scalar() or 0) for name, sql in checks.items()}


def count_rows(session: Session, model: type) -> int:
    return int(session.scalar(select(func.count()).select_from(model)) or 0)


# ------------------------------------------------------------------------------------- sites, statistics


def site_for_host(session: Session, host: str) -> Site:
    """The site of ``host`` (lower-cased), created on first sight."""
    host = host.strip().lower()[:255]
    if not host:
        raise ValueError("a site needs a host name")
    site = session.scalar(select(Site).where(Site.host == host))
    if site is None:
        site = Site(host=host, name=host)
        session.add(site)
        session.flush()
    return site


@dataclass(frozen=True)
class StoredCorpusStats:
    name: str
    version: int
    document_count: int
    payload: bytes
    created_at: datetime


def save_corpus_stats(session: Session, name: str, payload: bytes, *, document_count: int = 0) -> int:
    """Store a new version of the statistics ``name`` (opaque bytes, e.g. ``CorpusStats.to_bytes()``)."""
    if not name:
        raise ValueError("corpus statistics need a name (e.g. 'idf', 'entropy', 'pinyin_reference')")
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise TypeError(f"corpus statistics {name!r}: payload must be bytes, got {type(payload).__name__}")
    current = session.scalar(select(func.max(CorpusStatistics.version)).where(CorpusStatistics.name == name))
    version = int(current or 0) + 1
    session.add(
        CorpusStatistics(name=name, version=version, document_count=document_count, payload=bytes(payload))
    )
    session.flush()
    return version


def latest_corpus_stats(session: Session, name: str) -> StoredCorpusStats | None:
    row = session.scalar(
        select(CorpusStatistics).where(CorpusStatistics.name == name).order_by(CorpusStatistics.version.desc())
    )
    if row is None:
        return None
    return StoredCorpusStats(row.name, row.version, row.document_count, bytes(row.payload), row.created_at)

