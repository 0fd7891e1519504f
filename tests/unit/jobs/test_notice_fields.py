"""A notice's sender and recipients cannot break its email (``services.accounts.contact_fields``), on SQLite
and PostgreSQL: a line break in a name or an address and a comma in a recipient's address are refused where
they are typed (``save_sender``, ``add_contact``, a draft's recipient; the admin's form, the command line),
and a value stored before these checks makes a send refuse with one line, never crash, with nothing sent
(a real SMTP server on loopback, aiosmtpd)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from click.testing import CliRunner
from flask import Flask
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.orm import Session

from fptrack.admin.web import create_app
from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.jobs.delivery import SmtpTransport
from fptrack.jobs.notices import NoticeError, add_contact, draft_notice, save_sender, send_notice
from fptrack.services.accounts.contact_fields import InvalidField, check_email, check_one_line
from fptrack.storage.models import Match, Sender
from tests.support.accounts import add_account, csrf_token_in, log_in
from tests.support.admin_seed import Seeded, seed
from tests.unit.jobs.test_notices import add_rights

HOST = "pirate.example"
INJECTED = "Mountain Press\r\nBcc: victim@elsewhere.example"
TWO_ADDRESSES = "abuse@pirate.example, victim@elsewhere.example"


class _Inbox:
    def __init__(self) -> None:
        self.recipients: list[list[str]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 OK"


@pytest.fixture
def relay() -> Iterator[tuple[_Inbox, SmtpTransport]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    inbox = _Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield inbox, SmtpTransport("127.0.0.1", port, starttls=False)
    finally:
        controller.stop()


@pytest.fixture
def seeded(session: Session) -> Seeded:
    ids = seed(session)
    with Session(session.get_bind()) as other:
        other.get(Match, ids.hostile_match_id).status = "confirmed"  # type: ignore[union-attr]
        other.commit()
    return ids


def _sender(session: Session, name: str = "Mountain Press") -> Sender:
    sender = save_sender(
        session,
        name,
        create=True,
        rights_owner="Mountain Culture Ltd",
        address="1 Hill Road\nBeijing",
        email="rights@mountain.example",
        phone="+86 10 5555 0100",
        signer_name="Wang Wu",
        signer_title="General Counsel",
        language="en",
    )
    add_rights(session, sender)  # the works' owner and certificates, the agent's authorisation
    return sender


# ------------------------------------------------------------------------------------------ the checks


@given(st.text(max_size=20), st.sampled_from(["\r", "\n", "\r\n", "\x00", "\x1b", "\u2028", "\x85"]))
def test_a_line_break_or_control_character_is_refused_in_a_one_line_field(text: str, bad: str) -> None:
    with pytest.raises(InvalidField) as caught:
        check_one_line("name", text + bad + "Bcc: x@y.example")
    assert "\n" not in str(caught.value) and "\r" not in str(caught.value)


@pytest.mark.parametrize(
    "address",
    [
        TWO_ADDRESSES,
        "abuse@pirate.example;victim@elsewhere.example",
        "Abuse <abuse@pirate.example>",
        "abuse@pirate.example\r\nBcc: victim@elsewhere.example",
        "abuse@pirate@example",
        "abuse",
        '"a,b"@pirate.example',
    ],
)
def test_an_email_field_holds_one_bare_address(address: str) -> None:
    with pytest.raises(InvalidField, match="must be one email address") as caught:
        check_email("email", address)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "address", ["abuse@pirate.example", " Abuse.Desk+dmca@host.example.com ", "法务@例子.中国"]
)
def test_an_ordinary_address_passes(address: str) -> None:
    assert check_email("email", address) == address.strip()


# ------------------------------------------------------------------------------------- where typed


@pytest.mark.parametrize(
    "changes",
    [
        {"name": INJECTED},
        {"email": TWO_ADDRESSES},
        {"email": "rights@m.example\nBcc: v@e.example"},
        {"signer_name": "Wang\rWu"},
    ],
)
def test_a_sender_with_a_line_break_or_two_addresses_is_refused(
    session: Session, settings: Settings, changes: dict[str, str]
) -> None:
    fields: dict[str, str] = {"name": "Mountain Press", "email": "rights@mountain.example", **changes}
    name = fields.pop("name")
    with pytest.raises(NoticeError) as caught:
        save_sender(session, name, create=True, **fields)
    assert "\n" not in str(caught.value)


def test_a_postal_address_may_span_lines(session: Session, settings: Settings) -> None:
    assert _sender(session).address == "1 Hill Road\nBeijing"


@pytest.mark.parametrize(
    ("email", "name"),
    [
        (TWO_ADDRESSES, ""),
        ("abuse@pirate.example\r\nBcc: v@e.example", ""),
        ("abuse@pirate.example", INJECTED),
    ],
)
def test_a_contact_with_a_line_break_or_two_addresses_is_refused(
    session: Session, settings: Settings, email: str, name: str
) -> None:
    with pytest.raises(NoticeError) as caught:
        add_contact(session, HOST, email, name=name)
    assert "\n" not in str(caught.value)


def test_a_draft_to_two_addresses_is_refused(session: Session, settings: Settings, seeded: Seeded) -> None:
    _sender(session)
    with pytest.raises(NoticeError, match="must be one email address"):
        draft_notice(session, actor="test", host=HOST, recipient=TWO_ADDRESSES, bundle_settings=settings)


# --------------------------------------------------------------------------------- stored before


@pytest.mark.parametrize("stored", ["sender name", "recipient address", "recipient name"])
def test_a_bad_value_stored_before_makes_the_send_refuse_with_one_line(
    session: Session,
    settings: Settings,
    seeded: Seeded,
    relay: tuple[_Inbox, SmtpTransport],
    stored: str,
) -> None:
    inbox, transport = relay
    sender = _sender(session)
    add_contact(session, HOST, "abuse@pirate.example", name="Abuse Desk")
    notice = draft_notice(session, actor="test", host=HOST, bundle_settings=settings)
    if stored == "sender name":
        sender.name = INJECTED
    elif stored == "recipient address":
        notice.recipient_address = TWO_ADDRESSES
    else:
        notice.recipient_name = INJECTED
    session.flush()
    with pytest.raises(NoticeError, match=f"notice {notice.id} cannot be sent") as caught:
        send_notice(session, notice, settings, actor="test", transport=transport)
    assert "\n" not in str(caught.value) and "\r" not in str(caught.value)
    assert notice.state == "draft" and inbox.recipients == []


# ---------------------------------------------------------------------------- the form, the command


def test_the_admin_form_refuses_them_with_a_message(settings: Settings) -> None:
    app: Flask = create_app(settings)
    try:
        add_account(settings, "ada", "admin")
        client = app.test_client()
        log_in(client, "ada")
        token = csrf_token_in(client.get("/senders").get_data(as_text=True))
        response = client.post("/senders", data={"csrf_token": token, "name": INJECTED})
        assert response.status_code == 400 and "must be one line" in response.get_data(as_text=True)
        contact = {"csrf_token": token, "host": HOST, "email": TWO_ADDRESSES, "kind": "site"}
        response = client.post("/senders/contacts", data=contact)
        assert response.status_code == 400 and "must be one email address" in response.get_data(as_text=True)
    finally:
        app.extensions["fptrack"].engine.dispose()


def test_the_command_line_refuses_them_with_one_line(settings: Settings) -> None:
    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    runner = CliRunner()
    for args in (
        ["senders", "add", "Mountain Press", "--email", TWO_ADDRESSES],
        ["contacts", "add", HOST, TWO_ADDRESSES],
        ["senders", "add", INJECTED],
    ):
        result = runner.invoke(main, args, env=env, catch_exceptions=False)
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output and result.output.strip().count("\n") == 0, result.output
