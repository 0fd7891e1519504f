"""The crawl service: one crawl job from start URLs to settled verdicts. The CLI, scheduled crawls and tests
call :func:`run_crawl_job`; they only present what it returns.

1. A ``crawl_jobs`` row records the crawl (status, counts, error).
2. Scrapy fetches; :class:`crawler.pipelines.PersistPipeline` stores pages a batch per transaction through a
   :class:`crawler.store.PageStore`, which hands the ids to compare to the fingerprint stage after each
   commit: with no broker, to a process pool of the crawl's (:mod:`jobs.stage_process`; in this process's
   store thread when no pool can be used or it broke), else enqueued for Celery workers,
   :data:`jobs.PAGES_PER_TASK` per task.
3. With workers, the service waits until every page of the crawl is compared, showing pages done out of pages
   queued. It says within ``FPTRACK_NO_WORKER_SECONDS`` when no worker consumes the queue, and hands pages on
   again when they stall for ``FPTRACK_STALL_SECONDS`` (a killed worker): the stage is idempotent.
   In-process, the pool is drained (every batch it was sent compared there, or here), then pages another
   crawl was comparing at the same moment are awaited (or compared once it is gone).
4. With no broker, the meaning path's checks the crawl's pages left pending are done (:mod:`jobs.meaning`:
   rewrites and translations, the model loaded once), with progress; with workers, queue ``meaning`` does
   them.
5. The crawl's sites settle (:func:`compare.templates.settle_site`): site templates are decided from all
   pages.
6. The job is finished, failed or interrupted (Ctrl+C), with the pages of this crawl that copy registered
   works.

A distributed crawl (:mod:`crawler.distributed`) is one job crawled by several processes: the run's first
process creates the job, the others store into it; each waits for its own pages to be compared, adds its
counts to the run's totals in Redis and leaves; the last one to leave settles the sites and finishes the job
with the totals.

A run that could not hand its pages on (no broker, no worker) says so and fails: the pages are kept, and the
next crawl, ``fptrack maintain`` or the workers' periodic sweep compares them."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urldefrag

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.errors import FptrackError
from fptrack.core.settings import Settings
from fptrack.crawler.pages import CrawlOptions, CrawlProgress, CrawlStats
from fptrack.crawler.store import PageStore, StoreCounts
from fptrack.jobs import PAGES_PER_TASK
from fptrack.jobs.stage_process import ComparePool, ConfiguredTasks, compare_batch, compare_in_pool
from fptrack.storage.chunks import id_chunks
from fptrack.storage.db import retry_in_session, session_scope
from fptrack.storage.match_life import DOWN_OUTCOMES, INFRINGING_STATUSES
from fptrack.storage.models import CrawlJob, CrawlJobStatus, Match, Page, Site, utcnow
from fptrack.storage.sites import site_ids, site_of

if TYPE_CHECKING:
    from fptrack.crawler.distributed import SharedCrawl
    from fptrack.crawler.resume import CrawlState
    from fptrack.jobs.meaning import MeaningRun

__all__ = ["CrawlOutcome", "HandOffError", "WaitProgress", "job_stats", "pace_line", "run_crawl_job"]

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
WORKERS_POLL_SECONDS = 0.1
"""How often a crawl asks which of its pages the workers still have to compare, once it has fetched them all;
each time, only about the pages still pending at the last poll (a page compared stays compared)."""


class HandOffError(FptrackError, RuntimeError):
    """Pages were stored but could not be handed to the fingerprint stage (no broker, no worker)."""


@dataclass(frozen=True)
class WaitProgress:
    """While waiting on workers: pages compared out of pages queued."""

    compared: int
    queued: int


@dataclass
class CrawlOutcome:
    """What one crawl job did, for the caller to present."""

    job_id: int
    stats: CrawlStats | None = None
    pages_stored: int = 0
    pages_unchanged: int = 0
    pages_queued: int = 0
    pages_compared: int = 0
    # (url, chapters) of this crawl's copying pages
    copies: list[tuple[str, int]] = field(default_factory=list)
    # (url, chapters) of this crawl's pages whose copies are seen down now (a 404, a removal notice): a
    # removal pending its confirming fetch, or recorded
    down: list[tuple[str, int]] = field(default_factory=list)
    status: str = CrawlJobStatus.RUNNING.value
    error: str = ""
    elapsed_seconds: float = 0.0
    # a distributed crawl: 'first' (started the run) or 'joined'; ``whole_job`` is True when the counts above
    # are the job's (this process finished it), False when they are this process's part of a job others finish
    role: str = ""
    whole_job: bool = True
    # the meaning path's checks this crawl did as its last phase (no broker; jobs.meaning), else None
    meaning: MeaningRun | None = None

    @property
    def ok(self) -> bool:
        return self.status == CrawlJobStatus.FINISHED.value


class _Dispatcher:
    """Hands page ids to the fingerprint stage: with no broker, to ``pool`` (:mod:`jobs.stage_process`) while
    it runs, else right here; with one, queues it for the workers (after a broker failure nothing more is
    queued: the sweep hands the pages on later)."""

    def __init__(self, settings: Settings, tasks: Any, pool: ComparePool | None = None) -> None:
        self.settings = settings
        self.tasks = tasks
        self.pool = pool
        self.error = ""
        self.queued = 0

    def __call__(self, page_ids: list[int]) -> None:
        size = PAGES_PER_TASK
        for start in range(0, len(page_ids), size):
            chunk = page_ids[start : start + size]
            if self.settings.tasks_in_process:
                if self.pool is not None and self.pool.in_use:
                    self.pool.submit(chunk)  # compared here if the pool is broken
                    self.queued += len(chunk)
                else:
                    self._compare_here(chunk)
                continue
            if self.error:
                return
            try:
                self.tasks.process_pages.delay(chunk)
            except Exception as error:  # noqa: BLE001 - any broker trouble: the sweep hands the pages on later
                self.error = f"cannot hand pages to the workers ({type(error).__name__}: {error})"
                log.error("%s; the pages are stored and will be compared later", self.error)
                return
            self.queued += len(chunk)

    def compare_here(self, page_ids: list[int]) -> None:
        """Compare the pages in this thread, a task's worth at a time, whatever the mode: the pool, idle
        after the crawl's batches, is not sent more."""
        size = PAGES_PER_TASK
        for start in range(0, len(page_ids), size):
            self._compare_here(page_ids[start : start + size])

    def _compare_here(self, chunk: list[int]) -> None:
        """The task's body, in this thread (:func:`jobs.stage_process.compare_batch`)."""
        compare_batch(self.tasks, chunk)
        self.queued += len(chunk)


