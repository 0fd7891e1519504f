"""A notice prints the fingerprint of the key that signed the evidence bundles it attaches, in English and in
Chinese, in its text, its HTML and the message sent: what a recipient passes to ``fptrack evidence verify
--fingerprint`` to tie a bundle to the sender (the key inside a bundle alone proves nothing)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.jobs.capture_stamps import stamp_captures
from fptrack.jobs.delivery import SmtpTransport
from fptrack.jobs.notice_render import TEXTS, format_minute, render_html
from fptrack.jobs.notices import add_contact, send_notice
from fptrack.services.evidence.bundle import (
    bundle_key_fingerprint,
    key_fingerprint,
    load_signing_key,
    verify_bundle,
)
from fptrack.storage.exchanges import RawExchange, keep_exchanges
from fptrack.storage.models import CaptureStamp, Match
from tests.support.admin_seed import Seeded
from tests.support.tsa import LocalTsa, local_tsa
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


@pytest.fixture
def tsa(tmp_path: Path) -> Iterator[LocalTsa]:
    with local_tsa(tmp_path / "tsa") as authority:
        yield authority


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_notice_prints_when_each_capture_was_sealed(
    session: Session, settings: Settings, seeded: Seeded, tsa: LocalTsa, language: str
) -> None:
    match = session.get(Match, seeded.hostile_match_id)
    assert match is not None
    body = b"<html><body>copy</body></html>"
    exchange = RawExchange(
        match.page.final_url or match.page.url,
        b"GET / HTTP/1.1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n",
        body,
        datetime(2026, 11, 25, 17, 0, tzinfo=UTC),
    )
    match.page.snapshot_sha256 = exchange.snapshot_sha256
    keep_exchanges(session, [(match.page_id, exchange)])
    session.commit()
    with_tsa = settings.with_overrides(tsa_url=tsa.url)
    assert stamp_captures(session, with_tsa).stamped == 1
    sealed = session.scalars(select(CaptureStamp.stamped_at)).one()
    _sender(session, language=language)
    add_contact(session, HOST, "abuse@pirate.example")
    notice = _draft(session, with_tsa)
    colon = "：" if language == "zh" else ": "
    line = f"{TEXTS[language]['sealed']}{colon}{format_minute(sealed, language)}"
    assert line in notice.text, notice.text
    assert format_minute(sealed, language) in render_html(notice, notice.created_at)
