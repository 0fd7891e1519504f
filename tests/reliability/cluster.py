"""A cluster of real processes on 127.0.0.1 for the reliability tests: a PostgreSQL and a Redis of the test's
own, on spare ports (restarting them disturbs nothing else; 127.0.0.1:5432 and :6379 are never touched),
fptrack workers and crawls as subprocesses, and a census of what the database holds afterwards.

::

    def test_something(cluster: Cluster) -> None:        # fixture (conftest.py): one cluster per test,
                                                         # torn down
        cluster.env["FPTRACK_STALL_SECONDS"] = "8"      # the FPTRACK_* environment of every process
                                                         # started after
        cluster.fptrack("works", "add", str(WORK))      # the CLI against the cluster (CompletedProcess;
                                                         # check=True)
        worker = cluster.start_worker("w1", beat=True)  # `fptrack worker -c 1` in a process group of its own
        with serve_site(copy_site(60)) as base:
            crawl = cluster.start_crawl(base, depth=1)   # `fptrack crawl` in the background
            worker.wait_until_holding()                  # a batch done, and a task in its hands now
            worker.kill()                                # SIGKILL to the whole group: main process and pool
            cluster.postgres.restart()                   # fast shutdown, start on the same port and data
            cluster.redis.restart()                      # SIGKILL and start again: every message lost
            result = crawl.wait()                        # CompletedProcess: returncode, stdout, stderr
        census = cluster.census(base)                    # pages, pending, matches by path, duplicates,
                                                         # orphans

PostgreSQL: one ``initdb`` and one ``fptrack init`` per test session (:class:`PostgresTemplate`), the data
directory copied for each test; started with ``fsync=off`` and small buffers, as the ``postgres`` user when we
run as root. Redis: ``--save "" --appendonly no``, so a restart loses everything, as a crashed broker without
persistence does. Every process is stopped when the cluster is closed, whatever the test did."""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from sqlalchemy import create_engine, func, select, text
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.housekeeping import count_orphans
from fptrack.storage.models import Chapter, CrawlJob, Match, Page
from testbed.sites import free_port
from tests.support.env import clean_environ

__all__ = [
    "POSTGRES_BIN",
    "Census",
    "Cluster",
    "Crawl",
    "PostgresServer",
    "PostgresTemplate",
    "RedisServer",
    "Worker",
]

POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
REPO = Path(__file__).resolve().parents[2]
DATABASE = "fptrack"
READY_SECONDS = 60.0
_PROCESS_PAGES_RESULT = re.compile(r"fptrack\.process_pages\[[^\]]+\] succeeded in [0-9.]+s: (\{.*\})")
_SWEEP_RESULT = re.compile(r"fptrack\.sweep\[[^\]]+\] succeeded in [0-9.]+s: (\{.*\})")


def _as_postgres(*argv: str) -> list[str]:
    """``argv`` run as the ``postgres`` user when we are root (PostgreSQL refuses to run as root)."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else list(argv)


def _give_to_postgres(path: Path) -> None:
    """Make ``path`` the ``postgres`` user's when we are root (else it is ours, and so is the server)."""
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def _wait_until(ready: Callable[[], bool], what: str, timeout: float = READY_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} within {timeout:.0f} s")