def run_crawl_job(
    settings: Settings,
    sessions: sessionmaker[Session],
    urls: Sequence[str],
    *,
    depth: int,
    max_pages: int,
    progress: Callable[[CrawlProgress], None] | None = None,
    waiting: Callable[[WaitProgress], None] | None = None,
    site_id: int | None = None,
    options: CrawlOptions | None = None,
    trigger: str = "cli",
    on_start: Callable[[int], None] | None = None,
    shared: SharedCrawl | None = None,
    state: CrawlState | None = None,
    compare_process: bool | None = None,
    pool: ComparePool | None = None,
    meaning_progress: Callable[[int, int], None] | None = None,
) -> CrawlOutcome:
    """Run one crawl job (see the module docstring). Runs Scrapy in this process: once per process.

    ``options`` are the site's settings (or ``fptrack crawl``'s); ``trigger`` says what started the job
    (``cli``, ``site``, ``schedule``); ``on_start`` is told the job's id once its row exists (a scheduled
    crawl ties its claim to it). ``shared``, an entered :class:`crawler.distributed.SharedCrawl`, makes this
    process one of a distributed crawl's (``depth`` and ``max_pages`` are then the run's); ``on_start`` is
    called by the run's first process only.

    ``compare_process``: with tasks in-process, compare in a process pool (:mod:`jobs.stage_process`);
    ``None`` follows :func:`jobs.stage_process.compare_in_pool`, ``False`` keeps the stage in this process.
    ``pool``: that pool, started ahead by the caller (:func:`jobs.stage_process.start_early`), used instead
    of starting one (and stopped with the job in any case).

    ``state`` (:mod:`crawler.resume`, a site crawl's frontier on disk) is continued when an earlier crawl of
    it was killed: the pages that crawl stored are not fetched again (those it left uncompared are compared
    now), the budget counts them, and the job's stats say it resumed. It is removed when the crawl ends
    normally."""
    tasks = pool.tasks if pool is not None else ConfiguredTasks(settings)
    if not settings.tasks_in_process:
        tasks.load()  # the Celery app bound to the broker now, before anything asks the broker
    started = time.monotonic()
    if shared is not None and shared.joined is not None:
        depth, max_pages = shared.joined.depth, shared.joined.max_pages
    job_id = _open_job(sessions, urls, depth, max_pages, site_id, trigger, on_start=on_start, shared=shared)
    outcome = CrawlOutcome(job_id=job_id, role=shared.joined.role if shared and shared.joined else "")
    with ExitStack() as stack:
        # With no broker, a process pool compares each batch (jobs.stage_process: a core of its own, out of
        # this process's GIL), stopped whatever happens once this process's store thread has drained (the
        # callback runs after the executor's, registered below).
        if pool is not None:
            stack.callback(pool.stop)
        else:
            if compare_process is None:
                compare_process = compare_in_pool(settings)
            if settings.tasks_in_process and compare_process:
                pool = ComparePool(settings, tasks=tasks)
                stack.callback(pool.stop)
                pool.start()
        dispatcher = _Dispatcher(settings, tasks, pool)
        # One thread of this process stores each batch (and compares it, or hands it to the workers) while
        # Scrapy's thread goes on fetching and parsing (lxml, numpy and the database drivers run outside the
        # GIL). In Scrapy's thread, a batch's transaction and its hand-off (a round trip to the broker) held
        # back every request meanwhile: 7.8 s of fetching 1,011 pages against 6.7 s without a broker
        # (benchmarks/pipeline_throughput.py).
        local = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fptrack-store")
        stack.callback(local.shutdown, wait=True, cancel_futures=True)
        store = PageStore(sessions, job_id=job_id, dispatch=dispatcher, executor=local, settings=settings)
        if not settings.tasks_in_process:
            _warn_when_no_worker(settings)
        if state is not None:
            stack.callback(state.close)  # harmless once the state is removed (the crawl ran to its end)
        # The whole job, not only the crawl, answers Ctrl+C and SIGTERM: during the crawl run_crawl stops
        # Scrapy (gracefully, then at once); before and after it (storing, waiting on workers) the job is
        # interrupted.
        stop = stack.enter_context(_StopSignals())
        job = _Job(settings, sessions, tasks, outcome, store, dispatcher, stop, shared, started)
        try:
            job.crawl(urls, depth, max_pages, progress, options, state)
            job.compare_pages(waiting)
            job.check_meaning(meaning_progress)
            job.conclude()
        except KeyboardInterrupt:
            outcome.status, outcome.error = CrawlJobStatus.INTERRUPTED.value, "interrupted"
        except HandOffError as error:
            outcome.status, outcome.error = CrawlJobStatus.FAILED.value, str(error)
        except BaseException as error:
            outcome.status, outcome.error = CrawlJobStatus.FAILED.value, f"{type(error).__name__}: {error}"
            job.record_end()
            raise
    job.count()
    return job.record_end()


