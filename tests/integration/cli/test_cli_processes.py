"""The process commands of a deployment: ``fptrack ping`` and ``healthz`` (health checks), ``fptrack beat``
(the scheduler alone) and ``fptrack crawler`` (the crawl queue's worker), against real Redis and real
workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from fptrack.core.settings import Settings
from testbed.sites import closed_port_url
from tests.conftest import REDIS_URL
from tests.support.cli import assert_clean_error, fptrack
from tests.support.env import clean_environ


@pytest.fixture
def broker_env(tmp_path: Path) -> dict[str, str]:
    """A broker of the tests and a queue of this test alone (other runs sharing Redis never answer for it)."""
    return {"FPTRACK_BROKER_URL": REDIS_URL, "FPTRACK_TASK_QUEUE": f"processes-{uuid.uuid4().hex[:8]}"}


@contextmanager
def running(tmp_path: Path, name: str, *args: str, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    environ = clean_environ()
    environ.update(FPTRACK_DATA_DIR=str(tmp_path / "data"), **env)
    with open(tmp_path / f"{name}.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "fptrack.cli", *args],
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)


def test_the_process_commands_explain_themselves_and_refuse_to_run_without_a_broker(tmp_path: Path) -> None:
    for command in ("beat", "crawler", "ping", "healthz", "worker"):
        shown = fptrack(tmp_path, command, "--help")
        assert shown.returncode == 0 and "Usage: " in shown.stdout, shown.stderr
    assert "--no-crawls" in fptrack(tmp_path, "worker", "--help").stdout
    for command in ("beat", "crawler", "ping"):
        assert_clean_error(fptrack(tmp_path, command), "FPTRACK_BROKER_URL is not set")


def test_healthz_fails_in_one_line_when_the_admin_does_not_answer(tmp_path: Path) -> None:
    url = closed_port_url() + "/healthz"
    assert_clean_error(fptrack(tmp_path, "healthz", "--url", url), url)


@pytest.mark.redis
def test_ping_fails_in_one_line_when_no_worker_or_no_broker_answers(
    tmp_path: Path, broker_env: dict[str, str]
) -> None:
    queue = broker_env["FPTRACK_TASK_QUEUE"]
    assert_clean_error(
        fptrack(tmp_path, "ping", "--queue", "tasks", "--timeout", "1", **broker_env),
        f"no worker consuming {queue} answered within 1s",
    )
    unreachable = {**broker_env, "FPTRACK_BROKER_URL": "redis://:secret@127.0.0.1:9/0"}
    refused = fptrack(tmp_path, "ping", "--timeout", "1", **unreachable)
    assert_clean_error(refused, "cannot reach the broker redis://:***@127.0.0.1:9/0")
    assert "secret" not in refused.stderr


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
def test_ping_tells_fingerprint_workers_from_crawlers(
    tmp_path: Path, broker_env: dict[str, str], postgres_settings: Settings
) -> None:
    env = {**broker_env, "FPTRACK_DATABASE_URL": postgres_settings.database_url}
    with running(tmp_path, "worker", "worker", "--no-crawls", "--concurrency", "1", **env) as worker:
        answered = fptrack(tmp_path, "ping", "--queue", "tasks", "--wait", "120", **env)
        assert answered.returncode == 0, answered.stderr + (tmp_path / "worker.log").read_text(
            errors="replace"
        )
        assert answered.stdout.startswith(f"worker-{worker.pid}@"), answered.stdout
        started = time.monotonic()
        assert (
            fptrack(tmp_path, "ping", "--queue", "tasks", "--local", "--timeout", "60", **env).returncode == 0
        )
        # the first answer ends the wait: the broadcast's --timeout is not waited out (it was: 6.3 s for the
        # default 5 s)
        assert time.monotonic() - started < 30
        # a worker with --no-crawls leaves the crawl queue alone: no crawler yet
        assert_clean_error(
            fptrack(tmp_path, "ping", "--queue", "crawls", "--timeout", "2", **env),
            f"no worker consuming {broker_env['FPTRACK_TASK_QUEUE']}.crawls",
        )
        with running(tmp_path, "crawler", "crawler", "--concurrency", "1", **env) as crawler:
            crawls = fptrack(tmp_path, "ping", "--queue", "crawls", "--wait", "120", **env)
            assert crawls.returncode == 0, crawls.stderr + (tmp_path / "crawler.log").read_text(
                errors="replace"
            )
            assert crawls.stdout.startswith(f"crawler-{crawler.pid}@"), crawls.stdout
            assert (
                f"({broker_env['FPTRACK_TASK_QUEUE']}.crawls)" in crawls.stdout
                and "worker-" not in crawls.stdout
            )
            every = fptrack(tmp_path, "ping", "--all", "--timeout", "3", **env)
            assert every.returncode == 0 and len(every.stdout.splitlines()) >= 2, every.stdout


@pytest.mark.redis
def test_beat_alone_sends_the_crawl_tasks_to_the_crawl_queue_and_the_rest_to_the_workers(
    tmp_path: Path, broker_env: dict[str, str]
) -> None:
    queue = broker_env["FPTRACK_TASK_QUEUE"]
    client = redis.Redis.from_url(REDIS_URL)
    env = {**broker_env, "FPTRACK_SCHEDULE_EVERY": "1", "FPTRACK_SWEEP_EVERY": "1"}
    try:
        with running(tmp_path, "beat", "beat", **env):
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not (client.llen(queue) and client.llen(f"{queue}.crawls")):
                time.sleep(0.5)
        log = (tmp_path / "beat.log").read_text(errors="replace")

        def task_names(key: str) -> set[str]:
            return {json.loads(raw)["headers"]["task"] for raw in client.lrange(key, 0, -1)}

        assert "fptrack.start_due_crawls" in task_names(f"{queue}.crawls"), log[-3000:]
        assert "fptrack.sweep" in task_names(queue), log[-3000:]
        assert not task_names(queue) & {"fptrack.start_due_crawls", "fptrack.recheck_takedowns"}
        assert list((tmp_path / "data").glob("celerybeat-schedule*")), (
            "the schedule file is in the data folder"
        )
    finally:
        client.delete(queue, f"{queue}.crawls")
        client.close()


def _children(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in found.read_text().split()] if found.exists() else []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_runs_the_meaning_checks_in_a_lower_priority_companion_that_ends_with_it(
    tmp_path: Path, broker_env: dict[str, str], postgres_settings: Settings
) -> None:
    """The meaning path's checks take seconds to minutes each: a worker takes them in a companion process at
    niceness 10, never in its own pool, where they held a crawl's compares back (docs/meaning-crawl.md), and
    the companion ends with the worker, even one killed outright."""
    env = {**broker_env, "FPTRACK_DATABASE_URL": postgres_settings.database_url}
    queue = broker_env["FPTRACK_TASK_QUEUE"]
    with running(tmp_path, "worker", "worker", "--no-crawls", "--concurrency", "1", **env) as worker:
        meaning = fptrack(tmp_path, "ping", "--queue", "meaning", "--wait", "120", **env)
        log = (tmp_path / "worker.log").read_text(errors="replace")
        assert meaning.returncode == 0, meaning.stderr + log
        assert meaning.stdout.startswith("meaning-"), meaning.stdout
        assert f"({queue}.meaning)" in meaning.stdout
        companion = int(meaning.stdout.split("-", 1)[1].split("@", 1)[0])
        assert companion in _children(worker.pid)
        assert os.getpriority(os.PRIO_PROCESS, companion) == os.getpriority(os.PRIO_PROCESS, worker.pid) + 10
        # the worker's own node takes the tasks and not the meaning queue
        tasks = fptrack(tmp_path, "ping", "--all", "--timeout", "3", **env)
        own = [line for line in tasks.stdout.splitlines() if line.startswith(f"worker-{worker.pid}@")]
        assert own and f"{queue}.meaning" not in own[0], tasks.stdout
        worker.kill()
        worker.wait(timeout=30)
        deadline = time.monotonic() + 60
        while _alive(companion) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(companion), "the meaning companion outlived its worker"


def test_only_meaning_and_no_meaning_workers_say_what_they_take(tmp_path: Path) -> None:
    shown = fptrack(tmp_path, "worker", "--help").stdout
    assert "--only-meaning" in shown and "--no-meaning" in shown and "nice 10" in shown
