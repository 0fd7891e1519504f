"""The fingerprint stage on a real Celery worker over Redis, sharing a real PostgreSQL database."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from testbed.sites import Page, chapter_page, serve_site
from tests.conftest import REDIS_URL
from tests.support.env import clean_environ

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]


def test_crawl_with_a_broker_runs_on_the_worker(postgres_settings, tmp_path) -> None:
    import uuid

    env = clean_environ()
    env.update(
        FPTRACK_DATA_DIR=str(tmp_path),
        FPTRACK_DATABASE_URL=postgres_settings.database_url,
        FPTRACK_BROKER_URL=REDIS_URL,
        # a queue of this test alone: other runs sharing the Redis server never take its tasks
        FPTRACK_TASK_QUEUE=f"fptrack-test-{uuid.uuid4().hex[:8]}",
    )

    def fptrack(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fptrack.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=180,
        )

    worker_log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 - closed below
    worker = subprocess.Popen(
        [sys.executable, "-m", "fptrack.cli", "worker", "--concurrency", "1", "--loglevel", "INFO"],
        env=env,
        stdout=worker_log,
        stderr=subprocess.STDOUT,
    )
    try:
        # --wait: the work's fingerprints are indexed (by the worker) before the command returns
        added = fptrack("works", "add", str(DEMO_DATA / "lighthouse.txt"), "--wait")
        assert added.returncode == 0, added.stdout + added.stderr
        assert "queued for the workers to fingerprint" in added.stdout, added.stdout + added.stderr
        assert "work #1 fingerprinted: 0 already-crawled page(s) copy it" in added.stdout, added.stdout
        chapters = demo_chapters("lighthouse.txt")
        pages = {
            "/": Page.html('<a href="/1.html">1</a> <a href="/2.html">2</a> <a href="/3.html">3</a>'),
            "/1.html": chapter_page("第一章", chapters[0].split("\n")),
            "/2.html": chapter_page("第二章", chapters[1].split("\n"), encoding="gbk"),
            # not registered yet
            "/3.html": chapter_page("第一回", demo_chapters("alley.txt")[0].split("\n")),
        }
        with serve_site(pages) as base:
            crawl = fptrack("crawl", base + "/", "--allow-private-host", base.key, "--depth", "1")
        assert crawl.returncode == 0, crawl.stderr
        assert "2 page(s) copy registered works" in crawl.stdout, crawl.stdout + crawl.stderr
        # registered after the crawl: the worker compares it with the pages crawled before, and --wait says so
        later = fptrack("works", "add", str(DEMO_DATA / "alley.txt"), "--wait")
        assert later.returncode == 0, later.stdout + later.stderr
        assert "work #2 fingerprinted: 1 already-crawled page(s) copy it" in later.stdout, later.stdout
        log = (tmp_path / "worker.log").read_text()
        assert "fptrack.process_pages" in log and "fptrack.index_work" in log
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        worker_log.close()
