"""The chapter side of the code index in each worker's memory: crawl-time compare asks no query per batch.

:func:`storage.code_index.code_holder_pairs` answers "which registered chapters hold these codes" with one
index probe per code in PostgreSQL; with 100,000 registered chapters that side is ~90M ``code_index`` rows and
every batch of pages walks a b-tree four levels deep for each of its ~30,000 codes. The registry changes
rarely (a publisher registers or removes a work) while pages are compared all day, so each process keeps the
chapter side as arrays and answers from them (:func:`chapter_holder_pairs`, the same contract).

Layout, per code kind (only the kinds a compare asks for are loaded):

- ``codes``: int64, the distinct ``(code, chapter)`` pairs sorted by code then chapter; ``owners``: the
  chapter ids aligned with them, int32 (int64 if an id does not fit). 12 bytes per pair: measured at 100,000
  chapters of 3,000-6,000 characters (87.6M ``code_index`` rows, two kinds), 1,023 MB with the directories,
  once per worker machine when the files below are used (``benchmarks.scale.compare``).
- ``directory``: for the top ``bits`` bits of a code, where its run starts in ``codes`` (the codes are
  hashes, so spread evenly: ~32 entries per bucket). A look-up reads the bucket bounds and bisects inside
  them, for all the batch's codes at once: ~8 vectorised steps instead of a 27-level bisection that misses
  the CPU caches at every level (measured: 2.5 ms instead of 40 ms for 14,000 codes against 45M pairs).

Freshness. Before answering, :func:`chapter_holder_pairs` reads the registry's version in the caller's own
transaction: the count, the sum and the largest id of the chapters' ``fingerprints`` rows, and their latest
``created_at``, which triggers keep in one row (``registry_version``). Chapter fingerprints are only ever
written whole (a ``DELETE`` and ``INSERT`` per chapter, :func:`storage.fingerprints.write_fingerprints`) or
deleted with their work, so an unchanged version means
unchanged codes. When the version moved, the rows above the largest id known are read: if they account for the
whole change (count and sum), they are a newly registered work, kept as a small sorted *delta* and merged into
the main arrays once it grows; anything else (a removal, a re-fingerprinted chapter, a transaction that
committed late with lower ids) reloads the arrays. A registration or removal committed by another process is
thus seen by the next batch, and a transaction sees its own uncommitted chapters, as the database path does.

Sharing. On PostgreSQL, with a folder configured (:func:`configure`: ``<FPTRACK_CACHE_DIR>/chapter-index``),
a full load of a large registry is also written as ``.npy`` files named after the database and the version
(temporary file, then rename: a reader sees the whole file or none) and read back memory-mapped: the worker's
processes share one copy in the page cache and only the first of them reads the database (at 100,000 chapters:
45 s to load and write, 0.16 s to map). Small registries
(under :data:`FILE_MIN_PAIRS` pairs) load from the database in milliseconds and leave no file.

``FPTRACK_CHAPTER_INDEX=database`` turns all this off (the compare queries ``code_index`` as before).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import update
from sqlalchemy.orm import Session

from fptrack.compare.index_config import configure, configured, on_configure
from fptrack.fingerprint.arrays import distinct
from fptrack.storage.fingerprints import is_postgres, signed_codes_array
from fptrack.storage.models import REGISTRY_LOCK_KEY, RegistryVersion

__all__ = [
    "FILE_MIN_PAIRS",
    "ChapterIndex",
    "KindArrays",
    "Snapshot",
    "chapter_holder_pairs",
    "configure",
    "hold_registry",
    "in_memory",
    "observe",
    "registry_serial",
    "snapshot",
]

FILE_MIN_PAIRS = 1_000_000
"""Registries with fewer ``(code, chapter)`` pairs of a kind than this are not written to the file cache."""
DELTA_MERGE_MIN = 500_000
"""A delta is merged into the main arrays once it holds this many pairs and a sixteenth of the main ones."""
STALE_FILE_SECONDS = 7 * 86400
"""Files of the folder not read nor written for this long are removed when another is written."""
_BUCKET_TARGET = 32  # mean pairs per directory bucket
_FETCH_ROWS = 2_000  # fingerprint rows per round trip while loading
_INT32_MAX = 2**31 - 1

Version = tuple[Any, ...]
"""(count, sum of ids, largest id, latest created_at, serial) of the chapters' fingerprints rows."""


# ------------------------------------------------------------------------------------------------- arrays


