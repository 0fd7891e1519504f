"""What was sent, provable later (jobs/delivery.py, jobs/notice_proof.py), and the notice's wording of an
excerpt (the reviewer's basis, services/review.py), on SQLite and PostgreSQL, through a real SMTP server
(aiosmtpd on loopback) and a real RFC 3161 authority (openssl ts on loopback): the stored .eml is byte for
byte what the server received, its SHA-256 recorded, the relay's reply to DATA kept, the time-stamp token over
that SHA-256 verifies with openssl; the CLI and the admin hand the .eml out."""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from click.testing import CliRunner
from sqlalchemy.orm import Session

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.jobs.delivery import SmtpTransport
from fptrack.jobs.notice_proof import timestamp_time
from fptrack.jobs.notices import draft_notice, load_notice, send_notice
from fptrack.services.evidence.bundle import verify_timestamp
from fptrack.services.review import Basis, record_decision
from fptrack.storage.models import Match
from tests.support.accounts import add_account, log_in
from tests.support.admin_seed import Seeded, seed
from tests.support.tsa import local_tsa
from tests.unit.jobs.test_notices import HOST, _sender

QUEUED = "2.0.0 Ok: queued as 4F1A2B3C"


class _RawInbox:
    """Keeps what the server received as DATA, bytes as they came."""

    def __init__(self) -> None:
        self.received: list[bytes] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.received.append(bytes(envelope.original_content or envelope.content))
        return f"250 {QUEUED}"


