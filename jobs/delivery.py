"""Sending a takedown notice by email through the configured SMTP relay, and the bulk formats platforms take.

:func:`notice_message` builds the message: the notice as text (the body, exactly the text whose SHA-256 is
recorded) and as HTML (an alternative part), each item's evidence bundle and the sender's proofs of ownership
attached, a ``Message-ID`` of our own (recorded with the notice, so that a reply, a bounce or a later notice
can refer to it). :class:`SmtpTransport` hands it to ``FPTRACK_SMTP_HOST`` with :mod:`smtplib` (STARTTLS and a
login when configured); tests and scripts pass any object with the same ``send`` method. What it sent is
proof kept with the notice (:class:`Delivered`): the message's bytes exactly as handed to the relay (an
``.eml``), and the relay's reply to the message's ``DATA`` (code and text: the relay's word that it took the
message, its queue id as a rule) and when it came.

Exports (:func:`lumen_json`, :func:`infringing_urls`): a notice in the shape of the Lumen database's notice
submissions (works with their infringing URLs, the sender and recipient as entities), and the plain list of
infringing URLs, one a line, that search engines' bulk removal forms take.
"""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, getaddresses, make_msgid
from typing import Any, Protocol

from fptrack.core.errors import FptrackError
from fptrack.core.settings import Settings
from fptrack.jobs.notice_render import bundle_filename, notice_subject
from fptrack.services.rights import notice_proofs
from fptrack.storage.models import Notice, as_utc, iso_utc, utcnow

__all__ = [
    "SMTP_TIMEOUT",
    "Delivered",
    "DeliveryError",
    "SmtpTransport",
    "Transport",
    "attachment_names",
    "infringing_urls",
    "lumen_json",
    "notice_message",
    "wire_bytes",
]

SMTP_TIMEOUT = 60.0


class DeliveryError(FptrackError, RuntimeError):
    """The relay refused or could not be reached; the message says which and why."""


@dataclass(frozen=True)
class Delivered:
    """What the relay took: ``message``, the bytes handed to it (CRLF line ends; what a recipient's server
    receives, before it adds its own trace headers), ``reply`` its answer to ``DATA`` (``250 2.0.0 Ok: queued
    as ...``), at ``at``."""

    message: bytes
    reply: str
    at: datetime


class Transport(Protocol):
    """What sends a message: :class:`SmtpTransport`, or anything that behaves like it (``send`` may return
    None when it has no relay's word to give)."""

    def send(self, message: EmailMessage) -> Delivered | None: ...  # pragma: no cover

    def describe(self) -> str: ...  # pragma: no cover


@dataclass(frozen=True)
class SmtpTransport:
    """The configured relay (``FPTRACK_SMTP_*``)."""

    host: str
    port: int = 587
    user: str | None = None
    password: str | None = None
    starttls: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> SmtpTransport:
        if not settings.smtp_host:
            raise DeliveryError(
                "no SMTP relay is configured: set FPTRACK_SMTP_HOST (and FPTRACK_SMTP_PORT...)"
            )
        return cls(
            settings.smtp_host,
            settings.smtp_port,
            settings.smtp_user,
            settings.smtp_password,
            settings.smtp_starttls,
        )

    def describe(self) -> str:
        return f"smtp {self.host}:{self.port}" + (" starttls" if self.starttls else "")

    def send(self, message: EmailMessage) -> Delivered:
        """Hand ``message`` to the relay, flattened once (:func:`wire_bytes`): the bytes kept are the bytes
        sent. The envelope is what :meth:`smtplib.SMTP.send_message` would take (``From``, and ``To``, ``Cc``
        and ``Bcc``; a notice has no ``Bcc``)."""
        raw = wire_bytes(message)
        origin = getaddresses([str(message["From"] or "")])[0][1]
        recipients = [
            address for _name, address in getaddresses(message.get_all("To", []) + message.get_all("Cc", []))
        ]
        options = ["SMTPUTF8", "BODY=8BITMIME"] if not (origin + "".join(recipients)).isascii() else []
        try:
            with _ReplyKeepingSMTP(self.host, self.port, timeout=SMTP_TIMEOUT) as client:
                client.ehlo()
                if self.starttls:
                    client.starttls(context=ssl.create_default_context())
                    client.ehlo()
                if self.user:
                    client.login(self.user, self.password or "")
                refused = client.sendmail(origin, recipients, raw, mail_options=options)
                code, text = client.data_reply
        except (OSError, smtplib.SMTPException) as error:
            raise DeliveryError(
                f"the SMTP relay {self.host}:{self.port} did not take the notice: {error}"
            ) from None
        if refused:
            raise DeliveryError(f"the SMTP relay refused {', '.join(sorted(refused))}")
        return Delivered(raw, f"{code} {text.decode('utf-8', errors='replace')}".strip(), utcnow())


class _ReplyKeepingSMTP(smtplib.SMTP):
    """:class:`smtplib.SMTP` keeping the reply to ``DATA`` (``sendmail`` drops it)."""

    data_reply: tuple[int, bytes] = (0, b"")

    def data(self, msg: Any) -> tuple[int, bytes]:
        reply = super().data(msg)
        self.data_reply = reply
        return reply


def wire_bytes(message: EmailMessage) -> bytes:
    """``message`` as it goes over SMTP: flattened with CRLF line ends (as ``send_message`` flattens it),
    ending in CRLF."""
    raw = message.as_bytes(policy=message.policy.clone(linesep="\r\n"))
    return raw if raw.endswith(b"\r\n") else raw + b"\r\n"