def _bucket(codes: np.ndarray, bits: int) -> np.ndarray:
    """The directory bucket of each (signed) code: its top ``bits`` bits, shifted so that the buckets follow
    the signed order of the codes."""
    shifted: np.ndarray = (codes >> (64 - bits)) + (1 << (bits - 1))
    return shifted


@dataclass(frozen=True)
class KindArrays:
    """The distinct ``(code, owner)`` pairs of one code kind, sorted by code then owner, with a bucket
    directory over the codes' top bits (see the module's docstring)."""

    codes: np.ndarray
    owners: np.ndarray
    directory: np.ndarray
    bits: int

    def __len__(self) -> int:
        return len(self.codes)

    @property
    def nbytes(self) -> int:
        return int(self.codes.nbytes + self.owners.nbytes + self.directory.nbytes)

    @classmethod
    def of_sorted(cls, codes: np.ndarray, owners: np.ndarray) -> KindArrays:
        """Arrays already sorted by (code, owner) and distinct; builds the directory."""
        bits = max(4, min(26, int(np.ceil(np.log2(max(len(codes), 1) / _BUCKET_TARGET)))))
        counts = np.bincount(_bucket(codes, bits), minlength=1 << bits)
        directory = np.zeros((1 << bits) + 1, dtype=np.int64)
        np.cumsum(counts, out=directory[1:])
        return cls(codes, owners, directory, bits)

    @classmethod
    def of_vectors(cls, vectors: Iterable[tuple[int, np.ndarray]]) -> KindArrays:
        """From ``(owner id, codes)`` vectors (codes signed int64, in any order, repeats allowed)."""
        owner_parts: list[np.ndarray] = []
        code_parts: list[np.ndarray] = []
        for owner_id, codes in sorted(vectors, key=lambda item: item[0]):
            owned = distinct(codes)  # a sort, not np.unique's hash table (fingerprint.arrays.distinct)
            code_parts.append(owned)
            owner_parts.append(np.full(len(owned), owner_id, dtype=np.int64))
        if not code_parts:
            return cls.of_sorted(np.empty(0, np.int64), np.empty(0, np.int32))
        codes = np.concatenate(code_parts)
        owners = np.concatenate(owner_parts)
        # owners ascend and each owner's codes are distinct: a stable sort by code leaves (code, owner) sorted
        order = np.argsort(codes, kind="stable")
        return cls.of_sorted(codes[order], _compact_ids(owners[order]))

    def merged(self, other: KindArrays) -> KindArrays:
        """These pairs and ``other``'s (owners disjoint), sorted again."""
        codes = np.concatenate((self.codes, other.codes))
        owners = np.concatenate((self.owners.astype(np.int64), other.owners.astype(np.int64)))
        order = np.lexsort((owners, codes))
        return KindArrays.of_sorted(codes[order], _compact_ids(owners[order]))

    def _bound(self, query: np.ndarray, *, right: bool) -> np.ndarray:
        """``np.searchsorted(self.codes, query, side)``, bisecting inside each code's directory bucket."""
        bucket = _bucket(query, self.bits)
        low = self.directory[bucket]
        high = self.directory[bucket + 1]
        active = low < high
        while active.any():
            middle = (low + high) >> 1
            value = self.codes[np.where(active, middle, 0)]
            go_right = (value <= query if right else value < query) & active
            low = np.where(go_right, middle + 1, low)
            high = np.where(active & ~go_right, middle, high)
            active = low < high
        bound: np.ndarray = low
        return bound

    def pairs(self, query: np.ndarray) -> np.ndarray:
        """The ``(code, owner)`` pairs of the sorted, distinct signed ``query`` codes, an ``(n, 2)`` int64
        array sorted by code then owner."""
        if not len(self.codes) or not len(query):
            return np.empty((0, 2), dtype=np.int64)
        starts = self._bound(query, right=False)
        # the end of a code's run is looked for only where the code is held (a third of a batch's codes)
        held = self.codes[np.minimum(starts, len(self.codes) - 1)] == query
        query, starts = query[held], starts[held]
        lengths = self._bound(query, right=True) - starts
        total = int(lengths.sum())
        if not total:
            return np.empty((0, 2), dtype=np.int64)
        # the positions starts[i] .. starts[i] + lengths[i] - 1 of every held code, in one array
        offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
        return np.column_stack((self.codes[offsets], self.owners[offsets].astype(np.int64)))


