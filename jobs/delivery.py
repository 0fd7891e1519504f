"""Sending a takedown notice by email through the configured SMTP relay, and the bulk formats platforms take.

:func:`notice_message` builds the message: the notice as text (the body, exactly the text whose SHA-256 is
recorded) and as HTML (an alternative part), each item's evidence bundle and the sender's proofs of ownership
attached, a ``Message-ID`` of our own (recorded with the notice, so that a reply, a bounce or a later notice
can refer to it). :class:`SmtpTransport` hands it to ``FPTRACK_SMTP_HOST`` with :mod:`smtplib` (STARTTLS and a
login when configured); tests and scripts pass any object with the same ``send`` method. What it sent is
proof kept with the notice (:class:`Delivered`): the message's bytes exactly as handed to the relay (an
``.eml``), and the relay's reply to the message's ``DATA`` (code and text: the relay's word that it took the
message, its queue id as a rule) and when it came.

Exports (:func:`lumen_json` with :func:`lumen_files`, :func:`infringing_urls`, :func:`urls_by_work`): a notice
as a Lumen database notice submission (its schema's fields only: works with their authorised and infringing
URLs, the sender, owners and recipient as entities, a body, the files), the plain list of infringing URLs one
a line, and the URLs grouped per work as search engines' bulk removal forms take them.
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
    "lumen_files",
    "lumen_json",
    "notice_message",
    "urls_by_work",
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
    timeout: float = SMTP_TIMEOUT

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
        step = "connect"
        try:
            with _ReplyKeepingSMTP(self.host, self.port, timeout=self.timeout) as client:
                step = "ehlo"
                client.ehlo()
                if self.starttls:
                    step = "starttls"
                    client.starttls(context=ssl.create_default_context())
                    client.ehlo()
                if self.user:
                    step = "login"
                    client.login(self.user, self.password or "")
                step = "send"
                refused = client.sendmail(origin, recipients, raw, mail_options=options)
                code, text = client.data_reply
        except (OSError, smtplib.SMTPException) as error:
            raise DeliveryError(
                f"the SMTP relay {self.host}:{self.port} did not take the notice: {self._why(error, step)}"
            ) from None
        if refused:
            raise DeliveryError(f"the SMTP relay refused {', '.join(sorted(refused))}")
        return Delivered(raw, f"{code} {text.decode('utf-8', errors='replace')}".strip(), utcnow())

    def _why(self, error: Exception, step: str) -> str:
        """``error`` in a line, with what to change for the usual set-up mistakes: a relay without STARTTLS,
        a login refused or not offered, nothing listening, an implicit-TLS port, a certificate not trusted."""
        if isinstance(error, ConnectionRefusedError):
            return "connection refused (nothing listens there): check FPTRACK_SMTP_HOST and FPTRACK_SMTP_PORT"
        if step == "connect" and isinstance(error, (TimeoutError, smtplib.SMTPServerDisconnected)):
            return (
                f"no SMTP greeting ({error or 'timed out'}): an implicit-TLS port (SMTPS, usually 465) waits "
                "for TLS first, and fptrack speaks STARTTLS: set FPTRACK_SMTP_PORT to the relay's submission "
                "port (usually 587)"
            )
        if step == "starttls" and isinstance(error, smtplib.SMTPNotSupportedError):
            return (
                "it does not offer STARTTLS: set FPTRACK_SMTP_STARTTLS=false for a relay on loopback or a "
                "trusted network, else use a port of it that offers STARTTLS (usually 587)"
            )
        if isinstance(error, ssl.SSLCertVerificationError):
            return (
                f"its TLS certificate is not trusted ({error.verify_message}): give the relay a certificate "
                f"for {self.host} from a known authority, or add its authority to the trusted ones "
                "(SSL_CERT_FILE)"
            )
        if isinstance(error, ssl.SSLError):
            return (
                f"TLS failed ({error.reason or error}): check that FPTRACK_SMTP_PORT is a STARTTLS port "
                "(usually 587), not an implicit-TLS one (465), and FPTRACK_SMTP_STARTTLS"
            )
        if isinstance(error, smtplib.SMTPAuthenticationError):
            return (
                f"it refused the login of {self.user!r} ({_reply(error)}): check FPTRACK_SMTP_USER and "
                "FPTRACK_SMTP_PASSWORD"
            )
        if step == "login" and isinstance(error, smtplib.SMTPNotSupportedError):
            return (
                "it offers no login (AUTH)"
                + (" without STARTTLS: set FPTRACK_SMTP_STARTTLS=true" if not self.starttls else "")
                + ("; or unset FPTRACK_SMTP_USER if it needs none" if self.user else "")
            )
        if isinstance(error, smtplib.SMTPResponseException) and error.smtp_code == 530:
            return f"it asks for a login ({_reply(error)}): set FPTRACK_SMTP_USER and FPTRACK_SMTP_PASSWORD"
        return str(error)


def _reply(error: smtplib.SMTPResponseException) -> str:
    message = error.smtp_error
    text = message.decode("utf-8", errors="replace") if isinstance(message, bytes) else str(message)
    return f"{error.smtp_code} {text}".strip()


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


LUMEN_TYPES = {"en": "DMCA", "zh": "Other"}
"""Lumen's notice ``type`` per notice language: an English notice is sworn under 17 U.S.C. 512(c)(3) (DMCA);
a Chinese one is a notice under 信息网络传播权保护条例 第十四条 to a Chinese host, which is not a DMCA notice,
and Lumen has no type for another country's copyright takedown but ``Other``."""
LUMEN_WORK_KIND = "Book"


