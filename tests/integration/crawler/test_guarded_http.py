"""The plain client of the re-checks against a real loopback site: the private-address guard on every hop, the
site's delay and robots.txt Crawl-delay between requests, redirects followed."""

from __future__ import annotations

import pytest

from fptrack.core.settings import Settings
from fptrack.crawler.guard import PrivateAddressPolicy
from fptrack.crawler.guarded_http import FetchFailure, GuardedFetcher
from tests.support.live_site import serve_live_site


class FakeTime:
    """A clock that only moves when slept on: the delays are measured, not waited."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))
        self.now += seconds


def _fetcher(site_key: str, time: FakeTime, *, delay: float = 0.0, obey: bool = True) -> GuardedFetcher:
    policy = PrivateAddressPolicy.from_entries([site_key])
    return GuardedFetcher(Settings(), policy, lambda key: (delay, obey), sleep=time.sleep, clock=time.clock)


def test_the_site_delay_spaces_requests_and_robots_can_lengthen_it() -> None:
    with serve_live_site({"/1": "<p>一</p>", "/2": "<p>二</p>"}) as site:
        time = FakeTime()
        fetcher = _fetcher(site.key, time, delay=2.0)
        assert [fetcher.fetch(site.url(p)).status for p in ("/1", "/2", "/1")] == [200, 200, 200]
        # robots.txt, then three pages: each request waits out the delay since the previous one
        assert time.slept == [2.0, 2.0, 2.0]
    with serve_live_site({"/1": "<p>一</p>"}, robots="User-agent: *\nCrawl-delay: 5\n") as site:
        time = FakeTime()
        fetcher = _fetcher(site.key, time, delay=1.0)
        fetcher.fetch(site.url("/1"))
        fetcher.fetch(site.url("/1"))
        assert time.slept[-1] == 5.0


def test_redirects_are_followed_and_every_hop_is_guarded() -> None:
    with serve_live_site({"/new": "<p>新</p>"}) as site:
        site.redirect("/old", "/new")
        result = _fetcher(site.key, FakeTime()).fetch(site.url("/old"))
        assert (result.status, result.final_url, result.url) == (200, site.url("/new"), site.url("/old"))
        assert b"\xe6\x96\xb0" in result.body
        port = site.key.rsplit(":", 1)[1]
        site.redirect("/away", f"http://localhost:{port}/new")  # loopback under another name: not allowed
        with pytest.raises(FetchFailure, match="private-address guard: localhost"):
            _fetcher(site.key, FakeTime(), obey=False).fetch(site.url("/away"))
        assert ("/new", 1) == ("/new", sum(1 for path, _ in site.requests if path == "/new"))