def _signed_query(codes: Iterable[int]) -> np.ndarray:
    """The distinct codes, signed 64-bit, sorted (codes past 2**63 - 1 are unsigned: taken modulo 2**64)."""
    values = codes if isinstance(codes, list | tuple | np.ndarray) else list(codes)
    try:
        array = np.asarray(values, dtype=np.int64)
    except OverflowError:  # unsigned codes among them
        array = signed_codes_array([int(c) for c in values])
    return distinct(array)


def _compact_ids(owners: np.ndarray) -> np.ndarray:
    if not len(owners) or (int(owners.max()) <= _INT32_MAX and int(owners.min()) >= 0):
        return owners.astype(np.int32)
    return owners.astype(np.int64)


# ------------------------------------------------------------------------------------------- the database


def _raw(session: Session) -> Any:
    return session.connection().connection.driver_connection


def observe(session: Session) -> tuple[str, Version]:
    """The database the session talks to and the registry's version as its transaction sees them: (count, sum
    of ids, largest id, latest created_at, serial) of the chapters' ``fingerprints`` rows, as the one row of
    ``registry_version`` holds them (kept by triggers: :func:`storage.models.registry_version_ddl`; read in
    constant time, where aggregating over the rows took 35 ms a batch at 100,000 chapters). One round trip.

    On PostgreSQL the database's oid is part of its identity: a database dropped and created again under the
    same name (tests, benchmarks) holds another registry."""
    url = session.get_bind().engine.url.render_as_string(hide_password=True)
    columns = "chapter_rows, id_sum, max_id, last_at, serial"
    where = "FROM registry_version WHERE id = 1"
    if is_postgres(session):
        with _raw(session).cursor() as cursor:
            database = "(SELECT oid FROM pg_database WHERE datname = current_database())"
            cursor.execute(f"SELECT {database}, {columns} {where}")
            row = cursor.fetchone()
            if row is None:  # a database whose row was removed by hand: the version is the empty registry's
                cursor.execute(f"SELECT {database}, 0, 0, 0, NULL, 0")
                row = cursor.fetchone()
        url = f"{url}#{row[0]}"
        row = row[1:]
    else:
        row = _raw(session).execute(f"SELECT {columns} {where}").fetchone() or (0, 0, 0, None, 0)
    return url, (int(row[0]), int(row[1]), int(row[2]), str(row[3]), int(row[4]))


def registry_serial(session: Session) -> int:
    """The registry's serial as ``session`` sees it now (``registry_version.serial``: one more at every change
    of the chapters' fingerprints)."""
    raw = _raw(session)
    sql = "SELECT serial FROM registry_version WHERE id = 1"
    if is_postgres(session):
        with raw.cursor() as cursor:
            cursor.execute(sql)
            row = cursor.fetchone()
    else:
        row = raw.execute(sql).fetchone()
    return int(row[0]) if row else 0


def hold_registry(session: Session) -> int:
    """Keep the registry from changing until ``session``'s transaction ends, and return its serial as it now
    stands: verdicts compared at this serial hold when the transaction commits.

    PostgreSQL: the registry's advisory lock (:data:`storage.models.REGISTRY_LOCK_KEY`) taken shared, then the
    serial read by a statement of its own (a statement's snapshot is taken when it starts: one that waited for
    the lock inside it would see the registry as it was before the wait). A change of the registry takes the
    lock exclusively in its triggers: it waits for this transaction, or this one waits for it and reads its
    serial.

    SQLite: the database's one write lock, which a change of the registry holds too; taken here (a write that
    changes nothing) unless the transaction has written already."""
    raw = _raw(session)
    if is_postgres(session):
        with raw.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock_shared(%s)", (REGISTRY_LOCK_KEY,))
    elif not raw.in_transaction:
        session.execute(
            update(RegistryVersion).where(RegistryVersion.id == 1).values(serial=RegistryVersion.serial)
        )
    return registry_serial(session)


