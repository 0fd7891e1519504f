"""The ``fptrack`` command line (click). Every subcommand has ``--help``.

Errors a person can act on (a missing file, an unreachable URL, a malformed database URL, an uninitialised
database) end in one line on stderr and a non-zero exit status, never a traceback; set ``FPTRACK_DEBUG=1`` to
see the traceback of an unexpected failure.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload, sessionmaker

from fptrack.storage.db import (
    DatabaseUnavailable,
    SchemaOutOfDate,
    check_schema,
    create_engine_for,
    migrate,
    session_factory,
    session_scope,
)
from fptrack.core.settings import ConfigurationError, Settings

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CliError(click.ClickException):
    """A one-line error for the user."""

    exit_code = EXIT_FAILURE

    def show(self, file: Any = None) -> None:
        click.echo(click.style("error: ", fg="red", bold=True) + self.format_message(), err=True)


def _known_errors() -> tuple[type[BaseException], ...]:
    from fptrack.compare.works import WorkError
    from fptrack.crawler import CrawlError
    from fptrack.fingerprint.encoding import UndecodableError

    return (ConfigurationError, DatabaseUnavailable, SchemaOutOfDate, WorkError, CrawlError, UndecodableError)


def friendly_errors(command: F) -> F:
    """Turn the errors a person can act on into :class:`CliError`; hide tracebacks of the rest."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except click.ClickException:
            raise
        except _known_errors() as error:
            raise CliError(str(error)) from None
        except KeyboardInterrupt:
            raise CliError("interrupted") from None
        except Exception as error:
            if os.environ.get("FPTRACK_DEBUG"):
                raise
            raise CliError(
                f"unexpected {type(error).__name__}: {error} (set FPTRACK_DEBUG=1 to see the traceback)"
            ) from None

    return wrapper  # type: ignore[return-value]


