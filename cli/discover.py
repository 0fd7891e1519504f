"""``fptrack discover`` and ``fptrack candidates``: the pirate sites nobody listed. The service is
:mod:`jobs.discovery` (links, search providers, networks, probes, decisions); this module parses options and
presents what it returns."""

from __future__ import annotations

import json

import click

from fptrack.cli.common import (
    CliContext,
    echo_warning,
    friendly_errors,
    pass_context,
    print_table,
    private_site_warning,
    schedule_text,
)

__all__ = ["candidates", "discover"]

_HEADERS = ["id", "url", "source", "score", "copies", "pages", "requests", "state", "why"]


def _rows(entries: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [
        (
            c["id"],
            c["url"],
            c["source"],
            f"{float(c['score']):.2f}",  # type: ignore[arg-type]
            c["copies"],
            c["pages_probed"],
            c["requests"],
            c["state"],
            c["error"] or c["detail"],
        )
        for c in entries
    ]


@click.command()
@click.option(
    "--site", "site_name", metavar="NAME", help="Start from this monitored site only [every one with copies]."
)
@click.option("--format", "output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option(
    "--allow-private-host",
    "allow_private",
    multiple=True,
    metavar="HOST",
    help="Let probes reach this host (host:port, address or network) although it is private or loopback. "
    "Repeatable; FPTRACK_ALLOW_PRIVATE_HOSTS adds to it (a monitored site's own --allow-private applies to "
    "the fetches of that site).",
)
@click.option("--no-probe", is_flag=True, help="Propose candidates without probing them.")
@pass_context
@friendly_errors
def discover(
    context: CliContext, /, site_name: str | None, output: str, allow_private: tuple[str, ...], no_probe: bool
) -> None:
    """Find candidate pirate sites now: links on the monitored pirate sites (friend links, mirror notices,
    redirects), search providers (FPTRACK_SEARCH_PROVIDERS) and networks of near-duplicate pages; probe each
    new one (a few pages, guarded and polite) and list every candidate.

    What could not be fetched is said on stderr with the reason: a host the private-address guard refused
    (with how to allow it), a monitored site's page that did not answer. A candidate whose probe was refused
    stays new and is probed by the next run allowed to reach it. With --format json: one object, the summary
    (seeds, proposed, probed, requests, errors, warnings, searches, refused, unreachable) and candidates.

    \b
      fptrack discover                       from every monitored site with copies
      fptrack discover --site books --format json
      fptrack candidates accept 3            monitor candidate 3"""
    from fptrack.jobs.discovery import run_discovery

    report = run_discovery(
        context.sessions(),
        context.settings,
        site_name=site_name,
        allow_private=allow_private,
        probe=not no_probe,
    )
    for line in [*report.errors, *report.warnings]:
        echo_warning(line)
    for url, why in report.unreachable.items():
        echo_warning(f"not fetched: {url}: {why}")
    for host, why in report.refused.items():
        echo_warning(f"not fetched: {host}: {why}")
    if output == "json":
        click.echo(json.dumps(report.as_json(), ensure_ascii=False))
        return
    click.echo(
        f"from {len(report.seeds)} site(s): {report.proposed} new candidate(s), {report.probed} probed, "
        f"{report.requests} request(s)"
        + "".join(f", {n} {name} search(es)" for name, n in report.searches.items())
        + (f", {len(report.refused)} host(s) refused by the private-address guard" if report.refused else "")
    )
    if report.candidates:
        print_table(_HEADERS, _rows(report.candidates))


@click.group()
def candidates() -> None:
    """The candidate sites discovery proposed: list them, accept (monitor), reject or mark licensed."""


@candidates.command("list")
@click.option(
    "--state", type=click.Choice(["new", "probed", "clean", "failed", "accepted", "rejected", "licensed"])
)
@click.option("--format", "output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@pass_context
@friendly_errors
def candidates_list(context: CliContext, /, state: str | None, output: str) -> None:
    """The candidates, likeliest pirates first."""
    from fptrack.jobs.discovery import candidate_json, list_candidates

    with context.session() as session:
        entries = [candidate_json(c) for c in list_candidates(session, state)]
    if output == "json":
        for entry in entries:
            click.echo(json.dumps(entry, ensure_ascii=False))
    else:
        print_table(_HEADERS, _rows(entries))


@candidates.command("accept")
@click.argument("candidate_id", type=int)
@click.option(
    "--allow-private/--no-allow-private", default=False, help="Its crawls may reach a private address."
)
@pass_context
@friendly_errors
def candidates_accept(context: CliContext, /, candidate_id: int, allow_private: bool) -> None:
    """Monitor the candidate's site (schedule FPTRACK_DISCOVERY_SCHEDULE). A site on a private or loopback
    address is crawled only with --allow-private (a warning says so)."""
    from fptrack.jobs.discovery import accept_candidate

    with context.session() as session:
        site = accept_candidate(
            session, candidate_id, context.settings, by="cli", allow_private=allow_private
        )
        shown = f"{site.name} ({site.host}, {schedule_text(site.schedule)})"
        private = private_site_warning(site)
    click.echo(f"candidate {candidate_id} accepted: monitoring site {shown}")
    if private:
        echo_warning(private)


@candidates.command("reject")
@click.argument("candidate_id", type=int)
@pass_context
@friendly_errors
def candidates_reject(context: CliContext, /, candidate_id: int) -> None:
    """Not a pirate site: never proposed again."""
    from fptrack.jobs.discovery import reject_candidate

    with context.session() as session:
        host = reject_candidate(session, candidate_id, by="cli").host
    click.echo(f"candidate {candidate_id} rejected: {host} will not be proposed again")


@candidates.command("licensed")
@click.argument("candidate_id", type=int)
@pass_context
@friendly_errors
def candidates_licensed(context: CliContext, /, candidate_id: int) -> None:
    """A licensed partner: licensed for the works its probe found, never proposed again."""
    from fptrack.jobs.discovery import license_candidate

    with context.session() as session:
        candidate = license_candidate(session, candidate_id, by="cli")
        host, works = candidate.host, len(candidate.works or [])
    click.echo(f"candidate {candidate_id} licensed: {host}, for {works} work(s)")
