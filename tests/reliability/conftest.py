"""Reliability tests (``make reliability``; also part of ``make test``): real processes on 127.0.0.1, a fault
injected, and a report of what was done and what was lost, which must be nothing.

Every test in this folder carries the ``reliability`` marker, so ``pytest -m reliability`` selects them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.reliability)
