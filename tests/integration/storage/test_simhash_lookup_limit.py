"""``simhash_candidates(limit=...)`` on both backends: a text stored many times costs a bounded look-up that
returns the nearest stored pages, then those stored first; re-split (hot) buckets included."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from fptrack.fingerprint.simhash import hamming
from fptrack.storage.hot_buckets import forget_hot_buckets, split_hot_buckets
from fptrack.storage.index import DEFAULT_LAYOUT
from fptrack.storage.models import Chapter, Page, Work
from fptrack.storage.simhash_index import bulk_load_simhashes, simhash_candidates, simhash_neighbours

BASE = 0x0F1E_2D3C_4B5A_6978


def _pages(session: Session, count: int, host: str = "copies.test") -> list[int]:
    pages = [
        Page(url=f"http://{host}/{n}", final_url=f"http://{host}/{n}", status=200, text="t")
        for n in range(count)
    ]
    session.add_all(pages)
    session.flush()
    return [p.id for p in pages]


def _stored(session: Session) -> dict[int, int]:
    """60 pages: 40 copies at distance 0 of BASE, 10 at 1 bit, 10 at 3 bits; loaded in page order."""
    ids = _pages(session, 60)
    values = [BASE] * 40 + [BASE ^ (1 << 5)] * 10 + [BASE ^ 0b111 << 20] * 10
    bulk_load_simhashes(session, list(zip(ids, values, strict=True)), owner="page", layout=DEFAULT_LAYOUT)
    return dict(zip(ids, values, strict=True))


@pytest.mark.parametrize("hot", [False, True])
def test_the_limit_keeps_the_nearest_then_the_first_stored(session: Session, hot: bool) -> None:
    forget_hot_buckets()
    stored = _stored(session)
    # a chapter's Simhash in the same buckets: never a page, never counted against a page look-up's limit
    work = Work(title="w", content_sha256="sha-w", text="x" * 10)
    work.chapters = [Chapter(index=0, title="0", start=0, end=10, text="x" * 10)]
    session.add(work)
    session.flush()
    bulk_load_simhashes(session, [(work.chapters[0].id, BASE)], owner="chapter", layout=DEFAULT_LAYOUT)
    if hot:
        assert split_hot_buckets(session, DEFAULT_LAYOUT, min_size=8).split
    session.commit()
    ids = sorted(stored)
    everything = simhash_candidates(session, BASE ^ 1, DEFAULT_LAYOUT, owner="page")
    assert {h.owner_id for h in everything} == {o for o, v in stored.items() if hamming(v, BASE ^ 1) <= 3}

    # query at distance 1 from the 40 copies and 2 from the next ten: the first 12 stored of the 40
    limited = simhash_candidates(session, BASE ^ 1, DEFAULT_LAYOUT, owner="page", limit=12)
    assert [h.owner_id for h in limited] == ids[:12] and {h.distance for h in limited} == {1}
    # the excluded page is not one of the limit: still 12 others
    without = simhash_candidates(session, BASE ^ 1, DEFAULT_LAYOUT, owner="page", exclude_id=ids[0], limit=12)
    assert [h.owner_id for h in without] == ids[1:13]
    # nearest first across distances: all 40 copies, then the first 5 of the 1-bit ten
    wide = simhash_candidates(session, BASE ^ 1, DEFAULT_LAYOUT, owner="page", limit=45)
    assert [h.owner_id for h in wide] == ids[:45]
    assert [h.distance for h in wide] == [1] * 40 + [2] * 5
    with pytest.raises(ValueError, match="limit"):
        simhash_candidates(session, BASE, DEFAULT_LAYOUT, owner="page", limit=0)
    forget_hot_buckets()


@pytest.mark.parametrize("hot", [False, True])
def test_a_batch_of_look_ups_answers_what_each_look_up_answers(session: Session, hot: bool) -> None:
    """simhash_neighbours: one statement for many fingerprints, each with its owner excluded and the limit,
    gives what simhash_candidates gives for each; fingerprints in re-split buckets are looked up alone."""
    forget_hot_buckets()
    stored = _stored(session)
    far = _pages(session, 3, host="far.test")  # a text of its own, and two near it
    far_value = BASE ^ (0xFFFF << 40)
    near = [(far[0], far_value), (far[1], far_value ^ 1), (far[2], far_value ^ 0b11011 << 3)]
    bulk_load_simhashes(session, near, owner="page", layout=DEFAULT_LAYOUT)
    stored.update(near)
    if hot:
        assert split_hot_buckets(session, DEFAULT_LAYOUT, min_size=8).split
    session.commit()
    ids = sorted(stored)
    queries = [(ids[0], BASE), (ids[45], BASE ^ (1 << 5)), (ids[-1], stored[ids[-1]]), (far[0], far_value)]
    queries += [(far[1], far_value ^ 1), (ids[3], BASE ^ 1), (ids[3], BASE ^ 1), (10**9, 0x1234_5678)]
    for limit in (1, 5, 12, 100):
        batch = simhash_neighbours(session, queries, DEFAULT_LAYOUT, owner="page", limit=limit)
        each = [
            simhash_candidates(session, value, DEFAULT_LAYOUT, owner="page", exclude_id=owner, limit=limit)
            for owner, value in queries
        ]
        assert batch == each
    # the far text's one near page (the third is 4 bits off)
    assert [h.owner_id for h in batch[3]] == [far[1]]
    assert simhash_neighbours(session, [], DEFAULT_LAYOUT, owner="page", limit=3) == []
    with pytest.raises(ValueError, match="limit"):
        simhash_neighbours(session, queries, DEFAULT_LAYOUT, owner="page", limit=0)
    forget_hot_buckets()
