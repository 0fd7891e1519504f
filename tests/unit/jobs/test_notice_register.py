"""The Chinese notice as a Chinese legal department writes it (jobs/notice_render.py, jobs/delivery.py), on
SQLite and PostgreSQL, sent to a real SMTP server on loopback: 我司 rather than a translated 本人, dates in
北京时间 in 年月日 form, a reply deadline, the guarantee of truthfulness and indemnity, a seal and signature
block; reminders and escalations with no English in them; the message's ``Content-Language``."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage

import pytest
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.jobs.delivery import SmtpTransport
from fptrack.jobs.notice_render import key_fingerprints, missing_elements, render_html
from fptrack.jobs.notices import add_contact, follow_up, load_notice, send_notice
from fptrack.services.rights import notice_proofs, notice_works
from fptrack.storage.models import Notice
from tests.support.admin_seed import Seeded
from tests.unit.jobs.test_notices import HOST, Inbox, _draft, _sender, seeded, smtp

__all__ = ["seeded", "smtp"]  # the fixtures, shared with test_notices.py

SENT = datetime(2026, 11, 25, 18, 0, tzinfo=UTC)  # 2026年11月26日 02:00 北京时间: the day differs from UTC's


def _send(session: Session, settings: Settings, transport: SmtpTransport, language: str) -> Notice:
    _sender(session, language=language, signer_title="法务总监")
    add_contact(session, HOST, "abuse@pirate.example", name="盗版网站投诉处理部")
    add_contact(session, HOST, "abuse@hosting.example", kind="hosting", name="某某云主机公司")
    notice = _draft(session, settings, now=SENT)
    send_notice(session, notice, settings, actor="test", transport=transport, now=SENT)
    session.commit()
    return notice


def _latin_words(notice: Notice) -> set[str]:
    """The Latin-script words of a notice's text once its data (URLs, hashes, names, addresses, page titles,
    passages, message ids, file names) is taken out: what the notice's own wording says in English."""
    text = notice.text
    data: list[str] = [notice.host, notice.recipient_address, notice.recipient_name]
    sender = notice.sender
    assert sender is not None
    data += [sender.name, sender.rights_owner, sender.address, sender.email, sender.phone, sender.signer_name]
    proofs = notice_proofs(notice)  # the works' certificates, the agent's authorisation
    data += [proof.filename for proof in proofs] + [proof.sha256 for proof in proofs]
    for work in notice_works(notice):  # the owner of each work, as 权利人
        data += [work.owner_name, work.owner_address, work.owner_email, work.owner_phone]
        data += [work.author, work.registration_number, work.original_url]
    for item in notice.items:
        data += [item.url, item.page_title, item.work_title, item.chapter_title, item.snapshot_sha256]
        data += [item.bundle_sha256, f"fptrack-match-{item.match_id}-evidence.zip"]
        data += [str(part) for pair in item.passages or [] for part in pair]
    data += key_fingerprints(notice)  # the bundles' signing key, SHA256:<hex>
    parent = notice.parent
    while parent is not None:
        data.append(parent.message_id or "")
        parent = parent.parent
    for value in sorted(filter(None, data), key=len, reverse=True):
        text = text.replace(value, " ")
    for value in sorted(filter(None, data), key=len, reverse=True):
        text = text.replace(" ".join(value.split()), " ")  # as the text prints a page title: spaces folded
    return set(re.findall(r"[A-Za-z]{2,}", text))


# the technical names a Chinese notice keeps as they are (an algorithm, a file format)
TECHNICAL = {"SHA", "WARC"}