def _open_job(
    sessions: sessionmaker[Session],
    urls: Sequence[str],
    depth: int,
    max_pages: int,
    site_id: int | None,
    trigger: str,
    *,
    on_start: Callable[[int], None] | None,
    shared: SharedCrawl | None,
) -> int:
    """The job's id: a new ``crawl_jobs`` row (told to ``on_start``, and published to the other processes of a
    distributed run this one started), or the row the run's first process made."""
    try:
        if shared is not None and not shared.first:
            return shared.wait_for_job()
        job_id = _start_job(sessions, urls, depth, max_pages, site_id, trigger)
        if shared is not None:
            shared.publish_job(job_id)
        if on_start is not None:
            on_start(job_id)
        return job_id
    except Exception as error:
        if shared is not None:  # no job to store into: leave the run, so that it can end
            from fptrack.crawler.distributed import CrawlPart

            shared.leave(CrawlPart(stats=None, error=f"{type(error).__name__}: {error}"))
        raise


@dataclass
class _Job:
    """A crawl job while it runs: the parts :func:`run_crawl_job` set up, and its steps, which fill
    ``outcome``."""

    settings: Settings
    sessions: sessionmaker[Session]
    tasks: Any  # jobs.tasks
    outcome: CrawlOutcome
    store: PageStore
    dispatcher: _Dispatcher
    stop: _StopSignals
    shared: SharedCrawl | None
    started: float
    start_urls: list[str] = field(default_factory=list)

    def crawl(
        self,
        urls: Sequence[str],
        depth: int,
        max_pages: int,
        progress: Callable[[CrawlProgress], None] | None,
        options: CrawlOptions | None,
        state: CrawlState | None,
    ) -> None:
        """The crawl itself (Scrapy), continuing ``state`` when an earlier crawl of it was killed, and every
        page it stored written and handed on; the state is removed when the crawl ran to its end."""
        from fptrack.crawler.runner import run_crawl
        from fptrack.storage.pacing import Pacer

        self.start_urls = list(urls)
        resumed = ""
        if state is not None:
            resumed = _resume(self.sessions, state, self.outcome.job_id, self.store, self.dispatcher)
        self.outcome.stats = run_crawl(
            list(urls),
            settings=self.settings,
            depth=depth,
            max_pages=max_pages,
            store=self.store,
            progress=progress,
            options=options,
            shared=self.shared,
            state=state,
            pacer=Pacer(self.sessions, self.settings),
        )
        self.store.flush()
        self.store.drain()
        stats = self.outcome.stats
        if resumed:
            stats = self.outcome.stats = replace(stats, notes=(*stats.notes, resumed))
        if state is not None and stats.finish_reason in FINISHED_NORMALLY and not self.stop.received:
            state.remove()  # every page it holds is stored: nothing left to resume
        self._count_stored()

    def compare_pages(self, waiting: Callable[[WaitProgress], None] | None) -> None:
        """Every page of the crawl compared: here (no broker), or by the workers, awaited; an interrupted
        crawl goes no further."""
        assert self.outcome.stats is not None  # crawled
        if self.outcome.stats.interrupted or self.stop.received:
            self.outcome.status, self.outcome.error = CrawlJobStatus.INTERRUPTED.value, "interrupted"
        elif self.settings.tasks_in_process:
            self._drain_pool()
            _compare_the_rest(self.sessions, self.settings, self.store, self.dispatcher)
        else:
            if self.dispatcher.error:
                raise HandOffError(self.dispatcher.error)
            _wait_for_workers(self.sessions, self.settings, self.tasks, self.store, waiting)

    def _drain_pool(self) -> None:
        """Wait for the compare pool (:mod:`jobs.stage_process`) to compare every batch it was sent; a pool
        that broke (or could not start) is said in the crawl's notes (its batches were compared here)."""
        pool = self.dispatcher.pool
        if pool is None:
            return
        pool.finish()
        if pool.died and self.outcome.stats is not None:
            note = (
                f"compare process: {pool.died}; {pool.compared_here} page(s) compared in the crawl's own "
                "process instead"
            )
            self.outcome.stats = replace(self.outcome.stats, notes=(*self.outcome.stats.notes, note))

    def check_meaning(self, progress: Callable[[int, int], None] | None) -> None:
        """With no broker, the meaning path's checks the crawl's pages left pending (:mod:`jobs.meaning`),
        once every page is stored and compared: the model never holds back the crawl page by page. With
        workers, queue ``meaning`` does them."""
        if (
            self.outcome.status != CrawlJobStatus.RUNNING.value
            or not self.settings.tasks_in_process
            or not self.settings.meaning
        ):
            return
        from fptrack.jobs.meaning import run_pending

        self.outcome.meaning = run_pending(
            self.sessions, self.settings, page_ids=self.store.counts.page_ids, progress=progress
        )

    def conclude(self) -> None:
        """The verdict of a job still running: one process of a distributed crawl has done its part (the last
        to leave settles the sites); otherwise the crawl's sites settle, and the job failed when it could not
        fetch its pages (:func:`unfetched`)."""
        outcome = self.outcome
        if outcome.status != CrawlJobStatus.RUNNING.value:
            return
        if self.shared is not None:
            outcome.status = CrawlJobStatus.FINISHED.value
            return
        pool = self.dispatcher.pool
        site_ids = self.store.counts.site_ids
        if self.settings.tasks_in_process:
            settled = pool is not None and pool.settle(site_ids)
        else:
            settled = _settled_by_workers(self.tasks, site_ids, self.settings)
        if not settled:
            from fptrack.jobs.settling import settle_crawled_sites  # the compare code: not loaded until here

            settle_crawled_sites(self.sessions, site_ids, self.settings)
        if pool is not None:
            pool.end()
        assert outcome.stats is not None  # crawled
        error = unfetched(outcome.stats, self.start_urls)
        if error:
            outcome.status, outcome.error = CrawlJobStatus.FAILED.value, error
        else:
            outcome.status = CrawlJobStatus.FINISHED.value

    def count(self) -> None:
        """What the job did as the database has it now: pages stored and compared, pages that copy works."""
        self._count_stored()
        self.outcome.copies, self.outcome.down = _copies(self.sessions, self.store.counts.page_ids)
        self.outcome.pages_compared = _compared(self.sessions, self.store.counts.page_ids)
        self.outcome.elapsed_seconds = time.monotonic() - self.started

    def record_end(self) -> CrawlOutcome:
        """Record the job's end: this process's own job, or its part of a distributed run (the outcome of the
        whole job when this process is the last to leave it)."""
        if self.shared is None:
            _finish_job(self.sessions, self.outcome, self.store.counts)
            return self.outcome
        return _leave_shared(
            self.shared, self.sessions, self.settings, self.outcome, self.store, self.started
        )

    def _count_stored(self) -> None:
        counts = self.store.counts
        self.outcome.pages_stored, self.outcome.pages_unchanged = counts.stored, counts.unchanged
        self.outcome.pages_queued = counts.to_compare