class Context:
    """What every subcommand needs: the settings, built once; the database, opened on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._sessions: sessionmaker[Session] | None = None

    def sessions(self, *, require_schema: bool = True) -> sessionmaker[Session]:
        if self._sessions is None:
            engine = create_engine_for(self.settings)
            if require_schema:
                check_schema(engine, self.settings)
            self._sessions = session_factory(engine)
        return self._sessions

    @contextmanager
    def session(self) -> Iterator[Session]:
        with session_scope(self.sessions()) as session:
            yield session

    def tasks(self):  # type: ignore[no-untyped-def]
        from fptrack.jobs import tasks

        self.sessions()  # fail early, with a clear message, when the database is not ready
        tasks.configure(self.settings)
        return tasks


pass_context = click.make_pass_decorator(Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the embedded database (default: $FPTRACK_DATA_DIR or ./fptrack-data).",
)
@click.version_option(package_name="fptrack")
@click.pass_context
def main(ctx: click.Context, data_dir: Path | None) -> None:
    """fptrack: find pirated copies of registered texts on the web.

    \b
    Typical session:
      fptrack init                         create or migrate the database
      fptrack works add novel.txt          register a work (UTF-8, GB18030/GBK or Big5)
      fptrack crawl http://site/ --depth 3 crawl, fingerprint and compare
      fptrack matches --format json        the flagged matches
      fptrack serve                        review them in the admin web app

    Configuration comes from the environment: FPTRACK_DATABASE_URL (default: a SQLite file in the data
    folder; postgresql://... for production), FPTRACK_BROKER_URL (unset: tasks run in-process; redis://...
    to use Celery workers started with `fptrack worker`). See the README for all variables.
    """
    environ = dict(os.environ)
    if data_dir is not None:
        environ["FPTRACK_DATA_DIR"] = str(data_dir)
    try:
        settings = Settings.from_env(environ)
    except ConfigurationError as error:
        raise CliError(str(error)) from None
    from fptrack.fingerprint.normalize import use_table_cache

    use_table_cache(settings.cache_dir)
    ctx.obj = Context(settings)


# -------------------------------------------------------------------------------------------------- init


@main.command()
@pass_context
@friendly_errors
def init(context: Context) -> None:
    """Create the database or migrate it to the current schema.

    Safe to run again, and from several machines at once on PostgreSQL (an advisory lock serialises them)."""
    revision = migrate(context.settings)
    click.echo(f"database ready at schema revision {revision}: {_shown_url(context.settings)}")


def _shown_url(settings: Settings) -> str:
    from sqlalchemy.engine import make_url

    return make_url(settings.database_url).render_as_string(hide_password=True)


# ------------------------------------------------------------------------------------------------- works


@main.group()
def works() -> None:
    """Register and list the works to protect."""


@works.command("add")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--title", help="Title of the work (default: the file name). Only with a single file.")
@click.option("--wait", is_flag=True, help="With workers (FPTRACK_BROKER_URL): wait until they have fingerprinted each "
              "work and compared it with the pages crawled before, and print what they found (without a broker "
              "this is always so).")  # fmt: skip
@pass_context
@friendly_errors
def works_add(context: Context, files: tuple[Path, ...], title: str | None, wait: bool) -> None:
    """Register works from text files.

    Chapters are found from their headings (第…章/回/节, Chapter N). The encoding (UTF-8, GB18030/GBK or Big5) is detected from the bytes. Registering a work also compares
    it with every page crawled before (retroactive detection): right here without a broker, else on the workers
    (--wait waits for them).
    """
    from fptrack.compare.works import register_work_file

    if title and len(files) > 1:
        raise click.UsageError("--title applies to a single file; register the files one by one")
    tasks = context.tasks()
    failures = 0
    queued: list[int] = []
    for path in files:
        try:
            with context.session() as session:
                registered = register_work_file(session, path, title=title)
        except _known_errors() as error:
            click.echo(click.style("error: ", fg="red", bold=True) + str(error), err=True)
            failures += 1
            continue
        if registered.already_registered:
            click.echo(f"{path}: already registered as work #{registered.work_id} ({registered.title})")
            continue
        click.echo(
            f"registered work #{registered.work_id} {registered.title!r}: {registered.chapters} chapters, "
            f"{registered.characters:,} characters ({registered.encoding})"
        )
        try:
            result = tasks.index_work.delay(registered.work_id)
        except Exception as error:
            if context.settings.tasks_in_process:
                raise
            click.echo(
                click.style("error: ", fg="red", bold=True) + f"work #{registered.work_id} is saved but could not be "
                f"handed to the workers ({type(error).__name__}: {error}); `fptrack maintain` or the workers' sweep "
                "will index it",
                err=True,
            )
            failures += 1
            continue
        if context.settings.tasks_in_process:
            flagged = result.get()
            if flagged:
                click.echo(f"  retroactive check: {flagged} already-crawled page(s) copy this work")
        else:
            click.echo(f"  fingerprinting queued (task {result.id})")
            queued.append(registered.work_id)
    if wait and queued and not _wait_for_indexing(context, tasks, queued):
        failures += 1
    if failures:
        sys.exit(EXIT_FAILURE)


def _wait_for_indexing(context: Context, tasks: Any, work_ids: list[int]) -> bool:
    """Wait until the workers have indexed ``work_ids`` (``works.indexed_at``), then say what each found among the
    pages crawled before; False (said on stderr) when no worker consumes the queue."""
    from sqlalchemy import distinct, func, select

    from fptrack.jobs.pipeline import COPYING_STATUSES
    from fptrack.jobs.crawls import POLL_SECONDS, _workers_on_queue
    from fptrack.storage.models import Match, Work

    settings = context.settings
    waiting, since = set(work_ids), time.monotonic()
    asked = False
    while waiting:
        with context.session() as session:
            done = set(session.scalars(select(Work.id).where(Work.id.in_(sorted(waiting)), Work.indexed_at.is_not(None))))
            if done:
                copying = (
                    select(Match.work_id, func.count(distinct(Match.page_id)))
                    .where(Match.work_id.in_(sorted(done)), Match.status.in_(COPYING_STATUSES))
                    .group_by(Match.work_id)
                )
                counts = {int(work_id): int(pages) for work_id, pages in session.execute(copying)}
                for work_id in sorted(done):
                    click.echo(f"work #{work_id} fingerprinted: {counts.get(work_id, 0)} already-crawled page(s) "
                               "copy it")  # fmt: skip
        waiting -= done
        if not waiting:
            return True
        if not asked and time.monotonic() - since >= settings.no_worker_seconds:
            workers = _workers_on_queue(tasks, settings.task_queue)
            asked = workers is not None
            if workers == []:
                click.echo(
                    click.style("error: ", fg="red", bold=True) + f"no worker consumes the queue "
                    f"{settings.task_queue!r}: start one with `fptrack worker`; the work(s) "
                    f"{', '.join(f'#{w}' for w in sorted(waiting))} are saved and will be indexed once a worker runs",
                    err=True,
                )  # fmt: skip
                return False
        time.sleep(POLL_SECONDS)
    return True


@works.command("license")
@click.argument("work_id", type=int)
@click.argument("sites", nargs=-1, required=True)
@pass_context
@friendly_errors
def works_license(context: Context, work_id: int, sites: tuple[str, ...]) -> None:
    """Allow sites that publish a work under licence.

    SITES are hosts (or host:port) where work WORK_ID is published under licence: copies found there are
    recorded with status 'licensed' (see them with `fptrack matches --status licensed`), not flagged."""
    from fptrack.compare.licensing import add_licensed_site

    with context.session() as session:
        for site in sites:
            try:
                relabelled = add_licensed_site(session, work_id, site)
            except (LookupError, ValueError) as error:
                raise CliError(str(error).strip("'\"")) from None
            click.echo(f"work #{work_id}: {site} is licensed ({relabelled} existing match(es) relabelled)")


@works.command("list")
@pass_context
@friendly_errors
def works_list(context: Context) -> None:
    """List the registered works."""
    from fptrack.storage.models import Chapter, Match, Work

    with context.session() as session:
        chapters = dict(session.execute(select(Chapter.work_id, func.count()).group_by(Chapter.work_id)).all())
        matches = dict(session.execute(select(Match.work_id, func.count()).group_by(Match.work_id)).all())
        rows = [
            (w.id, w.title, chapters.get(w.id, 0), len(w.text), matches.get(w.id, 0))
            for w in session.scalars(select(Work).order_by(Work.id))
        ]
    if not rows:
        click.echo("no works registered yet: fptrack works add FILE")
        return
    _print_table(["id", "title", "chapters", "characters", "matches"], rows)


# ------------------------------------------------------------------------------------------------- crawl


@main.command()
@click.argument("urls", nargs=-1, required=True)
@click.option("--depth", default=2, show_default=True, type=click.IntRange(0, 50), help="Link depth to follow.")
@click.option("--max-pages", default=200, show_default=True, type=click.IntRange(1), help="Stop after this many pages.")
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
@click.option("--delay", type=click.FloatRange(0), help="Seconds at least between two requests to a site "
              "(default: FPTRACK_CRAWL_DELAY).")  # fmt: skip
@click.option("--ignore-robots", is_flag=True, help="Do not obey robots.txt (default: FPTRACK_CRAWL_OBEY_ROBOTS).")
@click.option("--distributed", is_flag=True, help="Share the crawl with other processes and machines through Redis "
              "(FPTRACK_CRAWL_REDIS_URL): the same command elsewhere joins the running crawl of the first URL's site.")
@click.option(
    "--render-js",
    type=click.Choice(["auto", "yes", "no"]),
    default="auto",
    show_default=True,
    help="Render pages built by scripts in Chromium: auto = pages with scripts and (almost) no static text, yes = "
    "every HTML page, no = never.",
)
@pass_context
@friendly_errors
def crawl(
    context: Context,
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
    for them). Once every page is compared, text the site repeats on many pages (its template) is set aside and
    the pages it touches are compared again. Prints progress, then a summary and the pages that copy registered
    works. Exits 1 when the crawl failed or its pages could not be handed to the workers, 130 when interrupted.

    Polite by default: robots.txt obeyed, AutoThrottle on, FPTRACK_CRAWL_CONCURRENCY_PER_SITE requests at a time
    per site. Private, loopback, link-local, multicast and reserved destinations are refused (and listed as
    failures) unless allowed with --allow-private-host or FPTRACK_ALLOW_PRIVATE_HOSTS.

    With --distributed the frontier is shared in Redis: the first process seeds the start URLs, the same command run
    while it crawls (on this machine or another) joins it, with its depth and page limit; the last process to finish
    writes the job's totals (docs/monitoring.md, "Crawls over several machines")."""
    from fptrack.crawler import CrawlProgress
    from fptrack.crawler.pages import CrawlOptions
    from fptrack.crawler.runner import check_options
    from fptrack.jobs.crawls import WaitProgress, run_crawl_job
    from fptrack.jobs.sites import one_off_claim

    options = CrawlOptions(
        allow_private_hosts=allow_private,
        scrapy_settings=parse_scrapy_settings(scrapy_set),
        delay=delay,
        obey_robots=False if ignore_robots else None,
        render_js=render_js,
    )
    check_options(options)
    from fptrack.crawler.render import plan_rendering

    plan_rendering(render_js, context.settings)  # --render-js yes without Chromium: one line, before any job

    sessions = context.sessions()
    shared = None
    if distributed:
        from fptrack.crawler.distributed import SharedCrawl
        from fptrack.crawler.links import request_url
        from fptrack.storage.sites import site_of

        shared = SharedCrawl.connect(context.settings, site_of(request_url(urls[0])))
        joined = shared.enter(depth=depth, max_pages=max_pages)
        if joined.role == "joined":
            click.echo(f"joining the running distributed crawl of {shared.site} (depth {joined.depth}, limit "
                       f"{joined.max_pages} pages)", err=True)  # fmt: skip

    def progress(update: CrawlProgress) -> None:
        if not quiet:
            click.echo(
                f"[{update.pages_seen} fetched, limit {update.max_pages}] {update.last_status} {update.last_url}",
                err=True,
            )

    last_shown = [-1.0]

    def waiting(update: WaitProgress) -> None:
        now = time.monotonic()
        if now - last_shown[0] >= 2.0 or update.compared == update.queued:
            last_shown[0] = now
            click.echo(f"workers: {update.compared}/{update.queued} page(s) compared", err=True)

    # a one-off crawl keeps a sign of life: killed, its job is marked failed, not left "running" (jobs.sites);
    # a distributed crawl's processes keep theirs in Redis
    alive = one_off_claim(sessions, context.settings) if shared is None else nullcontext(None)
    try:
        with alive as started:
            outcome = run_crawl_job(
                context.settings, sessions, list(urls), depth=depth, max_pages=max_pages, progress=progress,
                waiting=waiting, options=options, shared=shared, on_start=started,
            )  # fmt: skip
    finally:
        if shared is not None:
            shared.close()
    if not outcome.whole_job:
        click.echo(f"this process's part of distributed crawl #{outcome.job_id}: "
                   f"{outcome.stats.pages_seen if outcome.stats else 0} page(s); the last process to finish "
                   "records the job's totals")  # fmt: skip
    stats = outcome.stats
    if stats is not None and (stats.pages_seen or not outcome.error):
        statuses = ", ".join(f"{count} x {status}" for status, count in sorted(stats.by_status.items()))
        click.echo(
            f"crawled {stats.pages_seen} page(s) in {outcome.elapsed_seconds:.1f}s ({statuses or 'none'}); "
            f"{stats.pages_with_text} with text, {outcome.pages_unchanged} unchanged since the last crawl; "
            f"{len(stats.failures)} failed"
        )
        for url, reason in stats.failures[:10]:
            click.echo(f"  failed: {url}: {reason}")
        for note in stats.notes:
            click.echo(f"  note: {note}")
    if outcome.copies:
        click.echo(f"{len(outcome.copies)} page(s) copy registered works:")
        for url, count in outcome.copies:
            click.echo(f"  {url} ({count} chapter match{'es' if count != 1 else ''})")
    elif outcome.ok:
        click.echo("no copies of registered works found")
    if outcome.status == "interrupted":
        click.echo(
            click.style("error: ", fg="red", bold=True)
            + f"crawl #{outcome.job_id} interrupted; {outcome.pages_compared} page(s) compared, the rest are kept "
            "and compared by the next crawl or `fptrack maintain`",
            err=True,
        )
        sys.exit(130)
    if not outcome.ok:
        raise CliError(outcome.error or f"crawl #{outcome.job_id} failed")
    click.echo("see them all with: fptrack matches")


