"""The embedded crawl's compare stage in a process pool of its own.

With no broker (``Settings.tasks_in_process``), Scrapy and the compare stage would share one process and its
GIL. :class:`ComparePool` hands each committed batch of page ids to a
:class:`concurrent.futures.ProcessPoolExecutor` of one process (started with ``spawn``: the crawl runs threads
whose locks a fork would copy held), which runs the workers' task body (:func:`compare_batch`) after the
warm-up a worker does before its pool forks (:func:`jobs.bootstrap.warm_up`). What holds:

- **Committed before submitted**: the crawl's store commits a batch before handing on its ids; a page stored
  and not compared keeps ``compared_at`` NULL, which the crawl, the sweep and ``fptrack maintain`` look for.
- **Nothing lost**: a batch whose future fails (an error, or the pool broken by its process's death) is
  compared again in the crawl's thread, and so is every batch after a break; ``process_pages`` skips pages
  compared already. A process that completes nothing for ``FPTRACK_STALL_SECONDS`` while the crawl waits for
  it (hung, stopped) is killed, which breaks the pool.
- **Batches merged while the process lags**: at most :data:`IN_FLIGHT` batches are in the pool's hands; pages
  submitted meanwhile wait in the crawl's process and go as one batch of up to :data:`MAX_BATCH_PAGES`
  (a batch's fixed cost, ~18 ms of the process's CPU, paid once for several commits).
- **Stopped by the crawl**: the pool's process ignores SIGINT (the crawl decides) and is ended with the crawl
  (:meth:`ComparePool.stop`), or within a second of the crawl's death.
- **SQLite**: both processes wait for each other through the busy timeout, and a batch is tried again whole
  while the database is locked (:func:`storage.db.retry_while_unreachable`).
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.process import BaseProcess
from typing import Any

from sqlalchemy.engine import make_url

from fptrack.core.settings import Settings
from fptrack.jobs import PAGES_PER_TASK
from fptrack.storage.db import retry_while_unreachable

__all__ = ["ComparePool", "ConfiguredTasks", "compare_batch", "compare_in_pool", "start_early"]

log = logging.getLogger(__name__)

STOP_SECONDS = 5.0
"""How long :meth:`ComparePool.stop` lets the pool's process end before killing it."""

IN_FLIGHT = 2
"""Batches in the pool's hands at once: the one its process compares and the next, ready when it is done."""

MAX_BATCH_PAGES = 4 * PAGES_PER_TASK
"""The most pages handed to the pool as one batch (pages that waited while it lagged): each ``process_pages``
call pays a session, the registry's look-ups and the writes' statements once (~18 ms of CPU), so batches of
~100 pages cost the process ~10 % less CPU a page than the crawl's commits of ~25; bounded, so that a batch's
write transaction (the one SQLite write lock, which the crawl's page store waits on) stays short."""


def compare_in_pool(settings: Settings) -> bool:
    """Whether a crawl with ``settings`` compares in a process pool: tasks in-process, on a database another
    process can open (an in-memory SQLite database exists only in the connection that made it), from a
    process that may have children."""
    if not settings.tasks_in_process or not settings.compare_process:
        return False  # FPTRACK_COMPARE_PROCESS=false: a one-core machine gains nothing from a second process
    if multiprocessing.current_process().daemon:
        return False  # a daemonic process (a pool's) may not have children
    if settings.is_sqlite:
        url = make_url(settings.database_url)
        path = url.database or ""
        return bool(path) and path != ":memory:" and url.query.get("mode") != "memory"
    return True


def compare_batch(tasks: Any, page_ids: list[int]) -> None:
    """The fingerprint stage's task body for one batch (``tasks``: :mod:`jobs.tasks`), in the calling
    thread, tried again whole while the database is unreachable or locked. Not through Celery's eager mode,
    whose retry gives up at once (raising ``Retry``) while the database restarts."""

    def compare() -> None:
        tasks.process_pages.run(page_ids)

    retry_while_unreachable(compare, what=f"comparing a batch of {len(page_ids)} page(s)")


