"""The code index: which registered chapters hold the codes of a query (winnowing hashes, DNA codes), through
the ``code_index`` rows that :func:`storage.fingerprints.write_fingerprints` files, and which crawled pages
hold them in their sample (``page_codes``, :func:`pages_holding`).

- :func:`code_holder_pairs`: for a set of codes, the ``(code, owner)`` pairs holding them (one ``=
  ANY(array)`` statement per chunk on PostgreSQL, an index-only scan of ``(code, owner, kind) INCLUDE
  (owner_id)``), what the compare service reads for a whole batch of pages;
- :func:`code_holders`: the same per code;
- :func:`pages_holding`: the pages whose sample (:func:`storage.fingerprints.page_sample`) holds any of a set
  of codes, what a newly registered work looks up (one GIN probe per code on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.storage.chunks import id_chunks
from fptrack.storage.fingerprints import Owner, is_postgres, load_page_samples, owner_code, sample_array
from fptrack.storage.index import to_signed64
from fptrack.storage.models import Page, PageCodes

__all__ = [
    "code_holder_pairs",
    "code_holders",
    "pages_holding",
    "pages_sharing",
]

PG_ARRAY_CHUNK = 20_000  # codes per ``= ANY(:codes)`` statement on PostgreSQL
SQLITE_IN_CHUNK = 20_000  # codes written into one ``IN (...)`` on SQLite
SQLITE_SCAN_ROWS = 5_000  # page samples read at a time when SQLite scans them


def code_holder_pairs(session: Session, kind: str, codes: Iterable[int], *, owner: Owner) -> np.ndarray:
    """The distinct ``(code, owner id)`` pairs of the ``owner`` side holding any of ``codes`` (of ``kind``),
    as an ``(n, 2)`` int64 array sorted by code then owner.

    Codes are taken as unsigned or signed 64-bit integers and answered signed. PostgreSQL gets one array
    parameter per chunk, so the statement text (and its prepared plan) is the same every time; SQLite gets the
    integers written into the statement (binding thousands of parameters costs more than the look-ups)."""
    if owner == "page":
        raise ValueError(
            "pages have no code_index rows since revision 0016: pages_holding looks up their samples"
        )
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
                    "CROSS JOIN LATERAL (SELECT code, owner_id FROM code_index WHERE kind = %s AND owner = "
                    "%s AND code = q.code) AS c",
                    (
                        "{" + ",".join(map(str, chunk)) + "}",
                        kind,
                        side,
                    ),  # a literal: faster than adapting a list
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
    # one row per (code, owner): a code repeats within a vector
    keep[1:] = (pairs[1:] != pairs[:-1]).any(axis=1)
    return pairs[keep]


def code_holders(session: Session, kind: str, codes: Iterable[int], *, owner: Owner) -> dict[int, set[int]]:
    """For each of ``codes`` (of ``kind``) held by someone on the ``owner`` side, the owner ids holding it
    (keys signed)."""
    holders: dict[int, set[int]] = {}
    for code, owner_id in code_holder_pairs(session, kind, codes, owner=owner).tolist():
        holders.setdefault(code, set()).add(owner_id)
    return holders


def pages_holding(session: Session, codes: Iterable[int], *, min_shared: int = 1) -> list[int]:
    """The ids (sorted) of the pages whose sample holds at least ``min_shared`` of ``codes`` (any kind;
    unsigned or signed 64-bit).

    PostgreSQL: ``sample && :codes`` per chunk, which the GIN index answers with one probe per query code (the
    statement does not depend on the table's statistics); with ``min_shared`` > 1 the samples of the pages
    found are then read and counted. SQLite has no such index: the samples are read in batches and intersected
    in numpy, linear in the pages stored, which an embedded store keeps few of."""
    query = np.unique(np.array([to_signed64(int(c)) for c in codes], dtype=np.int64))
    if not len(query):
        return []
    if min_shared > 1 and is_postgres(session):
        return _holding_at_least(session, pages_holding(session, query.tolist()), query, min_shared)
    found: set[int] = set()
    raw = session.connection().connection.driver_connection
    if is_postgres(session):
        with raw.cursor() as cursor:  # type: ignore[union-attr]
            # The planner takes a long array for a filter most rows pass and scans the table, testing each
            # sample against the whole array (quadratic: two minutes a chunk at 12,000 pages, measured by
            # benchmarks.scale.pages); the GIN index answers the same chunk in about a second. So the scan is
            # ruled out for these statements only, and put back for the rest of the transaction.
            cursor.execute("SET LOCAL enable_seqscan = off")
            try:
                for start in range(0, len(query), PG_ARRAY_CHUNK):
                    chunk = query[start : start + PG_ARRAY_CHUNK]
                    cursor.execute(
                        "SELECT page_id FROM page_codes WHERE sample && %s::bigint[]",
                        ("{" + ",".join(map(str, chunk.tolist())) + "}",),  # a literal: faster than adapting
                    )
                    found.update(int(row[0]) for row in cursor.fetchall())
            finally:
                cursor.execute("SET LOCAL enable_seqscan TO DEFAULT")
        return sorted(found)
    cursor = raw.execute("SELECT page_id, sample FROM page_codes")  # type: ignore[union-attr]
    while rows := cursor.fetchmany(SQLITE_SCAN_ROWS):
        for page_id, sample in rows:
            held = sample_array(sample)
            if len(held) and np.isin(held, query, assume_unique=True).sum() >= min_shared:
                found.add(int(page_id))
    return sorted(found)


def pages_sharing(session: Session, codes: Iterable[int]) -> dict[int, np.ndarray]:
    """Every page whose sample holds any of ``codes`` (unsigned or signed 64-bit) -> which of them it holds
    (signed, sorted): :func:`pages_holding`'s pages with their samples read back and intersected, so that the
    caller can weigh each shared code by how many pages hold it (every page holding it is in the answer).

    A text served by many pages (mirrors, one chapter under several URLs) has one sample: pages of the same
    text (``content_sha256``) sampled at the same window are read once, through the first of them (at a
    million stored pages of ``benchmarks.scale.pages`` a new work's look-up found 7,917 pages of 349
    texts)."""
    query = np.unique(np.array([to_signed64(int(c)) for c in codes], dtype=np.int64))
    texts: dict[tuple[str, int] | int, list[int]] = {}
    for chunk in id_chunks(pages_holding(session, query.tolist())):
        statement = (
            select(PageCodes.page_id, Page.content_sha256, PageCodes.sample_window)
            .join(Page, Page.id == PageCodes.page_id)
            .where(PageCodes.page_id.in_(chunk))
        )
        for page_id, digest, window in session.execute(statement):
            # a page stored without a hash of its text is a text of its own
            texts.setdefault((str(digest), int(window)) if digest else int(page_id), []).append(int(page_id))
    readers = {min(pages): pages for pages in texts.values()}
    shared: dict[int, np.ndarray] = {}
    for chunk in id_chunks(sorted(readers), SQLITE_SCAN_ROWS):
        for reader, sample in load_page_samples(session, chunk).items():
            held = np.intersect1d(sample, query, assume_unique=True)
            if len(held):
                shared.update((page_id, held) for page_id in readers[reader])
    return shared


def _holding_at_least(session: Session, page_ids: list[int], query: np.ndarray, min_shared: int) -> list[int]:
    """Of ``page_ids``, those whose stored sample holds at least ``min_shared`` of the sorted ``query``."""
    kept = []
    for chunk in id_chunks(page_ids, SQLITE_SCAN_ROWS):
        for page_id, sample in load_page_samples(session, chunk).items():
            if np.isin(sample, query, assume_unique=True).sum() >= min_shared:
                kept.append(page_id)
    return sorted(kept)