def lumen_files(notice: Notice) -> list[tuple[str, str, bytes]]:
    """The files a Lumen submission uploads (``file_uploads_attributes``), as ``(kind, file name, bytes)``:
    the notice as sent (``original``: the stored ``.eml`` when there is one, else the text) and each copy's
    evidence bundle (``supporting``)."""
    if notice.sent_message:
        files = [("original", f"notice-{notice.id}.eml", bytes(notice.sent_message))]
    else:
        files = [("original", f"notice-{notice.id}.txt", notice.text.encode("utf-8"))]
    for item in notice.items:
        if item.bundle:
            files.append(("supporting", bundle_filename(item), bytes(item.bundle)))
    return files


def lumen_json(notice: Notice, *, country_code: str = "") -> dict[str, Any]:
    """The notice as a Lumen notice submission (the Lumen database's ``POST /notices``), with the fields of
    its schema only: ``type`` by language (:data:`LUMEN_TYPES`), one work per registered work (``kind``
    Book, its description, its authorised original in ``copyrighted_urls_attributes``, its copies in
    ``infringing_urls_attributes``), the sender, the rights owner(s) as ``principal`` and the recipient as
    entities (``country_code``: the sender's and owners' two-letter ISO code, when given), a ``body`` that
    says what the notice is without the addresses and telephone numbers Lumen asks to keep out of it, and
    the files (:func:`lumen_files`) by name, as a form-data submission uploads them."""
    from fptrack.services.rights import owner_of

    sender = notice.sender
    country = country_code.strip().upper()
    if country and not (len(country) == 2 and country.isascii() and country.isalpha()):
        raise ValueError(f"a country code is two letters (ISO 3166-1: CN, US), not {country_code!r}")
    works: dict[object, dict[str, Any]] = {}
    owners: dict[str, Any] = {}
    for item in notice.items:
        work = item.work
        key = work.id if work is not None else item.work_title
        if key not in works:
            description = f"《{item.work_title}》" if notice.language == "zh" else f'"{item.work_title}"'
            if work is not None and work.author:
                description += f" by {work.author}" if notice.language == "en" else f"，作者：{work.author}"
            works[key] = {
                "kind": LUMEN_WORK_KIND,
                "description": description,
                "copyrighted_urls_attributes": (
                    [{"url": work.original_url}] if work is not None and work.original_url else []
                ),
                "infringing_urls_attributes": [],
            }
        urls = works[key]["infringing_urls_attributes"]
        if {"url": item.url} not in urls:
            urls.append({"url": item.url})
        owner = owner_of(work, sender)
        if owner.name:
            owners.setdefault(owner.name, owner)
    roles: list[dict[str, Any]] = []
    if sender is not None:
        kind = "individual" if sender.kind == "person" else "organization"
        entity = _entity(sender.name, sender.address, sender.email, sender.phone, kind=kind, country=country)
        roles.append({"name": "sender", "entity_attributes": entity})
    for owner in owners.values():
        entity = _entity(owner.name, owner.address, owner.email, owner.phone, country=country)
        roles.append({"name": "principal", "entity_attributes": entity})
    recipient = notice.recipient_name or notice.recipient_address or notice.host
    roles.append(
        {"name": "recipient", "entity_attributes": _entity(recipient, email=notice.recipient_address)}
    )
    law = "信息网络传播权保护条例 第十四条" if notice.language == "zh" else "17 U.S.C. 512(c)(3)"
    urls = sum(len(work["infringing_urls_attributes"]) for work in works.values())
    body = (
        f"Takedown notice no. {notice.id} ({notice.kind}) under {law} to {notice.host}, naming {urls} "
        f"infringing URL(s) of {len(works)} work(s). The text as sent has SHA-256 {notice.text_sha256}"
    )
    if notice.sent_message_sha256:
        body += f"; the message as sent (the original file) has SHA-256 {notice.sent_message_sha256}"
    record: dict[str, Any] = {
        "title": f"Copyright takedown notice no. {notice.id} concerning {notice.host}",
        "type": LUMEN_TYPES.get(notice.language, "Other"),
        "subject": f"Copyright infringement on {notice.host}",
        "body": body + ".",
        "language": notice.language,
        "source": "Email",
        "jurisdiction_list": "CN" if notice.language == "zh" else "US",
        "tag_list": "copyright, takedown",
        "works_attributes": list(works.values()),
        "entity_notice_roles_attributes": roles,
        "file_uploads_attributes": [
            {"kind": kind, "file": name} for kind, name, _data in lumen_files(notice)
        ],
    }
    if notice.sent_at is not None:
        record["date_sent"] = iso_utc(notice.sent_at)
    return {"notice": record}


