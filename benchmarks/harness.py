"""What every benchmark shares: its command line (``--quick``), progress on stderr, percentiles, the printed
table, the final JSON line (or a skip), the machine, CPU seconds of processes (read from ``/proc``, Linux),
and a figure's ratio to its target or peer."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, Self

__all__ = [
    "ROOT",
    "BackendCpu",
    "arguments",
    "children_cpu_seconds",
    "emit",
    "machine",
    "percentile",
    "print_table",
    "process_cpu_seconds",
    "progress",
    "ratio",
    "require_service",
    "skip",
    "tree_cpu_seconds",
]

ROOT = Path(__file__).resolve().parents[1]  # the repository: benchmarks run from here (python -m)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def arguments(doc: str | None, quick: str) -> argparse.ArgumentParser:
    """An argument parser whose help is the script's docstring, with ``--quick`` (``quick`` says what it
    shrinks to; ``make bench-quick`` and the suite's smoke test run every benchmark so)."""
    made = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    made.add_argument("--quick", action="store_true", help=quick)
    return made


def progress(message: str) -> None:
    """A progress line on stderr (stdout holds the tables and the JSON line)."""
    print(f"# {message}", file=sys.stderr, flush=True)


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between the closest ranks (numpy's default);
    NaN when there are no values."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def print_table(title: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print ``rows`` (any values, shown with ``str``) under ``headers``, the first column left-aligned and
    the others right-aligned; nothing when there are no rows."""
    cells = [[str(c) for c in row] for row in rows]
    if not cells:
        return
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    print(f"\n{title}")
    print("  ".join(h.ljust(widths[i]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(headers)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))


def emit(figures: Mapping[str, Any], *, path: Path | None = None, sort_keys: bool = False) -> None:
    """Print the benchmark's figures as its last line, one JSON object; also write them, indented, to
    ``path`` when given."""
    if path is not None:
        path.write_text(json.dumps(figures, ensure_ascii=False, indent=2, sort_keys=sort_keys))
    print(json.dumps(figures, ensure_ascii=False, sort_keys=sort_keys), flush=True)


def skip(benchmark: str, reason: str) -> NoReturn:
    """End a benchmark that cannot run here (a service down, no corpus): the reason on stderr, a JSON line
    saying so, exit status 0."""
    progress(f"{benchmark} skipped: {reason}")
    emit({"benchmark": benchmark, "skipped": reason})
    sys.exit(0)


def require_service(benchmark: str, what: str, url: str, default_port: int) -> None:
    """End ``benchmark`` with a skip when the service at ``url`` (PostgreSQL, Redis, RabbitMQ) does not
    answer."""
    from testbed.services import reachable

    if not reachable(url, default_port):
        skip(benchmark, f"{what} not reachable at {url}")


def machine() -> dict[str, Any]:
    """What the figures were measured on: the CPU's model (``cpu``, Linux), ``cores``, ``ram_gb``, the
    architecture, Python and the platform."""
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        info["cpu"] = next(
            (line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if "model name" in line), ""
        )
        meminfo = Path("/proc/meminfo").read_text().split()
        info["ram_gb"] = round(int(meminfo[1]) / 1024 / 1024, 1)
    except (OSError, IndexError, ValueError):
        pass
    return info


def ratio(measured: float | None, target: float | None, *, higher_is_better: bool) -> str:
    """``measured`` against ``target`` (a goal, or a peer's figure in the same run) as a printed ratio where
    1.00 or more meets it, marked ``(miss)`` below; empty when either is unknown."""
    if measured is None or target is None or measured <= 0:
        return ""
    value = measured / target if higher_is_better else target / measured
    return f"{value:.2f}{'' if value >= 1 else ' (miss)'}"


# ----------------------------------------------------------------------------------------------- CPU time


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one live process (``/proc/<pid>/stat``); 0.0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime: fields 14 and 15 of stat(5)


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of a process and its live descendants (a Celery worker and its pool process)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    total, pending = 0.0, [root]
    while pending:
        pid = pending.pop()
        total += process_cpu_seconds(pid)
        pending.extend(children.get(pid, []))
    return total


def children_cpu_seconds() -> float:
    """CPU seconds of this process's finished (waited-for) children, ``getrusage(RUSAGE_CHILDREN)``."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class BackendCpu:
    """CPU seconds of the PostgreSQL backends serving one database, sampled from ``/proc`` in a thread: per
    backend the last value seen, summed (backends that existed before ``start`` count from their value
    then). Reading another user's backends needs root or the ``postgres`` user (``readable`` says)."""

    def __init__(self, dsn: str, database: str, every: float = 0.2) -> None:
        self.dsn, self.database, self.every = dsn, database, every
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.readable = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self, connection: Any, initial: bool) -> None:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.database,)
        ).fetchall()
        for (pid,) in rows:
            try:
                Path(f"/proc/{pid}/stat").read_bytes()
            except PermissionError:  # /proc mounted with hidepid
                self.readable = False
                continue
            except OSError:  # the backend ended between the query and the read
                continue
            seconds = process_cpu_seconds(int(pid))
            if initial:
                self.first[int(pid)] = seconds
            self.last[int(pid)] = max(seconds, self.last.get(int(pid), 0.0))

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as connection:
            self._sample(connection, initial=True)
            while not self._stop.wait(self.every):
                self._sample(connection, initial=False)
            self._sample(connection, initial=False)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    @property
    def seconds(self) -> float:
        return sum(value - self.first.get(pid, 0.0) for pid, value in self.last.items())
