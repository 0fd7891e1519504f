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


def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` from the third (state) on; [] when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def process_cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """User + system CPU seconds of one live process, with its reaped children's when ``reaped``; 0.0 when
    it is gone."""
    fields = _stat_fields(pid)
    if not fields:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)
    if reaped:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / CLOCK_TICKS


def tree_cpu_seconds(*roots: int) -> float:
    """CPU seconds of the processes ``roots`` and all their descendants, living or reaped (a Celery worker
    and its pool process)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))):
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, pending = 0.0, list(roots)
    while pending:
        pid = pending.pop()
        total += process_cpu_seconds(pid, reaped=True)  # a living child is not in its parent's cutime yet
        pending.extend(children.get(pid, []))
    return total


def children_cpu_seconds() -> float:
    """CPU seconds of this process's finished (waited-for) children and theirs,
    ``getrusage(RUSAGE_CHILDREN)``."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class BackendCpu:
    """CPU seconds of the PostgreSQL backends connected to ``database`` (their process title names it) while
    the block runs: sampled every ``every`` seconds, since a backend ends with its connection (its last
    interval may be missed); a backend seen at the start counts from there. Another user's backends are
    readable as root or as ``postgres`` (``readable`` says whether they were)."""

    def __init__(self, database: str, every: float = 0.2) -> None:
        self.marker = f" {database} ".encode()
        self.every = every
        self.readable = True
        self.start: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="backend-cpu", daemon=True)

    def _backends(self) -> dict[int, float]:
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                title = (entry / "cmdline").read_bytes()
            except PermissionError:  # /proc mounted with hidepid
                self.readable = False
                continue
            except OSError:  # gone between the listing and the read
                continue
            if title.startswith(b"postgres: ") and self.marker in title:
                found[int(entry.name)] = process_cpu_seconds(int(entry.name))
        return found

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.last.update({pid: cpu for pid, cpu in self._backends().items() if cpu})

    def __enter__(self) -> Self:
        self.start = self._backends()
        self.last = dict(self.start)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.last.update({pid: cpu for pid, cpu in self._backends().items() if cpu})

    @property
    def seconds(self) -> float:
        return sum(cpu - self.start.get(pid, 0.0) for pid, cpu in self.last.items())
