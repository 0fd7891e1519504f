"""Reliability tests (``make reliability``; also part of ``make test``): real processes on 127.0.0.1, a fault
injected, and a report of what was done and what was lost, which must be nothing.

Every test in this folder carries the ``reliability`` marker, so ``pytest -m reliability`` selects them.

Fixtures: ``cluster`` (a PostgreSQL and a Redis of the test's own on spare loopback ports, and the fptrack
processes it starts: tests/reliability/cluster.py), built from ``cluster_template`` (one ``initdb`` and one
``fptrack init`` per session). They need PostgreSQL 15's server binaries and ``redis-server`` (the Debian
packages of the shared servers), and ``runuser`` when run as root; missing ones skip the tests, or fail them
under ``CI=true``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import _require
from tests.reliability.cluster import POSTGRES_BIN, Cluster, PostgresTemplate

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.reliability)


def _tools_missing() -> list[str]:
    wanted = [str(POSTGRES_BIN / "initdb"), str(POSTGRES_BIN / "postgres"), "redis-server"]
    if os.geteuid() == 0:
        wanted.append("runuser")
    return [tool for tool in wanted if shutil.which(tool) is None]


@pytest.fixture(scope="session")
def cluster_template() -> Iterator[PostgresTemplate]:
    """One migrated PostgreSQL data directory per session, copied by every ``cluster``."""
    missing = _tools_missing()
    _require(not missing, f"the reliability tests' own servers ({', '.join(missing)})")
    template = PostgresTemplate.build()
    yield template
    template.remove()


@pytest.fixture
def cluster(cluster_template: PostgresTemplate, tmp_path: Path) -> Iterator[Cluster]:
    """A PostgreSQL and a Redis of this test's own on spare loopback ports; workers and crawls it starts are
    stopped at the end, pass or fail (tests/reliability/cluster.py)."""
    with Cluster.running(cluster_template, tmp_path) as cluster:
        yield cluster