def _stop_group(process: subprocess.Popen[bytes] | subprocess.Popen[str], sig: int, timeout: float) -> None:
    """Send ``sig`` to the process group the process leads (started with ``start_new_session``); SIGKILL the
    group if it is still there after ``timeout``."""
    if process.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
    with suppress(ProcessLookupError):  # children that outlived their leader
        os.killpg(process.pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------------------------
# PostgreSQL


class PostgresServer:
    """One PostgreSQL server on ``127.0.0.1:<port>`` over ``data_dir`` (owned by the ``postgres`` user)."""

    def __init__(self, data_dir: Path, log_path: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.port = port or free_port()
        self.restarts = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                _as_postgres(
                    str(POSTGRES_BIN / "postgres"),
                    "-D",
                    str(self.data_dir),
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.data_dir),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "shared_buffers=16MB",
                    "-c",
                    "max_connections=60",
                    "-c",
                    "autovacuum=off",
                ),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait_until(self._accepting, f"PostgreSQL on port {self.port} did not accept connections")

    def _accepting(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"PostgreSQL on port {self.port} exited ({self._process.returncode}):\n{tail}")
        probe = [str(POSTGRES_BIN / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)]
        return subprocess.run(probe, check=False).returncode == 0

    def stop(self, mode: str = "fast") -> None:
        """Shut down: ``fast`` (clients disconnected, a clean checkpoint) or ``immediate`` (as after a
        crash)."""
        process, self._process = self._process, None
        if process is None:
            return
        sig = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT}[mode]
        postmaster = self.data_dir / "postmaster.pid"
        try:
            # runuser leads the group; the postmaster is its child, and its shutdown modes are signals to it
            os.kill(int(postmaster.read_text().split()[0]), sig)
        except (OSError, ValueError, IndexError):
            pass  # already gone: the group is stopped below
        _stop_group(process, sig, timeout=60)

    def restart(self) -> None:
        """Fast shutdown, then start on the same port and data (open connections are cut, as in a real
        restart)."""
        self.stop("fast")
        self.start()
        self.restarts += 1


@dataclass
class PostgresTemplate:
    """A data directory made once per test session (``initdb``, ``CREATE DATABASE``, ``fptrack init``), copied
    for each test: a migrated database in well under a second."""

    root: Path
    data_dir: Path

    @classmethod
    def build(cls) -> PostgresTemplate:
        root = Path(tempfile.mkdtemp(prefix="fptrack-reliability-"))
        _give_to_postgres(root)  # the server's user must reach its data directories
        data_dir = root / "template"
        initdb = _as_postgres(
            str(POSTGRES_BIN / "initdb"),
            "-D",
            str(data_dir),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        )
        subprocess.run(initdb, check=True, capture_output=True)
        server = PostgresServer(data_dir, root / "template.log")
        server.start()
        try:
            admin = create_engine(server.url.rsplit("/", 1)[0] + "/postgres", isolation_level="AUTOCOMMIT")
            with admin.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{DATABASE}"'))
            admin.dispose()
            env = {**_base_env(), "FPTRACK_DATABASE_URL": server.url, "FPTRACK_DATA_DIR": str(root / "data")}
            subprocess.run(
                [sys.executable, "-m", "fptrack.cli", "init"],
                env=env,
                cwd=REPO,
                check=True,
                capture_output=True,
            )
        finally:
            server.stop("fast")
        return cls(root, data_dir)

    def copy(self, name: str) -> Path:
        target = self.root / name / "pgdata"
        target.parent.mkdir()
        _give_to_postgres(target.parent)
        subprocess.run(["cp", "-a", str(self.data_dir), str(target)], check=True)
        (target / "postmaster.pid").unlink(missing_ok=True)
        return target

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# --------------------------------------------------------------------------------------------------------
# Redis


class RedisServer:
    """A Redis of the test's own on ``127.0.0.1:<port>``, without persistence."""

    def __init__(self, work_dir: Path, log_path: Path) -> None:
        self.work_dir = work_dir
        self.log_path = log_path
        self.port = free_port()
        self.restarts = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.work_dir),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait_until(self._answers, f"Redis on port {self.port} did not answer PING")

    def _answers(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1).ping())
        except redis.ConnectionError:
            return False

    def queue_length(self, queue: str = "fptrack") -> int:
        """Messages waiting in a Celery queue (a Redis list of that name)."""
        import redis

        return int(redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5).llen(queue))

    def stop(self) -> None:
        """SIGKILL: what is in memory (queued and unacknowledged messages, results) is gone."""
        process, self._process = self._process, None
        if process is not None:
            _stop_group(process, signal.SIGKILL, timeout=30)

    def restart(self) -> None:
        self.stop()
        self.start()
        self.restarts += 1


# ------------------------------------------------------------------------------------------ fptrack processes


