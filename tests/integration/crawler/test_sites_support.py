"""The shared test-site server behaves like a web server (other teams' end-to-end tests rely on it)."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from testbed.sites import Page, Redirect, chapter_page, closed_port_url, render_chapter, serve_site


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read()


def test_serves_pages_redirects_and_404s_and_records_requests() -> None:
    pages = {
        "/a.html": Page.html("<p>甲</p>", encoding="gbk"),
        "/old": Redirect("/a.html"),
        "/raw": Page(b"\x00\x01", content_type=None, status=203),
    }
    with serve_site(pages) as site:
        assert site.startswith("http://127.0.0.1:")
        assert _get(site + "/a.html") == (200, "text/html; charset=gbk", "<p>甲</p>".encode("gbk"))
        assert _get(site + "/old")[2] == "<p>甲</p>".encode("gbk")  # urllib followed the 302
        assert _get(site + "/raw")[0:2] == (203, "")
        assert _get(site + "/nowhere")[0] == 404
        assert site.requests == ["/a.html", "/old", "/a.html", "/raw", "/nowhere"]


def test_big5_chapters_are_traditional_and_declared_as_asked() -> None:
    page = chapter_page("第一章 开始", ["这里是简体字写的句子。"], encoding="big5", header_charset=False)
    assert page.content_type == "text/html"
    html = page.body.decode("big5")
    # OpenCC s2t gives 這裏; Big5 lacks 裏, which is therefore sent as a character reference.
    assert "這&#35023;是簡體字寫的句子。" in html
    assert 'charset=big5"' in html
    assert "charset" not in render_chapter("第一章", ["句子。"], encoding="gbk", meta_charset=False).decode(
        "gbk"
    )


def test_unknown_template_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown template"):
        render_chapter("第一章", ["句子。"], template="nope")


def test_closed_port_refuses_connections() -> None:
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(closed_port_url(), timeout=5)