def _leave_shared(
    shared: SharedCrawl,
    sessions: sessionmaker[Session],
    settings: Settings,
    outcome: CrawlOutcome,
    store: PageStore,
    started: float,
) -> CrawlOutcome:
    """Add this process's part to the distributed run and leave it; the last process to leave settles the
    job's sites, finishes the job with the run's totals and removes the run's keys (returning the whole job's
    outcome)."""
    from fptrack.crawler.distributed import CrawlPart

    part = CrawlPart(
        stats=outcome.stats,
        stored=store.counts.stored,
        unchanged=store.counts.unchanged,
        to_compare=store.counts.to_compare,
        interrupted=outcome.status == CrawlJobStatus.INTERRUPTED.value,
        error=outcome.error if outcome.status == CrawlJobStatus.FAILED.value else "",
    )
    try:
        last = shared.leave(part)
    except Exception as error:  # Redis gone: the job cannot be finished by the run
        log.exception("cannot leave the distributed crawl of job %s", outcome.job_id)
        outcome.status, outcome.error = (
            CrawlJobStatus.FAILED.value,
            f"cannot leave the distributed crawl: {error}",
        )
        _finish_job(sessions, outcome, store.counts)
        return outcome
    if not last:
        outcome.whole_job = False
        return outcome
    elapsed = time.monotonic() - started
    stats, totals, errors = shared.totals(elapsed)
    page_ids, site_ids = _job_pages(sessions, outcome.job_id)
    whole = CrawlOutcome(job_id=outcome.job_id, stats=stats, role=outcome.role, elapsed_seconds=elapsed)
    whole.pages_stored, whole.pages_unchanged, whole.pages_queued = (
        totals.stored,
        totals.unchanged,
        totals.to_compare,
    )
    if errors:
        whole.status, whole.error = CrawlJobStatus.FAILED.value, errors[0]
    elif totals.interrupted:
        whole.status, whole.error = CrawlJobStatus.INTERRUPTED.value, "interrupted"
    elif reason := unfetched(stats, ()):
        whole.status, whole.error = CrawlJobStatus.FAILED.value, reason
    else:
        from fptrack.jobs.settling import settle_crawled_sites

        try:
            settle_crawled_sites(sessions, site_ids, settings)
            whole.status = CrawlJobStatus.FINISHED.value
        except Exception as error:  # recorded on the job like any failed crawl
            log.exception("settling the sites of job %s failed", outcome.job_id)
            whole.status, whole.error = CrawlJobStatus.FAILED.value, f"{type(error).__name__}: {error}"
    whole.copies, whole.down = _copies(sessions, page_ids)
    whole.pages_compared = _compared(sessions, page_ids)
    counts = StoreCounts(
        stored=totals.stored,
        unchanged=totals.unchanged,
        to_compare=totals.to_compare,
        page_ids=page_ids,
        site_ids=site_ids,
    )
    _finish_job(sessions, whole, counts)
    try:
        shared.remove_keys()
    except Exception:  # the keys expire on their own
        log.exception("cannot remove the Redis keys of the distributed crawl of job %s", outcome.job_id)
    return whole