def _base_env() -> dict[str, str]:
    """This process's environment without any FPTRACK_* setting (the cluster sets its own)."""
    return clean_environ()


@dataclass
class Worker:
    """An ``fptrack worker`` process group and its log."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, needle: str, *, count: int = 1, timeout: float = 120) -> None:
        """Wait until ``needle`` appears ``count`` times in the log."""
        _wait_until(
            lambda: self.log().count(needle) >= count, f"worker {self.name}: {needle!r} x{count}", timeout
        )

    def tasks_held(self) -> int:
        """Tasks received and not yet ended (succeeded, failed or retried), by the log."""
        log = self.log()
        ended = sum(log.count(f"] {outcome}") for outcome in ("succeeded", "raised", "retry:"))
        return log.count("] received") - ended

    def wait_until_holding(self, *, after_batches: int = 1, timeout: float = 120) -> None:
        """Wait until the worker has finished ``after_batches`` ``process_pages`` tasks and holds a task now
        (received, not ended)."""
        _wait_until(
            lambda: len(list(_PROCESS_PAGES_RESULT.finditer(self.log()))) >= after_batches,
            f"worker {self.name}: {after_batches} process_pages task(s) finished",
            timeout,
        )
        _wait_until(lambda: self.tasks_held() > 0, f"worker {self.name} never held a task", timeout)

    def pages_done(self) -> list[int]:
        """Ids of the pages this worker's finished ``process_pages`` tasks compared (their logged results), in
        order: a page compared twice appears twice."""
        done: list[int] = []
        for found in _PROCESS_PAGES_RESULT.finditer(self.log()):
            done.extend(int(page_id) for page_id in ast.literal_eval(found.group(1))["done"])
        return done

    def swept_pages(self) -> int:
        """Pages the ``fptrack.sweep`` tasks this worker ran handed on again (their logged results)."""
        return sum(
            int(ast.literal_eval(found.group(1))["pages"]) for found in _SWEEP_RESULT.finditer(self.log())
        )

    def kill(self) -> None:
        """SIGKILL to the worker's whole group (main process and pool child), whatever it is doing."""
        _stop_group(self.process, signal.SIGKILL, timeout=30)

    def stop(self) -> None:
        """A warm shutdown (SIGTERM), then SIGKILL if it takes too long."""
        _stop_group(self.process, signal.SIGTERM, timeout=30)


