"""``fptrack takedowns``: whether the copies found were taken down. The re-checks are :mod:`jobs.rechecks`,
the figures :mod:`analytics.takedowns`; this module only parses options and presents what they return. A
:class:`jobs.rechecks.RecheckError` is the one-line ``error:`` of :func:`cli.common.friendly_errors`.
"""

from __future__ import annotations

import json

import click

from fptrack.analytics.takedowns import STATES
from fptrack.cli.common import CliContext, bom_option, echo_csv, friendly_errors, pass_context, print_table

__all__ = ["takedowns"]


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


@click.group(invoke_without_command=True)
@click.option(
    "--state", type=click.Choice(STATES), help="Only matches in this state ('down': gone or removed now)."
)
@click.option("--work", "work_id", type=int, help="Only matches of this work id.")
@click.option("--domain", help="Only pages on this host (e.g. pirate.example or 127.0.0.1:8000).")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True
)
@bom_option
@click.pass_context
def takedowns(
    ctx: click.Context, state: str | None, work_id: int | None, domain: str | None, fmt: str, bom: bool
) -> None:
    """Whether the copies found were taken down: the flagged and confirmed matches with their latest re-check.

    \b
      fptrack takedowns                      every match: state, first seen, taken down at, time to takedown
      fptrack takedowns --state gone --format csv
      fptrack takedowns check                re-check the matches that are due now
      fptrack takedowns check --match 12     re-check match 12 now
      fptrack takedowns stats --by host      takedown rate and time to takedown per site

    States: present (the copy is still there), gone (404/410/451 or no such host), removed (the page is there,
    the copy is not), error (the check could not tell: 5xx, 403, 429, a timeout, a challenge page), unchecked.
    A removal counts as taken down once a second check confirms it. JSON is one object per line with id,
    page_url, work_id, work_title, status, state, first_seen, rechecked_at, taken_down_at,
    time_to_takedown_seconds; CSV has the same columns, after a UTF-8 byte order mark unless --no-bom.
    Settings: docs/monitoring.md."""
    if ctx.invoked_subcommand is not None:
        return
    _list(ctx.obj, state, work_id, domain, fmt, bom)


@friendly_errors
def _list(
    context: CliContext, state: str | None, work_id: int | None, domain: str | None, fmt: str, bom: bool
) -> None:
    from fptrack.analytics.takedowns import takedown_records

    with context.session() as session:
        records = takedown_records(session, state=state, work_id=work_id, domain=domain)
    if fmt == "json":
        for record in records:
            click.echo(json.dumps(record, ensure_ascii=False))
    elif fmt == "csv":
        from fptrack.analytics.takedowns import RECORD_COLUMNS

        echo_csv(RECORD_COLUMNS, records, bom=bom)
    elif not records:
        click.echo("no matches to follow" + (f" in state {state}" if state else ""))
    else:
        print_table(
            ["id", "page", "state", "first seen", "taken down at", "time to takedown"],
            [
                (
                    r["id"],
                    r["page_url"],
                    r["state"],
                    (r["first_seen"] or "")[:19],
                    (r["taken_down_at"] or "-")[:19],
                    _duration(r["time_to_takedown_seconds"]),
                )
                for r in records
            ],
        )


@takedowns.command("check")
@click.option(
    "--match",
    "match_ids",
    multiple=True,
    type=int,
    metavar="ID",
    help="Re-check this match now (repeatable); default: every match that is due.",
)
@click.option(
    "--allow-private-host",
    "allow_private",
    multiple=True,
    metavar="HOST",
    help="Let pages on HOST (host, host:port or network) be fetched although it is private or loopback.",
)
@click.option("--quiet", "-q", is_flag=True, help="No per-page progress lines.")
@pass_context
@friendly_errors
def takedowns_check(
    context: CliContext, match_ids: tuple[int, ...], allow_private: tuple[str, ...], quiet: bool
) -> None:
    """Re-check now whether copies were taken down: fetch their pages again (guarded, polite; pages built by
    scripts rendered in Chromium, chapters split over pages joined, as the crawl read them) and record each
    match as present, gone, removed or error.

    A removal is recorded once a second check at least FPTRACK_RECHECK_CONFIRM_AFTER seconds after the first
    confirms it ("awaiting confirmation" until then). Without --match: the flagged and confirmed matches that
    are due (at most FPTRACK_RECHECK_LIMIT), as the scheduler does: new copies at once, then every
    FPTRACK_RECHECK_YOUNG_EVERY seconds in their first FPTRACK_RECHECK_YOUNG_FOR, every FPTRACK_RECHECK_AFTER
    after; skipped when a scheduled run is under way."""
    from fptrack.crawler.guard import PrivateAddressPolicy
    from fptrack.jobs.rechecks import RecheckProgress, recheck_matches, run_due_rechecks

    try:
        PrivateAddressPolicy.from_entries(allow_private)
    except ValueError as error:
        raise click.UsageError(f"--allow-private-host: {error}") from None
    settings = context.settings
    if allow_private:
        settings = settings.with_overrides(
            allow_private_hosts=(*settings.allow_private_hosts, *allow_private)
        )
    sessions = context.sessions()

    def progress(update: RecheckProgress) -> None:
        if not quiet:
            click.echo(
                f"[{update.done}/{update.total}] {update.url}: {', '.join(sorted(set(update.outcomes)))}"
            )

    if match_ids:
        summary = recheck_matches(settings, sessions, match_ids, progress=progress)
    else:
        summary = run_due_rechecks(settings, sessions, progress=progress)
    if summary.skipped:
        click.echo(f"nothing re-checked: {summary.skipped}")
        return
    if not summary.matches:
        click.echo("no match is due for a re-check")
        return
    counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(summary.outcomes.items()))
    line = (
        f"re-checked {summary.matches} match(es) on {summary.pages} page(s): {counts}; "
        f"{summary.newly_taken_down} newly taken down"
    )
    if summary.pending:
        line += f", {summary.pending} awaiting confirmation"
    if summary.back:
        line += f", {summary.back} back up"
    click.echo(line)


