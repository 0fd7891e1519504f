"""The embedded crawl's compare stage in a child process of its own (issue 20).

With no broker (``Settings.tasks_in_process``) a crawl is one process, and under one process the GIL
serialises Scrapy's thread (engine, middlewares, decoding, extraction, storing) and the thread that compares
each batch of stored pages (fingerprint, index, compare, record: :func:`jobs.tasks.process_pages`), about a
third of a page's CPU. :class:`CompareProcess` moves that stage into ONE child process, so that the two
halves run on two cores; a PostgreSQL deployment gets the same from Celery workers.

The rule (:func:`compare_in_child`): a crawl run by :func:`jobs.crawls.run_crawl_job` with tasks in-process
compares in a child when its database can be opened by another process (any but an in-memory SQLite) and
``FPTRACK_COMPARE_PROCESS`` is not ``false``;
``run_crawl_job(compare_process=False)`` keeps everything in the crawl's own thread, as does a dispatcher
built without a child (what the fault tests drive directly).

How it stays correct:

- **Committed first.** The crawl stores each batch of pages and commits it (:class:`crawler.store.PageStore`)
  before the batch's ids are sent; the child receives ids only, and opens its own engine and sessions from
  the same :class:`Settings` (sent pickled at start). Nothing is lost if either process dies: a page stored
  and not compared keeps ``compared_at`` NULL, which the crawl, the sweep and ``fptrack maintain`` look for.
- **Confirmed, or compared again here.** The child confirms each batch after its commit. A batch it could not
  compare (an error it did not retry away) is compared again by the crawl process, in its thread, so that the
  error surfaces as it would without the child. If the child dies (killed, crashed), the crawl notices at its
  next batch or while waiting for the last ones, compares every batch the child had not confirmed in its own
  thread, and keeps comparing there until the crawl ends (no second child: a child that dies once may die
  again). ``process_pages`` skips pages already compared, so a batch committed by the child just before it
  died is not compared twice, and matches are upserts keyed by (page, chapter) besides. A child that confirms
  nothing for ``FPTRACK_STALL_SECONDS`` while the crawl waits for it (hung, stopped) is killed, and its
  batches compared here.
- **Split at the end, in the child.** The child is sent at most :data:`IN_FLIGHT` batches ahead of its
  confirmations; the others wait in the crawl process. When the crawl has stored its last page, they are sent
  at once, as the last message; the child, which reads ahead what the crawl sent, forks a helper that
  compares about half of the pages of those and of the batches it holds and has not begun (when each part
  has :data:`SPLIT_MIN_PAGES`) while it compares the rest: the crawl's process is done with the cores by
  then, and a process forked from the child starts warm (the registry's codes, the per-code-point tables and
  the tokenizer loaded), where the crawl's own thread would first load them (~0.6 s) and a fresh process for
  a second. The helper opens connections of its own and leaves the child's untouched
  (:func:`taskqueue.reopen_after_fork`); the child relays its confirmations, and compares again whatever
  batch the helper did not confirm (it died); a helper whose child is gone stops after its batch. A batch is
  compared by one process only, save after a death, when ``process_pages`` skips the pages already compared.
- **Drained, then settled in the child.** :meth:`CompareProcess.finish` waits until every batch is confirmed
  (or compared here); only then do the crawl's sites settle, in the child (:meth:`CompareProcess.settle`),
  which has the registry and the fingerprint code loaded, or in the crawl's process when the child is gone
  or its settling failed (rolled back). :meth:`CompareProcess.end` then sends the end of the work, without
  waiting for the child's exit.
- **SQLite.** The crawl's store and the child write to one file: each waits for the other through the busy
  timeout (:func:`storage.db.create_engine_for`), and a batch is tried again whole while "database is locked"
  persists (:func:`storage.db.retry_while_unreachable`).
- **Stopped with the crawl.** The child ignores SIGINT (a Ctrl+C in a terminal reaches the whole process
  group: the crawl decides what stops); the crawl terminates it when the job ends however it ends
  (:meth:`CompareProcess.stop`), and it is a daemon, which multiprocessing ends at the crawl's exit. A crawl
  killed outright closes the pipe: the child ends at its next read.

The child is started with ``spawn`` (a fresh interpreter), never ``fork``: the crawl process runs Scrapy's
reactor and other threads, whose locks a forked child would inherit held.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from sqlalchemy.engine import make_url

from fptrack.core.settings import Settings
from fptrack.storage.db import retry_while_unreachable

__all__ = ["CompareProcess", "ConfiguredTasks", "compare_batch", "compare_in_child", "start_early"]

log = logging.getLogger(__name__)

IN_FLIGHT = 2
"""Batches sent to the child and not confirmed yet, at most: one it compares, one waiting in the pipe so that
it never waits for the next; the rest wait in the crawl process, which sends them all at the end."""
SPLIT_MIN_PAGES = 8
"""The crawl's last batches are split between the child and a helper forked from it when each would compare
at least this many pages (a fork costs a few milliseconds)."""
STOP_SECONDS = 5.0
"""How long :meth:`CompareProcess.stop` lets the child end after SIGTERM before killing it."""
POLL_SECONDS = 0.5


def compare_in_child(settings: Settings) -> bool:
    """Whether a crawl with ``settings`` compares in a child process: tasks in-process, on a database another
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
    whose retry gives up at once (raising ``Retry``) while the database restarts: the batch is one unit of
    work, safe to run again whole."""

    def compare() -> None:
        tasks.process_pages.run(page_ids)

    retry_while_unreachable(compare, what=f"comparing a batch of {len(page_ids)} page(s)")


class ConfiguredTasks:
    """:mod:`jobs.tasks`, configured for ``settings`` at its first use (``tasks.configure``, once: configuring
    again forgets the chapter index loaded): an embedded crawl whose child does the comparing never needs it,
    and importing it (Celery's app, the compare code: ~0.2 s) would delay the crawl's first request. Shared by
    the crawl job and its :class:`CompareProcess`; attributes are the module's."""

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


def start_early(settings: Settings) -> CompareProcess | None:
    """A started child for a crawl about to begin in this process (``run_crawl_job(child=...)``), or None
    when the crawl would not compare in a child (:func:`compare_in_child`). Started before the crawl's own
    imports (Scrapy, the job's rows), the child's (the compare code, the registry's codes: ~1 s) run beside
    them on the other core instead of after them; it is otherwise the child ``run_crawl_job`` starts. The
    caller stops it (:meth:`CompareProcess.stop`) when the crawl never starts."""
    if not compare_in_child(settings):
        return None
    child = CompareProcess(settings)
    child.start()
    return child


class CompareProcess:
    """The child that compares the crawl's batches, seen from the crawl (see the module docstring).

    :meth:`submit` is called by the crawl's store thread after each commit; :meth:`finish` and :meth:`stop`
    by the crawl's main thread once the store thread has drained. A lock keeps the pipe to one thread at a
    time all the same. ``compare_here`` compares a batch in the calling thread: what a batch the child did not
    confirm falls back to (by default :func:`compare_batch` with ``tasks``, :class:`ConfiguredTasks` for
    ``settings`` unless given)."""

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
        self._process: BaseProcess | None = None
        self._connection: Connection | None = None
        self._unconfirmed: dict[int, list[int]] = {}  # batch number -> its page ids, sent and not confirmed
        self._waiting: deque[list[int]] = deque()  # committed batches not sent yet (IN_FLIGHT are out)
        self._window: int | None = IN_FLIGHT  # batches the child may hold unconfirmed (None: any, at the end)
        self._next_batch = 0
        self.confirmed = 0  # pages of the batches the child confirmed
        self.compared_here = 0  # pages of the batches compared again in the crawl's thread
        self.sent_last = 0  # batches sent in the last message (split by the child with a helper)
        self.helped = 0  # pages of the batches the child's helper compared (of those confirmed)
        self.died = ""  # why the child is gone before its work was done ('' while it is not)

    def start(self) -> None:
        """Start the child (its imports overlap Scrapy's start-up); a child that cannot be started leaves the
        stage in the crawl's thread."""
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe(duplex=True)
        process = context.Process(
            target=_child_main,
            args=(theirs, self.settings, logging.getLogger().getEffectiveLevel()),
            name="fptrack-compare",
            daemon=True,
        )
        try:
            process.start()
        except Exception as error:  # noqa: BLE001 - any reason at all: the crawl's thread compares instead
            ours.close()
            theirs.close()
            self.died = f"could not start ({type(error).__name__}: {error})"
            log.warning("compare stage: the child process %s; comparing in the crawl's process", self.died)
            return
        theirs.close()  # the child holds its end: when it dies, our reads see the end of the pipe
        self._process, self._connection = process, ours
        log.debug("compare stage: child process %s started", process.pid)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def in_use(self) -> bool:
        """True while batches go to the child (it was started and has neither died nor finished)."""
        return self._connection is not None and not self.died

    def submit(self, page_ids: list[int]) -> None:
        """Hand a committed batch to the child (sent at once, or when it has confirmed enough); compare it
        here when the child is gone."""
        with self._lock:
            if self.in_use:
                self._waiting.append(list(page_ids))
                self._collect(wait=0.0)  # confirmations read, the child topped up
                return
            self._compare_here(page_ids)

    @property
    def _outstanding(self) -> int:
        """Batches not confirmed yet: sent to the child, or waiting to be."""
        return len(self._unconfirmed) + len(self._waiting)

    def _send_waiting(self) -> None:
        """Send waiting batches while the child has fewer than :data:`IN_FLIGHT` unconfirmed (during the
        crawl; at its end, all of them)."""
        while self._waiting and self.in_use:
            if self._window is not None and len(self._unconfirmed) >= self._window:
                return
            assert self._connection is not None
            page_ids = self._waiting.popleft()
            batch = self._next_batch
            self._next_batch += 1
            self._unconfirmed[batch] = page_ids
            try:
                self._connection.send((batch, page_ids))
            except OSError as error:  # the child's end is closed: it died
                del self._unconfirmed[batch]
                self._waiting.appendleft(page_ids)  # compared by _lost, with the rest
                self._lost(f"{type(error).__name__}: {error}")

    def _send_last(self) -> None:
        """Send every waiting batch in one message, the last, which the child splits with a helper together
        with the batches it holds and has not begun."""
        assert self._connection is not None
        batches = []
        while self._waiting:
            batches.append((self._next_batch, self._waiting.popleft()))
            self._unconfirmed[self._next_batch] = batches[-1][1]
            self._next_batch += 1
        try:
            self._connection.send(("last", batches))
        except OSError as error:  # the child's end is closed: it died
            self._lost(f"{type(error).__name__}: {error}")  # compares the batches, now unconfirmed, here
            return
        self.sent_last = len(batches)

    def finish(self) -> None:
        """Wait until every batch is confirmed (or, the child gone or stalled, compared here). The child
        stays, idle, for :meth:`settle`; :meth:`end` lets it go."""
        with self._lock:
            if self._connection is None:
                return
            # the crawl has stored its last page: what waits goes to the child at once, as the last message
            self._collect(wait=0.0)
            self._window = None
            if self.in_use:  # else the waiting batches were compared here when the child was found gone
                self._send_last()
            left, since = self._outstanding, time.monotonic()
            while left and not self.died:
                self._collect(wait=POLL_SECONDS)
                if self._outstanding != left:
                    left, since = self._outstanding, time.monotonic()
                elif time.monotonic() - since >= self.settings.stall_seconds:
                    self._kill_stalled(time.monotonic() - since)

    def settle(self, site_ids: Collection[int]) -> bool:
        """Settle the crawl's sites (:func:`jobs.pipeline.settle_sites`) in the child, after :meth:`finish`:
        it holds the registry's codes and the fingerprint code loaded already, which this process would load
        for the settling alone. True when the child settled them; False when it could not (gone, or the
        settling failed there: its transaction rolled back) and the caller settles them itself. No stall
        limit: settling a large site takes as long as it takes, and a child that dies is seen."""
        with self._lock:
            if not site_ids or not self.in_use or self._unconfirmed or self._waiting:
                return False
            assert self._connection is not None
            try:
                self._connection.send(("settle", sorted(site_ids)))
                while not self._connection.poll(POLL_SECONDS):
                    if self._process is not None and self._process.exitcode is not None:
                        raise EOFError("the child ended")
                outcome, why = self._connection.recv()
            except (EOFError, OSError) as error:
                self._lost(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)
                return False
            if outcome != "settled":
                log.warning("compare stage: the child could not settle the crawl's sites (%s): settling them "
                            "here", why)  # fmt: skip
                return False
            return True

    def end(self) -> None:
        """Send the end of the work and let the child go, without waiting for its exit (:meth:`stop` reaps
        it); idempotent."""
        with self._lock:
            if self.in_use:
                assert self._connection is not None
                try:
                    self._connection.send(None)
                except OSError:
                    pass  # gone already: nothing was left to it

    def stop(self) -> None:
        """End the child now, whatever it holds (an interrupted or failed crawl: a batch it was comparing
        rolls back and, with the batches still waiting here, stays for the sweep). Idempotent; also after
        :meth:`finish`."""
        with self._lock:
            self._close(terminate=True)

    def _collect(self, wait: float) -> None:
        """Read the child's answers (waiting up to ``wait`` seconds for the first); notice it died."""
        assert self._connection is not None
        self._send_waiting()
        try:
            ready = self._connection.poll(wait)
            while ready:
                answer = self._connection.recv()
                self._answered(answer)
                ready = self._connection.poll(0)
        except (EOFError, OSError) as error:
            # the child's end closed: dead if it still owed batches; with nothing left to confirm it finished
            # (the end of the work read), and a batch sent later finds the pipe closed
            if self._unconfirmed:
                self._lost(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)
            return
        if self._unconfirmed:  # a child that ended with nothing left to confirm finished its work
            process = self._process
            if process is not None and process.exitcode is not None and not self._connection.poll(0):
                self._lost("ended")
                return
        self._send_waiting()

    def _answered(self, answer: tuple[str, int, str]) -> None:
        outcome, batch, error = answer
        page_ids = self._unconfirmed.pop(batch, None)
        if page_ids is None:
            return
        if outcome == "done":  # error: "" (the child compared it) or "helper" (its helper did, at the end)
            self.confirmed += len(page_ids)
            self.helped += len(page_ids) if error == "helper" else 0
            return
        log.warning("compare stage: the child could not compare a batch of %d page(s) (%s): comparing it "
                    "here", len(page_ids), error)  # fmt: skip
        self._compare_here(page_ids)

    def _kill_stalled(self, seconds: float) -> None:
        """A child that confirmed nothing for ``FPTRACK_STALL_SECONDS`` while batches wait (hung, stopped) is
        killed, and its batches compared here (as stalled pages are handed on again with workers)."""
        process = self._process
        if process is None:
            return
        log.warning("compare stage: the child process confirmed nothing for %.0f s: killing it", seconds)
        process.kill()
        process.join()
        self._lost(f"stalled for {seconds:.0f} s, killed", told=True)

    def _lost(self, why: str, *, told: bool = False) -> None:
        """The child is gone: compare here what it had not confirmed, and every batch from now on. ``why`` is
        what the crawl saw (a closed pipe...), replaced by the child's exit status unless ``told`` (the crawl
        ended it, and ``why`` says why)."""
        if self.died:
            return
        process = self._process
        if process is not None:
            process.join(1.0)  # gone, or about to be: its exit status says more than a closed pipe
        code = process.exitcode if process is not None else None
        if told:
            self.died = why
        elif code is not None and code < 0:
            self.died = f"killed by {signal.Signals(-code).name}"
        elif code is not None:
            self.died = f"exit code {code}"
        else:
            self.died = why
        left = [page_ids for _, page_ids in sorted(self._unconfirmed.items())] + list(self._waiting)
        self._unconfirmed.clear()
        self._waiting.clear()
        log.warning("compare stage: the child process died (%s); comparing its %d unconfirmed page(s) and "
                    "the crawl's next pages in this process", self.died, sum(map(len, left)))  # fmt: skip
        for page_ids in left:
            self._compare_here(page_ids)

    def _compare_here(self, page_ids: list[int]) -> None:
        self.compare_here(page_ids)
        self.compared_here += len(page_ids)

    def _close(self, *, terminate: bool) -> None:
        process, connection = self._process, self._connection
        self._process = self._connection = None
        if connection is not None:
            connection.close()
        if process is None:
            return
        if terminate and process.exitcode is None:
            process.terminate()
        process.join(STOP_SECONDS if terminate else None)
        if process.exitcode is None:
            log.warning("compare stage: the child process %s did not end on SIGTERM: killing it", process.pid)
            process.kill()
            process.join()
        process.close()


def _warm_up() -> None:
    """Load what comparing a page needs before the first batch arrives, while the crawl fetches its first
    pages (:func:`jobs.pipeline.warm_up`: ~0.5 s for 1,000 chapters, otherwise paid by the first batch, at the
    end of the queue of work). Only a head start: a failure is logged and left to the first batch."""
    from fptrack.jobs.pipeline import warm_up
    from fptrack.taskqueue import task_sessions, task_settings

    try:
        warm_up(task_sessions(), task_settings())
    except Exception:  # the first batch does it again, and says what fails
        log.debug("warming up the compare stage failed", exc_info=True)


def _settle(site_ids: list[int]) -> tuple[str, str]:
    """The child's answer to a request to settle ``site_ids``: ("settled", "") or ("failed", why)."""
    from fptrack.jobs.pipeline import settle_crawled_sites
    from fptrack.taskqueue import task_sessions, task_settings

    try:
        settle_crawled_sites(task_sessions(), site_ids, task_settings())
    except Exception as error:  # the crawl settles them itself, and raises it there
        log.exception("settling %d site(s) failed", len(site_ids))
        return "failed", f"{type(error).__name__}: {error}"
    return "settled", ""


def _is_last(message: Any) -> bool:
    """Whether ``message`` is the crawl's last batches (``("last", [(batch, ids), ...])``)."""
    return message is not None and message[0] == "last"


def _compare_one(
    connection: Connection, tasks: Any, batch: int, page_ids: list[int], *, by: str = ""
) -> bool:
    """Compare one batch and say so on ``connection`` (``done`` and ``by``: "" the child, "helper" its helper;
    or ``failed`` and why: the crawl compares it again and raises it there); True when it was compared."""
    try:
        compare_batch(tasks, page_ids)
    except Exception as error:
        log.exception("comparing a batch of %d page(s) failed", len(page_ids))
        connection.send(("failed", batch, f"{type(error).__name__}: {error}"))
        return False
    connection.send(("done", batch, by))
    return True


def _compare_split(
    connection: Connection, tasks: Any, batches: list[tuple[int, list[int]]]
) -> list[tuple[int, list[int]]]:
    """The crawl's last batches (see the module docstring): the first half to a helper forked from this
    process, the rest compared here; the helper's answers relayed to the crawl as they come, and what it did
    not answer compared here. The batches this process compared."""
    half = _half(batches)
    helper = _fork_helper(tasks, batches[:half], connection) if half else None
    theirs, ours = (batches[:half], batches[half:]) if helper is not None else ([], batches)
    answered: set[int] = set()

    def relay(wait: bool) -> None:
        """Relay the helper's answers that are ready (when ``wait``, all of them, to the end of its pipe)."""
        assert helper is not None
        with contextlib.suppress(EOFError, OSError):
            while wait or helper[1].poll(0):
                answer = helper[1].recv()
                answered.add(answer[1])
                connection.send(answer)

    done = []
    for batch, ids in ours:
        if _compare_one(connection, tasks, batch, ids):
            done.append((batch, ids))
        if helper is not None:
            relay(wait=False)
    if helper is not None:
        relay(wait=True)
        helper[1].close()
        os.waitpid(helper[0], 0)
        for batch, ids in theirs:  # the helper ended before answering them (it died): compared here
            if batch not in answered and _compare_one(connection, tasks, batch, ids):
                done.append((batch, ids))
    return done


def _half(batches: list[tuple[int, list[int]]]) -> int:
    """How many of the first ``batches`` make the helper's part: the split nearest half the pages; 0 (no
    helper) when either part would hold fewer than :data:`SPLIT_MIN_PAGES` pages."""
    sizes = [len(ids) for _, ids in batches]
    total = sum(sizes)
    before = list(itertools.accumulate(sizes))[:-1]  # the helper's pages when it takes 1, 2, ... batches
    if not before:
        return 0
    best = min(range(len(before)), key=lambda i: abs(2 * before[i] - total))
    if min(before[best], total - before[best]) < SPLIT_MIN_PAGES:
        return 0
    return best + 1


def _fork_helper(
    tasks: Any, batches: list[tuple[int, list[int]]], crawl: Connection
) -> tuple[int, Connection] | None:
    """Fork a process that compares ``batches`` and sends each answer on a pipe, closed at its end: (its pid,
    the pipe's end to read); None when it cannot be forked (the caller compares them). The helper closes its
    copy of the pipe to the crawl (``crawl``), which must see its end when the child ends."""
    reader, writer = multiprocessing.Pipe(duplex=False)
    try:
        pid = os.fork()
    except OSError:
        log.warning("could not fork a helper for the last batches: comparing them in this process")
        reader.close()
        writer.close()
        return None
    if pid:
        writer.close()
        return pid, reader
    status = 1
    try:  # the helper: never returns, never runs its parent's clean-up (os._exit)
        reader.close()
        crawl.close()  # this process's copy of the descriptor only
        from fptrack import taskqueue

        taskqueue.reopen_after_fork()
        parent = os.getppid()
        for batch, page_ids in batches:
            if os.getppid() != parent:
                break  # the child is gone (the crawl stopped it): the rest stays for the sweep
            _compare_one(writer, tasks, batch, page_ids, by="helper")
        status = 0
    except BaseException:
        log.exception("the helper comparing the last batches failed")
    finally:
        os._exit(status)


def _child_main(connection: Connection, settings: Settings, log_level: int) -> None:
    """The child: compare each batch of ids received, confirm it, until the end of the work (``None``) or of
    the pipe (the crawl is gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the crawl decides; it terminates this process
    logging.basicConfig(
        level=log_level, format="%(asctime)s %(levelname)s [compare stage] %(name)s: %(message)s"
    )
    from fptrack.jobs import tasks

    tasks.configure(settings)
    _warm_up()
    gc.freeze()  # the imports' objects: out of the collector's walks for the child's life (crawler.runner)
    started, pages, batches = time.process_time(), 0, 0
    queued: deque[Any] = deque()  # messages read ahead of the one at hand
    try:
        while True:
            try:  # read everything the crawl has sent so far: its last batches are split, those in hand too
                if not queued:
                    queued.append(connection.recv())
                while connection.poll(0):
                    queued.append(connection.recv())
            except (EOFError, OSError):
                return  # the crawl is gone: what was not confirmed stays for the sweep
            message = queued.popleft()
            if message is None:
                return
            if message[0] == "settle":
                connection.send(_settle(message[1]))
                continue
            if _is_last(message) or any(_is_last(ahead) for ahead in queued):
                work = []
                while not _is_last(message):
                    work.append(message)
                    message = queued.popleft()
                done = _compare_split(connection, tasks, [*work, *message[1]])
            else:
                done = [message] if _compare_one(connection, tasks, *message) else []
            pages, batches = pages + sum(len(ids) for _, ids in done), batches + len(done)
    finally:
        log.info("compared %d page(s) in %d batch(es), %.2f s of CPU", pages, batches,
                 time.process_time() - started)  # fmt: skip
        connection.close()
