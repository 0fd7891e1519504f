"""The ``fptrack`` command run as a user runs it (a child process, its own data folder), and the check that a
failure is one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.env import clean_environ


def fptrack(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = clean_environ()
    environ.update(FPTRACK_DATA_DIR=str(tmp_path / "data"), FPTRACK_CRAWL_TIMEOUT="3", **env)
    return subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_clean_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert error_lines, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
