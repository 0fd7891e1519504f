"""Writing and reading fingerprints: an owner's Simhash and code vectors with their index rows, one owner or a
batch at once, and the owners they belong to.

- Simhash: a ``fingerprints`` row (``kind = 'simhash64'``, ``value``). The permuted-prefix tables of Manku et
  al. are expression b-trees on ``value`` (see :mod:`storage.models`), so writing the row *is* writing the
  index; rows landing in re-split buckets are also filed in ``simhash_hot_index``
  (:mod:`storage.hot_buckets`). The query and the bulk loads are :mod:`storage.simhash_index`.
- A chapter's vector fingerprints (DNA codes, winnowing hashes): a ``fingerprints`` row (``payload``) plus one
  ``code_index`` row per ``(code, position)`` carrying its owner, what crawl-time compare looks up
  (:mod:`storage.code_index`).
- A page's vector fingerprints: one ``page_codes`` row (:class:`storage.models.PageCodes`), no positions: its
  distinct winnowing hashes (what a site template needs) and a sample of its codes of every kind, the minimum
  of every window of ``sample_window`` k-grams (:func:`page_sample`), which is all a newly registered work
  looks up.

Owners are chapters (registered works) or pages (crawled). Every index row hangs off a ``fingerprints`` row by
a cascading foreign key, and fingerprints hang off their owner the same way, so deleting or re-fingerprinting
a page, chapter or work leaves nothing behind (:func:`storage.housekeeping.count_orphans` checks it)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.orm import Session

from fptrack.fingerprint.arrays import distinct
from fptrack.storage.binary_copy import COPY_HEADER, COPY_TRAILER, binary_copy_rows
from fptrack.storage.chunks import id_chunks
from fptrack.storage.hot_buckets import file_in_hot_buckets
from fptrack.storage.index import IndexLayout, to_signed64
from fptrack.storage.models import CODE_OWNER_CHAPTER, CODE_OWNER_PAGE, Fingerprint, Page, PageCodes, utcnow

__all__ = [
    "DEFAULT_SAMPLE_WINDOW",
    "INITIALS_KIND",
    "INITIALS_WINDOW_FACTOR",
    "TEMPLATE_KEY_SHIFT",
    "TEMPLATE_KIND",
    "FingerprintSet",
    "Owner",
    "code_array",
    "is_postgres",
    "load_codes",
    "load_page_codes",
    "load_page_samples",
    "owner_code",
    "owner_column",
    "page_code_row",
    "page_sample",
    "replace_fingerprints",
    "sample_array",
    "sample_window_of",
    "signed_codes_array",
    "stored_template_keys",
    "template_keys",
    "write_fingerprints",
]

Owner = Literal["chapter", "page"]
DEFAULT_SAMPLE_WINDOW = 64
"""k-grams per window of a page's sample (``FPTRACK_PAGE_SAMPLE_WINDOW``; ``benchmarks.accuracy.piracy
--retroactive`` measured it)."""
TEMPLATE_KIND = "winnow"
"""The kind whose distinct codes a page keeps whole: site templates are decided on them."""


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
    unsigned or signed 64-bit; or an ``(n, 2)`` int64 array of them)."""

    owner_id: int
    simhash: int | None
    codes: Mapping[str, Sequence[tuple[int, int]] | np.ndarray]


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
    session: Session,
    *,
    owner: Owner,
    layout: IndexLayout,
    items: Sequence[FingerprintSet],
    sample_window: int = DEFAULT_SAMPLE_WINDOW,
) -> None:
    """Store the fingerprints and index rows of many owners in a few statements, replacing earlier ones.

    One ``DELETE`` (cascading to their index rows), one multi-row ``INSERT ... RETURNING`` of the fingerprint
    rows, then for chapters the code index rows by binary ``COPY`` on PostgreSQL or one ``executemany`` on
    SQLite, for pages one ``page_codes`` row each (``sample_window``: :func:`page_sample`). Pages get
    ``fingerprinted_at``. Raises ``ValueError`` when a vector repeats a position."""
    column = owner_column(owner)
    if not items:
        return
    owner_ids = [item.owner_id for item in items]
    if len(set(owner_ids)) != len(owner_ids):
        raise ValueError(f"{owner} fingerprints: an owner appears twice in one batch")
    for chunk in id_chunks(owner_ids):
        session.execute(delete(Fingerprint).where(column.in_(chunk)))
    if owner == "page":
        _write_pages(session, layout, items, sample_window)
        return

    owner_key = column.key
    now = utcnow()
    rows: list[dict[str, Any]] = []
    vectors: list[tuple[int, str, np.ndarray]] = []  # (row index, kind, (n, 2) int64 array)
    for item in items:
        if item.simhash is not None:
            rows.append(
                {
                    owner_key: item.owner_id,
                    "kind": layout.kind,
                    "value": to_signed64(item.simhash),
                    "payload": None,
                    "created_at": now,
                }
            )
        for kind, pairs in item.codes.items():
            array = code_array(pairs)
            if not _distinct_positions(array):
                raise ValueError(
                    f"{owner} {item.owner_id}: the {kind!r} codes repeat a position; positions must be "
                    "distinct"
                )
            vectors.append((len(rows), kind, array))
            rows.append(
                {
                    owner_key: item.owner_id,
                    "kind": kind,
                    "value": None,
                    "payload": array.astype("<i8").tobytes(),
                    "created_at": now,
                }
            )
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


