"""Every benchmark's ``--quick`` run, as ``make bench-quick`` runs it (``python -m benchmarks.<group>.<name>
--quick`` from the repository's root): it exits 0 and its last line on stdout is one JSON object. A benchmark
that cannot run here (a service down, no development corpus) prints a skip line instead, and the test skips
with its reason (a service under CI fails, as every test needing one does).

The runs selected are started ahead of their tests, :data:`AT_ONCE` at a time (much of a quick run waits on
its own servers, workers and schedules), so the next one is under way while a test waits for its own; each
test still judges its own run alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from subprocess import PIPE

import pytest

from tests.conftest import _require

ROOT = Path(__file__).resolve().parents[3]
AT_ONCE = 2


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
    # no benchmark left at the top, where only the shared modules live, but the meaning path's family: its
    # model embeds a sentence in 15-65 ms of CPU, so even a --quick run (minutes on a quiet machine) stays
    # out of the suite's quick runs; the suite runs them small or with a stand-in method
    # (tests/unit/benchmarks/test_meaning*.py); meaning_sources rebuilds their translation data, embedder
    # times the model's two engines
    assert sorted(
        path.name for path in (ROOT / "benchmarks").glob("*.py") if "__main__" in path.read_text()
    ) == [
        "corpus.py",
        "embedder.py",
        "meaning.py",
        "meaning_crawl.py",
        "meaning_entities.py",
        "meaning_sources.py",
    ]


class QuickRuns:
    """The quick runs of the benchmarks a session selected, started in the tests' order, :data:`AT_ONCE` at a
    time; :meth:`stop` kills those still running (a session stopped early)."""

    def __init__(self, modules: list[str]) -> None:
        self._running: set[subprocess.Popen[str]] = set()
        self._stopped = False
        self._pool = ThreadPoolExecutor(AT_ONCE, thread_name_prefix="quick-run")
        self._runs = {module: self._pool.submit(self._run, module) for module in modules}

    def result(self, module: str) -> subprocess.CompletedProcess[str]:
        if module not in self._runs:  # not started ahead: run it now
            self._runs[module] = self._pool.submit(self._run, module)
        return self._runs[module].result()

    def _run(self, module: str) -> subprocess.CompletedProcess[str]:
        args = [sys.executable, "-m", module, "--quick"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with subprocess.Popen(args, cwd=ROOT, env=env, stdout=PIPE, stderr=PIPE, text=True) as child:
            self._running.add(child)
            try:
                if self._stopped:
                    child.kill()
                stdout, stderr = child.communicate(timeout=900)
            except subprocess.TimeoutExpired:
                child.kill()
                raise
            finally:
                self._running.discard(child)
        return subprocess.CompletedProcess(args, child.returncode, stdout, stderr)

    def stop(self) -> None:
        self._stopped = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        for child in list(self._running):
            child.kill()


@pytest.fixture(scope="module")
def quick_runs(request: pytest.FixtureRequest) -> Iterator[QuickRuns]:
    # a pytest-xdist worker sees every item but runs only some: it runs each benchmark when its test asks
    ahead = not hasattr(request.config, "workerinput")
    selected = [
        str(item.callspec.params["module"])
        for item in request.session.items
        if ahead and item.path == request.path and "module" in getattr(item, "fixturenames", ())
    ]
    runs = QuickRuns(selected)
    yield runs
    runs.stop()


@pytest.mark.slow
@pytest.mark.parametrize("module", benchmark_modules())
def test_the_quick_run_ends_with_its_figures(module: str, quick_runs: QuickRuns) -> None:
    done = quick_runs.result(module)
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