class ConfiguredTasks:
    """:mod:`jobs.tasks`, configured for ``settings`` at its first use (``tasks.configure``, once): a crawl
    whose pool does the comparing never needs it, and importing it (Celery's app, the compare code: ~0.2 s)
    would delay the crawl's first request. Attributes are the module's."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._module: Any = None

    def load(self) -> Any:
        """The module, imported and configured the first time."""
        if self._module is None:
            from fptrack.jobs import tasks

            tasks.configure(self._settings)
            self._module = tasks
        return self._module

    def __getattr__(self, name: str) -> Any:
        return getattr(self.load(), name)


def start_early(settings: Settings) -> ComparePool | None:
    """A started pool for a crawl about to begin in this process (``run_crawl_job(pool=...)``), or None when
    the crawl would not compare in one (:func:`compare_in_pool`). Started before the crawl's own imports, the
    pool's (the compare code, the registry's codes: ~1 s) run beside them on the other core. The caller stops
    it (:meth:`ComparePool.stop`)."""
    if not compare_in_pool(settings):
        return None
    pool = ComparePool(settings)
    pool.start()
    return pool


class ComparePool:
    """The crawl's compare stage (see the module docstring). :meth:`submit` is called by the crawl's store
    thread after each commit; :meth:`finish`, :meth:`settle`, :meth:`end` and :meth:`stop` by its main thread
    once the store thread has drained. ``compare_here`` compares a batch in the calling thread (by default
    :func:`compare_batch` with ``tasks``)."""

    def __init__(
        self,
        settings: Settings,
        compare_here: Callable[[list[int]], None] | None = None,
        *,
        tasks: ConfiguredTasks | None = None,
    ) -> None:
        self.settings = settings
        self.tasks = tasks or ConfiguredTasks(settings)
        self.compare_here = compare_here or (lambda page_ids: compare_batch(self.tasks, page_ids))
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None
        self._process: BaseProcess | None = None
        self._futures: dict[Future[None], list[int]] = {}  # batches in the pool's hands, not collected yet
        self._waiting: list[int] = []  # pages submitted while IN_FLIGHT batches were in its hands
        self._ended = False
        self.batches = 0  # batches handed to the pool's process
        self.compared = 0  # pages of the batches the pool compared
        self.compared_here = 0  # pages of the batches compared in the crawl's thread instead
        self.died = ""  # why the pool broke ('' while it has not)

    def start(self) -> None:
        """Start the pool's process now (its imports and warm-up overlap the crawl's start); a pool that
        cannot start leaves the stage in the crawl's thread."""
        executor = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_initialize,
            initargs=(self.settings, logging.getLogger().getEffectiveLevel(), os.getpid()),
        )
        before = set(multiprocessing.active_children())
        try:
            executor.submit(_ready)  # the process is spawned by the first submission
        except Exception as error:  # noqa: BLE001 - any reason at all: the crawl's thread compares instead
            executor.shutdown(wait=False, cancel_futures=True)
            self.died = f"could not start ({type(error).__name__}: {error})"
            log.warning("compare stage: the pool %s; comparing in the crawl's process", self.died)
            return
        started = [process for process in multiprocessing.active_children() if process not in before]
        self._executor, self._process = executor, started[0] if started else None
        log.debug("compare stage: pool process %s started", self.pid)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def in_use(self) -> bool:
        """True while batches go to the pool (started, not broken, not ended)."""
        return self._executor is not None and not self.died and not self._ended

    def submit(self, page_ids: list[int]) -> None:
        """Hand a committed batch to the pool (merged with the pages waiting for it, :meth:`_hand_on`);
        compare it here when the pool is broken."""
        with self._lock:
            self._collect()
            self._waiting.extend(page_ids)
            self._hand_on()

    def finish(self) -> None:
        """Wait until every batch submitted is compared (by the pool, or here when its future failed). A pool
        that completes no batch for ``stall_seconds`` (hung, stopped) is killed, its batches compared here."""
        with self._lock:
            self._hand_on()
            while self._futures:
                stall = self.settings.stall_seconds
                done, _ = wait(list(self._futures), timeout=stall, return_when=FIRST_COMPLETED)
                if not done:
                    self._kill_stalled(stall)
                self._collect()
                self._hand_on()

    def settle(self, site_ids: Collection[int]) -> bool:
        """Settle the crawl's sites (:func:`jobs.settling.settle_crawled_sites`) in the pool, after
        :meth:`finish`: its process has the registry and the fingerprint code loaded, which this one would
        load for the settling alone. False when it could not (broken, or the settling failed there and rolled
        back): the caller settles them itself."""
        with self._lock:
            if not site_ids or not self.in_use or self._futures or self._waiting:
                return False
            assert self._executor is not None
            try:
                self._executor.submit(_settle, sorted(site_ids)).result()
            except (BrokenProcessPool, RuntimeError) as error:
                self._broke(error)
                return False
            except Exception as error:  # noqa: BLE001 - settled here instead, which raises it
                log.warning("compare stage: the pool could not settle the crawl's sites (%s: %s): settling "
                            "them here", type(error).__name__, error)  # fmt: skip
                return False
            return True

    def end(self) -> None:
        """No more work: the pool's process exits once idle, not awaited (:meth:`stop` reaps it)."""
        with self._lock:
            if self._executor is not None and not self._ended:
                self._ended = True
                self._executor.shutdown(wait=False)

    def stop(self) -> None:
        """End the pool now, whatever it holds (an interrupted or failed crawl: a batch it was comparing rolls
        back and stays for the sweep, with those not begun). After :meth:`end`, the process is given
        :data:`STOP_SECONDS` to exit on its own. Idempotent."""
        with self._lock:
            executor, process = self._executor, self._process
            self._executor = self._process = None
            self._waiting.clear()  # stored, not compared: left for the sweep, as the batches not begun
            if executor is None:
                return
            executor.shutdown(wait=False, cancel_futures=True)
            if process is None:
                return
            if _exit_code(process, STOP_SECONDS if self._ended else 0) is not None:
                return
            process.terminate()
            if _exit_code(process, STOP_SECONDS) is None:
                log.warning("compare stage: the pool process %s ignored SIGTERM: killing it", process.pid)
                process.kill()
                process.join()

    def _hand_on(self) -> None:
        """Hand the waiting pages to the pool while it holds fewer than :data:`IN_FLIGHT` batches, at most
        :data:`MAX_BATCH_PAGES` a batch: while its process keeps up, each commit's pages go as they come;
        while it lags, what the commits meanwhile piled up goes as one batch. A broken pool's are compared
        here."""
        while self._waiting and self.in_use and len(self._futures) < IN_FLIGHT:
            assert self._executor is not None
            batch = self._waiting[:MAX_BATCH_PAGES]
            try:
                future = self._executor.submit(_compare, batch)
            except (BrokenProcessPool, RuntimeError) as error:
                self._broke(error)
            else:
                self._futures[future] = batch
                self.batches += 1
                del self._waiting[: len(batch)]
        while self._waiting and not self.in_use:
            batch = self._waiting[:MAX_BATCH_PAGES]
            del self._waiting[: len(batch)]
            self._compare_here(batch)

    def _collect(self) -> None:
        """Account for the batches whose futures are done: compared there, or compared here now."""
        for future in [future for future in self._futures if future.done()]:
            page_ids = self._futures.pop(future)
            error = future.exception()
            if error is None:
                self.compared += len(page_ids)
                continue
            if isinstance(error, BrokenProcessPool):
                self._broke(error)
            else:
                log.warning("compare stage: the pool could not compare a batch of %d page(s) (%s: %s): "
                            "comparing it here", len(page_ids), type(error).__name__, error)  # fmt: skip
            self._compare_here(page_ids)

    def _kill_stalled(self, stall: float) -> None:
        """The pool's process compared nothing for ``stall`` seconds: kill it, which breaks the pool (its
        batches then come back failed and are compared here)."""
        process = self._process
        if process is None or process.exitcode is not None:
            return
        self.died = f"stalled for {stall:.0f}s, killed"
        log.warning("compare stage: the pool process %s %s; comparing its batches in this process",
                    process.pid, self.died)  # fmt: skip
        process.kill()
        process.join(STOP_SECONDS)

    def _broke(self, error: BaseException) -> None:
        """The pool is broken (its process died): say why, once; from now on batches are compared here."""
        if self.died:
            return
        process = self._process
        # gone, or about to be: its exit status says more than the pool's error
        code = _exit_code(process, 1.0) if process is not None else None
        if code is not None and code < 0:
            self.died = f"killed by {signal.Signals(-code).name}"
        elif code:
            self.died = f"exit code {code}"
        else:  # alive, or ended of itself (its initializer failed: logged there)
            self.died = f"{type(error).__name__}: {error}"
        log.warning("compare stage: the pool process died (%s); comparing its unfinished batches and the "
                    "crawl's next pages in this process", self.died)  # fmt: skip

    def _compare_here(self, page_ids: list[int]) -> None:
        self.compare_here(page_ids)
        self.compared_here += len(page_ids)


