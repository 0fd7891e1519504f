"""The Simhash index answers exactly what a brute-force scan answers, on real PostgreSQL and on SQLite: for
random stored sets (with planted near neighbours), random queries, several layouts, and with buckets
re-split."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, text
from sqlalchemy.orm import Session

from fptrack.fingerprint.simhash import hamming
from fptrack.storage.hot_buckets import forget_hot_buckets, split_hot_buckets
from fptrack.storage.index import DEFAULT_LAYOUT, IndexLayout, to_signed64
from fptrack.storage.models import Page
from fptrack.storage.simhash_index import ensure_simhash_indexes, simhash_candidates

u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
LAYOUTS = [DEFAULT_LAYOUT, IndexLayout(64, 3, 5), IndexLayout(64, 2, 4), IndexLayout(64, 1, 2)]


def _flip(value: int, rng: random.Random, distance: int) -> int:
    for bit in rng.sample(range(64), distance):
        value ^= 1 << bit
    return value


def _store(session: Session, values: list[int]) -> dict[int, int]:
    """Pages owning ``values`` as Simhashes; returns page id -> value."""
    session.execute(
        insert(Page),
        [{"url": f"http://t.test/{i}", "final_url": "", "status": 200} for i in range(len(values))],
    )
    ids = [i for (i,) in session.execute(text("SELECT id FROM pages ORDER BY id"))][-len(values) :]
    from fptrack.storage.simhash_index import bulk_load_simhashes

    bulk_load_simhashes(
        session, list(zip(ids, values, strict=True)), owner="page", layout=session.info["layout"]
    )
    return dict(zip(ids, values, strict=True))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seeds=st.lists(u64, min_size=1, max_size=12),
    extra=st.lists(u64, max_size=40),
    queries=st.lists(u64, min_size=1, max_size=6),
    layout=st.sampled_from(LAYOUTS),
    resplit=st.booleans(),
    rng_seed=st.integers(0, 2**32 - 1),
)
def test_index_answer_equals_brute_force(
    any_session: Session,
    seeds: list[int],
    extra: list[int],
    queries: list[int],
    layout: IndexLayout,
    resplit: bool,
    rng_seed: int,
) -> None:
    session = any_session
    rng = random.Random(rng_seed)
    ensure_simhash_indexes(session.connection(), layout)
    session.info["layout"] = layout
    # near neighbours of the seeds and of the queries at every distance 0..k+1, plus unrelated values
    values = list(extra)
    for centre in seeds + queries:
        values += [_flip(centre, rng, d) for d in range(layout.k + 2)]
    stored = _store(session, values)
    if resplit:  # every bucket with two or more fingerprints is re-split: the sub-key path answers
        split_hot_buckets(session, layout, mu=0.0, min_size=1)
    try:
        for query in queries + seeds[:2]:
            expected = {
                page_id: hamming(value, query)
                for page_id, value in stored.items()
                if hamming(value, query) <= layout.k
            }
            hits = simhash_candidates(session, query, layout, owner="page")
            assert {h.owner_id: h.distance for h in hits} == expected
            assert [h.distance for h in hits] == sorted(h.distance for h in hits)
            assert simhash_candidates(session, query, layout, owner="chapter") == []
    finally:
        session.rollback()
        forget_hot_buckets()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(u64, min_size=1, max_size=20), layout=st.sampled_from(LAYOUTS))
def test_sql_key_expressions_equal_python_keys(
    any_session: Session, values: list[int], layout: IndexLayout
) -> None:
    """The expression indexes and the query's keys come from one description; the database agrees with
    Python."""
    for value in values:
        signed = to_signed64(value)
        for t, key in layout.keys(value):
            assert (
                any_session.scalar(text(f"SELECT {layout.key_sql(t, 'CAST(:v AS BIGINT)')}"), {"v": signed})
                == key
            )
            for s, sub_key in layout.split_keys(value, t):
                assert (
                    any_session.scalar(
                        text(f"SELECT {layout.split_key_sql(t, s, 'CAST(:v AS BIGINT)')}"), {"v": signed}
                    )
                    == sub_key
                )


@pytest.mark.postgres
def test_lookup_is_an_index_only_scan(pg_session: Session) -> None:
    """The plan reads the expression indexes only (no sequential scan, no heap), for every table."""
    from fptrack.storage.simhash_index import _candidate_params, _candidate_sql

    layout = DEFAULT_LAYOUT
    plan = "\n".join(
        row[0]
        for row in pg_session.execute(
            text("EXPLAIN " + _candidate_sql(layout, True)), _candidate_params(0x0123456789ABCDEF, layout)
        )
    )
    for name in [f"ix_fingerprints_{layout.name}_t{t}" for t in range(layout.table_count)]:
        assert f"Index Only Scan using {name}" in plan or f"Bitmap Index Scan on {name}" in plan, plan
    assert "Seq Scan" not in plan, plan


@pytest.mark.postgres
def test_key_expressions_have_planner_statistics(pg_session: Session) -> None:
    """Without extended statistics the planner misjudges the partial expression indexes (and JIT-compiles
    every look-up at 10M rows); migrate() creates them for the configured layout."""
    names = set(pg_session.scalars(text("SELECT stxname FROM pg_statistic_ext")))
    assert {f"st_fingerprints_{DEFAULT_LAYOUT.name}_t{t}" for t in range(DEFAULT_LAYOUT.table_count)} <= names
