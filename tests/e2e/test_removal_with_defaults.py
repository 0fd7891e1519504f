"""A removal recorded within two crawl periods with the default settings (issue 37): a site monitored on a
2-minute schedule by ``fptrack worker --beat`` (PostgreSQL, Redis, a real Celery worker and beat, crawl
processes started by the scheduler), no ``FPTRACK_RECHECK_*`` or schedule setting touched. The site deletes a
chapter and takes it off its table of contents; the crawl that sees it go fetches it (the first sighting) and
the next crawl, or the beat's re-check 30 s later, confirms it: taken down within 240 s of the deletion. Then
the site puts the chapter back and links it again, and the next crawl records the copy back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from fptrack.cli.demo import DEMO_DATA
from fptrack.core.settings import Settings
from fptrack.storage.models import Match, Page
from tests.conftest import REDIS_URL
from tests.e2e.test_unattended_monitoring import _fill, _query
from tests.support.env import clean_environ
from tests.support.live_site import serve_live_site

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]

PERIOD = 120.0  # the site's schedule: 2 minutes, as on the live pirate web
CHAPTERS = range(2)  # the smallest web that tells a removal apart: one chapter stays, one goes


def test_a_removed_chapter_is_recorded_within_two_crawl_periods_with_defaults(
    postgres_settings: Settings, tmp_path: Path
) -> None:
    settings = postgres_settings
    with serve_live_site() as site:
        _fill(site, CHAPTERS, "biquge")
        env = clean_environ()
        env.update(
            FPTRACK_DATA_DIR=str(tmp_path / "data"),
            FPTRACK_DATABASE_URL=settings.database_url,
            FPTRACK_BROKER_URL=REDIS_URL,
            FPTRACK_TASK_QUEUE=f"removal-{uuid.uuid4().hex[:8]}",
        )
        in_process = {**env, "FPTRACK_BROKER_URL": ""}

        def fptrack(*args: str) -> None:
            done = subprocess.run(
                [sys.executable, "-m", "fptrack.cli", *args],
                env=in_process,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            assert done.returncode == 0, (args, done.stdout, done.stderr)

        fptrack("init")
        fptrack("works", "add", str(DEMO_DATA / "lighthouse.txt"), "--title", "灯塔")
        fptrack(
            "sites", "add", "pirate", site.base + "/", "--schedule", "2m", "--depth", "1", "--allow-private"
        )
        log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - the worker owns it
        worker = subprocess.Popen(
            [sys.executable, "-m", "fptrack.cli", "worker", "--beat", "--concurrency", "2"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        gone_url = site.url("/c/1.html")

        def match_of(url: str) -> list[Match]:
            return _query(
                settings,
                lambda s: list(  # type: ignore[return-value]
                    s.scalars(select(Match).join(Page, Page.id == Match.page_id).where(Page.url == url))
                ),
            )

        def wait_for(condition: Callable[[], bool], seconds: float) -> float | None:
            started = time.monotonic()
            while time.monotonic() - started < seconds:
                if condition():
                    return time.monotonic() - started
                time.sleep(1)
            return None

        try:
            found = wait_for(lambda: len(match_of(gone_url)) == 1, 240)
            assert found is not None, (tmp_path / "worker.log").read_text(errors="replace")[-4000:]
            # the site deletes its last chapter and takes it off its table of contents
            site.remove("/c/1.html")
            links = "".join(f'<li><a href="/c/{n}.html">第{n + 1}章</a></li>' for n in CHAPTERS[:-1])
            site.set("/", f"<html><head><title>目录</title></head><body><ul>{links}</ul></body></html>")
            recorded = wait_for(lambda: match_of(gone_url)[0].taken_down_at is not None, 2 * PERIOD + 30)
            # the chapter comes back, linked again: the next crawl (within a period) records it back
            _fill(site, CHAPTERS, "biquge")
            back = wait_for(lambda: match_of(gone_url)[0].taken_down_at is None, PERIOD + 30)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)
            log.close()
        worker_log = (tmp_path / "worker.log").read_text(errors="replace")
        print(f"removal recorded {recorded} s after the deletion; back after {back} s")
        assert recorded is not None and recorded <= 2 * PERIOD, (recorded, worker_log[-4000:])
        assert back is not None and back <= PERIOD + 30, (back, worker_log[-4000:])
        (match,) = match_of(gone_url)
        assert match.recheck_state == "present"