def _domain(address: str) -> str:
    return address.rpartition("@")[2] or "fptrack.invalid"


def notice_message(
    notice: Notice,
    text: str,
    html: str,
    *,
    from_address: str = "",
    message_id: str | None = None,
) -> EmailMessage:
    """The email of ``notice``: ``text`` as the body, ``html`` as its alternative, the evidence bundles and
    proofs of ownership attached. ``From`` is ``from_address`` (``FPTRACK_SMTP_FROM``) or the sender's email;
    ``Reply-To`` the sender's email."""
    sender = notice.sender
    sender_email = sender.email.strip() if sender is not None else ""
    origin = from_address or sender_email
    if not origin:
        raise DeliveryError(
            "the notice has no From address: give the sender an email or set FPTRACK_SMTP_FROM"
        )
    if not notice.recipient_address:
        raise DeliveryError(
            f"notice {notice.id} has no recipient address (fptrack contacts add {notice.host} ...)"
        )
    message = EmailMessage()
    display = sender.name if sender is not None else ""
    message["From"] = Address(display_name=display, addr_spec=origin) if display else origin
    message["To"] = (
        Address(display_name=notice.recipient_name, addr_spec=notice.recipient_address)
        if notice.recipient_name
        else notice.recipient_address
    )
    if sender_email and sender_email != origin:
        message["Reply-To"] = sender_email
    message["Subject"] = notice_subject(notice)
    message["Date"] = format_datetime(as_utc(notice.sent_at)) if notice.sent_at else format_datetime(utcnow())
    message["Message-ID"] = message_id or make_msgid("notice", domain=_domain(origin))
    parent = notice.parent
    if parent is not None and parent.message_id:
        message["In-Reply-To"] = parent.message_id
        message["References"] = parent.message_id
    message.set_content(text, charset="utf-8")
    message.add_alternative(html, subtype="html", charset="utf-8")
    for item in notice.items:
        if item.bundle:
            message.add_attachment(
                bytes(item.bundle), maintype="application", subtype="zip", filename=bundle_filename(item)
            )
    for proof in notice_proofs(notice):  # its works' proofs and the sender's identity, never another's
        maintype, _, subtype = (proof.media_type or "application/octet-stream").partition("/")
        message.add_attachment(
            bytes(proof.content),
            maintype=maintype,
            subtype=subtype or "octet-stream",
            filename=proof.filename,
        )
    _declare_language(message, "zh-CN" if notice.language == "zh" else "en")
    return message


def _declare_language(message: EmailMessage, tag: str) -> None:
    """``Content-Language`` (RFC 3282) on the message and on its text and HTML parts. Set last:
    ``set_content`` clears every ``Content-*`` header, and ``add_alternative`` / ``add_attachment`` move the
    top-level ones into the first part."""
    message["Content-Language"] = tag
    for kind in ("plain", "html"):
        part = message.get_body(preferencelist=(kind,))
        if part is not None and part is not message:
            part["Content-Language"] = tag


# ------------------------------------------------------------------------------------------------- exports


def infringing_urls(notice: Notice, *, open_only: bool = False) -> str:
    """The notice's infringing URLs, one a line (``open_only``: those still up)."""
    urls = [item.url for item in notice.items if not (open_only and item.closed_at is not None)]
    return "".join(f"{url}\n" for url in dict.fromkeys(urls))


def lumen_json(notice: Notice) -> dict[str, Any]:
    """The notice in the shape of a Lumen notice submission (``type`` DMCA; one work per registered work,
    each with its infringing URLs; the sender, principal and recipient as entities)."""
    sender = notice.sender
    works: dict[str, list[str]] = {}
    for item in notice.items:
        description = f"{item.work_title} — {item.chapter_title}".strip(" —")
        works.setdefault(description, []).append(item.url)
    roles: list[dict[str, Any]] = []
    if sender is not None:
        entity = _entity(sender.name, sender.address, sender.email, sender.phone)
        roles.append({"name": "sender", "entity_attributes": entity})
        roles.append({"name": "principal", "entity_attributes": _entity(sender.rights_owner or sender.name)})
    recipient = notice.recipient_name or notice.recipient_address or notice.host
    roles.append(
        {"name": "recipient", "entity_attributes": _entity(recipient, email=notice.recipient_address)}
    )
    return {
        "notice": {
            "title": f"Takedown notice no. {notice.id} concerning {notice.host}",
            "type": "DMCA",
            "subject": f"Copyright infringement on {notice.host}",
            "date_sent": iso_utc(notice.sent_at),
            "language": notice.language,
            "jurisdiction_list": "US, CN",
            "tag_list": notice.kind,
            "works_attributes": [
                {
                    "description": description,
                    "copyrighted_urls_attributes": [],
                    "infringing_urls_attributes": [{"url": url} for url in dict.fromkeys(urls)],
                }
                for description, urls in works.items()
            ],
            "entity_notice_roles_attributes": roles,
            "body_sha256": notice.text_sha256,
        }
    }


def _entity(name: str, address: str = "", email: str = "", phone: str = "") -> dict[str, Any]:
    entity: dict[str, Any] = {"name": name, "kind": "organization"}
    if address:
        entity["address_line_1"] = " ".join(address.split())
    if email:
        entity["email"] = email
    if phone:
        entity["phone"] = phone
    return entity


def attachment_names(message: EmailMessage) -> Sequence[str]:
    """The file names of ``message``'s attachments (for the delivery record)."""
    return [part.get_filename() or "" for part in message.iter_attachments()]
