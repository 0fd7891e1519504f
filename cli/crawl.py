"""``fptrack crawl``: crawl sites, fingerprint and compare every page, and say what copies registered works.

The crawl job is :func:`jobs.crawls.run_crawl_job` (Scrapy underneath, :mod:`crawler`); this module turns
the options into its inputs, joins a distributed crawl when asked, prints progress and the outcome, and
chooses the exit status. The command reads as its steps: :func:`_crawl_options`, :func:`_join_distributed`,
:func:`_run_job`, :func:`_print_outcome`, :func:`_finish`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

import click

from fptrack.cli.common import CliContext, CliError, echo_error, friendly_errors, pass_context

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from fptrack.crawler import CrawlProgress
    from fptrack.crawler.distributed import SharedCrawl
    from fptrack.crawler.pages import CrawlOptions
    from fptrack.jobs.crawls import CrawlOutcome, WaitProgress
    from fptrack.jobs.stage_process import ComparePool

__all__ = ["crawl", "parse_scrapy_settings"]

EXIT_INTERRUPTED = 130
"""The exit status of a crawl stopped by Ctrl+C or SIGTERM (the shell's 128 + SIGINT)."""


@click.command()
@click.argument("urls", nargs=-1, required=True)
@click.option(
    "--depth", default=2, show_default=True, type=click.IntRange(0, 50), help="Link depth to follow."
)
@click.option(
    "--max-pages", default=200, show_default=True, type=click.IntRange(1), help="Stop after this many pages."
)
@click.option("--quiet", "-q", is_flag=True, help="No per-page progress lines.")
@click.option(
    "--allow-private-host",
    "allow_private",
    multiple=True,
    metavar="HOST",
    help="Let the crawl reach HOST (host, host:port, address or network) although it is private, loopback, "
    "link-local...: refused otherwise, after DNS and on every redirect. Repeatable; adds to "
    "FPTRACK_ALLOW_PRIVATE_HOSTS.",
)
@click.option(
    "--set",
    "-s",
    "scrapy_set",
    multiple=True,
    metavar="NAME=VALUE",
    help="A Scrapy setting passed through (e.g. -s DOWNLOAD_DELAY=2 -s AUTOTHROTTLE_TARGET_CONCURRENCY=1). "
    "Repeatable.",
)
@click.option(
    "--delay",
    type=click.FloatRange(0),
    help="Seconds at least between two requests to a site (default: FPTRACK_CRAWL_DELAY).",
)
@click.option(
    "--ignore-robots", is_flag=True, help="Do not obey robots.txt (default: FPTRACK_CRAWL_OBEY_ROBOTS)."
)
@click.option(
    "--distributed",
    is_flag=True,
    help="Share the crawl with other processes and machines through Redis "
    "(FPTRACK_CRAWL_REDIS_URL): the same command elsewhere joins the running crawl of the first URL's site.",
)
@click.option(
    "--render-js",
    type=click.Choice(["auto", "yes", "no"]),
    default="auto",
    show_default=True,
    help="Render pages built by scripts in Chromium: auto = pages with scripts and (almost) no static text, "
    "yes = every HTML page, no = never.",
)
@pass_context
@friendly_errors
def crawl(
    context: CliContext,
    urls: tuple[str, ...],
    depth: int,
    max_pages: int,
    quiet: bool,
    allow_private: tuple[str, ...],
    scrapy_set: tuple[str, ...],
    delay: float | None,
    ignore_robots: bool,
    distributed: bool,
    render_js: str,
) -> None:
    """Crawl sites, fingerprint and compare every page.

    Starts from URLS and stays on their sites; every page is stored, fingerprinted and compared with the
    registered works (in this process, or by the workers when FPTRACK_BROKER_URL is set: the crawl then waits
    for them). Once every page is compared, text the site repeats on many pages (its template) is set aside
    and the pages it touches are compared again. Prints progress, then a summary and the pages that copy
    registered works. Exits 1 when the crawl failed or its pages could not be handed to the workers, 130 when
    interrupted.

    Polite by default: robots.txt obeyed, AutoThrottle on, FPTRACK_CRAWL_CONCURRENCY_PER_SITE requests at a
    time per site. Private, loopback, link-local, multicast and reserved destinations are refused (and listed
    as failures) unless allowed with --allow-private-host or FPTRACK_ALLOW_PRIVATE_HOSTS.

    With --distributed the frontier is shared in Redis: the first process seeds the start URLs, the same
    command run while it crawls (on this machine or another) joins it, with its depth and page limit; the last
    process to finish writes the job's totals (docs/monitoring.md, "Crawls over several machines")."""
    from fptrack.jobs.bootstrap import collector_paused
    from fptrack.jobs.stage_process import start_early

    pool: ComparePool | None = None
    try:
        # the set-up (Scrapy's and the crawler's imports, the database) makes objects that live on
        with collector_paused():
            # the compare pool (no broker) starts first: its start-up runs beside this one's on the other core
            pool = start_early(context.settings)
            _import_scrapys_tls_shallow()
            options = _crawl_options(context, allow_private, scrapy_set, delay, ignore_robots, render_js)
            sessions = context.sessions()
            shared = _join_distributed(context, urls[0], depth, max_pages) if distributed else None
        outcome = _run_job(context, sessions, urls, depth, max_pages, options, shared, pool, quiet=quiet)
    finally:
        if pool is not None:
            pool.stop()  # at once when the crawl never started; a no-op after the job stopped it
    _print_outcome(outcome)
    _finish(outcome)


def parse_scrapy_settings(pairs: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``('DOWNLOAD_DELAY=2', ...)`` -> ``(('DOWNLOAD_DELAY', '2'), ...)``; a usage error names a malformed
    pair."""
    parsed = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"-s {pair!r}: expected NAME=VALUE, e.g. -s DOWNLOAD_DELAY=2")
        parsed.append((name.strip(), value.strip()))
    return tuple(parsed)


def _import_scrapys_tls_shallow() -> None:
    """Import Scrapy's HTTP/1.1 download handler, and its TLS modules, from here: the crawler package imports
    it six imports deep (:mod:`crawler.render`). Making the three classes Scrapy keeps under old names
    (``scrapy.utils.deprecate.create_deprecated_class``) walks the whole call stack, looking up the module of
    every frame among all those loaded: 0.136 s of CPU from there, 0.075 s from here."""
    import scrapy.core.downloader.handlers.http11  # noqa: F401


def _crawl_options(
    context: CliContext,
    allow_private: tuple[str, ...],
    scrapy_set: tuple[str, ...],
    delay: float | None,
    ignore_robots: bool,
    render_js: str,
) -> CrawlOptions:
    """The crawl's options from the command's, checked before any job exists: a bad host, a malformed ``-s``
    or ``--render-js yes`` without Chromium is one line, not a failed job."""
    from fptrack.crawler.pages import CrawlOptions
    from fptrack.crawler.render import plan_rendering
    from fptrack.crawler.runner import check_options

    options = CrawlOptions(
        allow_private_hosts=allow_private,
        scrapy_settings=parse_scrapy_settings(scrapy_set),
        delay=delay,
        obey_robots=False if ignore_robots else None,
        render_js=render_js,
    )
    check_options(options)
    plan_rendering(render_js, context.settings)
    return options


def _join_distributed(context: CliContext, first_url: str, depth: int, max_pages: int) -> SharedCrawl:
    """This process's part in the distributed crawl of the first URL's site: it starts the run, or joins the
    one under way with that run's depth and page limit (said on stderr)."""
    from fptrack.crawler.distributed import SharedCrawl
    from fptrack.crawler.links import request_url
    from fptrack.storage.sites import site_of

    shared = SharedCrawl.connect(context.settings, site_of(request_url(first_url)))
    joined = shared.enter(depth=depth, max_pages=max_pages)
    if joined.role == "joined":
        click.echo(
            f"joining the running distributed crawl of {shared.site} (depth {joined.depth}, limit "
            f"{joined.max_pages} pages)",
            err=True,
        )
    return shared


def _run_job(
    context: CliContext,
    sessions: sessionmaker[Session],
    urls: tuple[str, ...],
    depth: int,
    max_pages: int,
    options: CrawlOptions,
    shared: SharedCrawl | None,
    pool: ComparePool | None,
    *,
    quiet: bool,
) -> CrawlOutcome:
    """Run the crawl job with progress on stderr; a distributed crawl's handle is closed whatever happens."""
    from fptrack.jobs.crawls import run_crawl_job
    from fptrack.jobs.site_runs import one_off_claim

    # a one-off crawl keeps a sign of life: killed, its job is marked failed, not left "running"
    # (jobs.site_runs); a distributed crawl's processes keep theirs in Redis
    alive: AbstractContextManager[Callable[[int], None] | None] = (
        one_off_claim(sessions, context.settings) if shared is None else nullcontext(None)
    )
    try:
        with alive as started:
            return run_crawl_job(
                context.settings,
                sessions,
                list(urls),
                depth=depth,
                max_pages=max_pages,
                progress=_progress_printer(quiet),
                waiting=_wait_printer(),
                options=options,
                shared=shared,
                on_start=started,
                pool=pool,
                meaning_progress=_meaning_printer(quiet),
            )
    finally:
        if shared is not None:
            shared.close()


def _progress_printer(quiet: bool) -> Callable[[CrawlProgress], None]:
    """One line on stderr per page fetched (none with --quiet)."""

    def progress(update: CrawlProgress) -> None:
        if not quiet:
            click.echo(
                f"[{update.pages_seen} fetched, limit {update.max_pages}] {update.last_status} "
                f"{update.last_url}",
                err=True,
            )

    return progress


def _meaning_printer(quiet: bool) -> Callable[[int, int], None]:
    """The crawl's meaning phase (jobs.meaning): a line on stderr per batch of pages checked."""

    def progress(done: int, total: int) -> None:
        if not quiet:
            click.echo(f"meaning: {done}/{total} page(s) checked", err=True)

    return progress


def _wait_printer() -> Callable[[WaitProgress], None]:
    """While the workers compare the pages: a line on stderr at most every two seconds, and the last one."""
    last_shown = -1.0

    def waiting(update: WaitProgress) -> None:
        nonlocal last_shown
        now = time.monotonic()
        if now - last_shown >= 2.0 or update.compared == update.queued:
            last_shown = now
            click.echo(f"workers: {update.compared}/{update.queued} page(s) compared", err=True)

    return waiting


def _print_outcome(outcome: CrawlOutcome) -> None:
    """The summary on stdout: pages by HTTP status, failures and notes, then the pages that copy works."""
    if not outcome.whole_job:
        click.echo(
            f"this process's part of distributed crawl #{outcome.job_id}: "
            f"{outcome.stats.pages_seen if outcome.stats else 0} page(s); the last process to finish "
            "records the job's totals"
        )
    from fptrack.jobs.crawls import job_stats, pace_line

    stats = outcome.stats
    if stats is not None and (stats.pages_seen or not outcome.error):
        statuses = ", ".join(f"{count} x {status}" for status, count in sorted(stats.by_status.items()))
        click.echo(
            f"crawled {stats.pages_seen} page(s) in {outcome.elapsed_seconds:.1f}s ({statuses or 'none'}); "
            f"{stats.pages_with_text} with text, {outcome.pages_unchanged} unchanged since the last crawl; "
            f"{len(stats.failures)} failed"
        )
        pace = pace_line(job_stats(stats))
        if pace:
            click.echo(f"  {pace}")
        for url, reason in stats.failures[:10]:
            click.echo(f"  failed: {url}: {reason}")
        for note in stats.notes:
            click.echo(f"  note: {note}")
    if outcome.meaning is not None:
        click.echo(outcome.meaning.line())
    if outcome.copies:
        click.echo(f"{len(outcome.copies)} page(s) copy registered works:")
        for url, count in outcome.copies:
            click.echo(f"  {url} ({count} chapter match{'es' if count != 1 else ''})")
    elif outcome.ok:
        click.echo("no copies of registered works found")


def _finish(outcome: CrawlOutcome) -> None:
    """Exit 130 when interrupted (what was fetched is kept), 1 with the job's error when it failed; else point
    at ``fptrack matches``."""
    if outcome.status == "interrupted":
        echo_error(
            f"crawl #{outcome.job_id} interrupted; {outcome.pages_compared} page(s) compared, the "
            "rest are kept and compared by the next crawl or `fptrack maintain`"
        )
        sys.exit(EXIT_INTERRUPTED)
    if not outcome.ok:
        raise CliError(outcome.error or f"crawl #{outcome.job_id} failed")
    click.echo("see them all with: fptrack matches")
