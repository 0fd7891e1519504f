"""``fptrack networks``: the pirate networks, groups of sites serving the same texts (:mod:`compare.networks`
finds them from near-duplicate pages as pages arrive)."""

from __future__ import annotations

import json

import click

from fptrack.cli.common import CliContext, friendly_errors, pass_context, print_table

__all__ = ["networks"]


@click.command()
@click.option("--format", "output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@pass_context
@friendly_errors
def networks(context: CliContext, /, output: str) -> None:
    """The pirate networks: their sites, the likely source (whose copies were there first), the works copied,
    copies and takedowns. JSON: one network per line."""
    from fptrack.compare.networks import find_networks

    with context.session() as session:
        found = find_networks(session, context.settings)
    if output == "json":
        for network in found:
            click.echo(json.dumps(network.as_json(), ensure_ascii=False))
        return
    if not found:
        click.echo("no networks yet: sites join one when they share near-duplicate pages with another")
        return
    rows = []
    for network in found:
        rate = "-" if network.takedown_rate is None else f"{network.takedown_rate:.0%}"
        works = ", ".join(title for _, title, _ in network.works[:3]) + (
            " …" if len(network.works) > 3 else ""
        )
        rows.append(
            (
                network.id,
                len(network.sites),
                network.source.host,
                ", ".join(s.host for s in network.sites),
                network.shared_pages,
                works or "-",
                network.copies,
                rate,
            )
        )
    print_table(
        ["network", "sites", "source", "members", "shared pages", "works", "copies", "taken down"], rows
    )
