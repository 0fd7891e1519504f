"""``fptrack notices``: takedown notices for confirmed matches, drafted, sent by email, exported, followed up.
The services are :mod:`jobs.notices` (the life of a notice), :mod:`jobs.notice_render` (what it says) and
:mod:`jobs.delivery` (SMTP, exports); the evidence bundles :mod:`services.evidence.bundle`.
The command line has no roles: whoever runs it owns the database; what it refuses is a notice for a match no
reviewer confirmed, and sending one that lacks an element of the law.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from fptrack.cli.common import CliContext, CliError, bom_option, friendly_errors, pass_context, print_table
from fptrack.storage.models import NOTICE_LANGUAGES, NOTICE_STATES, Notice, iso_utc, utcnow

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = ["notices"]


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _summary(notice: Notice) -> dict[str, object]:
    return {
        "id": notice.id,
        "host": notice.host,
        "state": notice.state,
        "kind": notice.kind,
        "language": notice.language,
        "sender": notice.sender.name if notice.sender is not None else None,
        "recipient": notice.recipient_address,
        "items": len(notice.items),
        "open_items": sum(1 for item in notice.items if item.closed_at is None),
        "created_at": iso_utc(notice.created_at),
        "sent_at": iso_utc(notice.sent_at),
        "message_id": notice.message_id or None,
        "parent_id": notice.parent_id,
        "text_sha256": notice.text_sha256,
    }


@click.group()
def notices() -> None:
    """Takedown notices: every element of 17 U.S.C. 512(c)(3)(A) and 信息网络传播权保护条例 第十四条, in
    Chinese or English, for confirmed matches only.

    \b
      fptrack notices draft --host pirate.example --lang zh      a draft for the host's confirmed matches
      fptrack notices draft --match 12 --format pdf -o n.pdf     a draft for one match, written as PDF
      fptrack notices send 3                                    send draft 3 (FPTRACK_SMTP_HOST)
      fptrack notices list --format json
      fptrack notices show 3 --eml n3.eml                       its text, and the message as sent
      fptrack notices export 3 --format lumen|urls|urls-by-work|urls-csv
      fptrack notices mark 3 acknowledged|bounced|withdrawn
      fptrack notices follow-up                                 close, remind, escalate now

    Needs a sender (fptrack senders add) and, to send, the host's abuse address (fptrack contacts add).
    What a notice carries and its life: docs/notices.md."""


@notices.command("draft")
@click.option(
    "--match", "match_ids", multiple=True, type=int, metavar="ID", help="A confirmed match (repeatable)."
)
@click.option("--host", help="Every confirmed match on this host (e.g. pirate.example).")
@click.option(
    "--lang", "language", type=click.Choice(NOTICE_LANGUAGES), help="Default: the recipient's, the sender's."
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "html", "pdf"]), default="text", show_default=True
)
@click.option("--sender", "sender_name", help="The sender's name (default: the only sender).")
@click.option("--to", "recipient", help="The recipient's email (default: the host's first contact).")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here, not to stdout."
)
@pass_context
@friendly_errors
def notices_draft(
    context: CliContext,
    match_ids: tuple[int, ...],
    host: str | None,
    language: str | None,
    fmt: str,
    sender_name: str | None,
    recipient: str | None,
    output: Path | None,
) -> None:
    """Draft a notice and print or write it. Refused for a match that is not confirmed, and before a sender
    exists (fptrack senders add); drafting again what an unsent draft names redoes that draft. When an element
    of the law is missing, nothing is printed: the command names what is missing and exits 1 (the draft is
    kept, and is sent once the sender or the contacts are completed: send renders it again)."""
    from fptrack.jobs.notice_render import missing_elements, render_html
    from fptrack.jobs.notices import NoticeError, default_sender, draft_notice, find_sender

    if bool(match_ids) == bool(host):
        raise click.UsageError("name the matches (--match ID) or the host (--host HOST), not both")
    if fmt == "pdf" and output is None:
        raise click.UsageError("--format pdf needs -o FILE")
    with context.session() as session:
        sender = find_sender(session, sender_name) if sender_name else default_sender(session)
        if sender is None:
            raise CliError(_no_sender(session))
        notice = draft_notice(
            session,
            actor=_actor(),
            match_ids=match_ids,
            host=host,
            sender=sender,
            language=language,
            recipient=recipient,
            bundle_settings=context.settings,
        )
        missing = missing_elements(notice)
        if fmt == "text":
            document: str | bytes = notice.text
        else:
            html = render_html(notice, utcnow())
            if fmt == "pdf":
                from fptrack.services.pdf import html_to_pdf

                document = html_to_pdf(
                    html.replace("<head>", '<head><link rel="stylesheet" href="notice.css">', 1)
                )
            else:
                document = html
        number = notice.id
    if missing:
        raise NoticeError(
            f"draft notice {number} is kept but cannot be sent; it lacks: "
            + "; ".join(missing)
            + f" (complete what it lacks, then: fptrack notices send {number})"
        )
    if output is not None:
        if isinstance(document, bytes):
            output.write_bytes(document)
        else:
            output.write_text(document, encoding="utf-8")
        click.echo(f"draft notice {number} written to {output}", err=True)
    else:
        click.echo(document, nl=False)
    click.echo(
        f"draft notice {number} carries every element; send it: fptrack notices send {number}", err=True
    )


@notices.command("send")
@click.argument("notice_id", type=int)
@pass_context
@friendly_errors
def notices_send(context: CliContext, notice_id: int) -> None:
    """Send draft NOTICE_ID through the SMTP relay (FPTRACK_SMTP_HOST...): refused, naming each missing
    element, unless it carries them all. Copies dismissed, licensed, taken down or already in an open notice
    to the same address since the draft are left out, and so is each copy whose page, fetched again just
    before (FPTRACK_NOTICE_REFETCH), is gone or no longer copies it; with none left it is not sent, and says
    why (exit 1). A page that could not be fetched (a time-out, a 5xx) keeps its copy, and says so. This is
    also how a person approves a reminder or an escalation the follow-up drafted."""
    from fptrack.jobs.delivery import DeliveryError
    from fptrack.jobs.notices import NothingLeftError, load_notice, send_notice

    with context.session() as session:
        notice = load_notice(session, notice_id)
        before = len(notice.items)
        try:
            send_notice(session, notice, context.settings, actor=_actor())
        except (DeliveryError, NothingLeftError):
            session.commit()  # the failed attempt (and what the pages answered when fetched again) is kept
            raise
        click.echo(
            f"sent notice {notice.id} to {notice.recipient_address} (Message-ID {notice.message_id}; "
            f"text sha256 {notice.text_sha256})"
        )
        if len(notice.items) < before:
            click.echo(
                f"{before - len(notice.items)} copy(ies) left out (fptrack notices show {notice.id})",
                err=True,
            )
        sent = next((e for e in reversed(notice.events) if e.kind == "sent"), None)
        if sent is not None and "kept though not fetched again: " in sent.detail:
            kept = sent.detail.split("kept though not fetched again: ", 1)[1]
            click.echo(f"kept though its page could not be fetched again: {kept}", err=True)


@notices.command("list")
@click.option("--state", type=click.Choice(NOTICE_STATES), help="Only notices in this state.")
@click.option("--host", help="Only notices about this host.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@pass_context
@friendly_errors
def notices_list(context: CliContext, state: str | None, host: str | None, fmt: str) -> None:
    """The notices, newest first (JSON: one object per line)."""
    from fptrack.jobs.notices import list_notices

    with context.session() as session:
        found = [_summary(n) for n in list_notices(session, state=state, host=host)]
    if fmt == "json":
        for record in found:
            click.echo(json.dumps(record, ensure_ascii=False))
    elif not found:
        click.echo("no notice yet: fptrack notices draft --host HOST")
    else:
        print_table(
            ["id", "host", "state", "kind", "lang", "recipient", "items", "open", "sent at"],
            [
                (
                    r["id"],
                    r["host"],
                    r["state"],
                    r["kind"],
                    r["language"],
                    r["recipient"],
                    r["items"],
                    r["open_items"],
                    (r["sent_at"] or "-"),
                )
                for r in found
            ],
        )


@notices.command("show")
@click.argument("notice_id", type=int)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--eml",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the message exactly as the relay took it here (its SHA-256 is the notice's).",
)
@click.option(
    "--timestamp",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the RFC 3161 time-stamp response over the message's SHA-256 here (openssl ts -verify).",
)
@pass_context
@friendly_errors
def notices_show(
    context: CliContext, notice_id: int, fmt: str, eml: Path | None, timestamp: Path | None
) -> None:
    """A notice: its state, what is missing, its items and events, then its text; what was sent (the
    message's SHA-256, the relay's reply, the time-stamp) once it is sent."""
    from fptrack.jobs.notice_proof import timestamp_time
    from fptrack.jobs.notice_render import missing_elements
    from fptrack.jobs.notices import NoticeError, load_notice

    with context.session() as session:
        notice = load_notice(session, notice_id)
        if eml is not None:
            if not notice.sent_message:
                raise NoticeError(
                    f"notice {notice.id} has no stored message (it is {notice.state}, or was sent before "
                    "messages were kept)"
                )
            eml.write_bytes(bytes(notice.sent_message))
            click.echo(f"wrote {eml} (SHA-256 {notice.sent_message_sha256})", err=True)
        if timestamp is not None:
            if not notice.sent_timestamp:
                raise NoticeError(f"notice {notice.id} has no time-stamp on its message (FPTRACK_TSA_URL)")
            timestamp.write_bytes(bytes(notice.sent_timestamp))
            click.echo(f"wrote {timestamp}", err=True)
        record = {
            **_summary(notice),
            "sent_message_sha256": notice.sent_message_sha256 or None,
            "relay_reply": notice.relay_reply or None,
            "relay_replied_at": iso_utc(notice.relay_replied_at),
            "time_stamped_at": timestamp_time(notice) or None,
            "missing": missing_elements(notice) if notice.state == "draft" else [],
            "items_detail": [
                {
                    "match_id": i.match_id,
                    "url": i.url,
                    "closed_at": iso_utc(i.closed_at),
                    "bundle_sha256": i.bundle_sha256,
                }
                for i in notice.items
            ],
            "events": [
                {
                    "at": iso_utc(e.at),
                    "kind": e.kind,
                    "actor": e.actor,
                    "recipient": e.recipient,
                    "message_id": e.message_id,
                    "detail": e.detail,
                }
                for e in notice.events
            ],
            "text": notice.text,
        }
    if fmt == "json":
        click.echo(json.dumps(record, ensure_ascii=False))
        return
    kind = f"{record['kind']}, {record['language']}"
    click.echo(f"notice {record['id']} · {record['host']} · {record['state']} ({kind})")
    click.echo(f"to {record['recipient'] or '(no recipient)'} · sent {record['sent_at'] or '-'}")
    if record["sent_message_sha256"]:
        click.echo(f"message as sent: SHA-256 {record['sent_message_sha256']} (--eml FILE writes it)")
        click.echo(f"relay replied at {record['relay_replied_at']}: {record['relay_reply']}")
        stamped = record["time_stamped_at"]
        click.echo(f"time-stamped at {stamped} (--timestamp FILE)" if stamped else "not time-stamped")
    for line in record["missing"]:  # type: ignore[attr-defined]
        click.echo(f"missing: {line}")
    for event in record["events"]:  # type: ignore[attr-defined]
        click.echo(
            f"{event['at']}  {event['kind']}  {event['recipient']}  {event['message_id']}  {event['detail']}"
        )
    click.echo("")
    click.echo(record["text"], nl=False)


def _no_sender(session: Session) -> str:
    """Why a notice cannot be drafted without ``--sender``: no sender yet, or several to choose from."""
    from sqlalchemy import func, select

    from fptrack.storage.models import Sender

    if session.scalar(select(func.count()).select_from(Sender)):
        return "there are several senders: name the one sending with --sender NAME (fptrack senders list)"
    return (
        "no sender yet: a notice speaks for a rights holder; add it first: fptrack senders add NAME "
        "--address ... --email ... --signer ... --title ... (fptrack senders add --help)"
    )


@notices.command("export")
@click.argument("notice_id", type=int)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["lumen", "urls", "urls-by-work", "urls-csv"]),
    default="lumen",
    show_default=True,
)
@click.option("--open-only", is_flag=True, help="urls: only the copies still up.")
@click.option(
    "--files",
    "files_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="lumen: write the files its file_uploads_attributes name (the notice as sent, the bundles) here.",
)
@click.option("--country", default="", help="lumen: the sender's and owners' ISO country code (CN, US).")
@bom_option
@pass_context
@friendly_errors
def notices_export(
    context: CliContext,
    notice_id: int,
    fmt: str,
    open_only: bool,
    files_dir: Path | None,
    country: str,
    bom: bool,
) -> None:
    """A notice in a bulk format: a Lumen database notice submission (JSON; type DMCA for an English notice,
    Other for a Chinese one; with --files DIR the files it uploads), the infringing URLs one a line, or
    grouped per work with its authorised original as search engines' bulk forms take them (text or CSV)."""
    from fptrack.jobs.delivery import infringing_urls, lumen_files, lumen_json, urls_by_work
    from fptrack.jobs.notices import NoticeError, load_notice

    with context.session() as session:
        notice = load_notice(session, notice_id)
        if fmt == "lumen":
            try:
                document = lumen_json(notice, country_code=country)
            except ValueError as error:
                raise NoticeError(str(error)) from None
            if files_dir is not None:
                files_dir.mkdir(parents=True, exist_ok=True)
                for _kind, name, data in lumen_files(notice):
                    (files_dir / name).write_bytes(data)
                click.echo(f"wrote {len(lumen_files(notice))} file(s) to {files_dir}", err=True)
            click.echo(json.dumps(document, ensure_ascii=False, indent=2))
        elif fmt == "urls":
            click.echo(infringing_urls(notice, open_only=open_only), nl=False)
        else:
            exported = urls_by_work(notice, open_only=open_only, csv_format=fmt == "urls-csv", bom=bom)
            click.echo(exported, nl=False)