def _payload_rows(session: Session, sql: str, parameters: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """Rows of ``sql`` (``%s`` placeholders), fetched a few thousand at a time (a server-side cursor on
    PostgreSQL: a large registry's payloads never sit in memory all at once)."""
    raw = _raw(session)
    if is_postgres(session):
        with raw.cursor(name=f"fptrack_chapter_index_{threading.get_ident()}") as cursor:
            cursor.itersize = _FETCH_ROWS
            cursor.execute(sql, parameters)
            yield from cursor
    else:
        cursor = raw.execute(sql.replace("%s", "?"), parameters)
        while rows := cursor.fetchmany(_FETCH_ROWS):
            yield from rows


def _codes_of(payload: bytes | memoryview | None) -> np.ndarray:
    """The codes of a stored vector (little-endian int64 ``(code, position)`` pairs, as the ``code_index``
    rows of the same fingerprint hold them)."""
    if not payload:
        return np.empty(0, dtype=np.int64)
    return np.frombuffer(payload, dtype="<i8")[0::2].astype(np.int64)


def _load_kind(session: Session, kind: str) -> KindArrays:
    rows = _payload_rows(
        session,
        "SELECT chapter_id, payload FROM fingerprints WHERE chapter_id IS NOT NULL AND kind = %s",
        (kind,),
    )
    return KindArrays.of_vectors((int(chapter_id), _codes_of(payload)) for chapter_id, payload in rows)


# ---------------------------------------------------------------------------------------------- the index


@dataclass(frozen=True)
class _State:
    """The chapter side at one registry version: per kind, the main arrays and a delta (or None)."""

    version: Version
    kinds: dict[str, tuple[KindArrays, KindArrays | None]] = field(default_factory=dict)


class ChapterIndex:
    """The chapter side of one database's code index in this process (see the module's docstring)."""

    def __init__(self, identity: str, folder: Path | None) -> None:
        self.identity = identity
        self.folder = folder
        self._lock = threading.Lock()
        self._state: _State | None = None
        self.loads = 0  # full loads from the database, for tests and benchmarks
        self.file_loads = 0  # full loads from the file cache
        self.appends = 0  # deltas read

    @property
    def nbytes(self) -> int:
        state = self._state
        if state is None:
            return 0
        return sum(m.nbytes + (d.nbytes if d is not None else 0) for m, d in state.kinds.values())

    def pairs(self, session: Session, version: Version, kind: str, codes: Iterable[int]) -> np.ndarray:
        """The distinct ``(code, chapter id)`` pairs holding any of ``codes`` of ``kind``, sorted: what
        :func:`storage.code_index.code_holder_pairs` returns for ``owner="chapter"``. ``version``: the
        registry's as ``session`` sees it (:func:`observe`)."""
        query = _signed_query(codes)
        main, delta = self.arrays(session, version, kind)
        found = main.pairs(query)
        if delta is not None and len(delta):
            extra = delta.pairs(query)
            if len(extra):
                found = np.concatenate((found, extra))
                found = found[np.lexsort((found[:, 1], found[:, 0]))]
        return found

    def arrays(self, session: Session, version: Version, kind: str) -> tuple[KindArrays, KindArrays | None]:
        """The arrays of ``kind`` at ``version`` (what ``session`` sees), refreshed first if needed."""
        with self._lock:
            state = self._refreshed(session, version)
            if kind not in state.kinds:
                state.kinds[kind] = (self._load_main(session, kind, version), None)
            return state.kinds[kind]

    def _refreshed(self, session: Session, version: Version) -> _State:
        state = self._state
        if state is not None and state.version == version:
            return state
        if state is not None and state.kinds:
            appended = self._appended(session, state, version)
            if appended is not None:
                self._state = appended
                self.appends += 1
                return appended
        self._state = _State(version)
        return self._state

    def _appended(self, session: Session, state: _State, version: Version) -> _State | None:
        """The state with the chapters registered since ``state`` added as deltas, or None when the change
        is not only additions (then everything is loaded again)."""
        count, total, largest, _, _ = state.version
        rows = list(
            _payload_rows(
                session,
                "SELECT id, chapter_id, kind, payload FROM fingerprints "
                "WHERE chapter_id IS NOT NULL AND id > %s",
                (largest,),
            )
        )
        if not rows or count + len(rows) != version[0] or total + sum(int(r[0]) for r in rows) != version[1]:
            # something was deleted, committed late below the largest id known, or written again under the
            # same ids (SQLite reuses the largest rowid once it is deleted: only created_at moved)
            return None
        kinds: dict[str, tuple[KindArrays, KindArrays | None]] = {}
        for kind, (main, delta) in state.kinds.items():
            vectors = [(int(r[1]), _codes_of(r[3])) for r in rows if r[2] == kind]
            if not vectors:
                kinds[kind] = (main, delta)
                continue
            added = KindArrays.of_vectors(vectors)
            grown = added if delta is None else delta.merged(added)
            if len(grown) >= DELTA_MERGE_MIN and len(grown) * 16 >= len(main):
                merged = main.merged(grown)
                self._save(kind, version, merged)
                kinds[kind] = (merged, None)
            else:
                kinds[kind] = (main, grown)
        return _State(version, kinds)

    def _load_main(self, session: Session, kind: str, version: Version) -> KindArrays:
        cached = self._read(kind, version)
        if cached is not None:
            self.file_loads += 1
            return cached
        arrays = _load_kind(session, kind)
        self.loads += 1
        self._save(kind, version, arrays)
        return arrays

    # ------------------------------------------------------------------------------------------ the files

    def _stem(self, kind: str, version: Version) -> str:
        key = hashlib.sha256(repr((self.identity, kind, version)).encode()).hexdigest()[:24]
        return f"{self._prefix()}{kind}-{key}"

    def _prefix(self) -> str:
        return "chapters-" + hashlib.sha256(self.identity.encode()).hexdigest()[:12] + "-"

    def _read(self, kind: str, version: Version) -> KindArrays | None:
        if self.folder is None:
            return None
        stem = self.folder / self._stem(kind, version)
        try:
            codes = np.load(f"{stem}.codes.npy", mmap_mode="r")
            owners = np.load(f"{stem}.owners.npy", mmap_mode="r")
            directory = np.load(f"{stem}.directory.npy", mmap_mode="r")
        except (OSError, ValueError):
            return None  # absent (or another process is still writing it)
        if len(codes) != len(owners) or len(directory) < 2 or directory[-1] != len(codes):
            return None
        bits = int(np.log2(len(directory) - 1))
        return KindArrays(codes, owners, directory, bits)

    def _save(self, kind: str, version: Version, arrays: KindArrays) -> None:
        """Write the arrays for the worker's other processes (large registries only); files of this database's
        other versions of ``kind`` are removed (a process still mapping one keeps reading it until it
        refreshes)."""
        if self.folder is None or len(arrays) < FILE_MIN_PAIRS:
            return
        stem = self._stem(kind, version)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for part in ("codes", "owners", "directory"):
                with tempfile.NamedTemporaryFile(dir=self.folder, suffix=".tmp", delete=False) as handle:
                    np.save(handle, np.ascontiguousarray(getattr(arrays, part)))
                os.replace(handle.name, self.folder / f"{stem}.{part}.npy")
            for old in self.folder.glob(f"{self._prefix()}{kind}-*.npy"):
                if not old.name.startswith(stem + "."):
                    old.unlink(missing_ok=True)
            # other databases' files (dropped databases, other deployments) once untouched for a week
            stale = time.time() - STALE_FILE_SECONDS
            for old in self.folder.glob("chapters-*.npy"):
                if old.stat().st_mtime < stale and old.stat().st_atime < stale:
                    old.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only or full disk: every process loads from the database, as without a folder


# ----------------------------------------------------------------------------------------- the process


_indexes: dict[str, ChapterIndex] = {}
_indexes_lock = threading.Lock()


def _forget_indexes() -> None:
    with _indexes_lock:
        _indexes.clear()


on_configure(_forget_indexes)  # a new mode or folder: the indexes held are forgotten


def in_memory() -> bool:
    """Whether the compare answers the chapter side from memory (``FPTRACK_CHAPTER_INDEX=memory``)."""
    return configured().mode == "memory"


def _index(identity: str, postgres: bool) -> ChapterIndex:
    folder = configured().folder if postgres else None
    with _indexes_lock:
        index = _indexes.get(identity)
        if index is None:
            index = _indexes[identity] = ChapterIndex(identity, folder)
        return index


@dataclass(frozen=True)
class Snapshot:
    """The chapter side as one transaction sees it: the registry's version is read once, for every kind a
    batch asks about."""

    session: Session
    index: ChapterIndex
    version: Version

    @property
    def serial(self) -> int:
        """The registry's serial at this version: the pairs answered hold every chapter it counts."""
        return int(self.version[4])

    def pairs(self, kind: str, codes: Iterable[int]) -> np.ndarray:
        return self.index.pairs(self.session, self.version, kind, codes)


def snapshot(session: Session) -> Snapshot:
    """This process's index of the database ``session`` talks to, at the registry version it sees."""
    identity, version = observe(session)
    return Snapshot(session, _index(identity, is_postgres(session)), version)


def chapter_holder_pairs(session: Session, kind: str, codes: Iterable[int]) -> np.ndarray:
    """:func:`storage.code_index.code_holder_pairs` for ``owner="chapter"``, answered from this process's
    arrays (refreshed first if the registry changed): the distinct ``(code, chapter id)`` pairs of the
    chapters holding any of ``codes``, an ``(n, 2)`` int64 array sorted by code then chapter."""
    return snapshot(session).pairs(kind, codes)
