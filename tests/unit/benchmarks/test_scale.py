"""The page plan of ``benchmarks.scale.pages`` (what every stored page holds, the planted copies of the new
works, the fresh site) and its recall arithmetic; generated text, no corpus, no database. Plus the bare Scrapy
spider of ``benchmarks.pipeline.throughput`` on a small loopback site."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.pipeline_site import generated_pools
from benchmarks.scale._data import (
    BLOCK,
    CHAPTERS_PER_WORK,
    NEW_WORK_BASE,
    PageTexts,
    Registry,
    fresh_site,
    new_work_of_size,
    numbers_between,
    page_spec,
    planted_copies,
)
from benchmarks.scale.pages import recall
from testbed.sites import Page, serve_site

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry(generated_pools(seed=3), 400, seed=3)


def test_half_the_pages_copy_registered_chapters_and_mirrors_share_one_chapter_on_three_hosts() -> None:
    specs = [page_spec(n, 400) for n in range(2 * BLOCK)]
    assert sum(s.truth is not None for s in specs) == BLOCK
    mirrors = [s for s in specs[:BLOCK] if s.kind == "mirror"]
    assert len(mirrors) == 3 and len({s.truth for s in mirrors}) == 1 and len({s.host for s in mirrors}) == 3
    # the copies of a block walk the registry: eight distinct chapters per block
    assert len({s.truth for s in specs[:BLOCK] if s.truth}) == 8
    assert page_spec(12_345, 400) == page_spec(12_345, 400)
    assert page_spec(0, 400).host != page_spec(20_000, 400).host  # 20,000 pages a host


def test_planted_copies_lie_below_their_size_and_have_every_kind() -> None:
    sizes = [2_000, 10_000]
    planted = planted_copies(sizes, seed=1)
    for i, size in enumerate(sizes):
        work = NEW_WORK_BASE + i
        assert new_work_of_size(sizes, size) == work
        mine = [p for p in planted.values() if p.work == work]
        assert all(p.number < size for p in mine)
        assert Counter(p.kind for p in mine) == {"verbatim": 40, "edited": 40, "mirror": 120, "excerpt": 80}
        assert {p.chapter for p in mine} == set(range(1, CHAPTERS_PER_WORK + 1))
    assert len({p.url for p in planted.values()}) == len(planted)
    with pytest.raises(ValueError, match="too small"):
        planted_copies([400], seed=1)


def test_page_texts_are_about_six_thousand_characters_and_copies_hold_their_chapter(
    registry: Registry,
) -> None:
    planted = planted_copies([1_000], seed=2)
    texts = PageTexts(registry, planted, seed=2, stream=0)
    made = {n: texts.page(n) for n in range(BLOCK)}
    for spec, _, text in made.values():
        assert 5_000 <= len(text) <= 7_500, (spec, len(text))
        if spec.kind == "verbatim" and not spec.planted:
            assert spec.truth is not None
            chapter = registry.work(spec.truth[0])[spec.truth[1] - 1]
            assert "\n".join(chapter.paragraphs) in text
    mirror_bodies = {text.split("\n", 2)[2] for spec, _, text in made.values() if spec.kind == "mirror"}
    assert len(mirror_bodies) == 1  # one text, three hosts (the promotion line names the host)
    excerpt = next(p for p in planted.values() if p.kind == "excerpt")
    spec, _, text = texts.page(excerpt.number)
    chapter_text = "".join(registry.work(excerpt.work)[excerpt.chapter - 1].paragraphs)
    passage = next(line for line in text.split("\n") if line and line in chapter_text)
    assert spec.planted and len(passage) == excerpt.excerpt_chars


def test_fill_slices_cover_a_range_once() -> None:
    parts = [list(numbers_between(1_000, 2_001, part, 3)) for part in range(3)]
    assert sorted(n for p in parts for n in p) == list(range(1_000, 2_001))


def test_recall_counts_planted_copies_found_per_kind() -> None:
    planted = planted_copies([2_000], seed=4)
    work = NEW_WORK_BASE
    verbatim = [p for p in planted.values() if p.kind == "verbatim"]
    found = {(p.url, p.chapter) for p in verbatim[:30]} | {("http://elsewhere/1.html", 1)}
    figures = recall(planted, work, found)
    assert figures["recall"]["verbatim"] == 0.75 and figures["recall"]["excerpt"] == 0.0
    assert figures["other_matches"] == 1


def test_the_fresh_site_links_every_chapter_page_within_depth_two(registry: Registry) -> None:
    served, copies = fresh_site(registry, registry.pools, pages=150, seed=5, links_per_index=50)
    assert copies == 75
    linked = set()
    for path in ["/", *(p for p in served if p.startswith("/list/"))]:
        body = served[path].body.decode("utf-8")
        linked.update(re.findall(r'href="([^"]+)"', body))
    assert {p for p in served if p.startswith("/book/")} <= linked and len(served) == 150 + 3 + 1


def test_the_bare_scrapy_spider_fetches_every_page_of_a_site_once() -> None:
    pages = {
        "/": Page(b'<html><body><a href="/a.html">a</a> <a href="/b.html">b</a></body></html>'),
        "/a.html": Page(b'<html><body><p>one</p><a href="/c.html">c</a></body></html>'),
        "/b.html": Page(b'<html><body><p>two</p><a href="/">home</a></body></html>'),
        "/c.html": Page(b"<html><body><p>three</p></body></html>"),
    }
    with serve_site(pages) as base:
        completed = subprocess.run(
            [sys.executable, "-m", "benchmarks.pipeline.throughput", "--bare-spider", base + "/",
             "--bare-depth", "2", "--bare-max-pages", "100", "--concurrency", "4"],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
    counts = json.loads(completed.stdout.strip().splitlines()[-1])
    assert counts["pages"] == 4 and counts["statuses"] == {"200": 4}


def test_a_crawls_wall_is_split_at_its_first_and_last_request() -> None:
    """The benchmark's phases: start = to the run's first request, fetch = first to last, after = last
    to the end; requests before the run (an earlier mode's) are not the run's."""
    from benchmarks.pipeline.throughput import phases
    from testbed.sites import SiteURL

    site = SiteURL("http://127.0.0.1:9")
    site.request_times.extend([1.0, 2.0])  # an earlier run's
    first = len(site.request_times)
    site.request_times.extend([10.5, 11.0, 17.25])
    assert phases(site, first, started=10.0, ended=18.0) == {"start": 0.5, "fetch": 6.75, "after": 0.75}
    assert phases(site, len(site.request_times), started=20.0, ended=21.0) == {}  # no request: nothing said


def test_each_rounds_ratio_is_read_against_the_bare_spider_of_its_own_round() -> None:
    """The benchmark's --rounds: a mode's ratio in a round is over that round's bare spider, a skipped
    mode has none, and the median is over the rounds it ran."""
    from benchmarks.pipeline.throughput import ModeResult, median_of, ratios_by_round

    def ran(mode: str, seconds: float) -> ModeResult:
        return ModeResult(mode, crawl_seconds=seconds, pages_crawled=100)

    skipped = ModeResult("postgres-w2", skipped="no PostgreSQL")
    rounds = [
        ({"pages_per_second": 100.0}, [ran("sqlite", 1.25), skipped]),
        ({"pages_per_second": 50.0}, [ran("sqlite", 4.0), ran("postgres-w2", 2.5)]),
        ({"pages_per_second": 80.0}, [ran("sqlite", 1.5625), ran("postgres-w2", 1.25)]),
    ]
    ratios = ratios_by_round(rounds)
    assert ratios == {"sqlite": [0.8, 0.5, 0.8], "postgres-w2": [None, 0.8, 1.0]}
    assert median_of(ratios["sqlite"]) == 0.8 and median_of(ratios["postgres-w2"]) == 0.9
    assert median_of([None]) is None
