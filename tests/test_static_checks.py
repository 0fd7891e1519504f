"""Lint, format, types and dependencies, checked on every run with the commands ``make lint`` runs, each
configured in pyproject.toml: ruff's lint and format on the whole tree, mypy --strict on the package fptrack
(found as .mypy/fptrack, a link to the root), on the process-set script and on the benchmarks, and deptry on
what the product imports against what it declares."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for this module's three runs, fresh each session: the benchmarks import the product,
    so their run reads the product's modules from the first run's cache instead of checking them all again
    (mypy checks again whatever changed, and whatever was checked with other options)."""
    return tmp_path_factory.mktemp("mypy-cache")


def test_ruff_finds_nothing() -> None:
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tree_is_formatted() -> None:
    result = _run("ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_package_is_strictly_typed(mypy_cache: Path) -> None:
    result = _run("mypy", "--cache-dir", str(mypy_cache))
    assert result.returncode == 0, result.stdout + result.stderr
    # the run saw the whole product, not an empty package (a broken link gives "0 source files" or an error)
    # ("Success: no issues found in 121 source files")
    checked = re.search(r"in (\d+) source files", result.stdout)
    assert checked is not None and int(checked[1]) > 100, result.stdout


def test_the_benchmarks_are_strictly_typed(mypy_cache: Path) -> None:
    result = _run("mypy", "--cache-dir", str(mypy_cache), "-p", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr
    checked = re.search(r"in (\d+) source files", result.stdout)
    assert checked is not None and int(checked[1]) > 20, result.stdout


def test_the_process_set_script_is_strictly_typed(mypy_cache: Path) -> None:
    result = _run("mypy", "--cache-dir", str(mypy_cache), "deploy/process_set.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "in 1 source file" in result.stdout, result.stdout


def test_the_product_imports_what_it_declares_and_declares_what_it_imports() -> None:
    result = _run("deptry", ".")
    assert result.returncode == 0, result.stdout + result.stderr