def _settled_by_workers(tasks: Any, site_ids: set[int], settings: Settings) -> bool:
    """Settle the crawl's sites on the workers, which hold the registry and the fingerprint code loaded (this
    process would load them for the settling alone: ~0.5 s), waiting for their answers through the result
    backend; True when every site settled there. False, for the caller to settle them here, when there is no
    result backend (a broker other than Redis without ``FPTRACK_RESULT_BACKEND``), or a site's task failed or
    did not answer within ``FPTRACK_STALL_SECONDS`` (settling is idempotent: a late one changes nothing)."""
    if not site_ids or not tasks.celery.conf.result_backend:
        return False
    deadline = time.monotonic() + settings.stall_seconds
    try:
        pending = [tasks.settle_site.delay(site_id) for site_id in sorted(site_ids)]
        for result in pending:
            result.get(timeout=max(0.1, deadline - time.monotonic()))
    except Exception as error:  # noqa: BLE001 - any failure there: settled here instead, which raises it
        log.warning(
            "the workers did not settle the crawl's sites (%s: %s): settling them here",
            type(error).__name__,
            error,
        )
        return False
    return True


def unfetched(stats: CrawlStats, start_urls: Sequence[str]) -> str:
    """Why a crawl that ran could not fetch its pages ('' when it could): no page answered at all (every
    request failed: refused, timed out, the site kept answering 429...), or none of its start pages did (a
    crawl that got only robots.txt or a stray redirect has not crawled the site). Failed requests are
    counted either way; a crawl that fetched its start pages and lost some others is finished, with its
    failures."""
    if not stats.failures:
        return ""
    if stats.pages_seen == 0:
        url, reason = stats.failures[0]
        more = len(stats.failures) - 1
        return f"cannot crawl {url}: {reason}" + (f" (and {more} more request(s) failed)" if more else "")
    failed = dict(stats.failures)
    starts = [urldefrag(url.strip()).url for url in start_urls]
    if starts and all(url in failed for url in starts):
        return f"cannot crawl {starts[0]}: {failed[starts[0]]} (no start page could be fetched)"
    return ""


