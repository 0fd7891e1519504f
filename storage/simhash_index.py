"""The Simhash index: the permuted-prefix tables of Manku et al. (:mod:`storage.index`) over the ``simhash64``
rows of ``fingerprints``, found within ``layout.k`` bits.

- :func:`simhash_candidates`: the query. One statement, one exact-key look-up per table in its expression
  index, the Hamming distance verified on the index tuples; a bucket re-split by
  :func:`storage.hot_buckets.split_hot_buckets` is read under its k + 1 sub-keys instead.
- :func:`ensure_simhash_indexes`: the expression indexes of a configured layout (the migrations build the
  default's; ``storage.db.migrate`` calls this for another).
- :func:`bulk_load_simhashes`: many ``(owner, simhash)`` pairs at once by binary ``COPY``, the indexes
  optionally rebuilt afterwards as pg_restore does (initial loads, re-imports; benchmarks.scale.index loads
  10M rows).

Writing one owner's Simhash with its other fingerprints is :func:`storage.fingerprints.write_fingerprints`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, TextClause, func, select, text
from sqlalchemy.orm import Session

from fptrack.fingerprint.simhash import hamming
from fptrack.storage.binary_copy import COPY_HEADER, COPY_TRAILER, PG_EPOCH_US, binary_copy_rows
from fptrack.storage.fingerprints import Owner, is_postgres, owner_column
from fptrack.storage.hot_buckets import file_new_rows_in_hot_buckets, hot_bucket_keys
from fptrack.storage.index import DEFAULT_LAYOUT, IndexLayout, to_signed64, to_unsigned64
from fptrack.storage.models import Fingerprint, simhash_index_ddl, simhash_index_names

__all__ = [
    "SimhashHit",
    "bulk_load_simhashes",
    "ensure_simhash_indexes",
    "simhash_candidates",
    "simhash_neighbours",
]


@dataclass(frozen=True)
class SimhashHit:
    owner_id: int
    distance: int


def _distance_sql(postgres: bool, query: str = ":q", column: str = "value") -> str:
    # PostgreSQL 14+ has bit_count(bit); SQLite gets fp_hamming from storage.db's connection hook.
    return f"bit_count(({column} # {query})::bit(64))" if postgres else f"fp_hamming({column}, {query})"


def _candidate_sql(layout: IndexLayout, postgres: bool, hot_tables: frozenset[int] = frozenset()) -> str:
    """One statement: per table, the exact-key look-up in its expression index; for a table whose bucket of
    the query is (believed) re-split, the k + 1 sub-key look-ups in ``simhash_hot_index`` instead, guarded by
    the registry so that a stale belief still reads the right place. The Hamming distance is verified in the
    scans."""
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
        registered = (
            f"SELECT 1 FROM simhash_hot_buckets WHERE layout = :layout AND table_no = {t} AND key = :k{t}"
        )
        branches.append(f"{whole} AND NOT EXISTS ({registered})")
        for s in range(layout.k + 1):
            branches.append(
                "SELECT fingerprint_id, value FROM simhash_hot_index WHERE layout = :layout AND table_no = "
                f"{t} AND sub_no = {s} AND key = :s{t}_{s} AND {distance} <= :maxd AND EXISTS ({registered})"
            )
    return " UNION ".join(branches)


def _candidate_params(
    fingerprint: int, layout: IndexLayout, hot_tables: frozenset[int] = frozenset()
) -> dict[str, Any]:
    params: dict[str, Any] = {"q": to_signed64(fingerprint), "maxd": layout.k}
    if hot_tables:
        params["layout"] = layout.name
    for t, key in layout.keys(fingerprint):
        params[f"k{t}"] = key
        if t in hot_tables:
            for s, sub_key in layout.split_keys(fingerprint, t):
                params[f"s{t}_{s}"] = sub_key
    return params


def simhash_candidates(
    session: Session,
    fingerprint: int,
    layout: IndexLayout,
    *,
    owner: Owner,
    exclude_id: int | None = None,
    limit: int | None = None,
) -> list[SimhashHit]:
    """Owners whose Simhash is within ``layout.k`` bits of ``fingerprint``, nearest first.

    ``limit``: at most this many, the nearest, then those stored first (lowest fingerprint id), chosen in the
    statement. A text stored hundreds of times (a much-copied chapter) has every copy in the same buckets,
    which no re-split of a hot bucket separates; without a limit each look-up returns, and its caller
    handles, every copy. ``exclude_id`` is not counted against the limit."""
    if limit is not None and limit < 1:
        raise ValueError(f"a look-up limit must be >= 1 or None, got {limit}")
    column = owner_column(owner)
    postgres = is_postgres(session)
    hot = hot_bucket_keys(session, layout)
    hot_tables = (
        frozenset(t for t, key in layout.keys(fingerprint) if (t, key) in hot) if hot else frozenset()
    )
    # owners through a correlated primary-key look-up per verified candidate: a join here invites a hash join
    # over the whole table whenever the planner overestimates the candidates
    owner_sql = f"SELECT f.{column.key} FROM fingerprints f WHERE f.id = c.id"
    params = _candidate_params(fingerprint, layout, hot_tables)
    candidates = _candidate_sql(layout, postgres, hot_tables)
    statement_sql = f"SELECT ({owner_sql}) AS owner_id, c.value, c.id FROM ({candidates}) AS c"
    if limit is not None:
        # cut on the server, among this owner's rows only (one more for the excluded owner's own row), so that
        # neither the rows nor the Python below grow with the copies
        statement_sql = (
            f"SELECT owner_id, value, id FROM ({statement_sql}) AS o WHERE owner_id IS NOT NULL "
            f"ORDER BY {_distance_sql(postgres)}, id LIMIT :limit"
        )
        params["limit"] = limit + (exclude_id is not None)
    rows = session.execute(text(statement_sql), params)
    return _hits(rows, fingerprint, layout, exclude_id=exclude_id, limit=limit)


def _hits(
    rows: Iterable[Sequence[Any]],
    fingerprint: int,
    layout: IndexLayout,
    *,
    exclude_id: int | None,
    limit: int | None,
) -> list[SimhashHit]:
    """The hits of a look-up of ``fingerprint`` from its ``(owner id, stored value, fingerprint id)`` rows:
    each owner once, at its nearest fingerprint, nearest first (``limit`` of them), then by owner."""
    best: dict[int, tuple[int, int]] = {}  # owner -> (distance, fingerprint id)
    for owner_id, stored, fingerprint_id in rows:
        if owner_id is None or owner_id == exclude_id:
            continue
        distance = hamming(to_unsigned64(stored), fingerprint)
        if distance <= layout.k and (distance, fingerprint_id) < best.get(owner_id, (layout.k + 1, 0)):
            best[owner_id] = (distance, fingerprint_id)
    kept = sorted(best.items(), key=lambda item: item[1])
    if limit is not None:
        kept = kept[:limit]
    return sorted((SimhashHit(o, d) for o, (d, _) in kept), key=lambda h: (h.distance, h.owner_id))


_BRANCHES_PER_STATEMENT = 400
"""Look-ups (one per table of the layout) per statement of :func:`simhash_neighbours`: SQLite refuses a
compound SELECT of more than 500 parts."""


def simhash_neighbours(
    session: Session,
    queries: Sequence[tuple[int, int]],
    layout: IndexLayout,
    *,
    owner: Owner,
    limit: int,
) -> list[list[SimhashHit]]:
    """:func:`simhash_candidates` of each ``(owner id, fingerprint)`` of ``queries``, that owner excluded, at
    most ``limit`` hits each, in order: one statement for a batch instead of one per fingerprint (the same
    exact-key look-ups per table, the limit cut per query by a window on the server). A fingerprint in a
    re-split bucket is looked up on its own (:func:`simhash_candidates`)."""
    if limit < 1:
        raise ValueError(f"a look-up limit must be >= 1, got {limit}")
    hot = hot_bucket_keys(session, layout)
    found: list[list[SimhashHit]] = []
    together: list[int] = []  # indexes of the queries looked up in one statement
    for number, (owner_id, fingerprint) in enumerate(queries):
        if hot and any(bucket in hot for bucket in layout.keys(fingerprint)):
            hits = simhash_candidates(
                session, fingerprint, layout, owner=owner, exclude_id=owner_id, limit=limit
            )
            found.append(hits)
        else:
            found.append([])
            together.append(number)
    rows: dict[int, list[tuple[Any, Any, Any]]] = defaultdict(list)
    step = max(1, _BRANCHES_PER_STATEMENT // layout.table_count)
    for start in range(0, len(together), step):
        asked = together[start : start + step]
        statement, params = _neighbours_sql(
            session, [(n, queries[n][1]) for n in asked], layout, owner, limit
        )
        for number, owner_id, stored, fingerprint_id in session.execute(statement, params):
            rows[int(number)].append((owner_id, stored, fingerprint_id))
    for number in together:
        owner_id, fingerprint = queries[number]
        found[number] = _hits(rows[number], fingerprint, layout, exclude_id=owner_id, limit=limit)
    return found


def _neighbours_sql(
    session: Session, queries: Sequence[tuple[int, int]], layout: IndexLayout, owner: Owner, limit: int
) -> tuple[TextClause, dict[str, Any]]:
    """The statement of :func:`simhash_neighbours` for ``(number, fingerprint)`` queries and its parameters:
    per query, the exact-key look-up per table of :func:`_candidate_sql`, the owners by primary key, and the
    ``limit + 1`` nearest (its own owner's row is one of them), then those stored first, as
    :func:`simhash_candidates` cuts them.

    Each backend gets the form its planner keeps on the expression indexes (:func:`_lateral_sql`,
    :func:`_windowed_sql`): a plain join of the queries with ``fingerprints`` was planned as hash joins over
    every Simhash row on PostgreSQL and as scans of whole indexes on SQLite."""
    params: dict[str, Any] = {"maxd": layout.k, "limit": limit + 1}
    for number, fingerprint in queries:
        params[f"q{number}"] = to_signed64(fingerprint)
        for t, key in layout.keys(fingerprint):
            params[f"k{number}_{t}"] = key
    owners = f"SELECT f.{owner_column(owner).key} FROM fingerprints f WHERE f.id = c.id"
    numbers = [number for number, _ in queries]
    if is_postgres(session):
        return _lateral_sql(numbers, layout, owners), params
    return _windowed_sql(numbers, layout, owners), params


def _lateral_sql(numbers: Sequence[int], layout: IndexLayout, owners: str) -> TextClause:
    """PostgreSQL: the queries as a ``VALUES`` table (number, fingerprint, one key per table) and the look-up
    of one as a ``LATERAL`` subquery, run for each through the expression indexes (a branch per query and
    table instead cost 12 ms of planning for 32 pages, more than 32 statements)."""
    tables = range(layout.table_count)
    rows = ", ".join(
        f"({n}, CAST(:q{n} AS BIGINT)" + "".join(f", CAST(:k{n}_{t} AS BIGINT)" for t in tables) + ")"
        for n in numbers
    )
    columns = ", ".join(["number", "q", *(f"k{t}" for t in tables)])
    look_up = " UNION ".join(
        f"SELECT id, value FROM fingerprints WHERE kind = '{layout.kind}' "
        f"AND {layout.key_sql(t, 'value')} = asked.k{t} AND {_distance_sql(True, 'asked.q')} <= :maxd"
        for t in tables
    )
    owned = f"SELECT ({owners}) AS owner_id, c.value, c.id FROM ({look_up}) AS c"
    nearest = (
        f"SELECT owner_id, value, id FROM ({owned}) AS o WHERE owner_id IS NOT NULL "
        f"ORDER BY {_distance_sql(True, 'asked.q')}, id LIMIT :limit"
    )
    return text(
        f"SELECT asked.number, n.owner_id, n.value, n.id FROM (VALUES {rows}) AS asked ({columns}) "
        f"CROSS JOIN LATERAL ({nearest}) AS n"
    )


def _windowed_sql(numbers: Sequence[int], layout: IndexLayout, owners: str) -> TextClause:
    """SQLite (no ``LATERAL``): a branch per query and table, each an index search tagged with its query's
    number, and the cut per query by a window."""
    branches = " UNION ".join(
        f"SELECT {n} AS asked, CAST(:q{n} AS BIGINT) AS q, id, value FROM fingerprints "
        f"WHERE kind = '{layout.kind}' AND {layout.key_sql(t, 'value')} = :k{n}_{t} "
        f"AND {_distance_sql(False, f':q{n}')} <= :maxd"
        for n in numbers
        for t in range(layout.table_count)
    )
    owned = f"SELECT c.asked, c.q, c.value, c.id, ({owners}) AS owner_id FROM ({branches}) AS c"
    ranked = (
        f"SELECT asked, owner_id, value, id, ROW_NUMBER() OVER (PARTITION BY asked ORDER BY "
        f"{_distance_sql(False, 'q')}, id) AS nearest FROM ({owned}) AS o WHERE owner_id IS NOT NULL"
    )
    return text(f"SELECT asked, owner_id, value, id FROM ({ranked}) AS r WHERE nearest <= :limit")


# ------------------------------------------------------------------------------------------------- loading


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
        # guesses 0.5 % of the table per key, and at 10M rows that estimate switches on JIT compilation (~100
        # ms per look-up). Extended statistics on the same expressions give it the real ~N / 2**key_bits.
        for t in range(layout.table_count):
            connection.exec_driver_sql(
                f"CREATE STATISTICS IF NOT EXISTS st_fingerprints_{layout.name}_t{t} "
                f"ON ({layout.key_sql(t, 'value')}) FROM fingerprints"
            )
    return created


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
    :func:`storage.fingerprints.replace_fingerprints` to replace one). ``items`` may be an ``(n, 2)`` integer
    array (fastest).

    PostgreSQL: ``COPY fingerprints (...) FROM STDIN (FORMAT BINARY)`` through psycopg 3, the rows encoded
    with numpy. ``rebuild_indexes=True`` drops the layout's expression indexes and the owner foreign keys and
    unique constraints first and adds them back afterwards, as pg_restore does: one sort per index and one
    anti-join per foreign key instead of per-row b-tree inserts and trigger checks (about 4x faster; for
    initial loads and re-imports: it holds an exclusive lock on ``fingerprints`` until the transaction ends,
    and a violation found when adding a constraint back rolls the whole load back). SQLite: batched ``INSERT``
    statements. Fingerprints landing in re-split buckets are filed in ``simhash_hot_index`` too."""
    if layout.bits != 64:
        raise ValueError(f"bulk loading indexes 64-bit Simhashes, got a layout of {layout.bits} bits")
    column_name = owner_column(owner).key
    connection = bind.connection() if isinstance(bind, Session) else bind
    pairs = _as_pairs(items)
    if len(pairs) == 0:
        return 0
    before = int(connection.scalar(select(func.coalesce(func.max(Fingerprint.id), 0))) or 0)
    if connection.dialect.name == "postgresql":
        if rebuild_indexes:
            connection.exec_driver_sql(f"SET LOCAL maintenance_work_mem = '{_REBUILD_MAINTENANCE_WORK_MEM}'")
            for name in simhash_index_names(layout):
                connection.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
            for name, _ in _REBUILT_CONSTRAINTS:
                connection.exec_driver_sql(f"ALTER TABLE fingerprints DROP CONSTRAINT {name}")
        _copy_simhashes(connection, pairs, column_name, layout.kind, batch_size)
        if rebuild_indexes:
            # one sort per unique constraint and index, one anti-join per foreign key: what pg_restore does
            for name, definition in _REBUILT_CONSTRAINTS:
                connection.exec_driver_sql(f"ALTER TABLE fingerprints ADD CONSTRAINT {name} {definition}")
            ensure_simhash_indexes(connection, layout)
            connection.exec_driver_sql("ANALYZE fingerprints")  # estimates for the new rows before autovacuum
    else:
        now = datetime.now(UTC)
        statement = text(
            f"INSERT INTO fingerprints ({column_name}, kind, value, created_at) VALUES (:o, :k, :v, :t)"
        )
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start : start + batch_size]
            connection.execute(
                statement, [{"o": int(o), "k": layout.kind, "v": int(v), "t": now} for o, v in chunk.tolist()]
            )
    file_new_rows_in_hot_buckets(connection, layout, after_id=before)
    return len(pairs)


