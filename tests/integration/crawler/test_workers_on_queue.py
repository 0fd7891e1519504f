"""A crawl waiting on its workers asks the broker who consumes its queue, and fails fast when nobody does
(tests/integration/cli/test_pipeline_faults.py). A broker that cannot be asked (down, restarting) is no
answer: the crawl must not conclude there is no worker and fail with a wrong reason; it asks again later."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fptrack.core.settings import Settings
from fptrack.jobs import tasks
from fptrack.taskqueue import workers_on_queue
from testbed.sites import free_port


@pytest.fixture
def unreachable_broker(tmp_path: Path) -> Iterator[Settings]:
    settings = Settings.from_env(
        {
            "FPTRACK_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0",
            "FPTRACK_DATA_DIR": str(tmp_path / "data"),
        }
    )
    tasks.configure(settings)
    yield settings
    tasks.configure(Settings.from_env({"FPTRACK_DATA_DIR": str(tmp_path / "data")}))  # back to in-process


def test_a_broker_that_cannot_be_asked_says_nothing_about_the_workers(unreachable_broker: Settings) -> None:
    assert workers_on_queue(unreachable_broker.task_queue) is None
