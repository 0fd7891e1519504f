"""The chapter side of the code index held in memory (compare.chapter_index) against the database's answer.

The arrays' look-up against numpy's plain bisection, and on a real SQLite database the whole path (load,
deltas, reloads) against :func:`storage.code_index.code_holder_pairs` after every change of a random registry.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete
from sqlalchemy.orm import Session

from fptrack.compare import chapter_index
from fptrack.compare.chapter_index import KindArrays, chapter_holder_pairs
from fptrack.core.settings import Settings
from fptrack.storage.code_index import code_holder_pairs
from fptrack.storage.db import create_engine_for
from fptrack.storage.fingerprints import FingerprintSet, write_fingerprints
from fptrack.storage.housekeeping import delete_works
from fptrack.storage.index import DEFAULT_LAYOUT
from fptrack.storage.models import Chapter, Work

KINDS = ("winnow", "winnow_py")
INT64 = st.integers(-(2**63), 2**63 - 1)


@pytest.fixture(autouse=True)
def _memory_mode() -> Iterator[None]:
    chapter_index.configure(mode="memory")
    yield
    chapter_index.configure()


def _brute_force(vectors: list[tuple[int, np.ndarray]], query: np.ndarray) -> np.ndarray:
    wanted = set(query.tolist())
    pairs = sorted({(int(c), owner) for owner, codes in vectors for c in codes.tolist() if int(c) in wanted})
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


@hypothesis_settings(max_examples=200, deadline=None)
@given(
    pool=st.lists(INT64, min_size=1, max_size=60, unique=True),
    owners=st.lists(st.lists(st.integers(0, 59), max_size=40), max_size=12),
    extra=st.lists(INT64, max_size=10),
)
def test_the_arrays_answer_what_a_scan_of_the_vectors_answers(
    pool: list[int], owners: list[list[int]], extra: list[int]
) -> None:
    """Codes drawn from a small pool (so that chapters share them), repeats within a vector, the extremes of
    int64 (the directory's first and last buckets), and query codes nobody holds."""
    pool = [*pool, -(2**63), 2**63 - 1]
    vectors = [
        (owner_id * 7 + 1, np.array([pool[i % len(pool)] for i in picks], dtype=np.int64))
        for owner_id, picks in enumerate(owners)
    ]
    arrays = KindArrays.of_vectors(vectors)
    query = np.unique(np.array(pool[::2] + extra, dtype=np.int64))
    assert np.array_equal(arrays.pairs(query), _brute_force(vectors, query))
    half = len(vectors) // 2
    merged = KindArrays.of_vectors(vectors[:half]).merged(KindArrays.of_vectors(vectors[half:]))
    assert np.array_equal(merged.codes, arrays.codes) and np.array_equal(merged.owners, arrays.owners)


def test_a_large_array_answers_as_searchsorted_does() -> None:
    rng = np.random.default_rng(20)
    vectors = [(i, rng.integers(-(2**63), 2**63 - 1, 400, dtype=np.int64)) for i in range(1, 500)]
    arrays = KindArrays.of_vectors(vectors)
    assert arrays.owners.dtype == np.int32 and arrays.bits > 4
    held = arrays.codes[rng.integers(0, len(arrays), 3000)]
    query = np.unique(np.concatenate((held, rng.integers(-(2**63), 2**63 - 1, 3000, dtype=np.int64))))
    found = arrays.pairs(query)
    starts = np.searchsorted(arrays.codes, query, "left")
    ends = np.searchsorted(arrays.codes, query, "right")
    assert len(found) == int((ends - starts).sum()) and set(found[:, 0].tolist()) == set(held.tolist())


# ------------------------------------------------------------------------------ against the database (SQLite)


def _register(session: Session, vectors: list[dict[str, list[int]]]) -> int:
    """A work with one chapter per entry of ``vectors`` (kind -> codes), fingerprinted by the product's
    writer."""
    work = Work(title="w", content_sha256=uuid.uuid4().hex, text="x")
    session.add(work)
    session.flush()
    chapters = [
        Chapter(work_id=work.id, index=i, title=f"c{i}", start=0, end=1, text="x")
        for i in range(len(vectors))
    ]
    session.add_all(chapters)
    session.flush()
    write_fingerprints(
        session,
        owner="chapter",
        layout=DEFAULT_LAYOUT,
        items=[
            FingerprintSet(
                chapter.id,
                None,
                {kind: [(code, p) for p, code in enumerate(codes)] for kind, codes in by_kind.items()},
            )
            for chapter, by_kind in zip(chapters, vectors, strict=True)
        ],
    )
    return work.id


def _refingerprint(session: Session, work_id: int, codes: list[int]) -> None:
    chapter_ids = list(
        session.scalars(
            Chapter.__table__.select().with_only_columns(Chapter.id).where(Chapter.work_id == work_id)
        )
    )
    write_fingerprints(
        session,
        owner="chapter",
        layout=DEFAULT_LAYOUT,
        items=[
            FingerprintSet(c, None, {"winnow": [(code, p) for p, code in enumerate(codes)]})
            for c in chapter_ids
        ],
    )


def _assert_same(session: Session, queries: list[int]) -> None:
    for kind in KINDS:
        expected = code_holder_pairs(session, kind, queries, owner="chapter")
        assert np.array_equal(chapter_holder_pairs(session, kind, queries), expected), kind


CODES = st.lists(st.integers(-50, 50) | INT64, max_size=25)
OPERATION = st.one_of(
    st.tuples(
        st.just("register"),
        st.lists(st.fixed_dictionaries({"winnow": CODES, "winnow_py": CODES}), min_size=1, max_size=4),
    ),
    st.tuples(st.just("remove"), st.integers(0, 10)),
    st.tuples(st.just("refingerprint"), st.tuples(st.integers(0, 10), CODES)),
    st.tuples(st.just("commit"), st.none()),
    st.tuples(st.just("rollback"), st.none()),
)


@pytest.fixture
def sqlite_engine(sqlite_settings: Settings) -> Iterator[Engine]:
    engine = create_engine_for(sqlite_settings)
    yield engine
    engine.dispose()


@hypothesis_settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    operations=st.lists(OPERATION, min_size=1, max_size=8),
    queries=st.lists(st.integers(-60, 60) | INT64, max_size=80),
)
def test_memory_and_database_give_the_same_pairs_through_every_change(
    sqlite_engine: Engine, operations: list[tuple[str, object]], queries: list[int]
) -> None:
    """Registrations (deltas), removals and re-fingerprinted chapters (reloads), commits and rollbacks (a
    transaction's own uncommitted chapters, then their disappearance): after each, both paths agree."""
    with Session(sqlite_engine) as session:
        session.execute(delete(Work))
        session.commit()
        works: list[int] = []
        _assert_same(session, queries)
        for operation, argument in operations:
            if operation == "register":
                works.append(_register(session, argument))  # type: ignore[arg-type]
            elif operation == "remove" and works:
                delete_works(session, [works.pop(int(argument) % len(works))])  # type: ignore[call-overload]
            elif operation == "refingerprint" and works:
                number, codes = argument  # type: ignore[misc]
                _refingerprint(session, works[number % len(works)], codes)
            elif operation == "commit":
                session.commit()
            elif operation == "rollback":
                session.rollback()
                works = [w for w in works if session.get(Work, w) is not None]
            _assert_same(session, [*queries, *range(-50, 51)])
