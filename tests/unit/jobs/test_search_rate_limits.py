"""How long a search provider's answer says to wait (``rate_limit_wait``): ``Retry-After`` in seconds, else
the longest reset of the ``X-RateLimit-*`` windows used up (Brave lists one value per window), else nothing;
checked against a direct reading of the headers on generated windows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fptrack.jobs.search_providers import rate_limit_wait

windows = st.lists(
    st.tuples(st.integers(min_value=0, max_value=3), st.integers(min_value=0, max_value=3_000_000)),
    min_size=1,
    max_size=4,
)


def _headers(pairs: list[tuple[int, int]]) -> dict[str, str]:
    return {
        "x-ratelimit-remaining": ", ".join(str(left) for left, _ in pairs),
        "x-ratelimit-reset": ", ".join(str(reset) for _, reset in pairs),
    }


@given(windows)
def test_the_wait_is_the_longest_reset_of_a_used_up_window(pairs: list[tuple[int, int]]) -> None:
    used_up = [reset for left, reset in pairs if left == 0]
    assert rate_limit_wait(_headers(pairs)) == (max(used_up) if used_up else None)


@given(windows, st.integers(min_value=0, max_value=86_400))
def test_retry_after_wins(pairs: list[tuple[int, int]], seconds: int) -> None:
    assert rate_limit_wait({**_headers(pairs), "retry-after": str(seconds)}) == seconds


def test_what_says_nothing_gives_no_wait() -> None:
    assert rate_limit_wait({}) is None
    assert rate_limit_wait({"x-ratelimit-remaining": "0, 5", "x-ratelimit-reset": "1"}) is None  # unpaired
    assert rate_limit_wait({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "soon"}) is None
    assert rate_limit_wait({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}) is None  # a date: not read
    assert rate_limit_wait({"x-ratelimit-remaining": "0, 12", "x-ratelimit-reset": "1, 1419704"}) == 1.0