@pytest.fixture
def relay() -> Iterator[tuple[_RawInbox, SmtpTransport]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    inbox = _RawInbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, SmtpTransport("127.0.0.1", port, starttls=False)
    controller.stop()


@pytest.fixture
def seeded(session: Session) -> Seeded:
    return seed(session)


def _confirm(session: Session, match_id: int, basis: Basis | None = None) -> None:
    record_decision(session, match_id, "confirmed", "rita", basis=basis)
    session.flush()


def test_the_stored_message_is_what_the_server_received(
    session: Session, settings: Settings, seeded: Seeded, relay: tuple[_RawInbox, SmtpTransport]
) -> None:
    inbox, transport = relay
    _sender(session)
    _confirm(session, seeded.hostile_match_id)
    notice = draft_notice(
        session, actor="t", host=HOST, recipient="abuse@pirate.example", bundle_settings=settings
    )
    send_notice(session, notice, settings, actor="t", transport=transport)
    session.commit()
    assert len(inbox.received) == 1
    received = inbox.received[0]
    stored = load_notice(session, notice.id)
    assert stored.sent_message == received
    assert stored.sent_message_sha256 == hashlib.sha256(received).hexdigest()
    assert stored.relay_reply == f"250 {QUEUED}" and stored.relay_replied_at is not None
    assert stored.sent_timestamp is None and timestamp_time(stored) == ""
    sent = next(e.detail for e in stored.events if e.kind == "sent")
    assert f"message sha256 {stored.sent_message_sha256}" in sent and "not time-stamped" in sent
    # the text whose SHA-256 the notice records is in the message as sent
    assert f"Message-ID: {stored.message_id}".encode() in received


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_the_message_is_time_stamped_and_handed_out(
    session: Session,
    settings: Settings,
    seeded: Seeded,
    relay: tuple[_RawInbox, SmtpTransport],
    tmp_path: Path,
) -> None:
    inbox, transport = relay
    _sender(session)
    _confirm(session, seeded.hostile_match_id)
    with local_tsa(tmp_path / "tsa") as authority:
        stamped = settings.with_overrides(tsa_url=authority.url)
        notice = draft_notice(
            session, actor="t", host=HOST, recipient="abuse@pirate.example", bundle_settings=settings
        )
        send_notice(session, notice, stamped, actor="t", transport=transport)
        session.commit()
    token = load_notice(session, notice.id).sent_timestamp
    assert token is not None
    digest = hashlib.sha256(inbox.received[0]).digest()
    verify_timestamp(bytes(token), digest)
    assert timestamp_time(notice)

    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    eml, tsr = tmp_path / "n.eml", tmp_path / "n.tsr"
    shown = CliRunner().invoke(
        main, ["notices", "show", str(notice.id), "--eml", str(eml), "--timestamp", str(tsr)], env=env
    )
    assert shown.exit_code == 0, shown.output
    assert eml.read_bytes() == inbox.received[0] and tsr.read_bytes() == bytes(token)
    assert f"message as sent: SHA-256 {digest.hex()}" in shown.output and f"250 {QUEUED}" in shown.output
    checked = subprocess.run(
        ["openssl", "ts", "-verify", "-digest", digest.hex(), "-in", str(tsr),
         "-CAfile", str(authority.ca_cert), "-untrusted", str(authority.tsa_cert)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert checked.returncode == 0 and "Verification: OK" in checked.stdout, checked.stdout + checked.stderr

    from fptrack.admin.web import create_app

    app = create_app(settings)
    try:
        add_account(settings, "rita", "reviewer")
        client = app.test_client()
        log_in(client, "rita")
        page = client.get(f"/notices/{notice.id}").get_data(as_text=True)
        assert digest.hex() in page and f"250 {QUEUED}" in page and f"notice-{notice.id}.eml.tsr" in page
        download = client.get(f"/notices/{notice.id}/notice.eml")
        assert download.status_code == 200 and download.mimetype == "message/rfc822"
        assert download.data == inbox.received[0]
        assert client.get(f"/notices/{notice.id}/notice.eml.tsr").data == bytes(token)
    finally:
        app.extensions["fptrack"].engine.dispose()


def test_a_draft_has_no_message_to_hand_out(session: Session, settings: Settings, seeded: Seeded) -> None:
    _sender(session)
    _confirm(session, seeded.hostile_match_id)
    notice = draft_notice(session, actor="t", host=HOST, bundle_settings=settings)
    session.commit()
    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    result = CliRunner().invoke(main, ["notices", "show", str(notice.id), "--eml", "x.eml"], env=env)
    assert result.exit_code == 1 and "has no stored message (it is draft" in result.output


@pytest.mark.parametrize("language", ["en", "zh"])
def test_an_excerpt_is_not_called_a_complete_copy(
    session: Session, settings: Settings, seeded: Seeded, language: str
) -> None:
    _sender(session, language=language)
    low = session.get(Match, seeded.javascript_match_id)
    assert low is not None
    low.status, low.page.host = "flagged", HOST  # type: ignore[union-attr]
    _confirm(session, seeded.hostile_match_id, Basis("whole_chapter", True, "verbatim"))
    _confirm(session, low.id, Basis("excerpt", True, "a review quoting two paragraphs at length"))
    notice = draft_notice(session, actor="t", host=HOST, bundle_settings=settings)
    kinds = {item.match_id: item.copy_kind for item in notice.items}
    # the seed's other confirmed copy there was confirmed with no basis stated: no extent line
    assert kinds == {
        seeded.hostile_match_id: "whole_chapter",
        low.id: "excerpt",
        seeded.match_ids_newest_first[0]: "",
    }
    excerpt = {"en": "an excerpt of the chapter, not a complete copy", "zh": "该章的节选，并非完整复制"}[
        language
    ]
    whole = {"en": "Extent: the whole chapter", "zh": "侵权范围：整章"}[language]
    assert notice.text.count(excerpt) == 1 and notice.text.count(whole) == 1
    from fptrack.jobs.notice_render import render_html
    from fptrack.storage.models import utcnow

    assert excerpt in render_html(notice, utcnow())


def test_a_low_score_confirmed_without_its_basis_is_not_noticed(
    session: Session, settings: Settings, seeded: Seeded, relay: tuple[_RawInbox, SmtpTransport]
) -> None:
    """A 0.70-score copy confirmed before the basis was recorded (no decision states one) is left out of a
    host's notice and refused by id, with the way to state it; confirmed again with its basis, it is named."""
    inbox, transport = relay
    _sender(session)
    low = session.get(Match, seeded.javascript_match_id)
    assert low is not None and low.score < settings.review_basis_below
    low.status, low.page.host = "confirmed", HOST  # type: ignore[union-attr]
    session.flush()
    from fptrack.jobs.notices import NoticeError

    with pytest.raises(NoticeError, match=rf"match {low.id} was confirmed without the reviewer's basis"):
        draft_notice(session, actor="t", match_ids=[low.id], bundle_settings=settings)
    _confirm(session, seeded.hostile_match_id)
    notice = draft_notice(
        session, actor="t", host=HOST, recipient="abuse@pirate.example", bundle_settings=settings
    )
    assert low.id not in {item.match_id for item in notice.items}
    assert "fptrack review" in next(e.detail for e in notice.events if e.kind == "drafted")
    # confirmed again with its basis: named, and sent
    record_decision(session, low.id, "flagged", "rita")
    _confirm(session, low.id, Basis("excerpt", True, "quoted at length"))
    again = draft_notice(
        session, actor="t", match_ids=[low.id], recipient="abuse@other.example", bundle_settings=settings
    )
    assert [item.copy_kind for item in again.items] == ["excerpt"]
    send_notice(session, again, settings, actor="t", transport=transport)
    assert again.state == "sent" and len(inbox.received) == 1
