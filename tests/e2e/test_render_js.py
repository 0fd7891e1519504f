"""End to end: copies of a registered work that only a browser sees are found by ``fptrack crawl`` (which runs
``jobs.crawls.run_crawl_job``): a chapter loaded from a JSON endpoint and a chapter printed by
``document.write``, on SQLite and PostgreSQL in-process, and with a real Celery worker over Redis;
``--render-js no`` finds neither."""

from __future__ import annotations

import uuid

import pytest

from fptrack.cli.demo import DEMO_DATA
from fptrack.core.settings import Settings
from testbed.jspages import json_chapter, json_endpoint, written_chapter
from testbed.sites import Page, serve_site
from tests.conftest import REDIS_URL
from tests.e2e.conftest import Fptrack
from tests.support.pirate_site import LIGHT, paragraphs_of
from tests.support.workers import wait_indexed, worker_processes

pytestmark = [pytest.mark.slow, pytest.mark.browser]
EXPECTED = {"/book/1.html": ("灯塔守望人", 1), "/book/2.html": ("灯塔守望人", 2)}


def _pages() -> dict[str, Page]:
    return {
        "/": Page.html(
            "<html><body><h1>书友小说网</h1><a href='/book/1.html'>第一章</a> "
            "<a href='/book/2.html'>第二章</a></body></html>"
        ),
        "/book/1.html": json_chapter("第一章", "/api/1.json"),
        "/api/1.json": json_endpoint(paragraphs_of(LIGHT[0])),
        "/book/2.html": written_chapter("第二章", paragraphs_of(LIGHT[1])),
    }


def _crawl(fptrack: Fptrack, *options: str) -> dict[str, tuple[str, int]]:
    with serve_site(_pages()) as base:
        fptrack.run(
            "crawl",
            base + "/",
            "--allow-private-host",
            base.key,
            "--depth",
            "1",
            "--quiet",
            *options,
            timeout=300,
        )
        return {
            m["page_url"].removeprefix(base): (m["work_title"], m["chapter_index"]) for m in fptrack.matches()
        }


def test_script_built_copies_are_found(fptrack: Fptrack) -> None:
    fptrack.run("init")
    fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
    assert _crawl(fptrack) == EXPECTED


def test_render_js_no_leaves_them_unmatched(sqlite_settings: Settings) -> None:
    fptrack = Fptrack(sqlite_settings, {})
    fptrack.run("init")
    fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
    assert _crawl(fptrack, "--render-js", "no") == {}


@pytest.mark.redis
@pytest.mark.postgres
def test_script_built_copies_are_found_by_a_celery_worker(postgres_settings: Settings, tmp_path) -> None:
    postgres_settings.data_dir.mkdir(parents=True, exist_ok=True)
    fptrack = Fptrack(
        postgres_settings,
        {"FPTRACK_BROKER_URL": REDIS_URL, "FPTRACK_TASK_QUEUE": f"fptrack-render-{uuid.uuid4().hex[:8]}"},
    )
    fptrack.run("init")
    with worker_processes(fptrack.env(), tmp_path, 1):
        fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
        wait_indexed(postgres_settings)
        assert _crawl(fptrack) == EXPECTED