# Scrapy's finish reasons of a crawl that ran to its end: the frontier is exhausted, or the page budget spent.
FINISHED_NORMALLY = frozenset({"finished", "max_pages"})


def _resume(
    sessions: sessionmaker[Session], state: CrawlState, job_id: int, store: PageStore, dispatcher: _Dispatcher
) -> str:
    """Tie ``state`` to the job; when earlier (killed) jobs crawled from it, mark the pages they stored done,
    hand on those they left uncompared, count them as this crawl's, and return the line that says the crawl
    resumed."""
    earlier = state.earlier_jobs() if state.resumed else []
    state.add_job(job_id)
    if not earlier:
        return ""
    rows = retry_in_session(
        sessions,
        lambda session: session.execute(
            select(Page.id, Page.url, Page.site_id, Page.compared_at).where(Page.crawl_job_id.in_(earlier))
        ).all(),
        what="reading the pages of the interrupted crawl",
    )
    state.done = {str(url) for _, url, _, _ in rows}
    store.counts.page_ids.update(int(page_id) for page_id, _, _, _ in rows)
    store.counts.site_ids.update(int(site_id) for _, _, site_id, _ in rows if site_id is not None)
    uncompared = sorted(int(page_id) for page_id, _, _, compared_at in rows if compared_at is None)
    if uncompared:
        store.counts.to_compare += len(uncompared)
        dispatcher(uncompared)
    jobs = ", ".join(f"#{job}" for job in earlier)
    line = (
        f"resumed the interrupted crawl of job {jobs}: {len(rows)} page(s) stored before are not fetched "
        f"again ({len(uncompared)} handed on to compare); state in {state.directory}"
    )
    log.warning("%s", line)
    return line


def _job_pages(sessions: sessionmaker[Session], job_id: int) -> tuple[set[int], set[int]]:
    """Ids of the pages a crawl job stored (by any of its processes) and of their sites."""
    rows = retry_in_session(
        sessions,
        lambda session: session.execute(
            select(Page.id, Page.site_id).where(Page.crawl_job_id == job_id)
        ).all(),
        what="reading the pages of the crawl",
    )
    return {int(page_id) for page_id, _ in rows}, {int(site_id) for _, site_id in rows if site_id is not None}


class _StopSignals:
    """Turns a Ctrl+C (or SIGTERM) outside the crawl itself (before Scrapy starts, while pages are stored or
    workers awaited) into an interrupted job, never a "finished" one with the pages it did not get, nor a job
    left "running" by a process killed by the default SIGTERM action. During the crawl, crawler.runner handles
    them."""

    def __init__(self) -> None:
        self.received = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = True
        raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def _start_job(
    sessions: sessionmaker[Session],
    urls: Sequence[str],
    depth: int,
    max_pages: int,
    site_id: int | None,
    trigger: str = "cli",
) -> int:
    with session_scope(sessions) as session:
        if site_id is None:
            key = site_of(urls[0]) if urls else ""
            site_id = site_ids(session, [key]).get(key) if key else None
        job = CrawlJob(
            site_id=site_id,
            start_urls=list(urls),
            depth=depth,
            max_pages=max_pages,
            status=CrawlJobStatus.RUNNING,
            trigger=trigger,
        )
        session.add(job)
        session.flush()
        return int(job.id)


def _finish_job(sessions: sessionmaker[Session], outcome: CrawlOutcome, counts: StoreCounts) -> None:
    try:
        retry_in_session(
            sessions,
            lambda session: _record_end(session, outcome, counts),
            what="recording the end of the crawl",
        )
    except Exception:
        log.exception("could not record the end of crawl job %s", outcome.job_id)