# Constraints of ``fingerprints`` that a rebuilding bulk load drops and adds back (names and definitions as in
# storage.models / the migrations); primary key and CHECK stay.
_REBUILT_CONSTRAINTS = (
    ("fk_fingerprints_page_id_pages", "FOREIGN KEY (page_id) REFERENCES pages (id) ON DELETE CASCADE"),
    (
        "fk_fingerprints_chapter_id_chapters",
        "FOREIGN KEY (chapter_id) REFERENCES chapters (id) ON DELETE CASCADE",
    ),
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


def _copy_rows_binary(owner_ids: np.ndarray, values: np.ndarray, kind: str, created_us: int) -> bytes:
    """Rows ``(owner bigint, kind text, value bigint, created_at timestamptz)`` of binary ``COPY``."""
    kind_bytes = kind.encode()
    fields = [(">i8", owner_ids), (f"S{len(kind_bytes)}", kind_bytes), (">i8", values), (">i8", created_us)]
    return binary_copy_rows(len(owner_ids), fields)


def _copy_simhashes(
    connection: Connection, pairs: np.ndarray, owner_column: str, kind: str, batch: int
) -> None:
    raw = connection.connection.driver_connection  # the psycopg 3 connection, inside SQLAlchemy's transaction
    created_us = int(datetime.now(UTC).timestamp() * 1_000_000) - PG_EPOCH_US
    with raw.cursor() as cursor:  # type: ignore[union-attr]
        sql = f"COPY fingerprints ({owner_column}, kind, value, created_at) FROM STDIN (FORMAT BINARY)"
        with cursor.copy(sql) as copy:
            copy.write(COPY_HEADER)
            for start in range(0, len(pairs), batch):
                chunk = pairs[start : start + batch]
                copy.write(_copy_rows_binary(chunk[:, 0], chunk[:, 1], kind, created_us))
            copy.write(COPY_TRAILER)
