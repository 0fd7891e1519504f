"""Fingerprint storage and candidate look-ups: the one store compare asks for every kind of candidate.

- Simhash: a ``fingerprints`` row (``value``) plus one ``simhash_index`` row per permuted-prefix table;
  :func:`simhash_candidates` looks up the query's keys (exact match per table) and verifies the Hamming distance.
- Vector fingerprints (DNA codes, winnowing hashes): a ``fingerprints`` row (``payload``) plus one ``code_index``
  row per code; :func:`code_candidates` counts distinct shared codes per owner.

Owners are chapters (registered works) or pages (crawled); a query asks for one side. Replacing an owner's
fingerprints deletes the old rows first; the foreign keys cascade to the index rows, so nothing is orphaned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from sqlalchemy import and_, delete, func, insert, or_, select
from sqlalchemy.orm import Session

from storage.index import IndexLayout, hamming, to_signed64, to_unsigned64
from storage.models import CodeIndexRow, Fingerprint, SimhashIndexRow

__all__ = [
    "Owner",
    "SimhashHit",
    "code_candidates",
    "load_codes",
    "replace_fingerprints",
    "simhash_candidates",
]

Owner = Literal["chapter", "page"]
_CHUNK = 2000  # bound parameters per statement (SQLite allows 32,766; PostgreSQL 65,535)


@dataclass(frozen=True)
class SimhashHit:
    owner_id: int
    distance: int


def _owner_column(owner: Owner):  # type: ignore[no-untyped-def]
    return Fingerprint.chapter_id if owner == "chapter" else Fingerprint.page_id


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

    ``codes`` maps a kind (``"dna"``, ``"winnow"``) to ``(code, position)`` pairs; codes are unsigned or signed
    64-bit integers.
    """
    column = _owner_column(owner)
    session.execute(delete(Fingerprint).where(column == owner_id))
    session.flush()
    owner_kw = {"chapter_id": owner_id} if owner == "chapter" else {"page_id": owner_id}

    simhash_row = Fingerprint(kind=f"simhash{layout.bits}", value=to_signed64(simhash), **owner_kw)
    session.add(simhash_row)
    vector_rows = {}
    for kind, pairs in codes.items():
        array = np.array([[to_signed64(c), p] for c, p in pairs], dtype=np.int64).reshape(-1, 2)
        vector_rows[kind] = Fingerprint(kind=kind, payload=array.astype("<i8").tobytes(), **owner_kw)
        session.add(vector_rows[kind])
    session.flush()

    session.execute(
        insert(SimhashIndexRow),
        [
            {"fingerprint_id": simhash_row.id, "table_no": t, "prefix": key, "fingerprint": to_signed64(simhash)}
            for t, key in layout.keys(simhash)
        ],
    )
    for kind, pairs in codes.items():
        rows = [
            {"fingerprint_id": vector_rows[kind].id, "kind": kind, "code": to_signed64(c), "position": p}
            for c, p in pairs
        ]
        for start in range(0, len(rows), _CHUNK * 4):
            session.execute(insert(CodeIndexRow), rows[start : start + _CHUNK * 4])


def load_codes(session: Session, *, owner: Owner, owner_id: int, kind: str) -> list[tuple[int, int]]:
    """The stored (code, position) pairs of an owner's vector fingerprint (signed codes)."""
    payload = session.scalar(
        select(Fingerprint.payload).where(_owner_column(owner) == owner_id, Fingerprint.kind == kind)
    )
    if not payload:
        return []
    array = np.frombuffer(payload, dtype="<i8").reshape(-1, 2)
    return [(int(c), int(p)) for c, p in array]


def simhash_candidates(
    session: Session, fingerprint: int, layout: IndexLayout, *, owner: Owner, exclude_id: int | None = None
) -> list[SimhashHit]:
    """Owners whose Simhash is within ``layout.k`` bits of ``fingerprint``, nearest first."""
    column = _owner_column(owner)
    keys = layout.keys(fingerprint)
    statement = (
        select(column, SimhashIndexRow.fingerprint)
        .join(Fingerprint, Fingerprint.id == SimhashIndexRow.fingerprint_id)
        .where(or_(*(and_(SimhashIndexRow.table_no == t, SimhashIndexRow.prefix == key) for t, key in keys)))
        .where(column.is_not(None))
        .distinct()
    )
    best: dict[int, int] = {}
    for owner_id, stored in session.execute(statement):
        if owner_id == exclude_id:
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
    for start in range(0, len(unique), _CHUNK):
        chunk = unique[start : start + _CHUNK]
        statement = (
            select(CodeIndexRow.code, column)
            .join(Fingerprint, Fingerprint.id == CodeIndexRow.fingerprint_id)
            .where(CodeIndexRow.kind == kind, CodeIndexRow.code.in_(chunk), column.is_not(None))
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


def count_rows(session: Session, model: type) -> int:
    return int(session.scalar(select(func.count()).select_from(model)) or 0)