@dataclass
class Crawl:
    """A background ``fptrack crawl``; its output goes to files (a pipe left unread could block it)."""

    process: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path

    def wait(self, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        self.process.wait(timeout=timeout)
        return subprocess.CompletedProcess(
            self.process.args,
            self.process.returncode,
            self.stdout_path.read_text(errors="replace"),
            self.stderr_path.read_text(errors="replace"),
        )

    def stop(self) -> None:
        _stop_group(self.process, signal.SIGKILL, timeout=30)


@dataclass(frozen=True)
class Census:
    """What the cluster's database holds after a run: the figures a reliability test reports and asserts
    on."""

    pages: int
    not_compared: int
    # page path -> chapter ranks (0 = the work's first chapter), one per match row
    matches: dict[str, list[int]]
    duplicate_matches: int  # (page, chapter) pairs held by more than one row
    duplicate_fingerprints: int  # (page, kind) pairs held by more than one fingerprint
    index_rows_off: int  # page_codes rows inconsistent in themselves, and page-side code_index rows
    unfingerprinted: int  # compared pages with text and no page_codes row
    orphans: dict[str, int]
    jobs: list[tuple[str, str]]  # (status, error) of every crawl job, oldest first

    def lost_or_duplicated(self, expected: dict[str, int]) -> dict[str, object]:
        """Everything that went wrong against the expected copies (path -> chapter rank); empty when
        nothing."""
        found = {path: ranks for path, ranks in self.matches.items()}
        problems: dict[str, object] = {
            "pages not compared": self.not_compared,
            "copies missed": sorted(p for p in expected if expected[p] not in found.get(p, [])),
            "unexpected matches": sorted(p for p, ranks in found.items() if set(ranks) - {expected.get(p)}),
            "duplicate matches": self.duplicate_matches
            + sum(len(ranks) - len(set(ranks)) for ranks in found.values()),
            "duplicate fingerprints": self.duplicate_fingerprints,
            "index rows off": self.index_rows_off,
            "compared without fingerprints": self.unfingerprinted,
            "orphan rows": sum(self.orphans.values()),
        }
        return {name: value for name, value in problems.items() if value}


@dataclass
class Cluster:
    """The processes of one reliability test (see the module docstring)."""

    work_dir: Path
    postgres: PostgresServer
    redis: RedisServer
    env: dict[str, str] = field(default_factory=dict)
    workers: list[Worker] = field(default_factory=list)
    crawls: list[Crawl] = field(default_factory=list)
    _logs: list[IO[bytes]] = field(default_factory=list)

    @classmethod
    @contextmanager
    def running(cls, template: PostgresTemplate, work_dir: Path) -> Iterator[Cluster]:
        """Start PostgreSQL (a copy of ``template``) and Redis; stop every process on the way out."""
        data = template.copy(work_dir.name + "-" + os.urandom(4).hex())
        postgres = PostgresServer(data, work_dir / "postgres.log")
        redis_server = RedisServer(work_dir, work_dir / "redis.log")
        cluster = cls(work_dir, postgres, redis_server)
        try:
            postgres.start()
            redis_server.start()
            cluster.env = {
                **_base_env(),
                "FPTRACK_DATA_DIR": str(work_dir / "data"),
                "FPTRACK_DATABASE_URL": postgres.url,
                "FPTRACK_BROKER_URL": redis_server.url,
                "FPTRACK_CRAWL_TIMEOUT": "10",
                "FPTRACK_CRAWL_AUTOTHROTTLE": "false",
            }
            yield cluster
        finally:
            cluster.close()
            shutil.rmtree(data.parent, ignore_errors=True)

    def close(self) -> None:
        for crawl in self.crawls:
            crawl.stop()
        for worker in self.workers:
            worker.kill()
        self.redis.stop()
        self.postgres.stop("immediate")
        for log in self._logs:
            log.close()

    @property
    def settings(self) -> Settings:
        return Settings.from_env(self.env)

    def _spawn(
        self, argv: list[str], stdout: Path, stderr: Path | None, env: dict[str, str]
    ) -> subprocess.Popen[bytes]:
        out = open(stdout, "ab")  # noqa: SIM115 - closed with the cluster
        err = open(stderr, "ab") if stderr is not None else None  # noqa: SIM115
        self._logs += [f for f in (out, err) if f is not None]
        return subprocess.Popen(
            [sys.executable, "-m", "fptrack.cli", *argv],
            env={**self.env, **env},
            cwd=REPO,
            stdout=out,
            stderr=err if err is not None else subprocess.STDOUT,
            start_new_session=True,
        )

    def fptrack(
        self, *args: str, check: bool = True, timeout: float = 300, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the CLI to its end against the cluster (``env``: settings of this run only)."""
        result = subprocess.run(
            [sys.executable, "-m", "fptrack.cli", *args],
            env={**self.env, **(env or {})},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"fptrack {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}"
            )
        return result

    def start_worker(self, name: str, *, beat: bool = False, **env: str) -> Worker:
        """``fptrack worker -c 1`` (``--beat`` too if asked), logging at INFO to ``<work_dir>/<name>.log``."""
        argv = ["worker", "--concurrency", "1", "--loglevel", "INFO", *(["--beat"] if beat else [])]
        log_path = self.work_dir / f"{name}.log"
        worker = Worker(name, self._spawn(argv, log_path, None, env), log_path)
        self.workers.append(worker)
        return worker

    def start_crawl(
        self, base: str, *, depth: int = 1, max_pages: int = 1000, name: str = "crawl", **env: str
    ) -> Crawl:
        """``fptrack crawl <base>/`` allowed to reach its loopback site, in the background."""
        site = base.split("://", 1)[1]
        argv = [
            "crawl",
            base + "/",
            "--allow-private-host",
            site,
            "--depth",
            str(depth),
            "--max-pages",
            str(max_pages),
            "-q",
        ]
        stdout, stderr = self.work_dir / f"{name}.out", self.work_dir / f"{name}.err"
        crawl = Crawl(self._spawn(argv, stdout, stderr, env), stdout, stderr)
        self.crawls.append(crawl)
        return crawl

    def count_pages(self) -> tuple[int, int]:
        """(pages stored, pages compared) now."""
        engine = create_engine(self.postgres.url)
        try:
            with Session(engine) as session:
                stored = session.scalar(select(func.count()).select_from(Page)) or 0
                done = session.scalar(
                    select(func.count()).select_from(Page).where(Page.compared_at.is_not(None))
                )
                return int(stored), int(done or 0)
        finally:
            engine.dispose()

    def census(self, base: str) -> Census:
        """Read back what the database holds (page paths relative to ``base``)."""
        engine = create_engine(self.postgres.url)
        try:
            with Session(engine) as session:
                return _census(session, base)
        finally:
            engine.dispose()


def _census(session: Session, base: str) -> Census:
    ranks: dict[int, int] = {}
    for work_id in sorted(set(session.scalars(select(Chapter.work_id)))):
        ordered = session.scalars(
            select(Chapter.id).where(Chapter.work_id == work_id).order_by(Chapter.index)
        )
        ranks.update({int(chapter_id): rank for rank, chapter_id in enumerate(ordered)})
    matches: dict[str, list[int]] = {}
    pairs: Counter[tuple[int, int]] = Counter()
    for url, page_id, chapter_id in session.execute(
        select(Page.url, Match.page_id, Match.chapter_id).join(Page, Page.id == Match.page_id)
    ):
        matches.setdefault(str(url).removeprefix(base), []).append(ranks[int(chapter_id)])
        pairs[(int(page_id), int(chapter_id))] += 1

    def scalar(sql: str) -> int:
        return int(session.execute(text(sql)).scalar() or 0)

    return Census(
        pages=scalar("SELECT COUNT(*) FROM pages"),
        not_compared=scalar("SELECT COUNT(*) FROM pages WHERE compared_at IS NULL"),
        matches={path: sorted(found) for path, found in sorted(matches.items())},
        duplicate_matches=sum(n - 1 for n in pairs.values()),
        duplicate_fingerprints=scalar(
            "SELECT COUNT(*) FROM (SELECT page_id, kind FROM fingerprints WHERE page_id IS NOT NULL "
            "GROUP BY page_id, kind HAVING COUNT(*) > 1) d"
        ),
        # a page keeps one page_codes row (revision 0016): its template keys (revision 0022: a marker byte,
        # then 4 bytes each; rows written before: whole 8-byte hashes) and a sample drawn from the same text,
        # never empty when they are not; and no code_index rows at all
        index_rows_off=scalar(
            "SELECT COUNT(*) FROM page_codes c WHERE NOT (octet_length(c.winnow) % 8 = 0 OR "
            "(octet_length(c.winnow) % 4 = 1 AND substring(c.winnow from 1 for 1) = '\\x20'::bytea)) OR "
            "(CASE WHEN octet_length(c.winnow) % 4 = 1 THEN octet_length(c.winnow) > 1 "
            "ELSE octet_length(c.winnow) > 0 END) <> (COALESCE(cardinality(c.sample), 0) > 0)"
        )
        + scalar("SELECT COUNT(*) FROM code_index WHERE owner <> 0"),
        unfingerprinted=scalar(
            "SELECT COUNT(*) FROM pages p WHERE p.compared_at IS NOT NULL AND p.status = 200 AND "
            "octet_length(p.text_z) > 0 AND NOT EXISTS (SELECT 1 FROM page_codes c WHERE c.page_id = p.id)"
        ),
        orphans=count_orphans(session),
        jobs=[
            (str(status), str(error or ""))
            for status, error in session.execute(
                select(CrawlJob.status, CrawlJob.error).order_by(CrawlJob.id)
            )
        ],
    )
