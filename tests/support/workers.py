"""Celery worker processes of the ``fptrack`` command for the end-to-end tests, and the wait until they have
indexed the registered works (a crawl started before would find nothing to compare with)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Work


@contextmanager
def worker_processes(env: dict[str, str], log_dir: Path, count: int) -> Iterator[None]:
    processes = []
    logs = []
    try:
        for n in range(count):
            log = open(log_dir / f"worker{n}.log", "w")  # noqa: SIM115 - closed below
            logs.append(log)
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "fptrack.cli",
                        "worker",
                        "--concurrency",
                        "1",
                        "--loglevel",
                        "INFO",
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        yield
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
        for log in logs:
            log.close()


def wait_indexed(settings: Settings, timeout: float = 120) -> None:
    engine = create_engine_for(settings)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with Session(engine) as session:
                states = list(session.scalars(select(Work.indexed_at)))
            if states and all(states):
                return
            time.sleep(0.3)
        raise AssertionError("the workers did not index the registered works")
    finally:
        engine.dispose()
