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