def urls_by_work(
    notice: Notice, *, open_only: bool = False, csv_format: bool = False, bom: bool = False
) -> str:
    """The notice's infringing URLs grouped per work, as search engines' bulk removal forms take them (one
    request per work: the work, where its authorised original is, then its URLs): text, one block per work
    (``# title``, ``# authorised original: URL`` when the work has one, the URLs one a line, a blank line),
    or CSV (``work,authorised_url,infringing_url``, a row per URL, written by ``services.exports.csv_lines``:
    cells made safe, a byte order mark first when ``bom``). ``open_only``: the copies still up."""
    from fptrack.services.exports import csv_lines

    blocks: dict[object, tuple[str, str, list[str]]] = {}
    for item in notice.items:
        if open_only and item.closed_at is not None:
            continue
        work = item.work
        key = work.id if work is not None else item.work_title
        original = work.original_url if work is not None else ""
        title, _original, urls = blocks.setdefault(key, (item.work_title, original, []))
        if item.url not in urls:
            urls.append(item.url)
    if csv_format:
        rows = (
            {"work": title, "authorised_url": original, "infringing_url": url}
            for title, original, urls in blocks.values()
            for url in urls
        )
        return "".join(csv_lines(("work", "authorised_url", "infringing_url"), rows, bom=bom))
    lines: list[str] = []
    for title, original, urls in blocks.values():
        lines.append(f"# {title}")
        if original:
            lines.append(f"# authorised original: {original}")
        lines += [*urls, ""]
    return "\n".join(lines)


def _entity(
    name: str,
    address: str = "",
    email: str = "",
    phone: str = "",
    *,
    kind: str = "organization",
    country: str = "",
) -> dict[str, Any]:
    entity: dict[str, Any] = {"name": name, "kind": kind}
    if address:
        entity["address_line_1"] = " ".join(address.split())
    if country:
        entity["country_code"] = country
    if email:
        entity["email"] = email
    if phone:
        entity["phone"] = phone
    return entity


def attachment_names(message: EmailMessage) -> Sequence[str]:
    """The file names of ``message``'s attachments (for the delivery record)."""
    return [part.get_filename() or "" for part in message.iter_attachments()]