def _record_end(session: Session, outcome: CrawlOutcome, counts: StoreCounts) -> None:
    job = session.get(CrawlJob, outcome.job_id)
    if job is None:
        return
    job.status = outcome.status if outcome.status != CrawlJobStatus.RUNNING.value else "failed"
    job.error = outcome.error[:2000]
    job.finished_at = utcnow()
    job.pages_stored = counts.stored
    job.pages_unchanged = counts.unchanged
    job.copies_found = len(outcome.copies)
    if outcome.stats is not None:
        job.pages_seen = outcome.stats.pages_seen
        job.pages_failed = len(outcome.stats.failures)
        job.stats = job_stats(outcome.stats)
    if counts.site_ids:
        session.execute(
            update(Site).where(Site.id.in_(sorted(counts.site_ids))).values(last_crawled_at=utcnow())
        )


MAX_FAILURES_RECORDED = 200


def job_stats(stats: CrawlStats) -> dict[str, Any]:
    """What a ``crawl_jobs.stats`` records of a crawl: pages by status, failures with their reasons (the first
    :data:`MAX_FAILURES_RECORDED`), the crawler's counters (private-address refusals, robots.txt...), and
    its pace (:mod:`crawler.pacing`): ``requests`` sent (robots.txt, redirects and tries again included),
    ``requests_per_second`` over the crawl's time, ``peak_requests_per_second`` (the most sent to one site
    in any one-second window; for a distributed crawl, the sum of its processes' peaks, an upper bound) and
    ``retry_after_waits`` (how often a site asked to slow down and was held)."""
    counters = stats.counters
    requests = int(counters.get("fptrack/requests", 0))
    elapsed = stats.elapsed_seconds
    return {
        "requests": requests,
        "requests_per_second": round(requests / elapsed, 3) if elapsed > 0 else 0.0,
        "peak_requests_per_second": int(counters.get("fptrack/peak_requests_per_second", 0)),
        "retry_after_waits": int(counters.get("fptrack/retry_after_waits", 0)),
        "by_status": {str(status): count for status, count in sorted(stats.by_status.items())},
        "failures": [[url, reason] for url, reason in stats.failures[:MAX_FAILURES_RECORDED]],
        "failures_total": len(stats.failures),
        "counters": dict(sorted(stats.counters.items())),
        "finish_reason": stats.finish_reason,
        "notes": list(stats.notes),
        "elapsed_seconds": round(stats.elapsed_seconds, 3),
    }


def pace_line(stats: Mapping[str, Any] | None) -> str:
    """The request rate a crawl job's stats record (``requests``, ``requests_per_second``,
    ``peak_requests_per_second``, ``retry_after_waits``: jobs.crawls.job_stats), as one line: ``requests: 57
    (0.98/s, at most 1 in a second)``; '' when the job recorded none."""
    if not stats or "requests" not in stats:
        return ""
    requests = int(stats.get("requests") or 0)
    parts = [f"{float(stats.get('requests_per_second') or 0.0):.2f}/s"]
    if "peak_requests_per_second" in stats:
        parts.append(f"at most {int(stats.get('peak_requests_per_second') or 0)} in a second")
    waits = int(stats.get("retry_after_waits") or 0)
    if waits:
        parts.append(f"held back {waits} time(s) by Retry-After")
    return f"requests: {requests} ({', '.join(parts)})"


def _pending(sessions: sessionmaker[Session], page_ids: Collection[int]) -> list[int]:
    """The crawl's pages not compared yet (asked again while the database is restarted: the crawl waits)."""

    def read(session: Session) -> list[int]:
        pending: list[int] = []
        for chunk in id_chunks(page_ids):
            pending.extend(
                session.scalars(select(Page.id).where(Page.id.in_(chunk), Page.compared_at.is_(None)))
            )
        return sorted(int(p) for p in pending)

    return retry_in_session(sessions, read, what="counting the pages still to compare")


def _warn_when_no_worker(settings: Settings) -> None:
    """Warn, beside the crawl, when no worker consumes the task queue. Asked in a thread of its own: the
    broker's answer takes its whole timeout (every worker may answer, however many there are: 2 s), which the
    crawl would otherwise wait before its first request."""
    from fptrack.taskqueue import workers_on_queue

    def ask() -> None:
        if not workers_on_queue(settings.task_queue):
            log.warning(
                "no worker consumes the queue %r yet: start one with `fptrack worker` (pages are stored "
                "meanwhile; the crawl fails if none shows up while it waits)",
                settings.task_queue,
            )

    threading.Thread(target=ask, name="fptrack-ask-workers", daemon=True).start()


