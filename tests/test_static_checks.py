"""The habits of STYLE.md, checked on every run: ruff on the whole tree, mypy --strict on the typed core."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_ruff_finds_nothing() -> None:
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_core_packages_are_strictly_typed() -> None:
    result = _run("mypy", "--strict", "fingerprint", "compare", "storage", "crawler")
    assert result.returncode == 0, result.stdout + result.stderr
