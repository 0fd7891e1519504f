"""``fptrack works add`` with a broker and no worker consuming its queue says that the work waits for one
(``fptrack worker``), not "fingerprinting queued" as if it were under way. Real Redis, a queue of this test's
own (no other test's or session's worker consumes it), the command in this process."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
from click.testing import CliRunner

from fptrack.cli.demo import DEMO_DATA
from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.jobs import tasks
from tests.conftest import REDIS_URL


@pytest.fixture
def lonely_queue(sqlite_settings: Settings) -> Iterator[dict[str, str]]:
    """The environment of a command line whose broker is Redis and whose task queue nobody consumes."""
    queue = f"fptrack-test-{uuid.uuid4().hex[:8]}"
    yield {
        "FPTRACK_DATABASE_URL": sqlite_settings.database_url,
        "FPTRACK_BROKER_URL": REDIS_URL,
        "FPTRACK_TASK_QUEUE": queue,
    }
    tasks.configure(sqlite_settings)  # back to in-process for the tests that follow in this process
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(queue)  # the message this test queued
    client.close()


@pytest.mark.redis
def test_works_add_without_a_worker_says_the_work_waits_for_one(lonely_queue: dict[str, str]) -> None:
    added = CliRunner().invoke(main, ["works", "add", str(DEMO_DATA / "lighthouse.txt")], env=lonely_queue)
    assert added.exit_code == 0, added.output  # the work is saved: nothing failed
    assert "queued for the workers to fingerprint (task " in added.stdout
    assert "fingerprinting queued" not in added.stdout
    queue = lonely_queue["FPTRACK_TASK_QUEUE"]
    assert added.stderr == (
        f"warning: no worker consumes the queue {queue!r}: work(s) #1 are saved and queued, and are "
        "fingerprinted and compared with the pages crawled before only once a worker runs: start one with "
        "`fptrack worker`\n"
    )