def _exit_code(process: BaseProcess, timeout: float) -> int | None:
    """The exit code of ``process`` once it has ended, waiting up to ``timeout`` seconds; None while it runs.
    Its end is read from its sentinel, not from ``exitcode`` alone: the executor's own thread reaps a process
    that died, and ``exitcode`` reads None from the moment that thread has taken the status until it has
    recorded it."""
    if not multiprocessing.connection.wait([process.sentinel], timeout):
        return None
    recorded_by = time.monotonic() + 1.0
    while process.exitcode is None and time.monotonic() < recorded_by:
        time.sleep(0.005)
    return process.exitcode


# ------------------------------------------------------------------------------- in the pool's process

_tasks: Any = None


def _initialize(settings: Settings, log_level: int, crawl: int) -> None:
    """The pool process's set-up: SIGINT left to the crawl, an end with the crawl's (process ``crawl``), the
    task runtime for ``settings`` and the warm-up a worker does before its pool forks (a failure there is
    left to the first batch, which says what fails)."""
    global _tasks
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(
        level=log_level, format="%(asctime)s %(levelname)s [compare stage] %(name)s: %(message)s"
    )
    threading.Thread(target=_end_with, args=(crawl,), name="fptrack-watch-crawl", daemon=True).start()
    from fptrack.jobs.bootstrap import collector_paused, warm_up

    with collector_paused():  # the imports' and the registry's objects: out of the collector's walks
        from fptrack.jobs import tasks
        from fptrack.taskqueue import task_sessions

        tasks.configure(settings)
        _tasks = tasks
        try:
            warm_up(task_sessions(), settings)
        except Exception:  # the first batch does it again, and says what fails
            log.debug("warming up the compare stage failed", exc_info=True)


def _end_with(parent: int) -> None:
    """End this process when the crawl's (``parent``) is gone (killed outright): its batches stay for the
    sweep."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _ready() -> None:
    """The first submission: spawns the process (and so its warm-up) ahead of the first batch."""


def _compare(page_ids: list[int]) -> None:
    compare_batch(_tasks, page_ids)


def _settle(site_ids: list[int]) -> None:
    from fptrack.jobs.settling import settle_crawled_sites
    from fptrack.taskqueue import task_sessions, task_settings

    settle_crawled_sites(task_sessions(), site_ids, task_settings())
