"""Stored versions of the corpus statistics (IDF, entropy, pinyin reference): opaque bytes, newest wins."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.storage.models import CorpusStatistics

__all__ = ["StoredCorpusStats", "latest_corpus_stats", "save_corpus_stats"]


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
        select(CorpusStatistics)
        .where(CorpusStatistics.name == name)
        .order_by(CorpusStatistics.version.desc())
    )
    if row is None:
        return None
    return StoredCorpusStats(row.name, row.version, row.document_count, bytes(row.payload), row.created_at)
