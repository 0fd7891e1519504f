"""Configuring the Celery app again with other settings binds it to them: the result backend too, which
Celery makes once and keeps (a process that first ran tasks in-process, then sends them to workers over
Redis, could otherwise not wait for their results: "No result backend is configured")."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fptrack import taskqueue
from fptrack.core.settings import Settings


def test_the_result_backend_follows_the_settings(tmp_path: Path) -> None:
    in_process = Settings(data_dir=tmp_path)
    over_redis = replace(in_process, broker_url="redis://127.0.0.1:6379/0")
    try:
        assert taskqueue.configure(in_process).backend.url is None  # in-process: no backend
        assert taskqueue.configure(over_redis).backend.url == "redis://127.0.0.1:6379/0"
        assert taskqueue.configure(in_process).backend.url is None
    finally:
        taskqueue.configure(Settings(data_dir=tmp_path / "after"))


def _route(task: str) -> str:
    return str(taskqueue.celery.amqp.router.route({}, task)["queue"].name)


def _broker() -> str:
    with taskqueue.celery.pool.acquire(block=False) as connection:
        return (
            f"{connection.transport_cls}://{connection.hostname}:{connection.port}/{connection.virtual_host}"
        )


def test_tasks_go_to_the_broker_and_queue_of_the_settings(tmp_path: Path) -> None:
    """Celery builds its queues, router and broker connections once; a process configured again (a test
    after another, a command after a probe) must send its tasks where the new settings say, not to the queue
    of the first configuration, where no worker listens."""
    first = Settings(data_dir=tmp_path, broker_url="redis://127.0.0.1:6379/0", task_queue="fptrack-first")
    second = replace(first, broker_url="redis://127.0.0.1:6379/3", task_queue="fptrack-second")
    try:
        taskqueue.configure(first)
        assert (_route("fptrack.process_pages"), _broker()) == ("fptrack-first", "redis://127.0.0.1:6379/0")
        taskqueue.configure(second)
        assert (_route("fptrack.process_pages"), _broker()) == ("fptrack-second", "redis://127.0.0.1:6379/3")
        taskqueue.configure(first)
        assert (_route("fptrack.process_pages"), _broker()) == ("fptrack-first", "redis://127.0.0.1:6379/0")
    finally:
        taskqueue.configure(Settings(data_dir=tmp_path / "after"))
