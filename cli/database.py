"""``fptrack init``, ``fptrack maintain``, ``fptrack db partition`` and ``fptrack analytics rebuild``: the
database, its upkeep and the sweep for work left behind, its partitions, and the kept roll-ups. The services
are :mod:`storage.db`, :mod:`compare.maintenance`, :mod:`jobs.sweep`, :mod:`jobs.settling`,
:mod:`storage.partitions` and :mod:`analytics.rollups`; this module parses options and presents what they
return."""

from __future__ import annotations

import click

from fptrack.cli.common import CliContext, friendly_errors, pass_context, print_table
from fptrack.core.settings import Settings
from fptrack.storage.db import migrate

__all__ = ["analytics", "db", "init", "maintain"]


@click.command()
@pass_context
@friendly_errors
def init(context: CliContext) -> None:
    """Create the database or migrate it to the current schema.

    Safe to run again, and from several machines at once on PostgreSQL (an advisory lock serialises them)."""
    revision = migrate(context.settings)
    _index_entities(context)
    click.echo(f"database ready at schema revision {revision}: {_shown_url(context.settings)}")


def _index_entities(context: CliContext) -> None:
    """The named-entity rows of the works registered before migration 0035 (the meaning path's candidates):
    one commit per work, so a run stopped part way resumes where it was; nothing to do costs one query."""
    from fptrack.compare.entities import index_missing

    def progress(done: int, total: int, work_id: int) -> None:
        click.echo(f"entity index: work {work_id} ({done}/{total})", err=True)

    with context.session() as session:
        indexed = index_missing(session, progress, commit=True)
    if indexed:
        click.echo(f"entity index: {len(indexed)} works registered before it indexed")


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
    from fptrack.jobs.settling import unsettled_sites
    from fptrack.jobs.sweep import sweep_left_behind

    tasks = context.tasks()
    with context.session() as session:
        left = sweep_left_behind(session, older_than_seconds=older_than, skip_running=True)
    if left.pages or left.works:
        where = "here" if context.settings.tasks_in_process else "to the workers"
        click.echo(
            f"left behind: {len(left.pages)} page(s) not compared, {len(left.works)} work(s) not "
            f"indexed; handing them on {where}"
        )
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
    if report.partitions_added:
        click.echo(f"page_codes partitions added ahead: {', '.join(report.partitions_added)}")
    dangling = {name: count for name, count in report.orphans.items() if count}
    click.echo(
        "orphaned index rows: " + (", ".join(f"{n}={c}" for n, c in dangling.items()) if dangling else "none")
    )


@click.group()
def db() -> None:
    """The database's layout: partitions of the largest per-page table (PostgreSQL)."""


@db.command("partition")
@click.option(
    "--pages-per-partition",
    default=1_000_000,
    show_default=True,
    type=click.IntRange(1),
    help="Page ids per range: small enough for one range's GIN index to stay in the database server's cache "
    "while crawls write it (~7.7 GB per million pages).",
)
@click.option(
    "--ahead",
    default=2,
    show_default=True,
    type=click.IntRange(0),
    help="Empty ranges to keep beyond the largest page id (`fptrack maintain` keeps them there).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and its SQL; change nothing.")
@pass_context
@friendly_errors
def db_partition(context: CliContext, pages_per_partition: int, ahead: int, dry_run: bool) -> None:
    """Split page_codes (the pages' samples under their GIN index) into ranges of page ids. PostgreSQL only.

    Run it once, before ~1M pages (its GIN index outgrows a 16 GB server's cache at ~2M; docs/capacity.md):
    crawls then write the newest range's small index only, and retention and VACUUM work per range; a newly
    registered work probes every range, so keep ranges large. No row is copied: the table becomes the first
    range as it is, ranges for the next --pages-per-partition ids follow, and a DEFAULT range catches ids past
    them until `fptrack maintain` (hourly with workers) adds the next ones.

    Safe on a live database: one transaction under an advisory lock (two runs never race), holding an ACCESS
    EXCLUSIVE lock on page_codes and a SHARE ROW EXCLUSIVE lock on pages while PostgreSQL reads the table's
    page ids once (70 ms at 3,000 pages, seconds per million). Crawls and workers wait meanwhile, they do not
    fail; a lock it cannot get within 10 s ends it with nothing changed. Running it again only adds missing
    ranges ahead."""
    from fptrack.storage.partitions import partition_page_codes, partition_report

    with context.session() as session:
        plan = partition_page_codes(
            session, pages_per_partition=pages_per_partition, ahead=ahead, dry_run=dry_run
        )
    verb = "would" if dry_run else "did"
    if plan.converts:
        click.echo(
            f"page_codes: plain table, largest page id {plan.max_page_id:,}; {verb} turn it into ranges of "
            f"{plan.pages_per_partition:,} ids without copying a row:"
        )
    elif plan.ranges:
        click.echo(f"page_codes: already partitioned; {verb} add {len(plan.ranges)} range(s) ahead:")
    else:
        click.echo(f"page_codes: already partitioned, {ahead} range(s) ahead of page id {plan.max_page_id:,}")
    for name, lower, upper in plan.ranges:
        first = "the lowest id" if lower is None else f"{lower:,}"
        click.echo(f"  {name}: page ids {first} to {upper - 1:,}")
    if plan.moved:
        click.echo(f"  {plan.moved:,} row(s) of the default partition moved into their ranges")
    if dry_run:
        click.echo("SQL:")
        for statement in plan.statements:
            click.echo(f"  {statement};")
        return
    with context.session() as session:
        partitions = partition_report(session)
    rows = [
        (
            p.name,
            "default" if p.default else _range_text(p.lower, p.upper),
            "?" if p.rows is None else f"{p.rows:,}",
            f"{p.bytes / 2**20:,.1f} MB",
        )
        for p in partitions
    ]
    print_table(["partition", "page ids", "rows (estimate)", "size"], rows)


def _range_text(lower: int | None, upper: int | None) -> str:
    return f"{'' if lower is None else f'{lower:,}'}..{'' if upper is None else f'{upper - 1:,}'}"


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
