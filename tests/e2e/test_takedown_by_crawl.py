"""A takedown seen by the scheduled crawl itself, before any re-check ran: a real loopback site, the real
``fptrack`` command line, a managed site crawled by ``fptrack sites run NAME --scheduled``.

The site removes its copies in three ways: one page answers 404, one shows a notice instead of the chapter,
one answers 503. With copies due for a re-check after a second and a removal confirmed by a fetch a second
after the first, two more scheduled crawls (no ``takedowns check``, no beat) record the 404 and the notice
as taken down and never the 503; no match is deleted, and each keeps the text it copied. The site then puts
the copies back and the next crawl finds them: same matches, same first-seen, the takedowns cleared."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from testbed.sites import render_chapter
from tests.e2e.conftest import Fptrack
from tests.support.live_site import serve_live_site

pytestmark = pytest.mark.slow

CHAPTERS = demo_chapters("lighthouse.txt")
NOTICE = ["本章节因版权原因已被删除。", *(DEMO_DATA / "library_news.txt").read_text("utf-8").split("\n")]
PATHS = ("/c/1.html", "/c/2.html", "/c/3.html")  # removed with a 404, replaced by a notice, answering 503

LIFE_ENV = {
    "FPTRACK_RECHECK_YOUNG_EVERY": "1",  # every copy is due again a second after a fetch
    "FPTRACK_RECHECK_CONFIRM_AFTER": "1",  # a removal is confirmed by a fetch a second after the first
    "FPTRACK_SITE_RATE": "50",  # the test's own site: no need to wait a second between requests
}


def _markup(number: int) -> str:
    return render_chapter(f"第{number + 1}章", CHAPTERS[number].split("\n")).decode("utf-8")


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _by_url(fptrack: Fptrack, *args: str) -> dict[str, dict[str, Any]]:
    return {r["page_url"]: r for r in _lines(fptrack.run(*args).stdout)}


def _crawl(fptrack: Fptrack) -> None:
    time.sleep(1.2)  # every copy is due again (and a removal seen a second ago can be confirmed)
    fptrack.run("sites", "run", "copies", "--scheduled", "--quiet")


def test_a_scheduled_crawl_records_takedowns_and_keeps_the_evidence(fptrack: Fptrack) -> None:
    fptrack.extra_env.update(LIFE_ENV)
    pages = {path: _markup(number) for number, path in enumerate(PATHS)}
    pages["/"] = "<html><body>" + "".join(f'<a href="{p}">{p}</a> ' for p in PATHS) + "</body></html>"
    with serve_live_site(pages) as site:
        fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
        fptrack.run(
            "sites", "add", "copies", site.url("/"), "--depth", "1", "--schedule", "3600", "--allow-private"
        )
        first = fptrack.run("sites", "run", "copies", "--scheduled")
        found = _by_url(fptrack, "matches", "--status", "all", "--format", "json")
        urls = [site.url(path) for path in PATHS]
        assert sorted(found) == sorted(urls), (first.stdout, first.stderr)
        ids = {url: found[url]["id"] for url in urls}
        first_seen = {url: found[url]["first_seen"] for url in urls}
        evidence = _by_url(fptrack, "matches", "--status", "all", "--format", "json", "--evidence")
        copied = {url: evidence[url]["evidence"]["passages"] for url in urls}
        assert all(copied[url] for url in urls)

        site.remove(PATHS[0], status=404)
        site.set(PATHS[1], render_chapter("第2章", NOTICE).decode("utf-8"))
        site.remove(PATHS[2], status=503)
        _crawl(fptrack)  # sees each copy down once: not yet a takedown
        pending = _by_url(fptrack, "takedowns", "--format", "json")
        assert all(pending[url]["taken_down_at"] is None for url in urls), pending
        _crawl(fptrack)  # the confirming fetch

        takedowns = _by_url(fptrack, "takedowns", "--format", "json")
        assert takedowns[urls[0]]["taken_down_at"] and takedowns[urls[0]]["state"] == "gone", takedowns
        assert takedowns[urls[1]]["taken_down_at"] and takedowns[urls[1]]["state"] == "removed", takedowns
        assert takedowns[urls[2]]["taken_down_at"] is None and takedowns[urls[2]]["state"] == "error"
        stats = _lines(fptrack.run("takedowns", "stats", "--format", "json").stdout)
        assert [(row["matches"], row["taken_down"]) for row in stats] == [(3, 2)], stats

        # nothing deleted, nothing overwritten: the same matches, and each still shows the text it copied
        kept = _by_url(fptrack, "matches", "--status", "all", "--format", "json", "--evidence")
        assert {url: (kept[url]["id"], kept[url]["first_seen"]) for url in urls} == {
            url: (ids[url], first_seen[url]) for url in urls
        }
        for number, url in enumerate(urls):
            shown = kept[url]["evidence"]
            assert shown["passages"] == copied[url] and shown["kept"] and shown["http_status"] == 200
            assert sum(len(passage) for passage in shown["passages"]) > len(CHAPTERS[number]) // 2
        table = fptrack.run("matches", "--status", "all", "--id", str(ids[urls[0]]), "--evidence").stdout
        assert "kept: the page has changed since" in table and copied[urls[0]][0][:20] in table

        # the copies come back: the same matches, their first-seen, the takedowns cleared
        for number, path in enumerate(PATHS):
            site.set(path, _markup(number))
        _crawl(fptrack)
        back = _by_url(fptrack, "takedowns", "--format", "json")
        assert all(back[url]["taken_down_at"] is None and back[url]["state"] == "present" for url in urls), (
            back
        )
        again = _by_url(fptrack, "matches", "--status", "all", "--format", "json", "--evidence")
        assert {url: (again[url]["id"], again[url]["first_seen"]) for url in urls} == {
            url: (ids[url], first_seen[url]) for url in urls
        }
        assert not any(again[url]["evidence"]["kept"] for url in urls)
