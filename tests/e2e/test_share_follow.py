"""End to end: `fptrack crawl` of a loopback forum whose thread posts a 蓝奏云-style public share of a whole
book (testbed/shares.py, reached as the crawl's HTTP proxy under its real host name) walks the share page,
its frame and its download link to the file, reads the zip like any download and records every chapter it
holds as a match at the share's URL; a share behind a password is one line of the summary; a Baidu share
(a login needed) stays a lead, never fetched."""

from __future__ import annotations

import json
from typing import Any

import pytest

from testbed.downloads import zip_of
from testbed.shares import SHARE_HOST, lanzou_share
from testbed.sites import Page, serve_site
from tests.e2e.conftest import Fptrack
from tests.support.books import book

pytestmark = pytest.mark.slow

BOOK = book(231, 4, title="山海长歌")
PUBLIC, LOCKED = "iAbCd1234x", "iPwd56789y"


def _forum() -> dict[str, Page]:
    thread = (
        "<html><head><title>山海长歌 全本</title></head><body><div class='post'>"
        "<p>《山海长歌》全集 TXT 打包：</p>"
        f"<p>蓝奏云：<a href='http://{SHARE_HOST}/{PUBLIC}'>点此下载</a></p>"
        f"<p>备用 http://{SHARE_HOST}/{LOCKED} 密码:ab12</p>"
        "<p>百度网盘：https://pan.baidu.com/s/1AbCdEfGhIjKlMnOp 提取码：x7k2</p>"
        "</div></body></html>"
    )
    return {
        "/": Page.html("<html><body><a href='/thread/1'>资源帖</a></body></html>"),
        "/thread/1": Page.html(thread),
    }


def _share_host() -> dict[str, Any]:
    archive = zip_of({"山海长歌/全本.txt": BOOK.encode("gb18030")}, gbk_names=True)
    return {
        **lanzou_share(PUBLIC, "山海长歌.zip", archive),
        **lanzou_share(LOCKED, "山海长歌.txt", BOOK.encode("utf-8"), password="ab12"),
    }


def test_a_public_share_is_followed_to_its_file_and_compared(fptrack: Fptrack, tmp_path: Any) -> None:
    work = tmp_path / "book.txt"
    work.write_text(BOOK, encoding="utf-8")
    fptrack.run("works", "add", str(work))
    with serve_site(_share_host()) as share_host, serve_site(_forum()) as forum:
        fptrack.extra_env.update(http_proxy=share_host, no_proxy="127.0.0.1")
        crawl = fptrack.run(
            *("crawl", forum + "/", "--depth", "2"),
            *("--allow-private-host", forum.key, "--allow-private-host", SHARE_HOST),
        )
    # the walk: the share page, its frame, the download link's redirect, the file; the locked share's page
    walked = {path.split(SHARE_HOST, 1)[1] for path in share_host.requests if "/robots.txt" not in path}
    steps = {f"/{PUBLIC}", f"/fn?{PUBLIC}FRAME", f"/file/?{PUBLIC}SIGN", f"/dl/{PUBLIC}", f"/{LOCKED}"}
    assert walked == steps, walked
    share_url = f"https://www.lanzoux.com/{PUBLIC}"
    on_share = [m for m in fptrack.matches() if m["page_url"] == share_url]
    assert sorted(m["chapter_index"] for m in on_share) == [1, 2, 3, 4], crawl.stdout
    assert all(m["work_title"] == "山海长歌" for m in on_share)
    assert f"share https://www.lanzoux.com/{LOCKED}: no file reached" in crawl.stdout, crawl.stdout
    leads = [json.loads(line) for line in fptrack.run("leads", "--format", "json").stdout.splitlines()]
    assert {(lead["platform"], lead["share_id"]) for lead in leads} == {
        ("lanzou", PUBLIC),
        ("lanzou", LOCKED),
        ("baidu", "1AbCdEfGhIjKlMnOp"),
    }
