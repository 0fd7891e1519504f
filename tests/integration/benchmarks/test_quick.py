"""Every benchmark's ``--quick`` run, as ``make bench-quick`` runs it (``python -m benchmarks.<group>.<name>
--quick`` from the repository's root): it exits 0 and its last line on stdout is one JSON object. A benchmark
that cannot run here (a service down, no development corpus) prints a skip line instead, and the test skips
with its reason (a service under CI fails, as every test needing one does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import _require

ROOT = Path(__file__).resolve().parents[3]


def benchmark_modules(root: Path = ROOT) -> list[str]:
    """The dotted names of the benchmarks: the modules of the groups under benchmarks/ whose names do not
    start with an underscore (those are helpers)."""
    return sorted(
        ".".join(path.relative_to(root).with_suffix("").parts)
        for path in (root / "benchmarks").glob("*/*.py")
        if not path.name.startswith("_")
    )


def test_the_benchmarks_are_found_in_their_groups() -> None:
    found = benchmark_modules()
    groups = {name.split(".")[1] for name in found}
    assert {"pipeline", "scale", "accuracy", "monitoring", "admin", "crawl", "fingerprint"} <= groups, found
    assert "benchmarks.pipeline.capacity" in found and "benchmarks.scale.index" in found
    # no benchmark left at the top, where only the shared modules live
    assert sorted(
        path.name for path in (ROOT / "benchmarks").glob("*.py") if "__main__" in path.read_text()
    ) == ["corpus.py"]


@pytest.mark.slow
@pytest.mark.parametrize("module", benchmark_modules())
def test_the_quick_run_ends_with_its_figures(module: str) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, "-m", module, "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-2000:]
    figures = json.loads(lines[-1])
    assert isinstance(figures, dict) and figures, lines[-1]
    if "skipped" in figures:
        reason = str(figures["skipped"])
        if "corpus" in reason:
            pytest.skip(f"{module}: {reason}")
        _require(False, f"{module}: {reason}")
