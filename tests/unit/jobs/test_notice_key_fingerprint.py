"""A notice prints the fingerprint of the key that signed the evidence bundles it attaches, in English and in
Chinese, in its text, its HTML and the message sent: what a recipient passes to ``fptrack evidence verify
--fingerprint`` to tie a bundle to the sender (the key inside a bundle alone proves nothing)."""

from __future__ import annotations

import io
import zipfile

import pytest
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.jobs.delivery import SmtpTransport
from fptrack.jobs.notice_render import render_html
from fptrack.jobs.notices import add_contact, send_notice
from fptrack.services.evidence.bundle import (
    bundle_key_fingerprint,
    key_fingerprint,
    load_signing_key,
    verify_bundle,
)
from tests.support.admin_seed import Seeded
from tests.unit.jobs.test_notices import HOST, Inbox, _draft, _sender, seeded, smtp

__all__ = ["seeded", "smtp"]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_notice_prints_its_bundles_key_fingerprint(
    session: Session,
    settings: Settings,
    seeded: Seeded,
    smtp: tuple[Inbox, SmtpTransport],
    language: str,
) -> None:
    inbox, transport = smtp
    _sender(session, language=language)
    add_contact(session, HOST, "abuse@pirate.example")
    notice = _draft(session, settings)
    fingerprint = key_fingerprint(load_signing_key(settings).public_key())
    bundles = [item.bundle for item in notice.items if item.bundle]
    assert bundles and {bundle_key_fingerprint(bundle) for bundle in bundles} == {fingerprint}
    send_notice(session, notice, settings, actor="test", transport=transport)
    session.commit()

    assert fingerprint in notice.text
    line = next(line for line in notice.text.splitlines() if fingerprint in line)
    assert ("公钥指纹" in line) if language == "zh" else ("--fingerprint " + fingerprint in line)
    assert fingerprint in render_html(notice, notice.sent_at or notice.created_at)
    ((_, _, message),) = inbox.messages
    body = message.get_body(preferencelist=("plain",))
    assert body is not None and fingerprint in body.get_content()

    # the fingerprint printed is what verify accepts for the bundle attached
    attached = next(
        part for part in message.iter_attachments() if (part.get_filename() or "").endswith(".zip")
    )
    assert verify_bundle(attached.get_content(), trusted_fingerprint=fingerprint).ok


def test_a_notice_without_bundles_prints_no_fingerprint(
    session: Session, settings: Settings, seeded: Seeded
) -> None:
    from fptrack.jobs.notices import draft_notice

    _sender(session)
    notice = draft_notice(session, actor="test", host=HOST, bundle_settings=None)
    assert "fingerprint" not in notice.text
    assert bundle_key_fingerprint(b"not a zip") is None
    empty = io.BytesIO()
    zipfile.ZipFile(empty, "w").close()
    assert bundle_key_fingerprint(empty.getvalue()) is None
