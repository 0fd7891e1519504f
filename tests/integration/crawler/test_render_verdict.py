"""A site built by scripts is learned once, not by every crawl (crawler/render.py, crawler/known.py,
jobs/site_crawl.py): a managed site's crawl stores that its chapters need the browser
(``sites.render_direct``), and the next crawl, a new process, sends its new chapters to the browser at once,
each fetched once; a page's shared script is fetched once per crawl, not once per rendered chapter; and a site
that stops building its pages by script is unlearned by the pages read that way, without a request more."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.core.settings import Settings
from fptrack.crawler.render import learned_verdict
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Site
from testbed.jspages import json_chapter, json_endpoint
from testbed.sites import render_chapter
from tests.support.env import clean_environ
from tests.support.live_site import LiveSite, serve_live_site

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHAPTERS = [chapter.split("\n") for chapter in demo_chapters("lighthouse.txt")]


def _fptrack(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_environ()
    env.update(
        FPTRACK_DATA_DIR=str(settings.data_dir),
        FPTRACK_DATABASE_URL=settings.database_url,
        FPTRACK_CRAWL_TIMEOUT="20",
    )
    return subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _script_chapter(site: LiveSite, number: int) -> str:
    """Chapter ``number`` as the script site serves it: an empty page whose script reads the paragraphs from
    a JSON endpoint (and loads the site's /js/common.js, which is missing)."""
    path = f"/book/{number}.html"
    site.set(f"/api/{number}.json", json_endpoint(CHAPTERS[number % len(CHAPTERS)]).body.decode("utf-8"))
    site.set(
        path, json_chapter(f"第{number}章", f"/api/{number}.json", encoding="utf-8").body.decode("utf-8")
    )
    return path


def _static_chapter(site: LiveSite, number: int) -> str:
    path = f"/book/{number}.html"
    site.set(path, render_chapter(f"第{number}章", CHAPTERS[number % len(CHAPTERS)]).decode("utf-8"))
    return path


def _toc(site: LiveSite, paths: list[str]) -> None:
    items = "".join(f"<li><a href='{path}'>第{n}章 标题</a></li>" for n, path in enumerate(paths))
    site.set("/book/", f"<html><head><title>某书目录</title></head><body><ul>{items}</ul></body></html>")


def _crawl(settings: Settings, site: LiveSite) -> Counter[str]:
    before = len(site.requests)
    result = _fptrack(settings, "sites", "run", "books", "--quiet")
    assert result.returncode == 0, result.stderr + result.stdout
    return Counter(path for path, _ in site.requests[before:] if path != "/robots.txt")


def _verdict(settings: Settings) -> bool:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            return bool(session.scalar(select(Site.render_direct).where(Site.name == "books")))
    finally:
        engine.dispose()


def test_a_recrawl_in_a_new_process_sends_a_script_sites_new_chapters_to_the_browser_at_once(
    settings: Settings,
) -> None:
    assert _fptrack(settings, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode == 0
    with serve_live_site() as site:
        site.set("/", "<html><body><h1>书站</h1><a href='/book/'>某书</a> <a href='/'>首页</a></body></html>")
        chapters = [_script_chapter(site, n) for n in range(3)]
        _toc(site, chapters)
        added = _fptrack(settings, "sites", "add", "books", site.url("/"), "--depth", "2", "--allow-private")
        assert added.returncode == 0, added.stderr
        assert not _verdict(settings)

        first = _crawl(settings, site)
        # learning within the crawl: the first chapters are fetched plainly, then rendered
        assert sum(first[path] for path in chapters) > len(chapters), first
        assert first["/js/common.js"] == 1, first  # kept for the crawl's other pages, missing as it is
        assert _verdict(settings)  # stored for the next crawl

        new = [_script_chapter(site, n) for n in range(3, 6)]
        _toc(site, chapters + new)
        second = _crawl(settings, site)
        # a new process: the new chapters go to the browser at once, each fetched once; the listings plainly
        assert all(second[path] == 1 for path in new), second
        assert all(second[f"/api/{n}.json"] == 1 for n in range(3, 6)), second
        assert second["/book/"] == 1 and second["/js/common.js"] <= 1, second
        assert _verdict(settings)

        # the site stops building its pages by script: the pages read in the browser at once say so
        static = [_static_chapter(site, n) for n in range(6, 9)]
        _toc(site, chapters + new + static)
        third = _crawl(settings, site)
        assert all(third[path] == 1 for path in static), third
        assert not _verdict(settings)  # unlearned, without fetching a page twice


def test_the_stored_verdict_moves_only_on_enough_pages() -> None:
    assert learned_verdict(2, 0, False) and learned_verdict(3, 2, False)
    assert not learned_verdict(0, 2, True) and not learned_verdict(1, 3, True)
    # an incremental re-crawl that read one page either way leaves the verdict as it was
    assert learned_verdict(0, 1, True) and not learned_verdict(1, 0, False) and learned_verdict(1, 1, True)
