"""``fptrack leads``: cloud-drive share links found on crawled pages (leads to a whole book), their review
(``confirm``, ``dismiss``) and the notice of a platform's confirmed leads (``notice``). The services are
:mod:`storage.leads` and :mod:`jobs.leads`; docs/leads.md says what a lead is."""

from __future__ import annotations

import json

import click

from fptrack.cli.common import CliContext, bom_option, echo_csv, friendly_errors, pass_context, print_table

__all__ = ["LEAD_COLUMNS", "leads"]

LEAD_COLUMNS = (
    "id",
    "platform",
    "share_id",
    "url",
    "code",
    "state",
    "work_ids",
    "work_titles",
    "basis",
    "pages",
    "first_seen",
    "last_seen",
    "context",
)
PLATFORM_NAMES = ("baidu", "aliyun", "quark", "123pan", "lanzou")
LEAD_STATES = ("new", "confirmed", "dismissed")


@click.group(invoke_without_command=True)
@click.option("--work", "work_id", type=int, help="Only leads of this work id.")
@click.option("--platform", type=click.Choice(PLATFORM_NAMES), help="Only this platform's share links.")
@click.option("--state", type=click.Choice(LEAD_STATES), help="Only leads in this state.")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True
)
@bom_option
@click.pass_context
def leads(
    ctx: click.Context, work_id: int | None, platform: str | None, state: str | None, fmt: str, bom: bool
) -> None:
    """Cloud-drive share links (百度网盘, 阿里云盘, 夸克, 123云盘, 蓝奏云) posted on crawled pages: leads to a
    whole book, one per share, with its 提取码, the work it is a lead of and every page it was seen on.

    \b
      fptrack leads                                 every lead, latest seen first
      fptrack leads --work 3 --platform baidu --format json
      fptrack leads confirm 12                      a reviewer confirms lead 12 (it may go into a notice)
      fptrack leads dismiss 13
      fptrack leads notice --platform baidu --work 3   a notice of work 3's confirmed Baidu leads

    JSON is one object per line: id, platform, share_id, url, code, state, works [{work_id, work_title}],
    basis (title: the text beside the link names the work; page: the page it was on matches the work),
    first_seen, last_seen, pages [{page_url, context, first_seen, last_seen}]. CSV: one line per lead, after
    a UTF-8 byte order mark unless --no-bom."""
    if ctx.invoked_subcommand is not None:
        return
    _list(ctx.obj, work_id, platform, state, fmt, bom)


@friendly_errors
def _list(
    context: CliContext, work_id: int | None, platform: str | None, state: str | None, fmt: str, bom: bool
) -> None:
    from fptrack.storage.leads import list_leads

    with context.session() as session:
        rows = list_leads(session, work_id=work_id, platform=platform, state=state)
    if fmt == "json":
        for row in rows:
            click.echo(json.dumps(row.as_json(), ensure_ascii=False))
    elif fmt == "csv":
        records = (
            {
                "id": row.id,
                "platform": row.platform,
                "share_id": row.share_id,
                "url": row.url,
                "code": row.code,
                "state": row.state,
                "work_ids": " ".join(str(w) for w, _ in row.works),
                "work_titles": " / ".join(t for _, t in row.works),
                "basis": row.basis,
                "pages": " ".join(s.page_url for s in row.sightings),
                "first_seen": row.first_seen.isoformat(),
                "last_seen": row.last_seen.isoformat(),
                "context": row.sightings[0].context if row.sightings else "",
            }
            for row in rows
        )
        echo_csv(LEAD_COLUMNS, records, bom=bom)
    elif not rows:
        click.echo("no leads" + (" matching these filters" if work_id or platform or state else ""))
    else:
        print_table(
            ["id", "platform", "share link", "code", "state", "work", "pages", "last seen"],
            [
                (
                    row.id,
                    row.platform,
                    row.url,
                    row.code or "-",
                    row.state,
                    " / ".join(t for _, t in row.works) or "-",
                    len(row.sightings),
                    row.last_seen.strftime("%Y-%m-%d %H:%M"),
                )
                for row in rows
            ],
        )


def _review(context: CliContext, lead_id: int, state: str, by: str) -> None:
    from fptrack.storage.leads import review_lead

    with context.session() as session:
        lead = review_lead(session, lead_id, state, by=by)
        click.echo(f"lead {lead.id} ({lead.platform} {lead.url}) is {lead.state}")


@leads.command("confirm")
@click.argument("lead_id", type=int)
@click.option("--by", default="", help="Who reviewed it (recorded with the decision).")
@pass_context
@friendly_errors
def leads_confirm(context: CliContext, lead_id: int, by: str) -> None:
    """Confirm lead LEAD_ID: the share holds the work (only confirmed leads go into notices)."""
    _review(context, lead_id, "confirmed", by)


@leads.command("dismiss")
@click.argument("lead_id", type=int)
@click.option("--by", default="", help="Who reviewed it (recorded with the decision).")
@pass_context
@friendly_errors
def leads_dismiss(context: CliContext, lead_id: int, by: str) -> None:
    """Dismiss lead LEAD_ID (kept, never deleted; ``confirm`` takes it back)."""
    _review(context, lead_id, "dismissed", by)


@leads.command("notice")
@click.option("--platform", required=True, type=click.Choice(PLATFORM_NAMES), help="The platform written to.")
@click.option("--work", "work_id", required=True, type=int, help="The work whose confirmed leads are listed.")
@click.option("--sender", "sender_name", help="The sender's name (default: the only sender).")
@click.option(
    "--lang", "language", type=click.Choice(["zh", "en"]), help="Default: the contact's, the sender's, zh."
)
@click.option("--to", "recipient", help="An email address (default: the platform's contact or channel).")
@pass_context
@friendly_errors
def leads_notice(
    context: CliContext,
    platform: str,
    work_id: int,
    sender_name: str | None,
    language: str | None,
    recipient: str | None,
) -> None:
    """Draft a notice listing WORK's confirmed share links on PLATFORM, addressed to the platform's complaint
    channel (built in: docs/leads.md; a contact added with `fptrack contacts add <platform host> EMAIL`
    overrides it). The draft is kept with the other notices (fptrack notices list); its text is printed."""
    from fptrack.jobs.leads import draft_lead_notice
    from fptrack.jobs.notices import find_sender

    with context.session() as session:
        sender = find_sender(session, sender_name) if sender_name else None
        notice = draft_lead_notice(
            session,
            platform=platform,
            work_id=work_id,
            actor="cli",
            sender=sender,
            language=language,
            recipient=recipient,
        )
        click.echo(f"drafted notice {notice.id} to {notice.recipient_name or notice.recipient_address}")
        click.echo(notice.text, nl=False)