@notices.command("mark")
@click.argument("notice_id", type=int)
@click.argument("mark", type=click.Choice(["acknowledged", "bounced", "withdrawn"]))
@click.option("--note", default="", help="What happened (the recipient's reference, the bounce reason).")
@pass_context
@friendly_errors
def notices_mark(context: CliContext, notice_id: int, mark: str, note: str) -> None:
    """Record what became of a notice: its recipient acknowledged it, it bounced, or it is withdrawn."""
    from fptrack.jobs.notices import load_notice, mark_notice

    with context.session() as session:
        notice = mark_notice(session, load_notice(session, notice_id), mark, actor=_actor(), note=note)
        click.echo(f"notice {notice.id}: {mark} (state {notice.state})")


@notices.command("follow-up")
@pass_context
@friendly_errors
def notices_follow_up(context: CliContext) -> None:
    """Run the follow-up now (as the scheduler does hourly): close the items the re-checks found taken down,
    mark notices whose copies are all gone, and draft a reminder, then an escalation upstream, for copies
    still up FPTRACK_NOTICE_ESCALATE_AFTER days after their notice. Each waits as a draft for a person to
    send it (fptrack notices send ID) unless FPTRACK_NOTICE_AUTO_FOLLOW_UP=true."""
    from fptrack.jobs.notices import follow_up

    with context.session() as session:
        summary = follow_up(session, context.settings)
    click.echo(
        f"{summary.items_closed} copy(ies) found gone, {summary.items_reopened} back up; notices done: "
        f"{len(summary.copies_gone)}; reminders: {len(summary.reminders)}; escalations: "
        f"{len(summary.escalations)}; sent: {len(summary.sent)}"
    )
    for notice_id, why in summary.not_sent.items():
        click.echo(f"notice {notice_id} not sent: {why}")
    for notice_id in summary.no_upstream:
        click.echo(f"notice {notice_id}: no contact upstream to escalate to (fptrack contacts add)")