@takedowns.command("stats")
@click.option(
    "--by",
    "grouping",
    type=click.Choice(["all", "host", "work", "notice", "recipient"]),
    default="all",
    show_default=True,
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True
)
@bom_option
@pass_context
@friendly_errors
def takedowns_stats(context: CliContext, grouping: str, fmt: str, bom: bool) -> None:
    """Takedown rate, time to takedown and time to detect (median, 90th percentile), overall or per site or
    work.

    Columns: key, matches (flagged and confirmed), checked, taken_down, rate (taken_down / checked),
    median_seconds, p90_seconds (first seen to the first check that found the copy down), then detect_known,
    detect_median_seconds, detect_p90_seconds (the page's own Last-Modified to first seen, over the matches
    whose page sent one before it was first seen).

    --by notice / --by recipient: time to removal after takedown notices (fptrack notices): key (the notice
    or the recipient's address), notices, copies named, removed since, median_seconds and p90_seconds from
    the notice being sent to each copy being found down."""
    if grouping in ("notice", "recipient"):
        _notice_stats(context, grouping, fmt, bom)
        return
    from fptrack.analytics.takedowns import (
        DETECTION_COLUMNS,
        TAKEDOWN_COLUMNS,
        DetectionRow,
        detection_times,
        takedown_stats,
    )

    with context.session() as session:
        rows = takedown_stats(session, grouping)  # type: ignore[arg-type]
        detected = detection_times(session, grouping)  # type: ignore[arg-type]
    records = [
        {**row.as_json(), **detected.get(row.key, DetectionRow(row.key, 0, None, None)).as_json()}
        for row in rows
    ]
    if fmt == "json":
        for record in records:
            click.echo(json.dumps(record, ensure_ascii=False))
    elif fmt == "csv":
        echo_csv((*TAKEDOWN_COLUMNS, *DETECTION_COLUMNS), records, bom=bom)
    elif not rows:
        click.echo("no matches yet")
    else:
        print_table(
            [
                grouping,
                "matches",
                "checked",
                "taken down",
                "rate",
                "median",
                "p90",
                "detect median",
                "detect p90",
            ],
            [
                (
                    r["key"],
                    r["matches"],
                    r["checked"],
                    r["taken_down"],
                    "-" if r["rate"] is None else f"{r['rate']:.0%}",
                    _duration(r["median_seconds"]),
                    _duration(r["p90_seconds"]),
                    _duration(r["detect_median_seconds"]),
                    _duration(r["detect_p90_seconds"]),
                )
                for r in records
            ],
        )


def _notice_stats(context: CliContext, grouping: str, fmt: str, bom: bool) -> None:
    from fptrack.analytics.takedowns import NOTICE_REMOVAL_COLUMNS, notice_removal_times

    with context.session() as session:
        rows = notice_removal_times(session, grouping)  # type: ignore[arg-type]
    records = [row.as_json() for row in rows]
    if fmt == "json":
        for record in records:
            click.echo(json.dumps(record, ensure_ascii=False))
    elif fmt == "csv":
        echo_csv(NOTICE_REMOVAL_COLUMNS, records, bom=bom)
    elif not rows:
        click.echo("no notice sent yet")
    else:
        print_table(
            [grouping, "notices", "copies", "removed", "median", "p90"],
            [
                (
                    r["key"],
                    r["notices"],
                    r["copies"],
                    r["removed"],
                    _duration(r["median_seconds"]),
                    _duration(r["p90_seconds"]),
                )
                for r in records
            ],
        )
