"""``fptrack senders add|list|edit|remove`` (who signs takedown notices) and ``fptrack contacts
add|list|edit|remove`` (whom a host's notices go to, in escalation order). The services are
:mod:`jobs.notices`; this module parses options and prints what they return.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from fptrack.cli.common import CliContext, friendly_errors, pass_context, print_table
from fptrack.storage.models import (
    CONTACT_KINDS,
    NOTICE_LANGUAGES,
    SENDER_KINDS,
    SENDER_ROLES,
    HostContact,
    Sender,
    iso_utc,
)

__all__ = ["contacts", "senders"]

MAX_PROOF_BYTES = 20 * 1024 * 1024
F = TypeVar("F", bound=Callable[..., Any])


def _sender_options(command: F) -> F:
    options = [
        click.option("--kind", type=click.Choice(SENDER_KINDS), help="A person (本人) or a company (我司)."),
        click.option(
            "--role",
            type=click.Choice(SENDER_ROLES),
            help="The owner of the works' rights, or the owner's agent (代理人: needs --authorisation).",
        ),
        click.option(
            "--owner",
            "rights_owner",
            help="An agent's principal, named when a work names no owner (fptrack works edit --owner).",
        ),
        click.option(
            "--credit-code", "credit_code", help="A company's unified social credit code (统一社会信用代码)."
        ),
        click.option(
            "--legal-rep", "legal_representative", help="A company's legal representative (法定代表人)."
        ),
        click.option("--address", help="Postal address (512(c)(3)(A)(iv); 第十四条 地址)."),
        click.option("--email", help="Email address; notices' Reply-To."),
        click.option("--phone", help="Telephone number."),
        click.option("--signer", "signer_name", help="Who signs: the /s/ Name of the electronic signature."),
        click.option(
            "--title", "signer_title", help="The signer's capacity: the authority to act for the owner."
        ),
        click.option("--lang", "language", type=click.Choice(NOTICE_LANGUAGES), help="Preferred language."),
        click.option(
            "--identity",
            "identities",
            multiple=True,
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="A file proving who the sender is (营业执照 / 身份证明): attached to every notice "
            "(repeatable).",
        ),
        click.option(
            "--authorisation",
            "authorisations",
            multiple=True,
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="An agent's authorisation (授权委托书), for the work --for-work or else for every work "
            "(repeatable).",
        ),
        click.option(
            "--for-work",
            "for_work",
            type=click.IntRange(1, 2**63 - 1),
            help="The work the --authorisation files are for (default: every work).",
        ),
        click.option(
            "--proof",
            "proofs",
            multiple=True,
            hidden=True,
            type=click.Path(path_type=Path),
            help="Moved: a proof of ownership belongs to its work (fptrack works edit ID --proof FILE).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def read_proof(option: str, path: Path) -> bytes:
    """The bytes of a proof file named by ``option``, refused (one line) when it is too large."""
    if path.stat().st_size > MAX_PROOF_BYTES:
        raise click.UsageError(f"{option} {path}: larger than {MAX_PROOF_BYTES // (1024 * 1024)} MB")
    return path.read_bytes()


def _save(
    context: CliContext,
    name: str,
    create: bool,
    proofs: tuple[Path, ...],
    identities: tuple[Path, ...],
    authorisations: tuple[Path, ...],
    for_work: int | None,
    **fields: str | None,
) -> None:
    from fptrack.jobs.notices import save_sender
    from fptrack.services.rights import RightsError, add_proof
    from fptrack.storage.models import Work

    if proofs:
        raise click.UsageError(
            "a proof of ownership belongs to its work: fptrack works edit WORK_ID --proof FILE (a sender "
            "takes --identity and, for an agent, --authorisation)"
        )
    if for_work is not None and not authorisations:
        raise click.UsageError("--for-work names the work of an --authorisation file")
    with context.session() as session:
        sender = save_sender(session, name, create=create, **fields)
        work = None
        if for_work is not None:
            work = session.get(Work, for_work)
            if work is None:
                raise RightsError(f"there is no work with id {for_work} (fptrack works list)")
        for path in identities:
            add_proof(session, path.name, read_proof("--identity", path), kind="identity", sender=sender)
        for path in authorisations:
            content = read_proof("--authorisation", path)
            add_proof(session, path.name, content, kind="authorisation", sender=sender, work=work)
        session.flush()
        click.echo(
            f"{'added' if create else 'saved'} sender {sender.name} ({sender.kind}, {sender.role}; "
            f"{len(sender.proofs)} proof file(s))"
        )


@click.group()
def senders() -> None:
    """Who signs takedown notices: name, address, email, telephone, the signer and their authority, proofs of
    ownership.

    \b
      fptrack senders add "山中出版社" --kind company --credit-code 91110000802100433B --legal-rep "张三" \\
          --address "北京市…" --email rights@example.com --phone "+86 10 …" \\
          --signer "王五" --title "法务总监" --lang zh --identity licence.pdf
      fptrack senders add "维权代理公司" --role agent --authorisation 授权委托书.pdf --for-work 3 ...
      fptrack senders list
      fptrack senders remove "旧代理公司"      (refused while a sent notice names it)
    """


@senders.command("add")
@click.argument("name")
@_sender_options
@pass_context
@friendly_errors
def senders_add(context: CliContext, /, name: str, **options: Any) -> None:
    """Add a sender NAME (a person's or a company's name)."""
    _save(context, name, True, **options)


@senders.command("edit")
@click.argument("name")
@_sender_options
@pass_context
@friendly_errors
def senders_edit(context: CliContext, /, name: str, **options: Any) -> None:
    """Change the sender NAME: the options given are set, proof files added."""
    _save(context, name, False, **options)


@senders.command("remove")
@click.argument("name")
@pass_context
@friendly_errors
def senders_remove(context: CliContext, /, name: str) -> None:
    """Remove the sender NAME and its identity and authorisation files. Refused while a sent notice names it
    (what was sent keeps its sender); drafts that named it are left without a sender."""
    from fptrack.jobs.notices import remove_sender

    with context.session() as session:
        drafts = remove_sender(session, name)
    left = f"; draft(s) {', '.join(map(str, drafts))} now name no sender" if drafts else ""
    click.echo(f"removed sender {name.strip()}{left}")


def _sender_json(sender: Sender) -> dict[str, object]:
    return {
        "name": sender.name,
        "kind": sender.kind,
        "role": sender.role,
        "credit_code": sender.credit_code,
        "legal_representative": sender.legal_representative,
        "rights_owner": sender.rights_owner,
        "address": sender.address,
        "email": sender.email,
        "phone": sender.phone,
        "signer_name": sender.signer_name,
        "signer_title": sender.signer_title,
        "language": sender.language,
        "proofs": [
            {
                "id": p.id,
                "kind": p.kind,
                "work_id": p.work_id,
                "filename": p.filename,
                "sha256": p.sha256,
                "bytes": len(p.content),
            }
            for p in sender.proofs
        ],
        "updated_at": iso_utc(sender.updated_at),
    }


@senders.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@pass_context
@friendly_errors
def senders_list(context: CliContext, fmt: str) -> None:
    """The senders (JSON: one object per line)."""
    from sqlalchemy import select

    with context.session() as session:
        found = [_sender_json(s) for s in session.scalars(select(Sender).order_by(Sender.name))]
    if fmt == "json":
        for record in found:
            click.echo(json.dumps(record, ensure_ascii=False))
    elif not found:
        click.echo(
            "no sender yet: fptrack senders add NAME --address ... --email ... --signer ... --title ..."
        )
    else:
        print_table(
            ["name", "email", "signer", "title", "lang", "proofs"],
            [
                (r["name"], r["email"], r["signer_name"], r["signer_title"], r["language"], len(r["proofs"]))  # type: ignore[arg-type]
                for r in found
            ],
        )


@click.group()
def contacts() -> None:
    """Whom a host's takedown notices go to, in escalation order (level 0 first: the site's abuse address,
    then its hosting provider, CDN, registrar).

    \b
      fptrack contacts add pirate.example abuse@pirate.example
      fptrack contacts add pirate.example abuse@hosting.example --kind hosting --name "Hosting Ltd"
      fptrack contacts add pirate.example dmca@host.example --kind designated_agent --name "Host Inc."
        (a US host's DMCA agent, as the Copyright Office's DMCA designated agent directory lists it)
      fptrack contacts list --host pirate.example
      fptrack contacts edit pirate.example 0 --email dmca@pirate.example
      fptrack contacts remove pirate.example 1   (refused while a notice sent to it is followed up)
    """


@contacts.command("add")
@click.argument("host")
@click.argument("email")
@click.option("--level", type=click.IntRange(0, 100), help="Place in the escalation order (default: next).")
@click.option("--kind", type=click.Choice(CONTACT_KINDS), default="site", show_default=True)
@click.option("--name", default="", help="The recipient's name (a company).")
@click.option("--lang", "language", type=click.Choice(NOTICE_LANGUAGES), help="The recipient's language.")
@click.option("--note", default="", help="Anything worth remembering (where the address comes from).")
@pass_context
@friendly_errors
def contacts_add(
    context: CliContext,
    host: str,
    email: str,
    level: int | None,
    kind: str,
    name: str,
    language: str | None,
    note: str,
) -> None:
    """Add EMAIL as the next contact of HOST."""
    from fptrack.jobs.notices import add_contact

    with context.session() as session:
        contact = add_contact(
            session, host, email, level=level, kind=kind, name=name, language=language or "", note=note
        )
        click.echo(f"added {contact.email} as level {contact.level} ({contact.kind}) of {contact.host}")


def _contact_json(contact: HostContact) -> dict[str, object]:
    return {
        "host": contact.host,
        "level": contact.level,
        "kind": contact.kind,
        "name": contact.name,
        "email": contact.email,
        "language": contact.language,
        "note": contact.note,
    }


@contacts.command("list")
@click.option("--host", help="Only this host's contacts.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@pass_context
@friendly_errors
def contacts_list(context: CliContext, host: str | None, fmt: str) -> None:
    """The host contacts, by host and level (JSON: one object per line)."""
    from fptrack.jobs.notices import list_contacts

    with context.session() as session:
        found = [_contact_json(c) for c in list_contacts(session, host)]
    if fmt == "json":
        for record in found:
            click.echo(json.dumps(record, ensure_ascii=False))
    elif not found:
        click.echo("no host contact yet: fptrack contacts add HOST abuse@...")
    else:
        print_table(
            ["host", "level", "kind", "name", "email", "lang"],
            [(r["host"], r["level"], r["kind"], r["name"], r["email"], r["language"]) for r in found],
        )


@contacts.command("edit")
@click.argument("host")
@click.argument("level", type=click.IntRange(0, 100))
@click.option("--email", help="The new address.")
@click.option("--kind", type=click.Choice(CONTACT_KINDS))
@click.option("--name", help="The recipient's name (a company).")
@click.option("--lang", "language", type=click.Choice([*NOTICE_LANGUAGES, ""]), help="'' for the sender's.")
@click.option("--note", help="Anything worth remembering (where the address comes from).")
@pass_context
@friendly_errors
def contacts_edit(
    context: CliContext,
    host: str,
    level: int,
    email: str | None,
    kind: str | None,
    name: str | None,
    language: str | None,
    note: str | None,
) -> None:
    """Change the contact of HOST at LEVEL: the options given are set. Notices already drafted or sent keep
    the recipient they name."""
    from fptrack.jobs.notices import edit_contact, find_contact

    with context.session() as session:
        contact = edit_contact(
            session,
            find_contact(session, host, level),
            email=email,
            kind=kind,
            name=name,
            language=language,
            note=note,
        )
        click.echo(f"saved {contact.email} as level {contact.level} ({contact.kind}) of {contact.host}")


@contacts.command("remove")
@click.argument("host")
@click.argument("level", type=click.IntRange(0, 100))
@pass_context
@friendly_errors
def contacts_remove(context: CliContext, host: str, level: int) -> None:
    """Remove the contact of HOST at LEVEL. Refused while a notice sent to it is still followed up."""
    from fptrack.jobs.notices import find_contact, remove_contact

    with context.session() as session:
        contact = find_contact(session, host, level)
        email = contact.email
        remove_contact(session, contact)
    click.echo(f"removed {email} (level {level}) of {host.strip().lower()}")
