"""CPU seconds of processes on this machine, read from ``/proc`` (Linux): one process, a process tree, and the
PostgreSQL backends serving one database (shared by ``benchmarks/capacity.py`` and
``benchmarks/admin_load.py``). Reading another user's backends needs root or the ``postgres`` user."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Self

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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


class BackendCpu:
    """CPU seconds of the PostgreSQL backends serving one database, sampled from ``/proc`` in a thread: per
    backend the last value seen, summed (backends that existed before ``start`` count from their value
    then)."""

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


def children_cpu_seconds() -> float:
    """CPU seconds of this process's finished (waited-for) children, ``getrusage(RUSAGE_CHILDREN)``."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
