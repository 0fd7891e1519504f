"""The long-running processes and their health checks: ``fptrack serve`` (the admin), ``worker``, ``crawler``,
``beat`` (Celery), ``ping`` (do workers answer?) and ``healthz`` (does the admin?). The admin is
:mod:`admin.web` / :mod:`admin.production`, the Celery app and its tasks :mod:`jobs.tasks`; this module starts
them with the settings and says what is wrong when it cannot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click
from sqlalchemy import select

from fptrack.cli.common import CliContext, CliError, echo_warning, friendly_errors, pass_context
from fptrack.core.settings import Settings

__all__ = ["beat", "crawler", "healthz", "ping", "serve", "worker"]


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option(
    "--debug", is_flag=True, help="Flask debug mode with the Werkzeug debugger: loopback hosts only."
)
@click.option("--production", is_flag=True, help="Serve with gunicorn (several worker processes).")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    help="gunicorn workers with --production (default: 2 per core + 1).",
)
@pass_context
@friendly_errors
def serve(
    context: CliContext, host: str, port: int, debug: bool, production: bool, workers: int | None
) -> None:
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
            "--debug runs the Werkzeug debugger, which executes code sent by the browser: refused on "
            f"{host}; use --host 127.0.0.1"
        )
    context.sessions()  # a clear error now rather than on the first request
    _serve_warnings(context, host, debug=debug, production=production)
    if production:
        from fptrack.admin.production import bind_address, default_workers, run_production

        count = workers or default_workers()
        click.echo(
            f"admin on http://{bind_address(host, port)}/ with gunicorn, {count} worker(s) (Ctrl+C to stop)"
        )
        run_production(context.settings, host, port, count)
        return
    from fptrack.admin.web import create_app

    app = create_app(context.settings)
    click.echo(f"admin on http://{host}:{port}/ (Ctrl+C to stop)")
    app.run(host=host, port=port, debug=debug, use_reloader=False)


def _serve_warnings(context: CliContext, host: str, *, debug: bool, production: bool) -> None:
    from fptrack.core.settings import is_loopback_host
    from fptrack.storage.models import User

    settings = context.settings
    if debug:
        echo_warning(
            "debug mode: the Werkzeug debugger runs code typed into the browser; never leave it running"
        )
    if not production and not is_loopback_host(host):
        echo_warning(f"the development server is listening on {host}; use --production behind a TLS proxy")
    if not is_loopback_host(host) and all(is_loopback_host(h) for h in settings.admin_hosts):
        echo_warning(
            "FPTRACK_ADMIN_HOSTS names only loopback hosts: requests for any other host name are refused"
        )
    if settings.admin_cookies_secure and not production:
        echo_warning("session cookies are Secure (HTTPS only): logging in over plain http will not stick")
    with context.session() as session:
        if session.scalar(select(User.id).limit(1)) is None:
            echo_warning("no accounts yet: create the first admin with `fptrack users add NAME --role admin`")


@click.command()
@click.option("--concurrency", "-c", default=0, type=int, help="Worker processes (default: one per core).")
@click.option("--loglevel", default="INFO", show_default=True)
@click.option(
    "--beat",
    is_flag=True,
    help="Also run the scheduler: periodic upkeep (`fptrack maintain`) and the crawls of monitored sites "
    "when due (`fptrack sites`), the takedown re-checks (`fptrack takedowns`); one per cluster. Or run it "
    "alone with `fptrack beat`.",
)
@click.option(
    "--crawls/--no-crawls",
    default=True,
    show_default=True,
    help="Also take the scheduler's crawl tasks (start the due site crawls here, the takedown re-checks). "
    "--no-crawls: fingerprint and compare only, and run `fptrack crawler` elsewhere.",
)
@click.option(
    "--meaning/--no-meaning",
    "meaning_queue",
    default=True,
    show_default=True,
    help="Also run the meaning path's checks (queue FPTRACK_TASK_QUEUE.meaning: rewrites and translations "
    "aligned by a model, seconds of CPU a page), in a companion process of this worker at a lower CPU "
    "priority (nice 10), one check at a time, so that compares never wait behind them. --no-meaning: leave "
    "them to a worker started with --only-meaning.",
)
@click.option(
    "--only-meaning",
    is_flag=True,
    help="Take the meaning path's checks only (a machine of its own for the model).",
)
@pass_context
@friendly_errors
def worker(
    context: CliContext,
    concurrency: int,
    loglevel: str,
    beat: bool,
    crawls: bool,
    meaning_queue: bool,
    only_meaning: bool,
) -> None:
    """Run a Celery worker for the fingerprint stage.

    Needs FPTRACK_BROKER_URL (redis:// or amqp://); start one per machine, with one process per core. It
    consumes FPTRACK_TASK_QUEUE and, unless --no-crawls, the crawl queue (FPTRACK_TASK_QUEUE.crawls); unless
    --no-meaning, a companion worker process (nice 10, one check at a time) consumes the meaning path's queue
    (FPTRACK_TASK_QUEUE.meaning), so one worker with --beat runs everything. Check it answers with
    `fptrack ping`."""
    settings = context.settings
    queues = [settings.task_queue] + ([settings.crawl_task_queue] if crawls else [])
    if only_meaning:
        _run_worker(context, "meaning", [settings.meaning_task_queue], concurrency, loglevel, beat=beat)
        return
    if not (meaning_queue and settings.meaning):
        _run_worker(context, "worker", queues, concurrency, loglevel, beat=beat, load_tables=True)
        return
    # A check holds its process for seconds to minutes (a model embeds every sentence): taken by this
    # worker's pool it would hold back the compares of a crawl behind it (measured: a one-in-ten site's crawl
    # 296 s instead of 17 s, docs/meaning-crawl.md). In a process of its own at a lower priority it takes the
    # CPU the compares leave.
    companion = _start_meaning_companion(settings, loglevel)
    try:
        _run_worker(context, "worker", queues, concurrency, loglevel, beat=beat, load_tables=True)
    finally:
        _stop(companion)


MEANING_NICENESS = 10


def _start_meaning_companion(settings: Settings, loglevel: str) -> subprocess.Popen[bytes]:
    """``fptrack worker --only-meaning -c 1`` beside this worker, at niceness :data:`MEANING_NICENESS`, its
    output on this worker's, ended with it (on Linux even when this process is killed: a parent-death
    signal)."""
    args = [sys.executable, "-m", "fptrack.cli", "--data-dir", str(settings.data_dir)]
    args += ["worker", "--only-meaning", "--concurrency", "1", "--loglevel", loglevel]
    return subprocess.Popen(args, preexec_fn=_lower_priority_and_die_with_parent)  # noqa: PLW1509


def _lower_priority_and_die_with_parent() -> None:
    os.nice(MEANING_NICENESS)
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _stop(process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """A warm shutdown (SIGTERM: the check under way finishes or is handed back), then a kill."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@click.command()
@click.option(
    "--concurrency",
    "-c",
    default=2,
    show_default=True,
    type=click.IntRange(1),
    help="Crawl tasks at a time (each site crawl then runs in a process of its own).",
)
@click.option("--loglevel", default="INFO", show_default=True)
@pass_context
@friendly_errors
def crawler(context: CliContext, concurrency: int, loglevel: str) -> None:
    """Run a crawler: a Celery worker for the scheduler's crawl tasks only.

    It consumes the crawl queue (FPTRACK_TASK_QUEUE.crawls): the scheduler's "start the due site crawls", each
    crawl then run as `python -m fptrack.jobs.site_crawl NAME --scheduled` in a process of its own on this
    machine (Scrapy, Chromium; logs in <data dir>/logs/site-ID.log), and the takedown re-checks. The crawled
    pages are fingerprinted by the workers (`fptrack worker --no-crawls`). Run crawlers where the bandwidth
    is."""
    _run_worker(context, "crawler", [context.settings.crawl_task_queue], concurrency, loglevel, beat=False)


