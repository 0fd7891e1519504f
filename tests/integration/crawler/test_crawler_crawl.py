"""Real crawls of sites served on 127.0.0.1, each crawl in its own process (Twisted's reactor runs once)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from testbed.sites import Page, Redirect, SiteURL, as_served, chapter_page, closed_port_url, serve_site
from tests.integration.crawler.harness import OTHER_PARAGRAPHS, PARAGRAPHS, ChildCrawl, crawl_in_child

pytestmark = pytest.mark.slow


def _links(*paths: str) -> Page:
    anchors = "".join(f"<li><a href='{p}'>{p}</a></li>" for p in paths)
    return Page.html(f"<html><head><title>目录</title></head><body><ul>{anchors}</ul></body></html>")


BROKEN_HTML = (
    "<html><head><title>残缺的页面</title><body><div id=content class=txt><p>"
    + "<p>".join(PARAGRAPHS[:2])
    + "</div></span></td><div><b><i>"
    + PARAGRAPHS[2]
    + "</b></i><br>\x00<i>未闭合的标签<div class='x"
).encode("utf-8")


@pytest.fixture(scope="module")
def off_site() -> Iterator[SiteURL]:
    with serve_site({"/secret.html": chapter_page("不该抓取", OTHER_PARAGRAPHS)}) as site:
        yield site


@pytest.fixture(scope="module")
def mixed_site(off_site: SiteURL) -> Iterator[SiteURL]:
    text_bytes = "\n".join(OTHER_PARAGRAPHS).encode("gbk")
    pages = {
        "/": _links(
            "/utf8.html",
            "/utf8.html#comments",
            "/utf8.html#top",
            "/gbk-header.html",
            "/gbk-meta.html",
            "/gbk-none.html",
            "/gbk-lying.html",
            "/big5.html",
            "/broken.html",
            "/empty.html",
            "/missing.html",
            "/error.html",
            "/moved.html",
            "/cover.png",
            "/book.zip",
            "/notes.txt",
            f"{off_site}/secret.html",
            "mailto:admin@example.com",
            "javascript:void(0)",
        ),
        "/utf8.html": chapter_page("第一章 山路", PARAGRAPHS, template="biquge"),
        "/gbk-header.html": chapter_page("第二章", PARAGRAPHS, encoding="gbk", meta_charset=False),
        "/gbk-meta.html": chapter_page(
            "第三章", PARAGRAPHS, encoding="gbk", header_charset=False, template="p-paragraphs"
        ),
        "/gbk-none.html": chapter_page(
            "第四章",
            PARAGRAPHS,
            encoding="gbk",
            header_charset=False,
            meta_charset=False,
            template="ad-inside",
        ),
        "/gbk-lying.html": Page(
            chapter_page("第五章", PARAGRAPHS, encoding="gbk", meta_charset=False).body,
            content_type="text/html; charset=big5",
        ),
        "/big5.html": chapter_page("第六章", PARAGRAPHS, encoding="big5", template="split-divs"),
        "/broken.html": Page(BROKEN_HTML, content_type="text/html"),
        "/empty.html": Page(b"", content_type="text/html; charset=utf-8"),
        "/error.html": Page(b"<html><body>Internal Server Error</body></html>", status=500),
        "/moved.html": Redirect("/new/chapter.html"),
        "/new/chapter.html": chapter_page("第七章", OTHER_PARAGRAPHS, template="html5-article"),
        "/cover.png": Page(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40, content_type="image/png"),
        "/book.zip": Page(b"PK\x03\x04" + bytes(range(256)) * 40, content_type="application/zip"),
        "/notes.txt": Page(text_bytes, content_type="text/plain; charset=gbk"),
    }
    with serve_site(pages) as site:
        yield site


@pytest.fixture(scope="module")
def mixed_crawl(mixed_site: SiteURL) -> ChildCrawl:
    return crawl_in_child([mixed_site + "/"], depth=1, max_pages=100)


@pytest.mark.parametrize(
    ("path", "encoding", "served_as"),
    [
        ("/utf8.html", "utf-8", "utf-8"),
        ("/gbk-header.html", "gb18030", "gbk"),
        ("/gbk-meta.html", "gb18030", "gbk"),
        ("/gbk-none.html", "gb18030", "gbk"),
        ("/gbk-lying.html", "gb18030", "gbk"),
        ("/big5.html", "big5", "big5"),
    ],
)
def test_chapter_text_is_decoded_and_extracted(
    mixed_crawl: ChildCrawl, mixed_site: SiteURL, path: str, encoding: str, served_as: str
) -> None:
    page = mixed_crawl.page(mixed_site + path)
    assert page["status"] == 200
    assert page["encoding"] == encoding
    assert page["error"] == ""
    assert page["text"].split("\n") == [as_served(p, served_as) for p in PARAGRAPHS]
    assert page["title"].startswith(as_served("第", served_as))


def test_page_hashes_and_timestamp(mixed_crawl: ChildCrawl, mixed_site: SiteURL) -> None:
    page = mixed_crawl.page(mixed_site + "/utf8.html")
    assert page["content_sha256"] == hashlib.sha256(page["text"].encode("utf-8")).hexdigest()
    served = chapter_page("第一章 山路", PARAGRAPHS, template="biquge").body
    assert page["snapshot_sha256"] == hashlib.sha256(served).hexdigest()
    fetched_at = datetime.fromisoformat(page["fetched_at"])
    assert fetched_at.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - fetched_at) < timedelta(minutes=5)


def test_broken_html_still_gives_its_text(mixed_crawl: ChildCrawl, mixed_site: SiteURL) -> None:
    page = mixed_crawl.page(mixed_site + "/broken.html")
    assert page["status"] == 200
    for paragraph in PARAGRAPHS[:3]:
        assert paragraph in page["text"]


@pytest.mark.parametrize(("path", "status"), [("/missing.html", 404), ("/error.html", 500)])
def test_error_statuses_reach_the_sink_without_text(
    mixed_crawl: ChildCrawl, mixed_site: SiteURL, path: str, status: int
) -> None:
    page = mixed_crawl.page(mixed_site + path)
    assert page["status"] == status
    assert page["text"] == ""
    assert page["error"] == f"HTTP {status}"


def test_empty_body(mixed_crawl: ChildCrawl, mixed_site: SiteURL) -> None:
    page = mixed_crawl.page(mixed_site + "/empty.html")
    assert (page["status"], page["text"], page["error"]) == (200, "", "empty body")


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/cover.png", "binary content (image/png)"),
        # a download is read (docs/downloads.md): a damaged one says why it gave no text
        (
            "/book.zip",
            "download: zip: no text (the file: damaged or unreadable zip (File is not a zip file))",
        ),
    ],
)
def test_binary_files_are_reported_not_decoded(
    mixed_crawl: ChildCrawl, mixed_site: SiteURL, path: str, error: str
) -> None:
    page = mixed_crawl.page(mixed_site + path)
    assert page["status"] == 200
    assert page["text"] == "" and page["encoding"] == ""
    assert page["error"] == error


def test_plain_text_files_keep_their_lines(mixed_crawl: ChildCrawl, mixed_site: SiteURL) -> None:
    page = mixed_crawl.page(mixed_site + "/notes.txt")
    assert page["text"].split("\n") == OTHER_PARAGRAPHS
    assert page["encoding"] == "gb18030"


def test_redirect_records_the_final_url(mixed_crawl: ChildCrawl, mixed_site: SiteURL) -> None:
    page = mixed_crawl.page(mixed_site + "/moved.html")
    assert page["final_url"] == mixed_site + "/new/chapter.html"
    assert page["text"].split("\n")[-2:] == OTHER_PARAGRAPHS


def test_off_site_links_are_never_requested(mixed_crawl: ChildCrawl, off_site: SiteURL) -> None:
    assert mixed_crawl.pages  # the crawl did run
    assert off_site.requests == []
    assert not any(url.startswith(off_site) for url in mixed_crawl.urls)


def test_each_url_is_requested_and_sunk_once(mixed_crawl: ChildCrawl, mixed_site: SiteURL) -> None:
    assert len(mixed_crawl.urls) == len(set(mixed_crawl.urls))
    assert mixed_site.requests.count("/utf8.html") == 1  # three links, two with fragments
    assert all("#" not in url for url in mixed_crawl.urls)


def test_depth_one_does_not_follow_links_of_depth_one_pages(
    mixed_crawl: ChildCrawl, mixed_site: SiteURL
) -> None:
    # The chapter templates link to /xuanhuan/, /book/1/... : depth 2, beyond the limit.
    assert "/xuanhuan/" not in mixed_site.requests
    assert "/book/1/" not in mixed_site.requests
    assert len(mixed_crawl.pages) == 15  # the index and its 14 distinct same-site links


def test_stats_and_progress_agree_with_the_sink(mixed_crawl: ChildCrawl) -> None:
    stats = mixed_crawl.stats
    assert stats["pages_seen"] == len(mixed_crawl.pages)
    assert stats["pages_with_text"] == sum(1 for p in mixed_crawl.pages if p["text"])
    assert stats["by_status"] == {"200": 13, "404": 1, "500": 1}
    assert stats["failures"] == []
    assert stats["sink_errors"] == 0
    assert [p["pages_seen"] for p in mixed_crawl.progress] == list(range(1, len(mixed_crawl.pages) + 1))
    assert [p["last_url"] for p in mixed_crawl.progress] == mixed_crawl.urls


def test_depth_limit_counts_from_the_start_pages() -> None:
    chain = {f"/d{i}.html": _links(f"/d{i + 1}.html") for i in range(5)}
    with serve_site(chain) as site:
        result = crawl_in_child([site + "/d0.html"], depth=2)
    assert site.page_requests == ["/d0.html", "/d1.html", "/d2.html"]
    assert result.stats["pages_seen"] == 3


def test_depth_zero_fetches_only_the_start_pages() -> None:
    chain = {"/a.html": _links("/b.html"), "/b.html": _links("/c.html")}
    with serve_site(chain) as site:
        result = crawl_in_child([site + "/a.html", site + "/b.html"], depth=0)
    assert sorted(site.page_requests) == ["/a.html", "/b.html"]
    assert sorted(result.urls) == [site + "/a.html", site + "/b.html"]


def test_max_pages_is_exact() -> None:
    many = {"/": _links(*(f"/c{i}.html" for i in range(30)))}
    many.update({f"/c{i}.html": chapter_page(f"第{i}章", PARAGRAPHS) for i in range(30)})
    with serve_site(many) as site:
        result = crawl_in_child([site + "/"], depth=3, max_pages=7, settings={"crawl_concurrency": 4})
    assert len(result.pages) == 7
    assert result.stats["pages_seen"] == 7
    assert result.pages[0]["url"] == site + "/"  # breadth first: the start page comes first
    assert result.progress[-1] == {
        "pages_seen": 7,
        "max_pages": 7,
        "last_url": result.pages[-1]["url"],
        "last_status": 200,
    }


def test_unreachable_start_url_is_a_failure_not_a_crash() -> None:
    dead = closed_port_url()
    with serve_site({"/": chapter_page("第一章", PARAGRAPHS)}) as site:
        result = crawl_in_child([dead, site + "/"], depth=0)
    assert result.stats["failures"] == [[dead, "connection refused"]]
    assert result.urls == [site + "/"]


def test_slow_page_times_out() -> None:
    pages = {
        "/": _links("/slow.html", "/fast.html"),
        "/slow.html": Page.html("<p>迟到的页面。</p>", delay=3.0),
    }
    pages["/fast.html"] = chapter_page("第一章", PARAGRAPHS)
    with serve_site(pages) as site:
        result = crawl_in_child([site + "/"], depth=1, settings={"crawl_timeout": 1.0})
    assert result.stats["failures"] == [[site + "/slow.html", "timed out after 1 s"]]
    assert sorted(result.urls) == [site + "/", site + "/fast.html"]


def test_off_site_redirect_of_a_linked_page_is_not_followed(off_site: SiteURL) -> None:
    requests_before = list(off_site.requests)
    pages = {"/": _links("/away.html"), "/away.html": Redirect(f"{off_site}/secret.html")}
    with serve_site(pages) as site:
        result = crawl_in_child([site + "/"], depth=1)
    assert off_site.requests == requests_before
    assert result.urls == [site + "/"]
    assert result.stats["failures"] == [[site + "/away.html", f"off-site redirect to {off_site}/secret.html"]]


def test_bodies_over_the_size_cap_are_abandoned() -> None:
    big = chapter_page("第一章", PARAGRAPHS * 40)
    small = chapter_page("第二章", PARAGRAPHS[:1])
    pages = {"/": _links("/big.html", "/small.html"), "/big.html": big, "/small.html": small}
    with serve_site(pages) as site:
        result = crawl_in_child([site + "/"], depth=1, settings={"crawl_max_body_bytes": 4000})
    assert len(big.body) > 4000 > len(small.body)
    assert [url for url, _ in result.stats["failures"]] == [site + "/big.html"]
    assert (
        result.stats["failures"][0][1]
        == f"larger than 4000 bytes (the download size cap): {len(big.body)} bytes announced"
    )
    assert result.page(site + "/small.html")["text"] == PARAGRAPHS[0]


def test_a_failing_sink_is_counted_and_the_crawl_goes_on() -> None:
    pages = {"/": _links("/a.html", "/b.html")}
    pages.update({p: chapter_page("第一章", PARAGRAPHS) for p in ("/a.html", "/b.html")})
    with serve_site(pages) as site:
        result = crawl_in_child([site + "/"], depth=1, failing_sink_urls=[site + "/a.html"])
    assert result.stats["sink_errors"] == 1
    assert result.stats["pages_seen"] == 3
    assert sorted(result.urls) == [site + "/", site + "/b.html"]


def test_run_crawl_refuses_a_second_run_in_one_process() -> None:
    with serve_site({"/": chapter_page("第一章", PARAGRAPHS)}) as site:
        result = crawl_in_child([site + "/"], depth=0, run_twice=True)
    assert result.stats["pages_seen"] == 1
    assert result.second_run_error is not None and "once per process" in result.second_run_error


def test_a_start_url_redirecting_to_another_site_makes_it_the_crawl_site(off_site: SiteURL) -> None:
    moved = {"/index.html": _links("/chapter.html"), "/chapter.html": chapter_page("第一章", PARAGRAPHS)}
    with serve_site(moved) as new_home, serve_site({"/": Redirect(f"{new_home}/index.html")}) as old_home:
        result = crawl_in_child([old_home + "/"], depth=1, allow=[old_home.key, new_home.key])
    assert result.page(old_home + "/")["final_url"] == new_home + "/index.html"
    assert result.page(new_home + "/chapter.html")["text"].split("\n") == PARAGRAPHS
    assert result.stats["failures"] == []
