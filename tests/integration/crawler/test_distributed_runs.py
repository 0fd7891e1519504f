"""The bookkeeping of distributed crawls on a real Redis: who starts a run and who joins it, when a crawl is
over, who finishes the job, and that only the run's own keys are touched."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from fptrack.core.settings import Settings
from fptrack.crawler.distributed import CrawlKeys, CrawlPart, DistributedError, SharedCrawl, crawl_redis_url
from fptrack.crawler.pages import CrawlStats
from tests.conftest import REDIS_URL

pytestmark = [pytest.mark.redis]

SITE = "books.example:8123"


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL)
    client.set("someone-else:key", "kept")
    yield client
    for key in client.scan_iter(f"fptrack:crawl:{SITE}:*"):
        client.delete(key)
    assert client.get("someone-else:key") == b"kept"  # never FLUSHDB, never another's key
    client.delete("someone-else:key")
    client.close()


def _process(stale: float = 120.0) -> SharedCrawl:
    settings = Settings(crawl_redis_url=REDIS_URL, crawl_stale_seconds=stale)
    return SharedCrawl.connect(settings, SITE)


def _stats(pages: int, failures: int = 0) -> CrawlStats:
    return CrawlStats(
        pages_seen=pages,
        pages_with_text=pages,
        by_status={200: pages},
        failures=tuple((f"http://{SITE}/gone/{n}", "connection refused") for n in range(failures)),
        elapsed_seconds=1.0,
        counters={"fptrack/links_off_site": 1},
    )


def test_the_redis_url_comes_from_the_setting_or_a_redis_broker() -> None:
    assert crawl_redis_url(Settings(crawl_redis_url="redis://r:6379/3")) == "redis://r:6379/3"
    assert crawl_redis_url(Settings(broker_url="redis://b:6379/0")) == "redis://b:6379/0"
    for settings in (Settings(), Settings(broker_url="amqp://b//")):
        with pytest.raises(
            DistributedError, match="a distributed crawl needs Redis: set FPTRACK_CRAWL_REDIS_URL"
        ):
            crawl_redis_url(settings)
    with pytest.raises(DistributedError, match="expected a redis:// URL"):
        crawl_redis_url(Settings(crawl_redis_url="http://r/"))


def test_one_process_starts_the_run_the_others_join_it_with_its_limits(client: redis.Redis) -> None:
    first, second, third = _process(), _process(), _process()
    try:
        with pytest.raises(DistributedError, match=f"no distributed crawl of {SITE} is running to join"):
            first.enter(depth=2, max_pages=10, mode="join")
        started = first.enter(depth=3, max_pages=50)
        joined = second.enter(depth=1, max_pages=5)
        assert (started.role, joined.role) == ("first", "joined")
        assert joined.run == started.run and (joined.depth, joined.max_pages) == (3, 50)
        assert third.enter(depth=1, max_pages=5, mode="join").run == started.run
        first.publish_job(42)
        assert second.wait_for_job() == third.wait_for_job() == 42
        assert client.get(CrawlKeys.current_of(SITE)) == started.run.encode()

        # the page budget is shared
        taken = [p.take_page() for p in (first, second, third) for _ in range(20)]
        assert taken.count(True) == 50 and first.budget_spent()

        # each leaves with its part; the last one is told, and the totals are everyone's
        assert not first.leave(CrawlPart(stats=_stats(20, failures=1), stored=20, unchanged=0, to_compare=20))
        assert not second.leave(CrawlPart(stats=_stats(20), stored=18, unchanged=2, to_compare=18))
        assert third.leave(CrawlPart(stats=_stats(10), stored=10, to_compare=10))
        stats, totals, errors = third.totals(3.0)
        assert (stats.pages_seen, stats.by_status, len(stats.failures), errors) == (50, {200: 50}, 1, [])
        assert (totals.stored, totals.unchanged, totals.to_compare) == (48, 2, 48)
        assert stats.counters == {"fptrack/links_off_site": 3, "fptrack/distributed_processes": 3}
        third.remove_keys()
        assert list(client.scan_iter(f"fptrack:crawl:{SITE}:*")) == []
    finally:
        for process in (first, second, third):
            process.close()


def test_a_crawl_is_over_when_the_frontier_is_empty_and_nobody_is_busy(client: redis.Redis) -> None:
    first, second = _process(), _process()
    try:
        first.enter(depth=2, max_pages=100)
        second.enter(depth=2, max_pages=100)
        # the second process holds requests (it is busy until it says otherwise)
        assert first.crawl_over() == 0
        assert second.crawl_over() == 1  # now nobody is busy and the frontier is empty
        keys = first.keys
        assert keys is not None
        client.zadd(keys.requests, {b"a-request": 0})
        assert first.crawl_over() == 0  # requests left in the frontier
        client.delete(keys.requests)
        first.set_busy()
        assert second.crawl_over() == 0
        client.set(keys.pages, 100)
        assert second.crawl_over() == 2  # the page budget is spent: over, whoever is busy
    finally:
        first.close()
        second.close()


def test_a_dead_process_stops_counting_and_a_dead_run_is_not_joined(client: redis.Redis) -> None:
    first, second = _process(stale=5), _process(stale=5)
    try:
        run = first.enter(depth=2, max_pages=100).run
        second.enter(depth=2, max_pages=100)
        keys = first.keys
        assert keys is not None
        first.close()  # its heartbeat stops; make its last one look old
        client.hset(keys.alive, first.member, int(client.time()[0]) - 60)
        assert second.crawl_over() == 1  # the dead process no longer counts as busy
        second.close()
        client.hset(keys.alive, second.member, int(client.time()[0]) - 60)
        late = _process(stale=5)
        try:
            assert late.enter(depth=2, max_pages=100).role == "first"  # not the dead run: a fresh one
            assert late.keys is not None and late.keys.run != run
        finally:
            late.close()
    finally:
        first.close()
        second.close()
