"""Nothing lost, nothing touched that is not ours: the crawl pipeline under faults, through the real CLI.

- no worker consumes the queue: the crawl says so quickly and fails; the pages are kept, and `fptrack
  maintain` compares them later;
- the broker is unreachable: the crawl says it could not hand the pages on and fails; nothing is lost;
- a whole worker is killed with SIGKILL mid-crawl and another started: every page is compared exactly once;
- Ctrl+C: the crawl is recorded as interrupted and exits non-zero;
- the demo never deletes data it did not create.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CrawlJob, MonitorLock
from testbed.sites import Page as SitePage
from testbed.sites import SiteURL, closed_port_url, serve_site
from tests.conftest import REDIS_URL
from tests.support.copy_site import copy_site, pipeline_counts
from tests.support.env import clean_environ

pytestmark = pytest.mark.slow


def _env(settings: Settings, **extra: str) -> dict[str, str]:
    env = clean_environ()
    env.update(
        FPTRACK_DATA_DIR=str(settings.data_dir),
        FPTRACK_DATABASE_URL=settings.database_url,
        FPTRACK_CRAWL_TIMEOUT="5",
        **extra,
    )
    return env


def _run(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _job_status(settings: Settings) -> str:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            return str(session.scalars(select(CrawlJob.status).order_by(CrawlJob.id.desc())).first())
    finally:
        engine.dispose()


@pytest.mark.redis
def test_works_add_wait_says_when_no_worker_consumes_the_queue(sqlite_settings: Settings) -> None:
    queued = {
        **_env(sqlite_settings),
        "FPTRACK_BROKER_URL": REDIS_URL,
        "FPTRACK_NO_WORKER_SECONDS": "2",
        "FPTRACK_TASK_QUEUE": f"nobody-{uuid.uuid4().hex[:8]}",
    }
    added = _run(queued, "works", "add", str(DEMO_DATA / "alley.txt"), "--wait", timeout=120)
    assert added.returncode == 1, added.stdout + added.stderr
    assert "no worker consumes the queue" in added.stderr and "#1 are saved" in added.stderr, added.stderr
    assert "Traceback" not in added.stderr
    assert "青石巷" in _run(queued, "works", "list").stdout  # registered, waiting for a worker


@pytest.mark.redis
def test_no_worker_on_the_queue_fails_fast_and_loses_nothing(sqlite_settings: Settings) -> None:
    env = _env(sqlite_settings)
    assert _run(env, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode == 0
    queued = {
        **env,
        "FPTRACK_BROKER_URL": REDIS_URL,
        "FPTRACK_TASK_QUEUE": f"nobody-{uuid.uuid4().hex[:8]}",
        "FPTRACK_NO_WORKER_SECONDS": "5",
    }
    with serve_site(copy_site(3)) as base:
        # without asking who consumes the queue it would wait for ever: the timeout would stop it, not this
        # answer
        crawl = _run(
            queued,
            "crawl",
            base + "/",
            "--allow-private-host",
            base.key,
            "--depth",
            "1",
            "--quiet",
            timeout=120,
        )
    assert crawl.returncode == 1, crawl.stdout + crawl.stderr
    assert "no worker consumes the queue" in crawl.stderr and "fptrack worker" in crawl.stderr
    assert "Traceback" not in crawl.stderr
    assert _job_status(sqlite_settings) == "failed"
    pages, pending, matches = pipeline_counts(sqlite_settings)
    assert (pages, pending, matches) == (4, 3, 0)  # stored, kept, not compared
    # later, with tasks in-process (or a worker running), the sweep picks them up
    maintained = _run(env, "maintain", "--older-than", "0")
    assert maintained.returncode == 0, maintained.stderr
    assert "3 page(s) not compared" in maintained.stdout
    assert pipeline_counts(sqlite_settings) == (4, 0, 3)


def test_an_unreachable_broker_fails_the_crawl_and_loses_nothing(sqlite_settings: Settings) -> None:
    env = _env(sqlite_settings)
    assert _run(env, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode == 0
    port = closed_port_url().rsplit(":", 1)[1].strip("/")
    broken = {**env, "FPTRACK_BROKER_URL": f"redis://127.0.0.1:{port}/0"}
    with serve_site(copy_site(2)) as base:
        crawl = _run(
            broken,
            "crawl",
            base + "/",
            "--allow-private-host",
            base.key,
            "--depth",
            "1",
            "--quiet",
            timeout=240,
        )
    assert crawl.returncode == 1, crawl.stdout + crawl.stderr
    assert "cannot hand pages to the workers" in crawl.stderr, crawl.stderr
    assert "no copies of registered works found" not in crawl.stdout
    assert pipeline_counts(sqlite_settings)[:2] == (3, 2)
    assert _run(env, "maintain", "--older-than", "0").returncode == 0
    assert pipeline_counts(sqlite_settings) == (3, 0, 2)


@pytest.mark.redis
@pytest.mark.postgres
def test_a_worker_killed_mid_crawl_loses_no_page_and_duplicates_no_match(
    postgres_settings: Settings, tmp_path: Path
) -> None:
    env = _env(
        postgres_settings,
        FPTRACK_BROKER_URL=REDIS_URL,
        FPTRACK_TASK_QUEUE=f"kill-{uuid.uuid4().hex[:8]}",
        FPTRACK_STALL_SECONDS="8",
    )
    assert (
        _run({**env, "FPTRACK_BROKER_URL": ""}, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode
        == 0
    )

    def start_worker(name: str) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - the process owns it
        return subprocess.Popen(
            [sys.executable, "-m", "fptrack.cli", "worker", "--concurrency", "1", "--loglevel", "INFO"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    first = start_worker("first")
    second: subprocess.Popen[bytes] | None = None
    try:
        with serve_site(copy_site(150, 30)) as base:
            crawl = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fptrack.cli",
                    "crawl",
                    base + "/",
                    "--allow-private-host",
                    base.key,
                    "--depth",
                    "1",
                    "--max-pages",
                    "300",
                    "-q",
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and b"succeeded" not in (tmp_path / "first.log").read_bytes():
                time.sleep(0.2)
            assert b"succeeded" in (tmp_path / "first.log").read_bytes(), "the worker never finished a task"
            os.killpg(first.pid, signal.SIGKILL)  # the whole worker: main process and its pool, mid-batch
            first.wait(timeout=30)
            second = start_worker("second")
            out, err = crawl.communicate(timeout=400)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=30)
    assert crawl.returncode == 0, out + err
    assert "150 page(s) copy registered works" in out, out + err
    pages, pending, matches = pipeline_counts(postgres_settings)
    assert (pages, pending, matches) == (181, 0, 150)


def _slow_copy_site() -> dict[str, SitePage]:
    """40 copies answered after 0.3 s each: a crawl that is still running when the test hits it."""
    return {path: SitePage(page.body, delay=0.3) for path, page in copy_site(40).items()}


def _crawl_under_way(env: dict[str, str], base: SiteURL) -> subprocess.Popen[str]:
    """``fptrack crawl base/`` in the background, returned once it has fetched three pages."""
    crawl = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fptrack.cli",
            "crawl",
            base + "/",
            "--allow-private-host",
            base.key,
            "--depth",
            "1",
            "-q",
        ],
        env={**env, "FPTRACK_CRAWL_CONCURRENCY": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(base.requests) < 3:
        time.sleep(0.1)
    return crawl


def test_ctrl_c_records_an_interrupted_crawl_and_exits_non_zero(sqlite_settings: Settings) -> None:
    env = _env(sqlite_settings)
    assert _run(env, "init").returncode == 0
    with serve_site(_slow_copy_site()) as base:
        crawl = _crawl_under_way(env, base)
        crawl.send_signal(signal.SIGINT)
        out, err = crawl.communicate(timeout=120)
    assert crawl.returncode == 130, out + err
    assert "interrupted" in err
    assert _job_status(sqlite_settings) == "interrupted"


def test_a_killed_crawl_is_marked_failed_by_the_next_one_not_left_running(settings: Settings) -> None:
    env = _env(settings)  # on SQLite and on PostgreSQL (the settings fixture)
    assert _run(env, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode == 0
    with serve_site(_slow_copy_site()) as base:
        crawl = _crawl_under_way(env, base)
        crawl.kill()  # SIGKILL: nothing of the process runs to record its end
        crawl.communicate(timeout=60)
        assert _job_status(settings) == "running"  # as it was left
        with serve_site(copy_site(2)) as other:
            again = _run(env, "crawl", other + "/", "--allow-private-host", other.key, "--depth", "1", "-q")
    assert again.returncode == 0, again.stdout + again.stderr
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            jobs = session.execute(
                select(CrawlJob.id, CrawlJob.status, CrawlJob.error).order_by(CrawlJob.id)
            ).all()
            locks = session.scalars(select(MonitorLock.name)).all()
    finally:
        engine.dispose()
    (_, killed_status, killed_error), (_, status, _) = jobs
    assert killed_status == "failed" and "died" in killed_error and "run the crawl again" in killed_error
    assert status == "finished"
    assert locks == []  # the second crawl's own claim went with it


def test_the_demo_never_touches_data_it_did_not_create(tmp_path: Path) -> None:
    mine = tmp_path / "my-data"
    env = clean_environ()
    env["FPTRACK_DATA_DIR"] = str(mine)
    assert _run(env, "init").returncode == 0
    assert _run(env, "works", "add", str(DEMO_DATA / "alley.txt")).returncode == 0
    before = {p.name: p.stat().st_size for p in mine.iterdir()}

    refused = _run(env, "demo", "--dir", str(mine))
    assert refused.returncode == 1 and "was not made by the demo" in refused.stderr
    demo = _run(env, "demo", "--dir", str(tmp_path / "demo"), timeout=300)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    # a demo folder is reset, not refused
    again = _run(env, "demo", "--dir", str(tmp_path / "demo"), timeout=300)
    assert again.returncode == 0, again.stderr

    assert {p.name for p in mine.iterdir()} == set(before)
    listed = _run(env, "works", "list")
    assert "青石巷" in listed.stdout and "灯塔守望人" not in listed.stdout


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_two_crawls_at_once_share_sites_and_pages_and_count_truly(
    backend: str, request: pytest.FixtureRequest
) -> None:
    settings: Settings = request.getfixturevalue(f"{backend}_settings")
    env = _env(settings)
    assert _run(env, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode == 0
    with serve_site(copy_site(6, 4)) as first, serve_site(copy_site(4, 2)) as second:
        crawls = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fptrack.cli",
                    "crawl",
                    *urls,
                    "--depth",
                    "1",
                    "-q",
                    "--allow-private-host",
                    first.key,
                    "--allow-private-host",
                    second.key,
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for urls in ([first + "/", second + "/"], [second + "/", first + "/"])
        ]
        results = [crawl.communicate(timeout=300) for crawl in crawls]
    for crawl, (out, err) in zip(crawls, results, strict=True):
        assert crawl.returncode == 0, out + err
        assert "10 page(s) copy registered works" in out, out + err  # each crawl saw every copy itself
    pages, pending, matches = pipeline_counts(settings)
    assert (pages, pending, matches) == (6 + 4 + 1 + 4 + 2 + 1, 0, 10)
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            from fptrack.storage.models import Site

            assert sorted(session.scalars(select(Site.host))) == sorted(
                [first.removeprefix("http://"), second.removeprefix("http://")]
            )
    finally:
        engine.dispose()
