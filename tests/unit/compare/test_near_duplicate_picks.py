"""Which near duplicates a page records (``compare.networks.pick_near_duplicates``): a bounded, deterministic
choice from the look-up's hits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fptrack.compare.networks import CLOSE_DISTANCE, pick_near_duplicates

SITE = 7
hits_strategy = st.lists(
    st.tuples(st.integers(1, 60), st.one_of(st.none(), st.integers(1, 9)), st.integers(0, 3)),
    unique_by=lambda hit: hit[0],  # a page is one hit of the look-up
    max_size=40,
)


def test_close_pages_first_then_by_site_one_per_site() -> None:
    hits = [
        (10, 5, 3),  # near only, lowest site: after every close page
        (11, 9, 0),
        (12, 8, 2),
        (13, 8, 1),  # site 8's nearest
        (14, SITE, 0),  # the page's own site: never
        (15, None, 0),  # a page without a site: never
        (16, 6, 2),
    ]
    assert pick_near_duplicates(hits, SITE, per_site=1, limit=10) == [(16, 2), (13, 1), (11, 0), (10, 3)]
    assert pick_near_duplicates(hits, SITE, per_site=1, limit=2) == [(16, 2), (13, 1)]
    assert pick_near_duplicates(hits, SITE, per_site=2, limit=10) == [
        (16, 2),
        (13, 1),
        (12, 2),
        (11, 0),
        (10, 3),
    ]


def test_equal_distances_pick_the_page_stored_first() -> None:
    assert pick_near_duplicates([(30, 2, 1), (20, 2, 1), (25, 2, 1)], SITE, per_site=1, limit=5) == [(20, 1)]


@given(hits_strategy, st.integers(1, 3), st.integers(1, 12), st.randoms(use_true_random=False))
def test_bounded_and_independent_of_the_hits_order(hits, per_site, limit, rng) -> None:  # type: ignore[no-untyped-def]
    picked = pick_near_duplicates(hits, SITE, per_site=per_site, limit=limit)
    shuffled = list(hits)
    rng.shuffle(shuffled)
    assert pick_near_duplicates(shuffled, SITE, per_site=per_site, limit=limit) == picked
    site_of = {page: site for page, site, _ in hits}
    sites = [site_of[page] for page, _ in picked]
    assert len(picked) <= limit
    assert all(site is not None and site != SITE for site in sites)
    assert all(sites.count(s) <= per_site for s in set(sites))
    eligible = {site for _, site, _ in hits if site is not None and site != SITE}
    # as many as the bounds allow: every other site is represented unless the limit is reached
    assert len(picked) == min(limit, sum(min(per_site, [s for _, s, _ in hits].count(e)) for e in eligible))
    # a close page is never left out while a merely near one is recorded
    if any(d > CLOSE_DISTANCE for _, d in picked):
        close_sites = {s for _, s, d in hits if s in eligible and d <= CLOSE_DISTANCE}
        assert all(sites.count(s) >= 1 for s in close_sites)
