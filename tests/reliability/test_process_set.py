"""The whole process set comes up from deploy/ with one command and goes down with one.

``deploy/process_set.py up`` (what ``make up`` runs) against a PostgreSQL database it must create, Redis and a
spare admin port; then, with nothing but the running processes, a monitored loopback site is crawled by the
crawler when the scheduler says it is due and its copies are found by the workers; ``/healthz`` answers 200
and ``fptrack ping`` finds a worker and a crawler. ``down`` then stops every process ``up`` started, the crawl
process the crawler started included, and nothing else: a bystander process and the shared services live on.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from deploy import process_set
from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CrawlJob, Match, Site
from testbed.sites import render_chapter
from tests.conftest import REDIS_URL, _admin_engine, _pg_url
from tests.support.env import clean_environ
from tests.support.live_site import LiveSite, serve_live_site

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]

SCRIPT = process_set.DEPLOY / "process_set.py"
CHAPTERS = demo_chapters("lighthouse.txt")


def _spare_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _fill(site: LiveSite) -> None:
    site.set("/", '<html><body><a href="/c/0.html">一</a> <a href="/c/1.html">二</a></body></html>')
    for n in range(2):
        markup = render_chapter(f"第{n + 1}章", CHAPTERS[n].split("\n"), template="biquge").decode("utf-8")
        site.set(f"/c/{n}.html", markup)


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def _alive(pid: int, started: int | None) -> bool:
    return started is not None and process_set.start_time(pid) == started


def _wait_for(
    condition: Callable[[], bool], seconds: float, every: Callable[[], None] = lambda: None
) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        every()
        if condition():
            return True
        time.sleep(1)
    return False


def test_up_runs_the_whole_set_a_scheduled_crawl_finds_copies_and_down_stops_exactly_what_up_started(
    tmp_path: Path,
) -> None:
    database = f"fptrack_test_{os.getpid()}_ps_{uuid.uuid4().hex[:8]}"
    url = _pg_url(database)
    port = _spare_port()
    env = clean_environ()
    env.update(
        FPTRACK_DATA_DIR=str(tmp_path / "data"),
        FPTRACK_DATABASE_URL=url,
        FPTRACK_BROKER_URL=REDIS_URL,
        FPTRACK_TASK_QUEUE=f"process-set-{uuid.uuid4().hex[:8]}",
        FPTRACK_SCHEDULE_EVERY="1",
        FPTRACK_CRAWL_TIMEOUT="5",
        ADMIN_PORT=str(port),
        ADMIN_WORKERS="1",
        WORKER_CONCURRENCY="1",
        CRAWLER_CONCURRENCY="1",
    )
    env.pop("PROCESS_FORMATION", None)

    def run_script(action: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(SCRIPT), action, "--env-file", str(process_set.DEPLOY / ".env.example")],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def fptrack(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "fptrack.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    pid_file = tmp_path / "data" / process_set.PID_FILE
    seen: dict[int, int | None] = {}  # every process of the set met while it ran, with its start time

    def note_processes() -> None:
        recorded = process_set.read_pid_file(pid_file)
        if recorded is not None:
            for pid in process_set.descendants({recorded[0]}):
                seen.setdefault(pid, process_set.start_time(pid))

    bystander = subprocess.Popen(["sleep", "600"], start_new_session=True)  # not ours to stop
    engine = None
    try:
        up = run_script("up")
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"created the database {database}" in up.stdout
        assert f"admin on http://127.0.0.1:{port}/" in up.stdout and "ready" in up.stdout
        note_processes()
        again = run_script("up")
        assert again.returncode == 0 and "already running" in again.stdout, again.stdout + again.stderr

        # a monitored site, then nothing more: beat says it is due, the crawler crawls it, the workers compare
        with serve_live_site() as site, serve_live_site() as slow:
            _fill(site)
            # a second site crawled slowly (a request every 2 s), still crawling when the set goes down
            slow.set(
                "/",
                "<html><body>"
                + "".join(f'<a href="/{n}.html">{n}</a>' for n in range(60))
                + "</body></html>",
            )
            for n in range(60):
                slow.set(f"/{n}.html", f"<html><body><p>第{n}页：与登记的作品无关的文字。</p></body></html>")
            fptrack("works", "add", str(DEMO_DATA / "lighthouse.txt"), "--title", "灯塔")
            fptrack(
                "sites",
                "add",
                "pirate",
                site.base + "/",
                "--schedule",
                "1h",
                "--depth",
                "1",
                "--allow-private",
            )
            fptrack(
                "sites",
                "add",
                "slow",
                slow.base + "/",
                "--schedule",
                "1h",
                "--depth",
                "1",
                "--delay",
                "2",
                "--allow-private",
            )
            engine = create_engine_for(Settings(database_url=url))

            def copies_found() -> bool:
                with Session(engine) as session:
                    chapters = session.scalars(select(func.count(func.distinct(Match.chapter_id)))).one()
                    finished = session.scalars(
                        select(CrawlJob.id).where(
                            CrawlJob.trigger == "schedule", CrawlJob.status == "finished"
                        )
                    ).first()
                return chapters == 2 and finished is not None

            found = _wait_for(copies_found, 240, every=note_processes)
            log = (tmp_path / "data" / process_set.LOG_FILE).read_text(errors="replace")
            assert found, log[-4000:]
            assert list((tmp_path / "data" / "logs").glob("site-*.log")), (
                "the crawls ran in processes of their own"
            )

            def slow_crawl_running() -> bool:
                return any("site_crawl slow" in _command_line(pid) for pid in seen if _alive(pid, seen[pid]))

            crawling = _wait_for(
                lambda: slow_crawl_running() and bool(slow.page_requests()), 120, every=note_processes
            )
            assert crawling, sorted(map(_command_line, seen))

            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
                assert response.status == 200 and json.loads(response.read())["database"] == "ok"
            assert "worker-" in fptrack("ping", "--queue", "tasks").stdout
            assert "crawler-" in fptrack("ping", "--queue", "crawls").stdout
            note_processes()
            roles = " ".join(_command_line(pid) for pid in seen if _alive(pid, seen[pid]))
            for command in ("serve --production", "worker --no-crawls", "crawler", "beat", "site_crawl slow"):
                assert command in roles, roles

            down = run_script("down")
            assert down.returncode == 0, down.stdout + down.stderr
            assert "stopped the process set" in down.stdout and "killed" not in down.stdout, down.stdout

        survivors = [_command_line(pid) for pid in seen if _alive(pid, seen[pid])]
        assert survivors == []
        with Session(engine) as session:  # the interrupted crawl said so (it runs again when next due)
            statuses = dict(
                session.execute(
                    select(Site.name, CrawlJob.status).join(Site, Site.id == CrawlJob.site_id)
                ).all()
            )
        assert statuses == {"pirate": "finished", "slow": "interrupted"}, statuses
        assert not pid_file.exists()
        assert bystander.poll() is None, "down stopped a process it did not start"
        shared = _admin_engine()
        with shared.connect() as connection:
            assert connection.scalar(text("SELECT 1")) == 1  # the shared PostgreSQL still runs
        shared.dispose()
        fptrack_env_ping = subprocess.run(
            [sys.executable, "-m", "fptrack.cli", "ping", "--queue", "tasks", "--timeout", "2"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert fptrack_env_ping.returncode == 1 and "no worker consuming" in fptrack_env_ping.stderr

        second = run_script("down")
        assert second.returncode == 0 and "not running" in second.stdout
    finally:
        if process_set.read_pid_file(pid_file) is not None:
            run_script("down")
        os.kill(bystander.pid, signal.SIGTERM)
        bystander.wait(timeout=10)
        if engine is not None:
            engine.dispose()
        queue = env["FPTRACK_TASK_QUEUE"]
        client = redis.Redis.from_url(REDIS_URL)
        client.delete(queue, f"{queue}.crawls")  # what beat sent after the workers had gone
        client.close()
        admin = _admin_engine()
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
        admin.dispose()