def _run_worker(
    context: CliContext,
    role: str,
    queues: list[str],
    concurrency: int,
    loglevel: str,
    *,
    beat: bool,
    load_tables: bool = False,
) -> None:
    if context.settings.tasks_in_process:
        raise CliError(
            "FPTRACK_BROKER_URL is not set: tasks run in-process, there is nothing for a worker to do"
        )
    from fptrack import taskqueue

    context.tasks()  # the database ready, the app configured and the tasks registered on it
    if load_tables:
        _load_page_tables()
    # a node name of its own per process, so that several workers on one machine answer `fptrack ping` apart
    argv = [
        "worker",
        f"--loglevel={loglevel}",
        "--without-gossip",
        "--without-mingle",
        f"--hostname={role}-{os.getpid()}@%h",
        f"--queues={','.join(queues)}",
    ]
    if concurrency:
        argv.append(f"--concurrency={concurrency}")
    if beat:
        argv += ["--beat", f"--schedule={_beat_schedule_file(context.settings)}"]
    taskqueue.celery.worker_main(argv)


def _load_page_tables() -> None:
    """Load, in the worker's main process, what the first page of every pool process would load
    (:func:`jobs.bootstrap.warm_up`: the normaliser's and the pinyin initials' tables, rjieba's dictionary,
    the registry's codes), then close the database connection it used.

    Why: Celery forks its pool from this process after this call, so the children inherit them loaded and
    shared, instead of each paying ~0.9 s and ~60 MB on its first task for the tables (the fingerprint
    modules load them on first use, as any process that fingerprints only on occasion
    should), and the registry's load besides (a child refreshes it when the registry has changed since). No
    connection may be shared by two processes: the one the sample used is closed before the fork."""
    from fptrack import taskqueue
    from fptrack.jobs.bootstrap import warm_up

    try:
        warm_up(taskqueue.task_sessions(), taskqueue.task_settings())
    finally:
        taskqueue.release_connections()


