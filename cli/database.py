"""``fptrack init``, ``fptrack maintain`` and ``fptrack analytics rebuild``: the database, its upkeep and the
sweep for work left behind, and the kept roll-ups. The services are :mod:`storage.db`,
:mod:`compare.maintenance`, :mod:`jobs.pipeline` and :mod:`analytics.rollups`; this module parses options
and presents what they return."""

from __future__ import annotations

import click

from fptrack.cli.common import CliContext, friendly_errors, pass_context
from fptrack.core.settings import Settings
from fptrack.storage.db import migrate

__all__ = ["analytics", "init", "maintain"]


@click.command()
@pass_context
@friendly_errors
def init(context: CliContext) -> None:
    """Create the database or migrate it to the current schema.

    Safe to run again, and from several machines at once on PostgreSQL (an advisory lock serialises them)."""
    revision = migrate(context.settings)
    click.echo(f"database ready at schema revision {revision}: {_shown_url(context.settings)}")


def _shown_url(settings: Settings) -> str:
    from sqlalchemy.engine import make_url

    return make_url(settings.database_url).render_as_string(hide_password=True)


@click.command()
@click.option(
    "--older-than",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Pick up pages and works left behind for at least this many seconds (pages of crawls still running "
    "are theirs to hand on).",
)
@pass_context
@friendly_errors
def maintain(context: CliContext, older_than: int) -> None:
    """Index upkeep and the sweep for work left behind; safe to run on a schedule.

    Hands on again pages stored but never compared and works registered but never indexed (a lost task, a dead
    worker, a broker that was down), re-splits overloaded Simhash buckets (boilerplate pages make them) so
    that look-ups stay fast, brings the corpus statistics up to date, and reports orphaned index rows. With
    workers, `fptrack worker --beat` runs the sweep every FPTRACK_SWEEP_EVERY seconds and the upkeep every
    FPTRACK_MAINTAIN_EVERY seconds."""
    from fptrack.compare.maintenance import run_maintenance
    from fptrack.jobs.pipeline import sweep_left_behind, unsettled_sites

    tasks = context.tasks()
    with context.session() as session:
        left = sweep_left_behind(session, older_than_seconds=older_than, skip_running=True)
    if left.pages or left.works:
        where = "here" if context.settings.tasks_in_process else "to the workers"
        click.echo(f"left behind: {len(left.pages)} page(s) not compared, {len(left.works)} work(s) not "
                   f"indexed; handing them on {where}")  # fmt: skip
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
        click.echo(
            f"re-split {len(buckets.split)} overloaded bucket(s), {buckets.rows_filed:,} rows under sub-keys:"
        )
        for table_no, key, size in buckets.split[:20]:
            click.echo(f"  table {table_no} key {key}: {size:,} fingerprints")
    else:
        click.echo("no overloaded buckets")
    click.echo(f"corpus statistics: +{corpus.documents_added} document(s), {corpus.documents:,} in all")
    click.echo(
        f"pages gone for good whose fingerprints were retired: {report.retired:,} "
        "(FPTRACK_RETAIN_GONE_DAYS, FPTRACK_RETAIN_UNSEEN_DAYS; matches and evidence kept)"
    )
    dangling = {name: count for name, count in report.orphans.items() if count}
    click.echo(
        "orphaned index rows: " + (", ".join(f"{n}={c}" for n, c in dangling.items()) if dangling else "none")
    )


@click.group()
def analytics() -> None:
    """The kept roll-ups behind the dashboard."""


@analytics.command("rebuild")
@pass_context
@friendly_errors
def analytics_rebuild(context: CliContext) -> None:
    """Recompute the match roll-ups (per day, work, host and status) from the matches.

    The database keeps them in step with every change by itself; rebuild after restoring or bulk-loading
    matches with the triggers off, or to check them. On PostgreSQL, writes to matches wait until it is
    done."""
    from fptrack.analytics.rollups import kept_rollup, rebuild_rollups

    with context.session() as session:
        before = kept_rollup(session)
        rows = rebuild_rollups(session)
        changed = kept_rollup(session) != before
    click.echo(
        f"match roll-ups rebuilt: {rows} rows" + (" (they had drifted)" if changed else " (unchanged)")
    )
