"""Hostile sites, crawled for real on 127.0.0.1: each ends in a clear record (a page, or a failure with its
reason) at a bounded cost. Robots.txt, private-address redirects, 404/500 and timeouts have their tests beside
the crawler's (test_polite.py, test_guard.py, test_crawler_crawl.py); this file holds the rest."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CrawlJob
from testbed.sites import Generated, Page, Redirect, chapter_page, serve_site
from tests.integration.crawler.harness import PARAGRAPHS, crawl_in_child
from tests.support.env import clean_environ

pytestmark = pytest.mark.slow


def _links(*paths: str) -> Page:
    anchors = "".join(f"<li><a href='{p}'>{p}</a></li>" for p in paths)
    return Page.html(f"<html><head><title>目录</title></head><body><ul>{anchors}</ul></body></html>")


def _many_links(count: int) -> Page:
    anchors = "".join(f"<a href='/p/{n}.html'>第{n}章</a><br>" for n in range(count))
    return Page.html(f"<html><body>{anchors}</body></html>")


# ---------------------------------------------------------------------------------------------- 200,000 links


def test_a_page_of_200000_links_is_stopped_by_sigterm_and_the_job_says_interrupted(tmp_path: Path) -> None:
    """The page that once hung a crawl for ten minutes, ignoring SIGTERM: parsing runs off the event loop, so
    the signal is handled while the page is parsed, and the crawl stops within its grace period."""
    data = str(tmp_path)
    env = clean_environ()
    env.update(FPTRACK_DATA_DIR=data, FPTRACK_CRAWL_TIMEOUT="5")
    cli = [sys.executable, "-m", "fptrack.cli"]
    assert subprocess.run([*cli, "init"], env=env, capture_output=True, check=False).returncode == 0
    with serve_site({"/": _many_links(200_000)}) as base:
        crawl = subprocess.Popen(
            [*cli, "crawl", base + "/", "--allow-private-host", base.key, "--depth", "1", "-q"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "/" not in base.page_requests:
            time.sleep(0.05)
        assert "/" in base.page_requests, "the crawl never fetched its start page"
        time.sleep(1.0)  # the 7 MB page is being parsed now
        crawl.send_signal(signal.SIGTERM)
        out, err = crawl.communicate(timeout=60)  # bounded: it would raise TimeoutExpired if the crawl hung
    assert crawl.returncode == 130, out + err
    assert "interrupted" in err
    settings = Settings.from_env(env)
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            job = session.scalars(select(CrawlJob).order_by(CrawlJob.id.desc())).first()
            assert job is not None
            assert (job.status, job.error) == ("interrupted", "interrupted")
            assert job.finished_at is not None
    finally:
        engine.dispose()


def test_links_taken_from_one_page_are_capped_and_the_cut_is_noted() -> None:
    pages = {"/": _many_links(50)}
    with serve_site(pages) as site:
        result = crawl_in_child([site + "/"], depth=1, max_pages=100, settings={"crawl_max_links": 7})
    assert sorted(site.page_requests) == sorted(["/", *[f"/p/{n}.html" for n in range(7)]])
    assert result.page(site + "/")["note"] == "links cut to the first 7 (more on the page)"


# ------------------------------------------------------------------------------------------ deep nesting,
# size


@pytest.mark.parametrize("levels", [3000, 10000])
def test_a_copy_nested_thousands_of_levels_deep_still_gives_its_text(levels: int) -> None:
    inner = "".join(f"<p>{p}</p>" for p in PARAGRAPHS)
    html = f"<html><body>{'<div>' * levels}{inner}{'</div>' * levels}</body></html>"
    with serve_site({"/": Page.html(html)}) as site:
        result = crawl_in_child([site + "/"], depth=0)
    page = result.page(site + "/")
    assert page["text"].split("\n") == PARAGRAPHS
    assert "flattened" in page["note"]


def test_text_over_the_character_cap_is_cut_at_a_paragraph_and_noted() -> None:
    paragraphs = [f"第{n}段。" + PARAGRAPHS[n % 4] for n in range(40)]
    with serve_site({"/": chapter_page("第一章", paragraphs)}) as site:
        result = crawl_in_child([site + "/"], depth=0, settings={"max_page_chars": 500})
    page = result.page(site + "/")
    kept = page["text"].split("\n")
    assert 0 < len(page["text"]) <= 500
    assert kept == paragraphs[: len(kept)]
    assert re.fullmatch(r"text cut to \d+ of \d+ characters \(over the 500-character cap\)", page["note"])


def test_a_50_mb_page_is_abandoned_at_the_size_cap() -> None:
    body = b"<html><body>" + "很长的一页。".encode() * (50 * 1024 * 1024 // 18) + b"</body></html>"
    pages = {
        "/": _links("/huge.html", "/huge-chunked.html", "/ok.html"),
        "/ok.html": chapter_page("第一章", PARAGRAPHS),
    }
    pages["/huge.html"] = Page(body)
    pages["/huge-chunked.html"] = Page(body, chunked=True)
    with serve_site(pages) as site:
        result = crawl_in_child([site + "/"], depth=1)
    failures = dict(result.stats["failures"])
    cap = 10 * 1024 * 1024
    assert (
        failures[site + "/huge.html"]
        == f"larger than {cap} bytes (the download size cap): {len(body)} bytes announced"
    )
    chunked = failures[site + "/huge-chunked.html"]
    assert re.fullmatch(
        rf"larger than {cap} bytes \(the download size cap\): stopped after \d+ bytes", chunked
    )
    assert cap < int(chunked.rsplit(" ", 2)[-2]) < 2 * cap  # stopped soon after the cap, not at 50 MB
    assert result.page(site + "/ok.html")["text"].split("\n") == PARAGRAPHS


def test_a_binary_file_served_as_text_html_is_a_page_without_text() -> None:
    noise = bytes((n * 7919 + 13) % 256 for n in range(64 * 1024))
    with serve_site({"/": _links("/book.html"), "/book.html": Page(b"PK\x03\x04" + noise)}) as site:
        result = crawl_in_child([site + "/"], depth=1)
    page = result.page(site + "/book.html")
    # its bytes say zip whatever its header says: read as a download (fingerprint/containers.py), which
    # finds no archive in them
    assert (page["status"], page["text"]) == (200, "")
    assert page["error"].startswith("download: zip: no text") and "not a zip file" in page["error"]


def test_a_slow_drip_page_times_out() -> None:
    drip = Page.html("<html><body><p>" + "慢" * 200 + "</p></body></html>", drip=0.2)
    pages = {
        "/": _links("/drip.html", "/ok.html"),
        "/drip.html": drip,
        "/ok.html": chapter_page("第一章", PARAGRAPHS),
    }
    with serve_site(pages) as site:
        result = crawl_in_child([site + "/"], depth=1, settings={"crawl_timeout": 2.0})
    assert result.stats["failures"] == [[site + "/drip.html", "timed out after 2 s"]]
    assert sorted(result.urls) == [site + "/", site + "/ok.html"]


# ---------------------------------------------------------------------------------------------------
# redirects


def test_a_redirect_loop_is_a_failure_with_its_reason() -> None:
    pages = {
        "/": _links("/a.html", "/ok.html"),
        "/a.html": Redirect("/b.html"),
        "/b.html": Redirect("/a.html"),
    }
    pages["/ok.html"] = chapter_page("第一章", PARAGRAPHS)
    with serve_site(pages) as site:
        result = crawl_in_child([site + "/"], depth=1)
    loop = f"redirect loop: {site}/a.html -> {site}/b.html -> {site}/a.html"
    assert result.stats["failures"] == [[site + "/a.html", loop]]
    assert sorted(result.urls) == [site + "/", site + "/ok.html"]


def test_an_endless_redirect_chain_is_too_many_redirects() -> None:
    def hop(path: str) -> Redirect:
        return Redirect(f"/hop/{int(path.rsplit('/', 1)[1]) + 1}")

    with serve_site({"/": _links("/hop/0"), "/hop/": Generated(hop)}) as site:
        result = crawl_in_child([site + "/"], depth=1)
    assert result.stats["failures"] == [[site + "/hop/0", "too many redirects"]]
    assert len(site.page_requests) <= 1 + 11  # the start page, then the hops up to Scrapy's 10 redirects


def test_a_start_page_redirecting_to_another_host_is_refused_with_its_reason() -> None:
    with serve_site({"/": chapter_page("别处", PARAGRAPHS)}) as elsewhere:
        other = elsewhere.replace("127.0.0.1", "localhost")
        with serve_site({"/": Redirect(f"{other}/")}) as start:
            result = crawl_in_child(
                [start + "/"], depth=1, allow=[start.key, f"localhost:{other.rsplit(':', 1)[1]}"]
            )
    assert elsewhere.requests == []
    assert result.urls == []
    [(url, reason)] = result.stats["failures"]
    assert url == start + "/"
    assert reason.startswith(f"start page redirected to another domain, refused: {other}/")


# ----------------------------------------------------------------------------------------- endless sites,
# noise


def test_an_endless_calendar_stops_at_the_depth_and_page_limits() -> None:
    def day(path: str) -> Page:
        current = date.fromisoformat(path.rsplit("/", 1)[1].removesuffix(".html"))
        links = [current + timedelta(days=1), current + timedelta(days=30), current - timedelta(days=1)]
        anchors = "".join(f"<a href='/cal/{d.isoformat()}.html'>{d}</a> " for d in links)
        return Page.html(f"<html><body><h1>{current}</h1><p>今天没有事情。</p>{anchors}</body></html>")

    pages = {"/cal/": Generated(day)}
    with serve_site(pages) as site:
        deep = crawl_in_child([site + "/cal/2024-01-01.html"], depth=3, max_pages=10_000)
        capped = crawl_in_child([site + "/cal/2024-01-01.html"], depth=50, max_pages=25)
    # depth 3 from one day: at most 1 + 3 + 9 + 27 days (fewer: the links overlap)
    assert 4 < len(deep.pages) <= 1 + 3 + 9 + 27
    assert deep.stats["finish_reason"] == "finished"
    assert len(capped.pages) == 25
    assert capped.stats["finish_reason"] == "max_pages"


def test_a_page_hiding_noise_with_style_rules_gives_the_clean_text() -> None:
    noise = [
        "<span class='hide'>笔趣阁</span>",
        "<i id='x9'>ｗww．ｂiquge．coｍ</i>",
        "<b class='a b'>盗版必究</b>",
    ]
    spliced = [p[:8] + noise[n % 3] + p[8:] for n, p in enumerate(PARAGRAPHS)]
    html = (
        "<html><head><title>第一章</title><style>.hide{display:none} #x9{visibility:hidden} "
        ".a.b{font-size:0}</style></head><body><div id='content'>"
        + "<br>".join(spliced)
        + "</div></body></html>"
    )
    with serve_site({"/": Page.html(html)}) as site:
        result = crawl_in_child([site + "/"], depth=0)
    assert result.page(site + "/")["text"].split("\n") == PARAGRAPHS
