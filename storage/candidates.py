"""Candidate look-ups: which owners on one side (chapters or pages) share fingerprints with a query.

- :func:`simhash_candidates`: owners whose Simhash lies within ``layout.k`` bits, through the permuted-prefix
  expression indexes (one statement, the Hamming distance verified on the index tuples); buckets re-split by
  :func:`storage.hot_buckets.split_hot_buckets` are read under their k + 1 sub-keys instead.
- :func:`code_holders`: for a set of codes, the owners holding each (one ``= ANY(array)`` statement per chunk on
  PostgreSQL, an index-only scan of ``(kind, owner, code) INCLUDE (owner_id)``); :func:`code_candidates` counts
  the distinct shared codes per owner for one query.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, select, text
from sqlalchemy.orm import Session

from fptrack.fingerprint.simhash import hamming
from fptrack.storage.fingerprints import Owner, is_postgres, owner_code, owner_column
from fptrack.storage.index import IndexLayout, to_signed64, to_unsigned64
from fptrack.storage.models import SimhashHotBucket

__all__ = [
    "HOT_BUCKET_CACHE_SECONDS",
    "SimhashHit",
    "code_candidates",
    "code_holder_pairs",
    "code_holders",
    "count_shared",
    "forget_hot_buckets",
    "simhash_candidates",
]

PG_ARRAY_CHUNK = 20_000  # codes per ``= ANY(:codes)`` statement on PostgreSQL
SQLITE_IN_CHUNK = 20_000  # codes written into one ``IN (...)`` on SQLite


@dataclass(frozen=True)
class SimhashHit:
    owner_id: int
    distance: int


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
    column = owner_column(owner)
    postgres = is_postgres(session)
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


def code_holder_pairs(session: Session, kind: str, codes: Iterable[int], *, owner: Owner) -> np.ndarray:
    """The distinct ``(code, owner id)`` pairs of the ``owner`` side holding any of ``codes`` (of ``kind``), as an
    ``(n, 2)`` int64 array sorted by code then owner.

    Codes are taken as unsigned or signed 64-bit integers and answered signed. PostgreSQL gets one array parameter
    per chunk, so the statement text (and its prepared plan) is the same every time; SQLite gets the integers
    written into the statement (binding thousands of parameters costs more than the look-ups).
    """
    unique = sorted({to_signed64(int(c)) for c in codes})
    postgres = is_postgres(session)
    chunk_size = PG_ARRAY_CHUNK if postgres else SQLITE_IN_CHUNK
    side = owner_code(owner)
    parts = []
    for start in range(0, len(unique), chunk_size):
        chunk = unique[start : start + chunk_size]
        if postgres:
            # one index probe per query code (a nested loop over the array): the plan does not depend on the
            # statistics, which lag behind a table that grows by the batch (a stale estimate turned ``code =
            # ANY(...)`` into a filter over every row of the kind: seconds per batch)
            raw = session.connection().connection.driver_connection
            with raw.cursor() as cursor:  # type: ignore[union-attr]
                cursor.execute(
                    "SELECT c.code, c.owner_id FROM unnest(%s::bigint[]) AS q(code) "
                    "CROSS JOIN LATERAL (SELECT code, owner_id FROM code_index WHERE kind = %s AND owner = %s "
                    "AND code = q.code) AS c",
                    ("{" + ",".join(map(str, chunk)) + "}", kind, side),  # a literal: faster than adapting a list
                )
                rows = cursor.fetchall()
        else:
            raw = session.connection().connection.driver_connection
            rows = raw.execute(  # type: ignore[union-attr]
                "SELECT code, owner_id FROM code_index WHERE kind = ? AND owner = ? "
                f"AND code IN ({','.join(map(str, chunk))})",
                (kind, side),
            ).fetchall()
        if rows:
            parts.append(np.array(rows, dtype=np.int64).reshape(-1, 2))
    if not parts:
        return np.empty((0, 2), dtype=np.int64)
    pairs = np.concatenate(parts)
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    keep = np.ones(len(pairs), dtype=bool)
    keep[1:] = (pairs[1:] != pairs[:-1]).any(axis=1)  # one row per (code, owner): a code repeats within a vector
    return pairs[keep]


def code_holders(session: Session, kind: str, codes: Iterable[int], *, owner: Owner) -> dict[int, set[int]]:
    """For each of ``codes`` (of ``kind``) held by someone on the ``owner`` side, the owner ids holding it (keys
    signed)."""
    holders: dict[int, set[int]] = {}
    for code, owner_id in code_holder_pairs(session, kind, codes, owner=owner).tolist():
        holders.setdefault(code, set()).add(owner_id)
    return holders


def code_candidates(
    session: Session, kind: str, codes: Iterable[int], *, owner: Owner, max_owners_per_code: int = 0
) -> Counter[int]:
    """Number of distinct ``codes`` each owner shares with the query.

    ``max_owners_per_code`` > 0 ignores codes held by more owners than that (boilerplate, common phrases).
    """
    return count_shared(code_holders(session, kind, codes, owner=owner), max_owners_per_code=max_owners_per_code)


def count_shared(holders: dict[int, set[int]], *, max_owners_per_code: int = 0) -> Counter[int]:
    """Per owner, the number of codes of ``holders`` (code -> owners) it holds."""
    counts: Counter[int] = Counter()
    for owners in holders.values():
        if max_owners_per_code and len(owners) > max_owners_per_code:
            continue
        counts.update(owners)
    return counts