def _wait_for_workers(
    sessions: sessionmaker[Session],
    settings: Settings,
    tasks: Any,
    store: PageStore,
    waiting: Callable[[WaitProgress], None] | None,
) -> None:
    from fptrack.taskqueue import workers_on_queue

    queued = store.counts.to_compare
    pending = _pending(sessions, store.counts.page_ids)
    last_count, last_change = len(pending), time.monotonic()
    checked_workers = False
    while pending:
        if waiting is not None:
            waiting(WaitProgress(compared=queued - len(pending), queued=queued))
        time.sleep(WORKERS_POLL_SECONDS)
        pending = _pending(sessions, pending)
        now = time.monotonic()
        if len(pending) != last_count:
            last_count, last_change = len(pending), now
            continue
        idle = now - last_change
        if idle >= settings.no_worker_seconds and not checked_workers:
            workers = workers_on_queue(settings.task_queue)
            checked_workers = workers is not None  # the broker could not be asked: ask again at the next poll
            if workers == []:
                raise HandOffError(
                    f"no worker consumes the queue {settings.task_queue!r}: start one with `fptrack worker` "
                    f"(same FPTRACK_BROKER_URL and FPTRACK_TASK_QUEUE); the {len(pending)} page(s) waiting "
                    "are stored and will be compared once a worker runs"
                )
        if idle >= settings.stall_seconds:
            log.warning(
                "%d page(s) stalled for %.0fs (a worker died?): handing them on again", len(pending), idle
            )
            try:
                for start in range(0, len(pending), PAGES_PER_TASK):
                    tasks.process_pages.delay(pending[start : start + PAGES_PER_TASK])
            except Exception as error:  # noqa: BLE001 - the broker is down: the next stall (or the sweep) tries again
                log.warning("cannot hand the stalled pages on again (%s: %s)", type(error).__name__, error)
            last_change, checked_workers = now, False
    if waiting is not None:
        waiting(WaitProgress(compared=queued, queued=queued))


def _compare_the_rest(
    sessions: sessionmaker[Session], settings: Settings, store: PageStore, dispatcher: _Dispatcher
) -> None:
    """With tasks in-process, compare what is left of the crawl's pages: those another process held when this
    one came to them. Two crawls meeting one page at once both hand it on; the one that finds it taken (``SKIP
    LOCKED``) waits here until the other has compared it, or compares it itself once the other is gone (its
    lock goes with it), so each crawl reports every copy it saw, never the state of the other's
    transaction."""
    pending = _pending(sessions, store.counts.page_ids)
    last_said = time.monotonic()
    while pending:
        dispatcher.compare_here(pending)  # compares the pages nobody holds, skips the ones held
        pending = _pending(sessions, store.counts.page_ids)
        if not pending:
            return
        if time.monotonic() - last_said >= settings.stall_seconds:
            log.warning(
                "%d page(s) of this crawl are held by another process comparing them: waiting", len(pending)
            )
            last_said = time.monotonic()
        time.sleep(POLL_SECONDS)


def _copies(
    sessions: sessionmaker[Session], page_ids: set[int]
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(url, chapters) of the crawl's pages that copy registered works without a licence and whose matches a
    reviewer did not dismiss (:data:`storage.match_life.INFRINGING_STATUSES`), whether or not the copies were
    found by an earlier crawl; and, apart, those whose every such copy is seen down now (its latest
    observation ``gone`` or ``removed``, or its takedown recorded): a page that now holds a removal notice or
    answers 404 is no copy."""

    def read(session: Session) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        live: Counter[str] = Counter()
        down: Counter[str] = Counter()
        for chunk in id_chunks(page_ids):
            rows = session.execute(
                select(Page.url, Match.recheck_state, Match.taken_down_at)
                .join(Match, Match.page_id == Page.id)
                .where(Page.id.in_(chunk), Match.status.in_(INFRINGING_STATUSES))
            )
            for url, state, taken_down_at in rows:
                seen_down = taken_down_at is not None or state in DOWN_OUTCOMES
                (down if seen_down else live)[str(url)] += 1
        copies = sorted(live.items())
        removed = sorted((url, count) for url, count in down.items() if url not in live)
        return copies, removed

    return retry_in_session(sessions, read, what="reading the crawl's copies")


def _compared(sessions: sessionmaker[Session], page_ids: set[int]) -> int:
    return len(page_ids) - len(_pending(sessions, page_ids))