def test_the_chinese_notice_speaks_as_the_company_dates_in_beijing_time_and_sets_a_deadline(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport]
) -> None:
    inbox, transport = smtp
    notice = _send(session, settings, transport, "zh")
    text = notice.text
    assert "本人" not in text and "我司" in text
    assert "山中出版社（以下简称“我司”）" in text
    # 北京时间, 年月日: sent 18:00 UTC on the 25th is 02:00 on the 26th in Beijing
    assert "日期：2026年11月26日 02:00（北京时间）" in text
    assert "UTC" not in text and not re.search(r"\d{4}-\d\d-\d\d", text), text
    assert "首次发现：2026年3月1日 20:00（北京时间）" in text  # the seed's T0, 12:00 UTC
    assert "并于2026年11月29日前将处理结果书面回复我司" in text  # the deadline: three days after sending
    # the guarantee of truthfulness and the indemnity, then 第十四条's own sentence
    assert "我司保证本通知书所述内容真实、准确" in text and "由我司承担赔偿责任" in text
    assert "权利人对本通知书的真实性负责。" in text
    # the seal and the signature: the company seals, the signer signs, the day in 年月日
    signature = "山中出版社（盖章）\n授权签署人：/s/ 王五（法务总监）\n2026年11月26日"
    assert text.rstrip().endswith(signature), text
    assert _latin_words(notice) <= TECHNICAL, _latin_words(notice) - TECHNICAL
    assert missing_elements(notice) == []
    html = render_html(notice, SENT)
    for words in ("我司", "2026年11月26日 02:00（北京时间）", "2026年11月29日", "山中出版社（盖章）", "赔偿"):
        assert words in html, words
    assert "本人" not in html and "UTC" not in html
    [(_from, _to, message)] = inbox.messages
    assert message["Content-Language"] == "zh-CN"
    assert message["Subject"] == f"侵权通知书：{HOST}（编号 {notice.id}）"


def test_the_english_notice_keeps_utc_and_its_language_header(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport]
) -> None:
    inbox, transport = smtp
    notice = _send(session, settings, transport, "en")
    assert "Date: 2026-11-25 18:00 UTC" in notice.text
    assert "reply to us by 2026-11-28" in notice.text
    # the signer's capacity: the agent's title, for the owner whose agent it is
    signature = "/s/ 王五\n法务总监, 山中出版社, authorised agent of 山中文化有限公司\n2026-11-25"
    assert notice.text.rstrip().endswith(signature)
    [(_from, _to, message)] = inbox.messages
    assert message["Content-Language"] == "en"
    assert message["Subject"] == f"Notice of copyright infringement: {HOST} (no. {notice.id})"
    for part in (message.get_body(preferencelist=(kind,)) for kind in ("plain", "html")):
        assert isinstance(part, EmailMessage) and part["Content-Language"] == "en"


@pytest.mark.parametrize("kind", ["reminder", "escalation"])
def test_chinese_follow_ups_have_no_english_in_them(
    session: Session,
    settings: Settings,
    seeded: Seeded,
    smtp: tuple[Inbox, SmtpTransport],
    kind: str,
) -> None:
    inbox, transport = smtp
    settings = settings.with_overrides(notice_auto_follow_up=True)
    first = _send(session, settings, transport, "zh")
    days = timedelta(days=settings.notice_escalate_after, hours=1)
    [reminder_id] = follow_up(session, settings, now=SENT + days, transport=transport).reminders
    session.commit()
    follow = load_notice(session, reminder_id)
    if kind == "escalation":
        [escalation_id] = follow_up(session, settings, now=SENT + 2 * days, transport=transport).escalations
        session.commit()
        follow = load_notice(session, escalation_id)
    assert follow.kind == kind and follow.language == "zh"
    # it cites the first notice by its number, its day in 年月日 and its message id, in Chinese
    assert f"（编号 {first.id}，邮件标识 {first.message_id}）" in follow.text
    assert "我司已于2026年11月26日" in follow.text
    assert "no." not in follow.text and "Message-ID" not in follow.text
    assert _latin_words(follow) <= TECHNICAL, _latin_words(follow) - TECHNICAL
    assert missing_elements(follow) == []
    message = inbox.messages[-1][2]
    assert message["Content-Language"] == "zh-CN" and "no." not in message["Subject"]
