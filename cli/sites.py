"""``fptrack sites``: the sites fptrack monitors (settings, schedules) and their crawls. The services are
:mod:`jobs.sites` (specs, CRUD) and :mod:`jobs.site_crawl` (a site's crawl); this module only parses options
and presents what they return. A :class:`jobs.sites.SiteError` is the one-line ``error:`` of
:func:`cli.common.friendly_errors`.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

import click
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.cli.common import (
    CliContext,
    CliError,
    echo_error,
    echo_warning,
    friendly_errors,
    interval_text,
    pass_context,
    print_table,
    private_site_warning,
    schedule_text,
)
from fptrack.storage.models import CrawlJob, Site

__all__ = ["sites"]


def _site_options(command: Any) -> Any:
    """The settings of a site, shared by ``add`` and ``edit`` (``None`` = not given)."""
    options = [
        click.option(
            "--depth", type=click.IntRange(0, 50), help="Link depth followed from the start URLs [2]."
        ),
        click.option("--max-pages", type=click.IntRange(1), help="Pages per crawl at most [200]."),
        click.option(
            "--allowed-host",
            "allowed_hosts",
            multiple=True,
            metavar="HOST",
            help="Another site (host or host:port) that links may lead to. Repeatable.",
        ),
        click.option(
            "--include",
            multiple=True,
            metavar="REGEX",
            help="Follow only links matching one of these (re.search). Repeatable.",
        ),
        click.option(
            "--exclude", multiple=True, metavar="REGEX", help="Never follow links matching this. Repeatable."
        ),
        click.option(
            "--schedule",
            metavar="WHEN",
            help="Crawl every N seconds (3600, 30m, 6h, 1d) or on a cron expression ('0 3 * * *', UTC); "
            "'' for manual only [manual].",
        ),
        click.option(
            "--rate",
            type=float,
            metavar="PER_SECOND",
            help="Requests per second at most to the site, from every crawl, re-check and rendering together "
            "[FPTRACK_SITE_RATE, 1].",
        ),
        click.option(
            "--delay",
            type=click.FloatRange(0),
            help="Seconds at least between two requests [FPTRACK_CRAWL_DELAY].",
        ),
        click.option(
            "--concurrency",
            type=click.IntRange(1),
            help="Requests to the site at a time [FPTRACK_CRAWL_CONCURRENCY_PER_SITE].",
        ),
        click.option(
            "--obey-robots/--ignore-robots", default=None, help="Obey the site's robots.txt [obey]."
        ),
        click.option(
            "--render-js",
            type=click.Choice(["auto", "yes", "no"]),
            help="Render pages built by scripts in Chromium [auto]: auto = pages with scripts and next to no "
            "static text, yes = every HTML page, no = never.",
        ),
        click.option(
            "--allow-private/--no-allow-private",
            default=None,
            help="Let crawls reach the site's hosts although their addresses are private or loopback [no].",
        ),
        click.option(
            "--distributed/--no-distributed",
            default=None,
            help="Crawls share one frontier in Redis (FPTRACK_CRAWL_REDIS_URL): `sites run` on "
            "other machines joins the running crawl [no].",
        ),
        click.option("--enable/--disable", "enabled", default=None, help="Scheduled crawls run [enabled]."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _changes(values: dict[str, Any]) -> dict[str, Any]:
    names = {"allowed_hosts": "allowed_hosts", "include": "include", "exclude": "exclude"}
    changes: dict[str, Any] = {}
    for key, value in values.items():
        if value is None or (key in names and not value):
            continue
        changes[key] = tuple(value) if isinstance(value, tuple) else value
    return changes


@click.group()
def sites() -> None:
    """The sites fptrack monitors: their crawl settings and schedules.

    \b
      fptrack sites add books http://pirate.example/ --schedule 6h --depth 3
      fptrack sites list
      fptrack sites run books          crawl it now
      fptrack worker --beat            scheduled crawls run by themselves

    Every setting and its default: docs/monitoring.md."""


@sites.command("add")
@click.argument("name")
@click.argument("urls", nargs=-1, required=True)
@_site_options
@pass_context
@friendly_errors
def sites_add(context: CliContext, /, name: str, urls: tuple[str, ...], **values: Any) -> None:
    """Monitor a site: NAME and its start URLs.

    The site is the host of the first URL; pages crawled there before (by `fptrack crawl`) are its pages. With
    --schedule it is crawled at once by `fptrack worker --beat`, then on its schedule (which may not be
    shorter than the scheduler's tick, FPTRACK_SCHEDULE_EVERY)."""
    from fptrack.jobs.sites import SiteSpec, add_site

    changes = _changes(values)
    tick = context.settings.schedule_every
    with context.session() as session:
        site = add_site(session, SiteSpec(name=name, start_urls=urls, **changes), tick=tick)
        shown, private = _describe(site), private_site_warning(site, "or add the site with --allow-private")
    click.echo(f"monitoring site {shown}")
    if private:
        echo_warning(private)


@sites.command("edit")
@click.argument("name")
@click.option(
    "--start-url", "start_urls", multiple=True, metavar="URL", help="Replace the start URLs. Repeatable."
)
@click.option("--rename", help="A new name for the site.")
@_site_options
@pass_context
@friendly_errors
def sites_edit(
    context: CliContext, /, name: str, start_urls: tuple[str, ...], rename: str | None, **values: Any
) -> None:
    """Change settings of a monitored site (only the options given). A new schedule is due at once."""
    from fptrack.jobs.sites import edit_site

    changes = _changes(values)
    if start_urls:
        changes["start_urls"] = start_urls
    if rename:
        changes["name"] = rename
    if not changes:
        raise click.UsageError("nothing to change: give at least one option (see --help)")
    with context.session() as session:
        site = edit_site(session, name, tick=context.settings.schedule_every, **changes)
        shown = _describe(site)
        private = private_site_warning(site) if {"start_urls", "allow_private"} & set(changes) else ""
    click.echo(f"site {shown}")
    if private:
        echo_warning(private)


@sites.command("remove")
@click.argument("name")
@pass_context
@friendly_errors
def sites_remove(context: CliContext, name: str) -> None:
    """Stop monitoring a site.

    Its settings and schedule are dropped and it is no longer crawled by the scheduler. Nothing is deleted:
    its pages, matches, reviews and crawl history stay (they are evidence, and plain crawls may have made
    them); `fptrack sites add` with the same host takes them up again."""
    from fptrack.jobs.sites import remove_site

    with context.session() as session:
        host = remove_site(session, name).host
    click.echo(f"no longer monitoring {name} ({host}); its pages and matches are kept")


@sites.command("list")
@pass_context
@friendly_errors
def sites_list(context: CliContext) -> None:
    """The monitored sites, their schedules and their last crawls."""
    with context.session() as session:
        rows = []
        for site in session.scalars(select(Site).where(Site.managed.is_(True)).order_by(Site.name)):
            last = _jobs(session, int(site.id), 1)
            rows.append(
                (
                    site.name,
                    site.host,
                    schedule_text(site.schedule),
                    "yes" if site.enabled else "no",
                    _when(site.next_crawl_at) if site.enabled and site.schedule else "-",
                    f"#{last[0].id} {last[0].status}" if last else "never",
                )
            )
    if not rows:
        click.echo("no monitored sites yet: fptrack sites add NAME URL...")
        return
    print_table(["name", "host", "schedule", "enabled", "next crawl", "last crawl"], rows)


@sites.command("show")
@click.argument("name")
@pass_context
@friendly_errors
def sites_show(context: CliContext, name: str) -> None:
    """A monitored site's settings and its recent crawls."""
    from fptrack.crawler.resume import state_dir
    from fptrack.jobs.crawls import pace_line
    from fptrack.jobs.sites import find_site, interval_factor, spec_of

    with context.session() as session:
        site = find_site(session, name)
        spec = spec_of(site)
        click.echo(f"site {site.name} ({site.host}), {'enabled' if site.enabled else 'disabled'}")
        for key in (
            "start_urls",
            "allowed_hosts",
            "depth",
            "max_pages",
            "include",
            "exclude",
            "schedule",
            "rate",
            "delay",
            "concurrency",
            "obey_robots",
            "render_js",
            "allow_private",
            "distributed",
        ):
            value = getattr(spec, key)
            if isinstance(value, tuple):
                value = " ".join(value) or "-"
            elif value is None:
                value = "default"
            elif key == "schedule":
                value = schedule_text(str(value))
            click.echo(f"  {key:<14} {value}")
        click.echo(
            f"  {'next crawl':<14} {_when(site.next_crawl_at) if site.schedule and site.enabled else '-'}"
        )
        if site.schedule.isdigit():
            factor = interval_factor(int(site.quiet_crawls or 0), context.settings.schedule_backoff_max)
            quiet = f" (quiet for {site.quiet_crawls} crawls)" if site.quiet_crawls else ""
            click.echo(f"  {'visited every':<14} {interval_text(int(site.schedule) * factor)}{quiet}")
        last = next((j for j in _jobs(session, int(site.id), 10) if pace_line(j.stats)), None)
        if last is not None:
            click.echo(f"  {'last pace':<14} {pace_line(last.stats)} (crawl #{last.id})")
        state = state_dir(context.settings.data_dir, int(site.id))
        if state.exists():  # an interrupted crawl's frontier: the next crawl continues it (crawler.resume)
            click.echo(f"  {'resumes from':<14} {state}")
        jobs = _jobs(session, int(site.id), 10)
        if jobs:
            click.echo("recent crawls:")
            print_table(
                ["job", "trigger", "status", "started", "pages", "failed", "copies", "error"],
                [
                    (
                        j.id,
                        j.trigger,
                        j.status,
                        _when(j.started_at),
                        j.pages_seen,
                        j.pages_failed,
                        j.copies_found,
                        j.error,
                    )
                    for j in jobs
                ],
            )


@sites.command("run")
@click.argument("name")
@click.option("--scheduled", is_flag=True, help="Started by the scheduler (recorded as trigger 'schedule').")
@click.option("--quiet", "-q", is_flag=True, help="No per-page progress lines.")
@click.option(
    "--join", is_flag=True, help="Only join the running crawl of a distributed site (exit 1 when none runs)."
)
@pass_context
@friendly_errors
def sites_run(context: CliContext, name: str, scheduled: bool, quiet: bool, join: bool) -> None:
    """Crawl a monitored site now, with its settings.

    At most one crawl per site at a time: when another is running (scheduled or not), this one says so and
    exits, except for a distributed site (--distributed), where this process joins the running crawl and
    shares its work (with --join it only joins). Prints a summary and the pages that copy registered works;
    exits 1 when the crawl failed."""
    from fptrack.crawler import CrawlProgress
    from fptrack.jobs.site_crawl import report_lines, run_site, waiting_lines

    def progress(update: CrawlProgress) -> None:
        if not quiet:
            click.echo(
                f"[{update.pages_seen} fetched, limit {update.max_pages}] {update.last_status} "
                f"{update.last_url}",
                err=True,
            )

    waiting = waiting_lines(lambda line: click.echo(line, err=True))
    result = run_site(
        context.settings,
        context.sessions(),
        name,
        trigger="schedule" if scheduled else "site",
        progress=progress,
        waiting=waiting,
        join=join,
    )
    if result.skipped:
        if scheduled:
            click.echo(result.skipped)
            return
        raise CliError(result.skipped)
    outcome = result.outcome
    assert outcome is not None  # a crawl that was not skipped has an outcome
    for line in report_lines(result.site_name, outcome):
        click.echo(line)
    if not outcome.ok:
        echo_error(outcome.error or f"crawl #{outcome.job_id} {outcome.status}")
        sys.exit(130 if outcome.status == "interrupted" else 1)


def _jobs(session: Session, site_id: int, limit: int) -> list[CrawlJob]:
    query = select(CrawlJob).where(CrawlJob.site_id == site_id).order_by(CrawlJob.id.desc()).limit(limit)
    return list(session.scalars(query))


def _when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment is not None else "-"


def _describe(site: Site) -> str:
    schedule = (
        f"every {site.schedule} s"
        if site.schedule.isdigit()
        else (f"cron {site.schedule!r}" if site.schedule else "manual")
    )
    return f"{site.name} ({site.host}): {' '.join(site.start_urls)}, depth {site.depth}, {schedule}"