def _write_pages(
    session: Session, layout: IndexLayout, items: Sequence[FingerprintSet], sample_window: int
) -> None:
    """Pages: a Simhash row where there is one, and one ``page_codes`` row each (earlier fingerprint rows are
    deleted by the caller)."""
    owner_ids = [item.owner_id for item in items]
    now = utcnow()
    simhashes: list[dict[str, Any]] = [
        {
            "page_id": item.owner_id,
            "kind": layout.kind,
            "value": to_signed64(item.simhash),
            "payload": None,
            "created_at": now,
        }
        for item in items
        if item.simhash is not None
    ]
    if simhashes:
        ids = list(
            session.scalars(
                insert(Fingerprint).returning(Fingerprint.id, sort_by_parameter_order=True), simhashes
            )
        )
        file_in_hot_buckets(
            session, layout, [(i, int(row["value"])) for i, row in zip(ids, simhashes, strict=True)]
        )
    postgres = is_postgres(session)
    rows = []
    for item in items:
        arrays = {}
        for kind, pairs in item.codes.items():
            array = code_array(pairs)
            if not _distinct_positions(array):
                raise ValueError(
                    f"page {item.owner_id}: the {kind!r} codes repeat a position; positions must be distinct"
                )
            arrays[kind] = array
        rows.append(page_code_row(item.owner_id, arrays, sample_window, postgres=postgres))
    for chunk in id_chunks(owner_ids):
        session.execute(delete(PageCodes).where(PageCodes.page_id.in_(chunk)))
    if rows:
        session.execute(insert(PageCodes), rows)
    for chunk in id_chunks(owner_ids):
        session.execute(update(Page).where(Page.id.in_(chunk)).values(fingerprinted_at=now))


def _distinct_positions(array: np.ndarray) -> bool:
    """Whether no two ``(code, position)`` pairs of ``array`` share a position (winnowing's, in increasing
    order, are checked without a sort)."""
    positions = array[:, 1]
    if (positions[1:] > positions[:-1]).all():
        return True
    return len(distinct(positions)) == len(positions)


def page_sample(array: np.ndarray, window: int) -> np.ndarray:
    """The sample of one vector a page keeps: the minimum code of every window of ``window`` consecutive
    k-gram positions, sorted and distinct, from the winnowing-selected ``(code, position)`` pairs ``array``
    ((n, 2) int64, codes signed: the order the winnowing picked its minima in).

    Why the selected pairs suffice: with ``window`` >= the winnowing window w, the minimum over ``window``
    k-grams is the minimum of every w-window inside it that contains it, so the winnowing selected that code
    (at that position, or at another holding the same code). Hence any run of ``window + k - 1`` characters a
    page shares with a chapter -- ``window`` whole k-grams -- has the same minimum in both, one of the page's
    sampled codes and one of the chapter's indexed codes. Windows run from position 0 to the last selected
    position (those reaching past it are cut there): a superset of the windows that lie inside the text,
    computed from the pairs alone, so a page sampled at write time and one rebuilt from a stored payload
    (migration 0016) keep the same codes. About 2 / (window + 1) of the k-grams are kept."""
    if window < 1:
        raise ValueError(f"the sample window must be >= 1, got {window}")
    pairs = np.asarray(array, dtype=np.int64).reshape(-1, 2)
    if not len(pairs):
        return np.empty(0, dtype=np.int64)
    positions, codes = pairs[:, 1], pairs[:, 0]
    if positions.min() < 0:
        raise ValueError("positions must be >= 0")
    if not (positions[1:] > positions[:-1]).all():  # winnowing gives them in order: no sort then
        order = np.lexsort((codes, positions))
        positions, codes = positions[order], codes[order]
    last = int(positions[-1])
    # every window [s, s + window) for s = 0 .. last holds a selected position when no gap between selected
    # positions (or before the first) reaches ``window``, which winnowing with w <= window guarantees; the
    # minimum over a window is then the minimum of the selected codes in it. Gaps are checked anyway (pairs
    # given by hand): an empty window contributes nothing.
    # The selected pairs a window holds change only where a position enters it (s = p - window + 1) or leaves
    # it (s = p + 1): the windows starting there, and at 0, are every distinct window (~2 per pair instead of
    # one per k-gram: a third of the time of the sample, which every stored page pays).
    bounds = np.concatenate(([0], positions - (window - 1), positions + 1))
    bounds = bounds[(bounds >= 0) & (bounds <= last)]
    first = np.searchsorted(positions, bounds, side="left")
    end = np.searchsorted(positions, bounds + window, side="left")
    filled = end > first
    return distinct(_range_minima(codes, first[filled], end[filled]))


