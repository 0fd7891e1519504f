"""``fptrack meaning``: the meaning path's pending checks (rewrites and translations, :mod:`jobs.meaning`)."""

from __future__ import annotations

import json

import click

from fptrack.cli.common import CliContext, friendly_errors, pass_context

__all__ = ["meaning"]


@click.group()
def meaning() -> None:
    """The meaning path: pages the exact compare flagged nothing on whose cheap features say "maybe" (a
    rewrite, a translation), aligned sentence by sentence with their candidate chapters."""


@meaning.command("run")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr.")
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@pass_context
@friendly_errors
def run(context: CliContext, /, quiet: bool, output: str) -> None:
    """Do every pending check now, in this process: what a crawl killed or interrupted before its meaning
    phase left, or what no worker of the meaning queue has taken yet (a check a worker holds is skipped).
    A check is done once: running this twice does nothing the second time."""
    from fptrack.jobs.meaning import run_pending

    def progress(done: int, total: int) -> None:
        if not quiet:
            click.echo(f"meaning: {done}/{total} page(s) checked", err=True)

    if not context.settings.meaning:
        click.echo(
            "note: FPTRACK_MEANING is off: no page is gated now; checking those already pending", err=True
        )
    done = run_pending(context.sessions(), context.settings, progress=progress)
    if output == "json":
        click.echo(json.dumps(done.as_json()))
    else:
        click.echo(done.line())


@meaning.command("status")
@pass_context
@friendly_errors
def status(context: CliContext, /) -> None:
    """How many meaning checks are pending and done, and the matches they recorded."""
    from sqlalchemy import func, select

    from fptrack.storage.models import MeaningCheck

    with context.session() as session:
        rows = session.execute(
            select(
                MeaningCheck.state, func.count(), func.coalesce(func.sum(MeaningCheck.matches), 0)
            ).group_by(MeaningCheck.state)
        ).all()
    counts = {str(state): (int(n), int(found)) for state, n, found in rows}
    pending, _ = counts.get("pending", (0, 0))
    done, found = counts.get("done", (0, 0))
    click.echo(f"meaning checks: {pending} pending, {done} done ({found} match(es))")