def _beat_schedule_file(settings: Settings) -> Path:
    """Where the scheduler remembers when each periodic task last ran (so a restart does not run them all)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return settings.data_dir / "celerybeat-schedule"


@click.command()
@click.option("--loglevel", default="INFO", show_default=True)
@pass_context
@friendly_errors
def beat(context: CliContext, loglevel: str) -> None:
    """Run the scheduler alone: exactly one per cluster.

    Sends the periodic tasks: the sweep (FPTRACK_SWEEP_EVERY) and upkeep (FPTRACK_MAINTAIN_EVERY) to the
    workers, the due site crawls (FPTRACK_SCHEDULE_EVERY) and takedown re-checks (FPTRACK_RECHECK_EVERY) to
    the crawl queue (`fptrack crawler`, or a worker without --no-crawls). It does no work itself: the
    scheduler of `fptrack worker --beat`, in a process of its own. Run exactly one: two would send every task
    twice. Needs the broker, not the database. Its schedule file is <data dir>/celerybeat-schedule."""
    if context.settings.tasks_in_process:
        raise CliError("FPTRACK_BROKER_URL is not set: there are no workers to send scheduled tasks to")
    from fptrack import taskqueue
    from fptrack.jobs import tasks

    # the scheduler only sends messages: it needs the broker, not the database
    tasks.configure(context.settings)
    schedule = _beat_schedule_file(context.settings)
    taskqueue.celery.start(["beat", f"--loglevel={loglevel}", f"--schedule={schedule}"])


_WAIT_OPTION = click.option(
    "--wait",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Keep asking for up to this many seconds before giving up (a start-up check: systemd's "
    "ExecStartPost).",
)


def _keep_trying(wait: float, check: Callable[[], str | None]) -> None:
    """Run ``check`` (None when healthy, else why not) until it passes or ``wait`` seconds are over; the last
    reason is the command's one-line error."""
    deadline = time.monotonic() + wait
    while (reason := check()) is not None:
        if time.monotonic() >= deadline:
            raise CliError(reason)
        time.sleep(1.0)


@click.command()
@click.option(
    "--timeout",
    default=5.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="Seconds to wait for answers.",
)
@click.option(
    "--queue",
    "queue_kind",
    type=click.Choice(["any", "tasks", "crawls", "meaning"]),
    default="any",
    show_default=True,
    help="Only workers consuming this queue: tasks = FPTRACK_TASK_QUEUE (`fptrack worker`), "
    "crawls = the crawl queue (`fptrack crawler`, or a worker without --no-crawls), meaning = the meaning "
    "path's queue (a worker without --no-meaning).",
)
@click.option(
    "--local",
    is_flag=True,
    help="Only workers on this machine (its host name): a container's own health check.",
)
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="List every worker that answers within --timeout (waits it out) instead of stopping at the first.",
)
@_WAIT_OPTION
@pass_context
@friendly_errors
def ping(context: CliContext, timeout: float, queue_kind: str, local: bool, every: bool, wait: float) -> None:
    """Check that workers answer: exit 0 when at least one does within --timeout, else 1 with one line.

    Asks over the broker (FPTRACK_BROKER_URL), not the database, and stops at the first worker that answers
    (about a second); --all waits out --timeout and prints every worker that answered, with its queues. Made
    for health checks (compose, systemd, `make up`)."""
    if context.settings.tasks_in_process:
        raise CliError("FPTRACK_BROKER_URL is not set: tasks run in-process, there are no workers to ping")
    from celery.utils.nodenames import gethostname

    from fptrack import taskqueue
    from fptrack.jobs import tasks

    tasks.configure(context.settings)
    settings = context.settings
    queue = {
        "any": None,
        "tasks": settings.task_queue,
        "crawls": settings.crawl_task_queue,
        "meaning": settings.meaning_task_queue,
    }[queue_kind]
    answering: dict[str, list[str]] = {}

    def check() -> str | None:
        try:
            host = gethostname() if local else None
            answering.update(taskqueue.workers_answering(timeout, queue=queue, host=host, first=not every))
        except Exception as error:  # noqa: BLE001 - whatever the broker's client raises means: unreachable
            return f"cannot reach the broker {_shown_broker(settings)}: {error}"
        if answering:
            return None
        where, consuming = " on this machine" if local else "", f" consuming {queue}" if queue else ""
        return f"no worker{consuming}{where} answered within {timeout:g}s on {_shown_broker(settings)}"

    _keep_trying(wait, check)
    for name, queues in sorted(answering.items()):
        click.echo(f"{name}: ok ({', '.join(queues)})")


@click.command()
@click.option(
    "--url", default="http://127.0.0.1:8000/healthz", show_default=True, help="The admin's health endpoint."
)
@_WAIT_OPTION
@friendly_errors
def healthz(url: str, wait: float) -> None:
    """Check the admin: exit 0 when its /healthz answers 200 (the admin runs and its database answers), else
    1.

    For health checks where no curl is at hand (the app image, systemd's ExecStartPost)."""
    from fptrack.core.plain_http import HttpFailure, http_request

    def check() -> str | None:
        try:
            status = http_request(url, timeout=5).status
        except HttpFailure as error:
            return f"{url}: {error}"
        return None if status == 200 else f"{url} answered {status}"

    _keep_trying(wait, check)
    click.echo(f"{url}: ok")


def _shown_broker(settings: Settings) -> str:
    from fptrack.crawler.distributed import url_without_password

    return url_without_password(settings.broker_url or "")
