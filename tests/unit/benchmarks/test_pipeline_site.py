"""The generated pirate site of benchmarks.pipeline.throughput: well-formed pages, every page reachable
within the crawl depth, and ground truth that says what the generator built. Random text only (no corpus)."""

from __future__ import annotations

import math
import urllib.request
from collections import Counter, deque
from urllib.parse import urljoin, urlsplit

import lxml.html
import pytest

from benchmarks.pipeline_site import (
    COPY_CYCLE,
    SITE_NAME,
    ClauseStream,
    PipelineSite,
    build_site,
    generated_pools,
)
from fptrack.compare.chapters import split_chapters
from testbed.sites import serve_site

PAGES, REGISTRY, PER_WORK, PER_INDEX = 60, 20, 8, 25


@pytest.fixture(scope="module")
def site() -> PipelineSite:
    return build_site(
        generated_pools(seed=3),
        pages=PAGES,
        registry=REGISTRY,
        chapters_per_work=PER_WORK,
        chapter_chars=1200,
        links_per_index=PER_INDEX,
        seed=4,
    )


def _decoded(site: PipelineSite, path: str) -> str:
    page = site.pages[path]
    charset = (page.content_type or "").split("charset=")[-1]
    return page.body.decode(charset)  # strict: the declared charset must decode the body


def test_counts_are_what_the_generator_says(site: PipelineSite) -> None:
    counts = site.counts()
    copies = PAGES // 2
    expected_kinds = Counter(COPY_CYCLE[i % len(COPY_CYCLE)] for i in range(copies))
    assert {k: counts[k] for k in expected_kinds} == dict(expected_kinds)
    assert counts["synthetic_unrelated"] == PAGES - copies  # generated pools hold no real documents
    assert (counts["copies"], counts["unrelated"], counts["chapter_pages"]) == (copies, PAGES - copies, PAGES)
    assert counts["index_pages"] == math.ceil(PAGES / PER_INDEX) + 1
    assert counts["registered_chapters"] == REGISTRY == len(site.chapters)
    assert len(site.expected_copies()) == copies
    per_chapter = Counter(p.truth for p in site.chapter_pages if p.truth is not None)
    assert max(per_chapter.values()) == site.notes["max_copies_per_chapter"] == math.ceil(copies / REGISTRY)
    assert set(per_chapter) <= {c.key for c in site.chapters}


def test_works_split_into_the_chapters_the_ground_truth_names(site: PipelineSite) -> None:
    assert len(site.works) == math.ceil(REGISTRY / PER_WORK)
    for title, text in site.works:
        ours = [(c.index, c.heading) for c in site.chapters if c.work_title == title]
        assert [(s.index, s.title) for s in split_chapters(text)] == ours


def test_pages_are_well_formed_and_share_one_template(site: PipelineSite) -> None:
    navs, footers = set(), set()
    for path in site.pages:
        tree = lxml.html.fromstring(_decoded(site, path))
        assert tree.findtext(".//title").endswith(SITE_NAME) or path == "/"
        navs.add(lxml.html.tostring(tree.find_class("nav")[0], encoding="unicode"))
        footers.add(lxml.html.tostring(tree.find_class("footer")[0], encoding="unicode"))
    assert len(navs) == len(footers) == 1
    chapters = {c.key: c for c in site.chapters}
    for spec in site.chapter_pages:
        tree = lxml.html.fromstring(_decoded(site, spec.path))
        assert tree.findtext(".//h1") == spec.title
        if spec.kind in ("verbatim", "gbk"):
            content = tree.get_element_by_id("content").text_content()
            assert all(p in content for p in chapters[spec.truth].paragraphs)  # type: ignore[index]


def test_every_page_is_reached_within_the_crawl_depth(site: PipelineSite) -> None:
    depth_of = {"/": 0}
    queue = deque(["/"])
    while queue:
        path = queue.popleft()
        if depth_of[path] >= site.depth:
            continue
        for href in lxml.html.fromstring(_decoded(site, path)).xpath("//a/@href"):
            target = urlsplit(urljoin("http://127.0.0.1" + path, href)).path
            assert target in site.pages, f"{path} links to {target}, which the site does not serve"
            if target not in depth_of:
                depth_of[target] = depth_of[path] + 1
                queue.append(target)
    assert set(depth_of) == set(site.pages)


def test_the_site_is_served_on_loopback(site: PipelineSite) -> None:
    gbk = next(p for p in site.chapter_pages if p.encoding == "gbk")
    with serve_site(site.pages) as base:
        assert base.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(base + gbk.path, timeout=5) as response:
            assert response.headers["Content-Type"] == "text/html; charset=gbk"
            assert response.read() == site.pages[gbk.path].body


def test_clause_stream_reletters_every_pass_after_the_first() -> None:
    clauses = ["甲乙丙丁戊，", "己庚辛壬癸。", "子丑寅卯辰！", "巳午未申酉？"]
    stream = ClauseStream(clauses, seed=1)
    first = sorted(stream.clause() for _ in clauses)
    second = sorted(stream.clause() for _ in clauses)
    assert first == sorted(clauses) and stream.epochs_used == 2
    assert second != first and sorted(map(len, second)) == sorted(map(len, first))
    skipped = ClauseStream(clauses, seed=1, first_epoch=1)
    assert sorted(skipped.clause() for _ in clauses) == second
