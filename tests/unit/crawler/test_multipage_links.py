"""crawler.multipage: the "下一页" link that continues a chapter on its next page, and only that link."""

from __future__ import annotations

import pytest

from fptrack.crawler.multipage import next_part_url, part_of
from tests.support.multipage import split_chapter_pages

BASE = "http://pirate.test/book"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"{BASE}/7.html", (f"{BASE}/7.html", 1)),
        (f"{BASE}/7_2.html", (f"{BASE}/7.html", 2)),
        (f"{BASE}/7-3.html", (f"{BASE}/7.html", 3)),
        (f"{BASE}/12_3_2.html?x=1#top", (f"{BASE}/12_3.html", 2)),
        (f"{BASE}/", None),
    ],
)
def test_part_of_reads_the_part_number_from_the_url(url: str, expected: tuple[str, int] | None) -> None:
    assert part_of(url) == expected


def _page(links: str) -> str:
    return f"<html><body><div id='content'><p>正文。</p></div><div class='page'>{links}</div></body></html>"


@pytest.mark.parametrize(
    ("url", "links", "expected"),
    [
        (f"{BASE}/7.html", "<a href='7_2.html'>下一页</a>", f"{BASE}/7_2.html"),
        (f"{BASE}/7_2.html", "<a href='/book/7_3.html'> 下一页 </a>", f"{BASE}/7_3.html"),
        (f"{BASE}/7_2.html", "<a href='7_3.html#c'><span>下一頁</span></a>", f"{BASE}/7_3.html"),
        (f"{BASE}/7.html", "<a href='8.html'>下一章</a>", ""),  # the next chapter is not a part
        (f"{BASE}/7.html", "<a href='8.html'>下一页</a>", ""),  # another stem: a list's next page
        (f"{BASE}/7_2.html", "<a href='7_4.html'>下一页</a>", ""),  # skips a part
        (f"{BASE}/7.html", "<a href='http://other.test/book/7_2.html'>下一页</a>", ""),  # another site
        (f"{BASE}/7.html", "<a href='7_2.html'>第2页</a>", ""),  # not a "next page" label
        (f"{BASE}/7.html", "", ""),
    ],
)
def test_next_part_url(url: str, links: str, expected: str) -> None:
    assert next_part_url(_page(links), url) == expected


def test_the_test_site_chains_its_parts() -> None:
    pages = split_chapter_pages("/book/7.html", "第七章", ["一", "二", "三"])
    found = {
        path: next_part_url(page.body.decode(), BASE.removesuffix("/book") + path)
        for path, page in pages.items()
    }
    assert found == {
        "/book/7.html": f"{BASE}/7_2.html",
        "/book/7_2.html": f"{BASE}/7_3.html",
        "/book/7_3.html": "",
    }