def parse_scrapy_settings(pairs: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``('DOWNLOAD_DELAY=2', ...)`` -> ``(('DOWNLOAD_DELAY', '2'), ...)``; a usage error names a malformed pair."""
    parsed = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"-s {pair!r}: expected NAME=VALUE, e.g. -s DOWNLOAD_DELAY=2")
        parsed.append((name.strip(), value.strip()))
    return tuple(parsed)


# ------------------------------------------------------------------------------------------------- check


@main.command()
@click.argument("source")
@click.option("--context-chars", default=30, show_default=True, help="Characters shown around each passage.")
@click.option("--allow-private-host", "allow_private", multiple=True, metavar="HOST",
              help="Let a URL on HOST (host, host:port or network) be fetched although it is private or loopback.")  # fmt: skip
@pass_context
@friendly_errors
def check(context: Context, source: str, context_chars: int, allow_private: tuple[str, ...]) -> None:
    """Compare one file or URL with the registry now.

    Shows the verdict for a text file or an http(s) URL with the copied passages highlighted. Nothing is stored. Exit status 3 when it copies a registered work."""
    from fptrack.compare.service import compare_document
    from fptrack.compare.works import decode_work_text, read_work_file
    from fptrack.fingerprint.pipeline import fingerprint_text

    if source.startswith(("http://", "https://")):
        text, label = _fetch_one(context, source, allow_private), source
    else:
        text, label = decode_work_text(read_work_file(Path(source)), source).text, source
    with context.session() as session:
        document = fingerprint_text(text)
        verdicts = [v for v in compare_document(session, document, context.settings) if v.copied_chars]
    flagged = [v for v in verdicts if v.flagged]
    if not flagged:
        click.echo(f"{label}: no copy of a registered work found")
        for v in verdicts[:3]:
            click.echo(f"  closest: {v.work_title} / {v.chapter_title}: {v.copied_chars} characters in common")
        return
    click.echo(click.style(f"{label}: copies {len(flagged)} chapter(s) of registered works", bold=True))
    for v in flagged:
        click.echo(
            f"\n  {v.work_title} / chapter {v.chapter_index} {v.chapter_title}  score {v.score:.2f}  "
            f"({v.copied_chars} characters; {', '.join(v.methods)})"
        )
        for page_start, page_end, work_start, work_end in v.spans[:8]:
            before = text[max(0, page_start - context_chars) : page_start].replace("\n", " ")
            copied = text[page_start:page_end].replace("\n", " ")
            if len(copied) > 160:
                copied = copied[:75] + " … " + copied[-75:]
            after = text[page_end : page_end + context_chars].replace("\n", " ")
            click.echo(f"    [{page_start}:{page_end}] <- work [{work_start}:{work_end}]")
            click.echo("      " + before + click.style(copied, fg="red", bold=True) + after)
    sys.exit(3)


def _fetch_one(context: Context, url: str, allow_private: tuple[str, ...] = ()) -> str:
    from fptrack.crawler import run_crawl
    from fptrack.crawler.pages import CrawlOptions

    pages: list[Any] = []
    options = CrawlOptions(allow_private_hosts=allow_private)
    stats = run_crawl([url], settings=context.settings, depth=0, max_pages=1, sink=pages.append, options=options)
    if not pages:
        reason = stats.failures[0][1] if stats.failures else "no response"
        raise CliError(f"cannot fetch {url}: {reason}")
    page = pages[0]
    if page.status != 200 or not page.text.strip():
        raise CliError(f"{url}: HTTP {page.status}, no text to check {('(' + page.error + ')') if page.error else ''}")
    return str(page.text)


# ----------------------------------------------------------------------------------------------- matches


@main.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("--status", default="flagged", show_default=True, help="flagged, licensed, confirmed, dismissed or all.")
@click.option("--work", "work_id", type=int, help="Only matches of this work id.")
@pass_context
@friendly_errors
def matches(context: Context, fmt: str, status: str, work_id: int | None) -> None:
    """List the matches found, with their id (for `fptrack review ID ...`) and review status.

    With --format json: one object per line with page_url, work_id, work_title, chapter_index, chapter_title,
    score, methods, spans ([page_start, page_end, work_start, work_end] in characters of the original texts),
    first_seen, then id and status. CSV has the same columns in that order (cells a spreadsheet would read as
    a formula are prefixed with an apostrophe)."""
    from fptrack.admin.exports import CSV_MATCH_COLUMNS, csv_lines, csv_match_row
    from fptrack.compare.records import match_to_dict
    from fptrack.storage.models import Match

    with context.session() as session:
        query = select(Match).options(joinedload(Match.page), joinedload(Match.work), joinedload(Match.chapter))
        if status != "all":
            query = query.where(Match.status == status)
        if work_id is not None:
            query = query.where(Match.work_id == work_id)
        records = [
            {**match_to_dict(m), "id": m.id, "status": m.status}
            for m in session.scalars(query.order_by(Match.first_seen, Match.id))
        ]
    if fmt == "json":
        for record in records:
            click.echo(json.dumps(record, ensure_ascii=False))
    elif fmt == "csv":
        for line in csv_lines(CSV_MATCH_COLUMNS, (csv_match_row(record) for record in records)):
            click.echo(line, nl=False)
    elif not records:
        click.echo("no matches" + (f" with status {status}" if status != "all" else ""))
    else:
        _print_table(
            ["id", "status", "score", "work", "chapter", "page", "methods", "first seen"],
            [
                (
                    r["id"],
                    r["status"],
                    f"{r['score']:.2f}",
                    r["work_title"],
                    f"{r['chapter_index']} {r['chapter_title']}",
                    r["page_url"],
                    ",".join(r["methods"]),
                    r["first_seen"][:19],
                )
                for r in records
            ],
        )


@main.command()
@click.option("--by", "dimension", type=click.Choice(["work", "host", "day"]), default="work", show_default=True)
@click.option("--days", type=click.IntRange(1), help="Only matches first seen in the last N days.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@pass_context
@friendly_errors
def report(context: Context, dimension: str, days: int | None, fmt: str) -> None:
    """Match counts per work, per host or per day, by review status.

    CSV columns: key, flagged, confirmed, dismissed, licensed, pages, total (the same as the JSON fields)."""
    from datetime import timedelta

    from fptrack.analytics.rollups import match_rollup
    from fptrack.storage.models import utcnow

    since = utcnow() - timedelta(days=days) if days else None
    with context.session() as session:
        rows = match_rollup(session, dimension, since=since)  # type: ignore[arg-type]
    if fmt == "json":
        for row in rows:
            click.echo(json.dumps(row.as_json(), ensure_ascii=False))
    elif fmt == "csv":
        from fptrack.admin.exports import csv_lines
        from fptrack.analytics.rollups import ROLLUP_COLUMNS

        for line in csv_lines(ROLLUP_COLUMNS, (row.as_json() for row in rows)):
            click.echo(line, nl=False)
    elif not rows:
        click.echo("no matches yet")
    else:
        _print_table(
            [dimension, "flagged", "confirmed", "dismissed", "licensed", "pages"],
            [(r.key, r.flagged, r.confirmed, r.dismissed, r.licensed, r.pages) for r in rows],
        )


@main.group()
def analytics() -> None:
    """The kept roll-ups behind the dashboard."""


@analytics.command("rebuild")
@pass_context
@friendly_errors
def analytics_rebuild(context: Context) -> None:
    """Recompute the match roll-ups (per day, work, host and status) from the matches.

    The database keeps them in step with every change by itself; rebuild after restoring or bulk-loading
    matches with the triggers off, or to check them. On PostgreSQL, writes to matches wait until it is done."""
    from fptrack.analytics.rollups import kept_rollup, rebuild_rollups

    with context.session() as session:
        before = kept_rollup(session)
        rows = rebuild_rollups(session)
        changed = kept_rollup(session) != before
    click.echo(f"match roll-ups rebuilt: {rows} rows" + (" (they had drifted)" if changed else " (unchanged)"))


def _print_table(headers: list[str], rows: list[tuple[Any, ...]]) -> None:
    import unicodedata

    def width(value: str) -> int:
        return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in value)

    def clip(value: str, limit: int = 60) -> str:
        out, used = "", 0
        for ch in value:
            w = width(ch)
            if used + w > limit:
                return out + "…"
            out, used = out + ch, used + w
        return out

    cells = [[clip(str(c)) for c in row] for row in rows]
    widths = [max([width(h)] + [width(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h + " " * (widths[i] - width(h)) for i, h in enumerate(headers))
    click.echo(line.rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(c + " " * (widths[i] - width(c)) for i, c in enumerate(row)).rstrip())


@main.command()
@click.option(
    "--older-than",
    default=60,
    show_default=True,
    type=click.IntRange(0),
    help="Pick up pages and works left behind for at least this many seconds.",
)
@pass_context
@friendly_errors
def maintain(context: Context, older_than: int) -> None:
    """Index upkeep and the sweep for work left behind; safe to run on a schedule.

    Hands on again pages stored but never compared and works registered but never indexed (a lost task, a dead
    worker, a broker that was down), re-splits overloaded Simhash buckets (boilerplate pages make them) so that
    look-ups stay fast, brings the corpus statistics up to date, and reports orphaned index rows. With workers,
    `fptrack worker --beat` runs the sweep every FPTRACK_SWEEP_EVERY seconds and the upkeep every
    FPTRACK_MAINTAIN_EVERY seconds."""
    from fptrack.compare.maintenance import run_maintenance
    from fptrack.jobs.pipeline import sweep_left_behind, unsettled_sites

    tasks = context.tasks()
    with context.session() as session:
        left = sweep_left_behind(session, older_than_seconds=older_than)
    if left.pages or left.works:
        where = "here" if context.settings.tasks_in_process else "to the workers"
        click.echo(f"left behind: {len(left.pages)} page(s) not compared, {len(left.works)} work(s) not indexed; "
                   f"handing them on {where}")  # fmt: skip
        for work_id in left.works:
            tasks.index_work.delay(work_id)
        for start in range(0, len(left.pages), tasks.PAGES_PER_TASK):
            tasks.process_pages.delay(left.pages[start : start + tasks.PAGES_PER_TASK])
    else:
        click.echo("left behind: nothing")
    with context.session() as session:
        unsettled = unsettled_sites(session)
    if unsettled:
        click.echo(f"settling {len(unsettled)} site(s) whose pages changed since they last settled")
        for site_id in unsettled:
            tasks.settle_site.delay(site_id)
    with context.session() as session:
        report = run_maintenance(session, context.settings)
    buckets, corpus = report.buckets, report.corpus
    click.echo(
        f"simhash index {buckets.layout}: {buckets.fingerprints:,} fingerprints, "
        f"mean bucket {buckets.mean_bucket_size:.2f}, re-split threshold {buckets.threshold:,.0f}"
    )
    if buckets.split:
        click.echo(f"re-split {len(buckets.split)} overloaded bucket(s), {buckets.rows_filed:,} rows under sub-keys:")
        for table_no, key, size in buckets.split[:20]:
            click.echo(f"  table {table_no} key {key}: {size:,} fingerprints")
    else:
        click.echo("no overloaded buckets")
    click.echo(f"corpus statistics: +{corpus.documents_added} document(s), {corpus.documents:,} in all")
    dangling = {name: count for name, count in report.orphans.items() if count}
    click.echo("orphaned index rows: " + (", ".join(f"{n}={c}" for n, c in dangling.items()) if dangling else "none"))


# ------------------------------------------------------------------------------------ serve, worker, demo


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--debug", is_flag=True, help="Flask debug mode with the Werkzeug debugger: loopback hosts only.")
@click.option("--production", is_flag=True, help="Serve with gunicorn (several worker processes).")
@click.option("--workers", type=click.IntRange(1, 64), help="gunicorn workers with --production (default: 2 per core + 1).")
@pass_context
@friendly_errors
def serve(context: Context, host: str, port: int, debug: bool, production: bool, workers: int | None) -> None:
    """Run the admin web app.

    Dashboard, works, and the review of matches with their evidence, for logged-in accounts (create the first
    with `fptrack users add NAME --role admin`). Without --production: Werkzeug's development server. With
    --production: gunicorn, to put behind a reverse proxy that terminates TLS."""
    from fptrack.core.settings import is_loopback_host

    if debug and production:
        raise click.UsageError("--debug is for the development server, not --production")
    if workers is not None and not production:
        raise click.UsageError("--workers applies to --production")
    if debug and not is_loopback_host(host):
        raise CliError(
            f"--debug runs the Werkzeug debugger, which executes code sent by the browser: refused on {host}; "
            "use --host 127.0.0.1"
        )
    context.sessions()  # a clear error now rather than on the first request
    _serve_warnings(context, host, debug=debug, production=production)
    if production:
        from fptrack.admin.production import bind_address, default_workers, run_production

        count = workers or default_workers()
        click.echo(f"admin on http://{bind_address(host, port)}/ with gunicorn, {count} worker(s) (Ctrl+C to stop)")
        run_production(context.settings, host, port, count)
        return
    from fptrack.admin.web import create_app

    app = create_app(context.settings)
    click.echo(f"admin on http://{host}:{port}/ (Ctrl+C to stop)")
    app.run(host=host, port=port, debug=debug, use_reloader=False)


def _serve_warnings(context: Context, host: str, *, debug: bool, production: bool) -> None:
    from fptrack.storage.models import User
    from fptrack.core.settings import is_loopback_host

    def warn(message: str) -> None:
        click.echo(click.style("warning: ", fg="yellow", bold=True) + message, err=True)

    settings = context.settings
    if debug:
        warn("debug mode: the Werkzeug debugger runs code typed into the browser; never leave it running")
    if not production and not is_loopback_host(host):
        warn(f"the development server is listening on {host}; use --production behind a TLS proxy")
    if not is_loopback_host(host) and all(is_loopback_host(h) for h in settings.admin_hosts):
        warn("FPTRACK_ADMIN_HOSTS names only loopback hosts: requests for any other host name are refused")
    if settings.admin_cookies_secure and not production:
        warn("session cookies are Secure (HTTPS only): logging in over plain http will not stick")
    with context.session() as session:
        if session.scalar(select(User.id).limit(1)) is None:
            warn("no accounts yet: create the first admin with `fptrack users add NAME --role admin`")


@main.command()
@click.option("--concurrency", "-c", default=0, type=int, help="Worker processes (default: one per core).")
@click.option("--loglevel", default="INFO", show_default=True)
@click.option("--beat", is_flag=True, help="Also run the scheduler: periodic upkeep (`fptrack maintain`) and the crawls of "
              "monitored sites when due (`fptrack sites`), the takedown re-checks (`fptrack takedowns`); one per cluster. "
              "Or run it alone with `fptrack beat`.")  # fmt: skip
@click.option("--crawls/--no-crawls", default=True, show_default=True,
              help="Also take the scheduler's crawl tasks (start the due site crawls here, the takedown re-checks). "
              "--no-crawls: fingerprint and compare only, and run `fptrack crawler` elsewhere.")  # fmt: skip
@pass_context
@friendly_errors
def worker(context: Context, concurrency: int, loglevel: str, beat: bool, crawls: bool) -> None:
    """Run a Celery worker for the fingerprint stage.

    Needs FPTRACK_BROKER_URL (redis:// or amqp://); start one per machine, with one process per core. It consumes
    FPTRACK_TASK_QUEUE and, unless --no-crawls, the crawl queue (FPTRACK_TASK_QUEUE.crawls) too, so one worker
    with --beat runs everything. Check it answers with `fptrack ping`."""
    queues = [context.settings.task_queue] + ([context.settings.crawl_task_queue] if crawls else [])
    _run_worker(context, "worker", queues, concurrency, loglevel, beat=beat)


@main.command()
@click.option("--concurrency", "-c", default=2, show_default=True, type=click.IntRange(1),
              help="Crawl tasks at a time (each site crawl then runs in a process of its own).")  # fmt: skip
@click.option("--loglevel", default="INFO", show_default=True)
@pass_context
@friendly_errors
def crawler(context: Context, concurrency: int, loglevel: str) -> None:
    """Run a crawler: a Celery worker for the scheduler's crawl tasks only.

    It consumes the crawl queue (FPTRACK_TASK_QUEUE.crawls): the scheduler's "start the due site crawls", each
    crawl then run as `fptrack sites run NAME --scheduled` in a process of its own on this machine (Scrapy,
    Chromium; logs in <data dir>/logs/site-ID.log), and the takedown re-checks. The crawled pages are
    fingerprinted by the workers (`fptrack worker --no-crawls`). Run crawlers where the bandwidth is."""
    _run_worker(context, "crawler", [context.settings.crawl_task_queue], concurrency, loglevel, beat=False)


def _run_worker(context: Context, role: str, queues: list[str], concurrency: int, loglevel: str, *, beat: bool) -> None:
    if context.settings.tasks_in_process:
        raise CliError("FPTRACK_BROKER_URL is not set: tasks run in-process, there is nothing for a worker to do")
    tasks = context.tasks()
    # a node name of its own per process, so that several workers on one machine answer `fptrack ping` apart
    argv = ["worker", f"--loglevel={loglevel}", "--without-gossip", "--without-mingle",
            f"--hostname={role}-{os.getpid()}@%h", f"--queues={','.join(queues)}"]  # fmt: skip
    if concurrency:
        argv.append(f"--concurrency={concurrency}")
    if beat:
        argv += ["--beat", f"--schedule={_beat_schedule_file(context.settings)}"]
    tasks.celery.worker_main(argv)


def _beat_schedule_file(settings: Settings) -> Path:
    """Where the scheduler remembers when each periodic task last ran (so a restart does not run them all)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return settings.data_dir / "celerybeat-schedule"


@main.command()
@click.option("--loglevel", default="INFO", show_default=True)
@pass_context
@friendly_errors
def beat(context: Context, loglevel: str) -> None:
    """Run the scheduler alone: exactly one per cluster.

    Sends the periodic tasks: the sweep (FPTRACK_SWEEP_EVERY) and upkeep (FPTRACK_MAINTAIN_EVERY) to the workers,
    the due site crawls (FPTRACK_SCHEDULE_EVERY) and takedown re-checks (FPTRACK_RECHECK_EVERY) to the crawl queue
    (`fptrack crawler`, or a worker without --no-crawls). It does no work itself: the scheduler of `fptrack worker
    --beat`, in a process of its own. Run exactly one: two would send every task twice. Needs the broker, not the
    database. Its schedule file is <data dir>/celerybeat-schedule."""
    if context.settings.tasks_in_process:
        raise CliError("FPTRACK_BROKER_URL is not set: there are no workers to send scheduled tasks to")
    from fptrack.jobs import tasks

    tasks.configure(context.settings)  # the scheduler only sends messages: it needs the broker, not the database
    tasks.celery.start(["beat", f"--loglevel={loglevel}", f"--schedule={_beat_schedule_file(context.settings)}"])


_WAIT_OPTION = click.option(
    "--wait", default=0.0, show_default=True, type=click.FloatRange(0),
    help="Keep asking for up to this many seconds before giving up (a start-up check: systemd's ExecStartPost).",
)  # fmt: skip


def _keep_trying(wait: float, check: Callable[[], str | None]) -> None:
    """Run ``check`` (None when healthy, else why not) until it passes or ``wait`` seconds are over; the last
    reason is the command's one-line error."""
    deadline = time.monotonic() + wait
    while (reason := check()) is not None:
        if time.monotonic() >= deadline:
            raise CliError(reason)
        time.sleep(1.0)


@main.command()
@click.option("--timeout", default=5.0, show_default=True, type=click.FloatRange(0.1),
              help="Seconds to wait for answers.")  # fmt: skip
@click.option("--queue", "queue_kind", type=click.Choice(["any", "tasks", "crawls"]), default="any", show_default=True,
              help="Only workers consuming this queue: tasks = FPTRACK_TASK_QUEUE (`fptrack worker`), crawls = the "
              "crawl queue (`fptrack crawler`, or a worker without --no-crawls).")  # fmt: skip
@click.option("--local", is_flag=True, help="Only workers on this machine (its host name): a container's own "
              "health check.")  # fmt: skip
@_WAIT_OPTION
@pass_context
@friendly_errors
def ping(context: Context, timeout: float, queue_kind: str, local: bool, wait: float) -> None:
    """Check that workers answer: exit 0 when at least one does within --timeout, else 1 with one line.

    Asks over the broker (FPTRACK_BROKER_URL), not the database; prints the workers that answered and their
    queues. Made for health checks (compose, systemd, `make up`)."""
    if context.settings.tasks_in_process:
        raise CliError("FPTRACK_BROKER_URL is not set: tasks run in-process, there are no workers to ping")
    from celery.utils.nodenames import gethostname

    from fptrack.jobs import tasks

    tasks.configure(context.settings)
    settings = context.settings
    queue = {"any": None, "tasks": settings.task_queue, "crawls": settings.crawl_task_queue}[queue_kind]
    answering: dict[str, list[str]] = {}

    def check() -> str | None:
        try:
            answering.update(tasks.workers_answering(timeout, queue=queue, host=gethostname() if local else None))
        except Exception as error:  # noqa: BLE001 - whatever the broker's client raises means: unreachable
            return f"cannot reach the broker {_shown_broker(settings)}: {error}"
        if answering:
            return None
        where, consuming = " on this machine" if local else "", f" consuming {queue}" if queue else ""
        return f"no worker{consuming}{where} answered within {timeout:g}s on {_shown_broker(settings)}"

    _keep_trying(wait, check)
    for name, queues in sorted(answering.items()):
        click.echo(f"{name}: ok ({', '.join(queues)})")


@main.command()
@click.option("--url", default="http://127.0.0.1:8000/healthz", show_default=True,
              help="The admin's health endpoint.")  # fmt: skip
@_WAIT_OPTION
@friendly_errors
def healthz(url: str, wait: float) -> None:
    """Check the admin: exit 0 when its /healthz answers 200 (the admin runs and its database answers), else 1.

    For health checks where no curl is at hand (the app image, systemd's ExecStartPost)."""
    import urllib.error
    import urllib.request

    def check() -> str | None:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return None if response.status == 200 else f"{url} answered {response.status}"
        except urllib.error.HTTPError as error:
            return f"{url} answered {error.code}"
        except (urllib.error.URLError, OSError) as error:
            return f"{url}: {getattr(error, 'reason', error)}"

    _keep_trying(wait, check)
    click.echo(f"{url}: ok")


def _shown_broker(settings: Settings) -> str:
    from fptrack.crawler.distributed import url_without_password

    return url_without_password(settings.broker_url or "")


@main.command()
@click.option(
    "--dir",
    "demo_dir",
    default=Path("fptrack-demo"),
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The demo's own data folder (made by the demo; never FPTRACK_DATA_DIR or --data-dir).",
)
@click.option("--port", default=0, type=int, help="Port of the demo pirate site (default: any free port).")
@click.option("--keep-serving", is_flag=True, help="Keep the demo site up until Ctrl+C.")
@pass_context
@friendly_errors
def demo(context: Context, demo_dir: Path, port: int, keep_serving: bool) -> None:
    """Show the whole product end to end in a minute.

    On the embedded default: register sample works, serve a small pirate site on 127.0.0.1, crawl it, and
    print the matches. Uses a folder of its own (--dir, ./fptrack-demo by default), which it resets at every run;
    it refuses a folder it did not make, so your data (FPTRACK_DATA_DIR, --data-dir) is never touched."""
    from fptrack.cli.demo import run_demo

    run_demo(context.settings, data_dir=demo_dir, port=port, keep_serving=keep_serving)


# Accounts and reviews live in their own module (cli/users.py).
from fptrack.cli.users import review, users

main.add_command(users)
main.add_command(review)

from fptrack.cli.sites import sites

main.add_command(sites)

from fptrack.cli.takedowns import takedowns

main.add_command(takedowns)

if __name__ == "__main__":  # pragma: no cover
    main()
