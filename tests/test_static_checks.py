"""Lint, format and types, checked on every run: ruff's lint and format on the whole tree, and mypy --strict
on every package of the product and on the process-set script. ``make lint`` runs the same commands.

mypy sees the package ``fptrack`` the way an installed copy looks: the repository's root IS the package
(pyproject ``package-dir = {"fptrack" = "."}``), so a folder named ``fptrack`` has to exist for ``-p fptrack``
to find it. A link in a temporary folder, passed as MYPYPATH, is that folder (``make lint`` keeps its link in
``.venv/mypy-path``). The research shelf is checked too (benchmarks import it); tests, benchmarks and deploy
are not the package and are left out of that run; deploy/process_set.py, a script, is checked on its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Folders under the root that are not the package (mypy --exclude is a regular expression on the path).
MYPY_EXCLUDE = r"/(tests|benchmarks|deploy)/"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )


def test_ruff_finds_nothing() -> None:
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tree_is_formatted() -> None:
    result = _run("ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def _package_link(tmp_path: Path) -> dict[str, str]:
    """The environment under which mypy finds the package ``fptrack`` (a link to the root in ``tmp_path``)."""
    (tmp_path / "fptrack").symlink_to(ROOT, target_is_directory=True)
    return {**os.environ, "MYPYPATH": str(tmp_path)}


def test_every_package_is_strictly_typed(tmp_path: Path) -> None:
    env = _package_link(tmp_path)
    result = _run(
        "mypy",
        "--strict",
        "--cache-dir",
        str(tmp_path / "mypy-cache"),
        "--exclude",
        MYPY_EXCLUDE,
        "-p",
        "fptrack",
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # the run saw the whole product, not an empty package (a broken link gives "0 source files" or an error)
    # ("Success: no issues found in 121 source files")
    checked = re.search(r"in (\d+) source files", result.stdout)
    assert checked is not None and int(checked[1]) > 100, result.stdout


def test_the_process_set_script_is_strictly_typed(tmp_path: Path) -> None:
    env = _package_link(tmp_path)
    cache = str(tmp_path / "mypy-cache")
    # --explicit-package-bases: without it mypy names the script after the folders above it that hold an
    # __init__.py, up to the root, whose folder is whatever the clone was called ("tmp.Ab12 ... is not a valid
    # Python package name" in a clone made by mktemp)
    result = _run(
        "mypy", "--strict", "--explicit-package-bases", "--cache-dir", cache, "deploy/process_set.py", env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
