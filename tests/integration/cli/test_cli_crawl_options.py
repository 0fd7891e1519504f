"""``fptrack crawl``'s polite and safe options through the real command line: settings validated at start with
one-line errors, ``-s`` passed through to Scrapy, the private-address guard and its explicit allowance."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.sites import Page, chapter_page, serve_site
from tests.support.cli import assert_clean_error, fptrack

PARAGRAPHS = [
    "山脚下的小镇在雨里显得格外安静，只有茶馆里还亮着昏黄的灯。",
    "老板娘擦着桌子，听见门口的铃铛响了一声。",
]


@pytest.fixture
def initialised(tmp_path: Path) -> Path:
    assert fptrack(tmp_path, "init").returncode == 0
    return tmp_path


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"FPTRACK_CRAWL_CONCURRENCY": "0"},
            "FPTRACK_CRAWL_CONCURRENCY=0 is out of range: expected an integer >= 1",
        ),
        ({"FPTRACK_CRAWL_MAX_BYTES": "0"}, "FPTRACK_CRAWL_MAX_BYTES=0 is out of range"),
        ({"FPTRACK_ALLOW_PRIVATE_HOSTS": "10.0.0.0/99"}, "FPTRACK_ALLOW_PRIVATE_HOSTS: '10.0.0.0/99'"),
    ],
)
def test_bad_crawl_settings_are_one_line_errors_at_start(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    result = fptrack(tmp_path, "crawl", "http://127.0.0.1:9/", **env)
    assert_clean_error(result, message)
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-s", "ITEM_PIPELINES={}"], "-s ITEM_PIPELINES: fptrack's own setting, it cannot be overridden"),
        (["-s", "PLAYWRIGHT_LAUNCH_OPTIONS={}"], "-s PLAYWRIGHT_LAUNCH_OPTIONS: fptrack's own setting"),
        (["-s", "DOWNLOAD_DELAY"], "expected NAME=VALUE"),
        (["-s", "download_delay=1"], "expected a Scrapy setting name in capitals"),
        (["--allow-private-host", "a b"], "'a b' is not a host"),
    ],
)
def test_bad_crawl_options_are_one_line_errors(initialised: Path, args: list[str], message: str) -> None:
    result = fptrack(initialised, "crawl", "http://127.0.0.1:9/", *args)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert message in result.stderr, result.stderr


@pytest.mark.slow
def test_the_guard_refuses_loopback_until_allowed_and_records_why(initialised: Path) -> None:
    pages = {
        "/robots.txt": Page(b"User-agent: *\nDisallow: /\n", content_type="text/plain"),
        "/": chapter_page("第一章", PARAGRAPHS),
    }
    with serve_site(pages) as site:
        refused = fptrack(initialised, "crawl", site + "/", "-q")
        assert site.requests == []
        robots = fptrack(initialised, "crawl", site + "/", "-q", "--allow-private-host", site.key)
        assert site.page_requests == []  # robots.txt disallows everything
        crawled = fptrack(
            initialised,
            "crawl",
            site + "/",
            "-q",
            "--depth",
            "0",
            "--allow-private-host",
            site.key,
            "-s",
            "ROBOTSTXT_OBEY=false",
        )
    assert_clean_error(refused, f"cannot crawl {site}/: refused by the private-address guard")
    assert_clean_error(robots, f"cannot crawl {site}/: Forbidden by robots.txt")
    assert crawled.returncode == 0, crawled.stderr
    assert "crawled 1 page(s)" in crawled.stdout
    assert site.page_requests == ["/"]


def test_render_js_yes_without_chromium_is_a_one_line_error_before_any_crawl(initialised: Path) -> None:
    with serve_site({"/": chapter_page("第一章", PARAGRAPHS)}) as site:
        result = fptrack(
            initialised,
            "crawl",
            site + "/",
            "--allow-private-host",
            site.key,
            "--render-js",
            "yes",
            FPTRACK_CHROMIUM="/nonexistent/chromium",
        )
        assert site.requests == []
    assert_clean_error(result, "render_js=yes needs Chromium, and '/nonexistent/chromium' was not found")
    assert result.stderr.count("\n") == 1


def test_render_js_auto_without_chromium_crawls_statically_and_says_why(initialised: Path) -> None:
    with serve_site({"/": chapter_page("第一章", PARAGRAPHS)}) as site:
        result = fptrack(
            initialised,
            "crawl",
            site + "/",
            "--allow-private-host",
            site.key,
            FPTRACK_CHROMIUM="/nonexistent/chromium",
        )
    assert result.returncode == 0, result.stderr
    assert "note: JS rendering off: '/nonexistent/chromium' not found" in result.stdout
