"""Helpers to run the real ``fptrack`` command line against a test database, as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from fptrack.core.settings import Settings
from tests.support.env import clean_environ


@dataclass
class Fptrack:
    settings: Settings
    extra_env: dict[str, str]

    def env(self) -> dict[str, str]:
        env = clean_environ()
        env.update(
            FPTRACK_DATA_DIR=str(self.settings.data_dir),
            FPTRACK_DATABASE_URL=self.settings.database_url,
            FPTRACK_CRAWL_TIMEOUT="5",
            **self.extra_env,
        )
        return env

    def run(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        completed = subprocess.run(
            [sys.executable, "-m", "fptrack.cli", *args],
            check=False,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and completed.returncode != 0:
            raise AssertionError(
                f"fptrack {' '.join(args)} exited {completed.returncode}\n"
                f"stdout:\n{completed.stdout}\nstderr:\n{completed.stderr}"
            )
        return completed

    def matches(self) -> list[dict[str, Any]]:
        out = self.run("matches", "--format", "json").stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture
def fptrack(settings: Settings) -> Fptrack:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return Fptrack(settings, {})