def _range_minima(values: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """``values[starts[i]:stops[i]].min()`` for every i (non-empty ranges), by a sparse table: row j holds the
    minima of the spans of 2**j values, up to the longest range's power of two only, and each range is two
    overlapping spans of its power of two, read for all ranges in one step."""
    level = np.floor(np.log2(stops - starts)).astype(np.int64)
    top = int(level.max())
    table = np.empty((top + 1, len(values)), dtype=np.int64)
    table[0] = values
    for row in range(1, top + 1):
        half = 1 << (row - 1)
        np.minimum(table[row - 1, :-half], table[row - 1, half:], out=table[row, :-half])
        # the spans that would run past the end: no range reads them (a range of 2**row values starts at
        # most 2**row before the end)
        table[row, -half:] = table[row - 1, -half:]
    minima: np.ndarray = np.minimum(table[level, starts], table[level, stops - (1 << level)])
    return minima


TEMPLATE_KEY_SHIFT = 32
"""A page keeps each of its winnowing hashes for templates as its high 32 bits, its *template key*
(:func:`template_keys`): 4 bytes instead of 8 a hash, 2.4 KB a 6,000-character page. A template is decided
among the pages of one site, where two different hashes share a key about once per 4 billion pairs; the exact
hashes a template stands for are read back off the texts of a few pages holding it
(:func:`compare.templates.site_template`)."""
_KEYS32 = 0x20  # the first byte of a ``page_codes.winnow`` of 32-bit template keys (revision 0022 and later)


def template_keys(codes: np.ndarray) -> np.ndarray:
    """The distinct template keys (sorted int64 values in [-2**31, 2**31)) of signed 64-bit ``codes``."""
    return distinct(np.asarray(codes, dtype=np.int64) >> TEMPLATE_KEY_SHIFT)


INITIALS_KIND = "winnow_py"
INITIALS_WINDOW_FACTOR = 4
"""A page samples its pinyin initials' codes at this many times its window (256 k-grams at the default 64),
its characters' codes at the window itself: what the initials alone find is a copy whose characters were
swapped for same-sound ones, which keeps its initials whole over the whole copy, while a copy cut by noise
characters every few characters keeps only short runs of characters (``benchmarks.accuracy.piracy
--retroactive``). A fifth fewer codes than both kinds at the window, and the same recall by kind."""


def sample_window_of(kind: str, window: int) -> int:
    """The window of ``kind``'s codes in the sample of a page whose ``sample_window`` is ``window``."""
    return window * INITIALS_WINDOW_FACTOR if kind == INITIALS_KIND else window


def page_code_row(
    page_id: int, arrays: Mapping[str, np.ndarray], window: int, *, postgres: bool
) -> dict[str, Any]:
    """The ``page_codes`` row of a page whose vectors (kind -> (n, 2) signed (code, position) arrays) are
    ``arrays``: the :func:`template_keys` of its :data:`TEMPLATE_KIND` codes (one marker byte, then
    little-endian int32) and the union of every kind's :func:`page_sample` at its :func:`sample_window_of`
    (``bigint[]`` on PostgreSQL, little-endian bytes elsewhere)."""
    template = arrays.get(TEMPLATE_KIND)
    keys = template_keys(template[:, 0]) if template is not None else np.empty(0, dtype=np.int64)
    samples = [page_sample(array, sample_window_of(kind, window)) for kind, array in arrays.items()]
    sample = distinct(np.concatenate(samples)) if samples else np.empty(0, dtype=np.int64)
    return {
        "page_id": page_id,
        "sample_window": window,
        "winnow": bytes((_KEYS32,)) + keys.astype("<i4").tobytes(),
        "sample": sample.tolist() if postgres else sample.astype("<i8").tobytes(),
    }


def stored_template_keys(payload: bytes | memoryview | None) -> np.ndarray:
    """The template keys (sorted int64) a stored ``page_codes.winnow`` holds: 32-bit keys after a marker
    byte (the length is then 1 mod 4), or, as rows written before revision 0022 keep them, whole 64-bit
    hashes (the length a multiple of 8), reduced to their keys."""
    data = bytes(payload or b"")
    if len(data) % 4 == 1 and data[0] == _KEYS32:
        return np.frombuffer(data, dtype="<i4", offset=1).astype(np.int64)
    return template_keys(np.frombuffer(data, dtype="<i8"))


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


def code_array(pairs: Sequence[tuple[int, int]] | np.ndarray) -> np.ndarray:
    """``(code, position)`` pairs as an ``(n, 2)`` int64 array with codes in the signed range."""
    if isinstance(pairs, np.ndarray):
        array = pairs.astype(np.uint64).view(np.int64) if pairs.dtype == np.uint64 else pairs
        return array.astype(np.int64, copy=False).reshape(-1, 2)
    if not len(pairs):
        return np.empty((0, 2), dtype=np.int64)
    positions = np.fromiter((p for _, p in pairs), dtype=np.int64, count=len(pairs))
    return np.column_stack((signed_codes_array([c for c, _ in pairs]), positions))


def signed_codes_array(codes: Sequence[int]) -> np.ndarray:
    """64-bit codes, signed or unsigned, as an int64 array of their signed form (:func:`to_signed64` of each).

    Read in C as they come: signed (what winnowing gives), else unsigned; element by element only when one
    sequence mixes negative codes and codes of 2**63 or more. (Reading unsigned first, as before, failed on
    every winnowed page's first negative code and fell to the Python loop: ~0.3 ms of a page's compare.)"""
    try:
        return np.fromiter(codes, dtype=np.int64, count=len(codes))
    except OverflowError:  # codes of 2**63 or more: unsigned
        pass
    try:
        return np.fromiter(codes, dtype=np.uint64, count=len(codes)).view(np.int64)
    except OverflowError:  # both forms in one sequence
        return np.array([to_signed64(c) for c in codes], dtype=np.int64)


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


def _chapters_only(owner: Owner) -> None:
    if owner == "page":
        raise ValueError(
            "pages keep no (code, position) vectors since revision 0016: load_page_codes reads their "
            "winnowing hashes, load_page_samples their samples"
        )


def load_codes(session: Session, *, owner: Owner, owner_id: int, kind: str) -> list[tuple[int, int]]:
    """The stored (code, position) pairs of a chapter's vector fingerprint (signed codes)."""
    _chapters_only(owner)
    payload = session.scalar(
        select(Fingerprint.payload).where(owner_column(owner) == owner_id, Fingerprint.kind == kind)
    )
    if not payload:
        return []
    array = np.frombuffer(payload, dtype="<i8").reshape(-1, 2)
    return [(int(c), int(p)) for c, p in array]


def load_page_codes(session: Session, page_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """The template keys (:func:`stored_template_keys`: the high 32 bits of the page's distinct
    :data:`TEMPLATE_KIND` winnowing hashes, sorted) of many pages; pages never fingerprinted are missing."""
    found: dict[int, np.ndarray] = {}
    for chunk in id_chunks(page_ids):
        statement = select(PageCodes.page_id, PageCodes.winnow).where(PageCodes.page_id.in_(chunk))
        for page_id, payload in session.execute(statement):
            found[int(page_id)] = stored_template_keys(payload)
    return found


def load_page_samples(session: Session, page_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """The sampled codes (signed, sorted) of many pages."""
    found: dict[int, np.ndarray] = {}
    for chunk in id_chunks(page_ids):
        statement = select(PageCodes.page_id, PageCodes.sample).where(PageCodes.page_id.in_(chunk))
        for page_id, sample in session.execute(statement):
            found[int(page_id)] = sample_array(sample)
    return found


def sample_array(value: bytes | Sequence[int] | None) -> np.ndarray:
    """A stored ``page_codes.sample`` (bytes on SQLite, a list of ints on PostgreSQL) as an int64 array."""
    if value is None:
        return np.empty(0, dtype=np.int64)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(value), dtype="<i8").astype(np.int64)
    return np.asarray(list(value), dtype=np.int64)
