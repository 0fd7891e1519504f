"""Takedown notices (jobs/notices.py, jobs/notice_render.py, jobs/delivery.py) on SQLite and PostgreSQL:
every element of 17 U.S.C. 512(c)(3)(A) and 信息网络传播权保护条例 第十四条, checked by name in Chinese and
in English;
notices refused for matches no reviewer confirmed; a missing element named; delivery received by a real SMTP
server (aiosmtpd on loopback); the follow-up closing, reminding and escalating on schedule (time passed in);
exports; time to removal per notice and per recipient."""

from __future__ import annotations

import email
import email.policy
import hashlib
import io
import socket
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from markupsafe import escape
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.analytics.takedowns import notice_removal_times
from fptrack.core.settings import ConfigurationError, Settings
from fptrack.jobs.delivery import DeliveryError, SmtpTransport, infringing_urls, lumen_json
from fptrack.jobs.notice_render import ELEMENTS, STATEMENTS, absent_elements, missing_elements
from fptrack.jobs.notices import (
    NothingLeftError,
    NoticeError,
    add_contact,
    draft_notice,
    follow_up,
    load_notice,
    mark_notice,
    save_sender,
    send_notice,
)
from fptrack.services.rights import add_proof, save_work_rights
from fptrack.storage.models import LicensedSite, Match, Notice, NoticeEvent, Sender, Work
from tests.support.admin_seed import COPIED_ONE, COPIED_TWO, T0, Seeded, seed

HOST = "pirate.example"
PROOF = b"%PDF-1.4 copyright registration certificate (test)"
AUTHORISATION = b"%PDF-1.4 authorisation (test)"


# ------------------------------------------------------------------------------------------------ fixtures


@dataclass
class Inbox:
    """What the local SMTP server received."""

    messages: list[tuple[str, list[str], EmailMessage]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), parsed))  # type: ignore[arg-type]
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, SmtpTransport]]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    try:
        yield inbox, SmtpTransport("127.0.0.1", controller.port, starttls=False)
    finally:
        controller.stop()


@pytest.fixture
def seeded(session: Session) -> Seeded:
    ids = seed(session)
    with Session(session.get_bind()) as s:
        # the Chinese copy on pirate.example, confirmed by a reviewer (the seed leaves it flagged)
        s.get(Match, ids.hostile_match_id).status = "confirmed"  # type: ignore[union-attr]
        s.commit()
    return ids


def _sender(session: Session, language: str = "en", **changes: str) -> Sender:
    fields = {
        "rights_owner": "山中文化有限公司",
        "address": "北京市东城区东直门内大街 1 号",
        "email": "rights@shanzhong.example",
        "phone": "+86 10 5555 0100",
        "signer_name": "王五",
        "signer_title": "法务总监 (General Counsel)",
        "language": language,
    }
    fields.update(changes)
    sender = save_sender(session, "山中出版社", create=True, **fields)
    add_rights(session, sender)
    return sender


def add_rights(session: Session, sender: Sender) -> None:
    """What a notice about the seed's works needs besides a sender (services.rights): each work's owner
    (山中文化有限公司, for whom the sender acts) with its address and contacts, its registration certificate,
    and the agent's authorisation for every work."""
    for work in session.scalars(select(Work).order_by(Work.id)):
        save_work_rights(
            session,
            work.id,
            owner_name="山中文化有限公司",
            owner_address="北京市朝阳区建国路 2 号",
            owner_email="legal@shanzhong-culture.example",
            owner_phone="+86 10 5555 0200",
        )
        add_proof(session, "registration.pdf", PROOF, kind="ownership_certificate", work=work)
    if sender.role == "agent":
        add_proof(session, "authorisation.pdf", AUTHORISATION, kind="authorisation", sender=sender)
    session.flush()


def _draft(session: Session, settings: Settings, **kwargs: Any) -> Notice:
    kwargs.setdefault("host", HOST)
    return draft_notice(session, actor="test", bundle_settings=settings, **kwargs)


# ------------------------------------------------------------------------------- every element, by name

# what each element looks like in a notice's text, per language
ELEMENT_MARKS: dict[str, dict[str, list[str]]] = {
    "us_i_signature": {"en": ["/s/ 王五", "法务总监 (General Counsel)"], "zh": ["/s/ 王五", "法务总监"]},
    "us_ii_work": {
        "en": ['"山中故事", 1. 第一章 山中', "registration.pdf"],
        "zh": ["《山中故事》1. 第一章 山中", "权属证明"],
    },
    "us_iii_material": {
        "en": [f"http://{HOST}/book/1.html", COPIED_ONE, "Original", "Copy"],
        "zh": [f"http://{HOST}/book/1.html", COPIED_TWO, "原文", "侵权内容"],
    },
    "us_iv_contact": {
        "en": [
            "Postal address: 北京市东城区",
            "Email: rights@shanzhong.example",
            "Telephone: +86 10 5555 0100",
        ],
        "zh": ["地址：北京市东城区", "电子邮件：rights@shanzhong.example", "电话：+86 10 5555 0100"],
    },
    "us_v_good_faith": {"en": [STATEMENTS["en"]["good_faith"]], "zh": [STATEMENTS["zh"]["good_faith"]]},
    "us_vi_accuracy": {
        "en": [STATEMENTS["en"]["accuracy"], "penalty of perjury"],
        "zh": [STATEMENTS["zh"]["accuracy"]],
    },
    "cn14_1_holder": {
        "en": [
            "Rights owner: 山中文化有限公司",
            "Authorised agent: 山中出版社",
            "Postal address: 北京市朝阳区",
        ],
        "zh": ["权利人：山中文化有限公司", "代理人：山中出版社", "地址：北京市朝阳区"],
    },
    "cn14_2_works": {"en": ["Network address (URL): http://"], "zh": ["网络地址：http://", "《山中故事》"]},
    "cn14_3_evidence": {
        "en": ["Prima facie evidence", "fptrack-match-", "-evidence.zip (SHA-256"],
        "zh": ["构成侵权的初步证明材料", "的证据包：fptrack-match-"],
    },
    "cn14_truth": {"en": [STATEMENTS["en"]["truth"]], "zh": ["权利人对本通知书的真实性负责。"]},
}


def test_the_marks_cover_every_element() -> None:
    assert set(ELEMENT_MARKS) == {element.key for element in ELEMENTS}


@pytest.mark.parametrize("language", ["zh", "en"])
@pytest.mark.parametrize("element", [e.key for e in ELEMENTS])
def test_a_notice_carries_the_element(
    session: Session, settings: Settings, seeded: Seeded, element: str, language: str
) -> None:
    _sender(session)
    notice = _draft(session, settings, language=language)
    assert notice.language == language
    for mark in ELEMENT_MARKS[element][language]:
        assert mark in notice.text, (element, language, mark)
    assert element not in {key for key, _ in absent_elements(notice)}
    assert missing_elements(notice) == []
    # the HTML the admin shows and the message carries says the same
    from fptrack.jobs.notice_render import render_html

    html = render_html(notice, datetime.now(UTC))
    for mark in ELEMENT_MARKS[element][language]:
        value = mark.split("：")[-1].split(": ")[-1]  # the value, without the text's label
        assert str(escape(value)) in html, (element, language, value)


# the change to a complete notice that takes one element away, and the words that name what is missing
TAKE_AWAY: dict[str, tuple[dict[str, str], str]] = {
    "us_i_signature": ({"signer_name": ""}, "names no signer"),
    "us_iv_contact": ({"phone": ""}, "no telephone number"),
    "us_vi_accuracy": ({"signer_title": ""}, "authority to act"),
    "cn14_1_holder": ({"address": ""}, "no postal address"),
}


@pytest.mark.parametrize("language", ["zh", "en"])
@pytest.mark.parametrize("element", sorted(TAKE_AWAY))
def test_a_missing_sender_element_is_named_and_the_notice_cannot_be_sent(
    session: Session,
    settings: Settings,
    seeded: Seeded,
    smtp: tuple[Inbox, SmtpTransport],
    element: str,
    language: str,
) -> None:
    change, words = TAKE_AWAY[element]
    _sender(session, **change)
    add_contact(session, HOST, "abuse@pirate.example")
    notice = _draft(session, settings, language=language)
    missing = missing_elements(notice)
    ref = next(e.ref for e in ELEMENTS if e.key == element)
    assert any(line.startswith(ref) and words in line for line in missing), missing
    with pytest.raises(NoticeError, match="cannot be sent; it lacks") as refused:
        send_notice(session, notice, settings, actor="test", transport=smtp[1])
    assert ref in str(refused.value)
    assert smtp[0].messages == [] and notice.state == "draft"


@pytest.mark.parametrize("language", ["zh", "en"])
def test_statements_evidence_and_works_missing_are_named(
    session: Session, settings: Settings, seeded: Seeded, language: str
) -> None:
    _sender(session)
    notice = _draft(session, settings, language=language)
    notice.text = notice.text.replace(STATEMENTS[language]["good_faith"], "")
    notice.text = notice.text.replace(STATEMENTS[language]["truth"], "")
    notice.items[0].bundle_sha256 = ""
    notice.items[0].work_title = ""
    notice.items[0].work.proofs.clear()  # type: ignore[union-attr]
    keys = {key for key, _ in absent_elements(notice)}
    assert {"us_v_good_faith", "cn14_truth", "cn14_3_evidence", "us_ii_work", "cn14_2_works"} <= keys
    lines = missing_elements(notice)
    assert any(line.startswith("17 U.S.C. 512(c)(3)(A)(v)") for line in lines)
    assert any("第十四条（三）" in line and "no proof of ownership" in line for line in lines)


def test_without_a_sender_every_sender_element_is_named(
    session: Session, settings: Settings, seeded: Seeded
) -> None:
    notice = _draft(session, settings)
    keys = {key for key, _ in absent_elements(notice)}
    assert {"us_i_signature", "us_iv_contact", "us_vi_accuracy", "cn14_1_holder", "cn14_truth"} <= keys


# ------------------------------------------------------------------------------------ confirmed only


@pytest.mark.parametrize("which", ["flagged", "dismissed", "licensed", "unreviewed"])
def test_notices_are_refused_for_matches_no_reviewer_confirmed(
    session: Session, settings: Settings, which: str
) -> None:
    ids = seed(session)  # hostile: flagged (unreviewed), plain: licensed, javascript: dismissed
    match_id = {
        "flagged": ids.hostile_match_id,
        "unreviewed": ids.hostile_match_id,
        "dismissed": ids.javascript_match_id,
        "licensed": ids.plain_match_id,
    }[which]
    _sender(session)
    with pytest.raises(NoticeError, match=rf"match {match_id} is \w+, not confirmed"):
        _draft(session, settings, host=None, match_ids=[match_id])
    # a host's notice leaves them out: only the confirmed copy on pirate.example is named
    notice = _draft(session, settings)
    assert [item.url for item in notice.items] == [f"http://{HOST}/other.html"]
    with pytest.raises(NoticeError, match="no confirmed match on copy.example"):
        _draft(session, settings, host="copy.example")


# ------------------------------------------------------------------------------------------ delivery


@pytest.mark.parametrize("language", ["zh", "en"])
def test_a_sent_notice_reaches_the_smtp_server_with_every_element_and_the_evidence(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport], language: str
) -> None:
    inbox, transport = smtp
    _sender(session, language=language)
    add_contact(session, HOST, "abuse@pirate.example", name="Pirate Abuse Desk")
    notice = _draft(session, settings)
    assert notice.language == language  # the sender's preference (the contact names none)
    now = datetime(2026, 11, 25, 18, 0, tzinfo=UTC)
    send_notice(
        session,
        notice,
        settings.with_overrides(smtp_from="notices@fptrack.example"),
        actor="test",
        transport=transport,
        now=now,
    )
    session.commit()
    assert notice.state == "sent" and notice.sent_at is not None
    [(mail_from, rcpt_tos, message)] = inbox.messages
    assert mail_from == "notices@fptrack.example" and rcpt_tos == ["abuse@pirate.example"]
    assert message["Message-ID"] == notice.message_id and notice.message_id.startswith("<")
    assert message["Reply-To"] == "rights@shanzhong.example"
    body = message.get_body(preferencelist=("plain",))
    assert body is not None
    text = body.get_content().replace("\r\n", "\n")  # SMTP carries lines ended by CRLF
    assert text == notice.text and hashlib.sha256(text.encode()).hexdigest() == notice.text_sha256
    for element in ELEMENTS:
        for mark in ELEMENT_MARKS[element.key][language]:
            assert mark in text, (element.key, mark)
    # dated when sent: 18:00 UTC on the 25th, 02:00 on the 26th in Beijing
    assert {"en": "2026-11-25 18:00 UTC", "zh": "2026年11月26日 02:00（北京时间）"}[language] in text
    html = message.get_body(preferencelist=("html",))
    assert html is not None and "side-by-side" in html.get_content()
    attachments = {part.get_filename(): part.get_content() for part in message.iter_attachments()}
    assert attachments["registration.pdf"] == PROOF
    bundles = {name: data for name, data in attachments.items() if name.endswith("-evidence.zip")}
    assert len(bundles) == len(notice.items) == 2
    for item in notice.items:
        data = bundles[f"fptrack-match-{item.match_id}-evidence.zip"]
        assert hashlib.sha256(data).hexdigest() == item.bundle_sha256
        assert "evidence.json" in zipfile.ZipFile(io.BytesIO(data)).namelist()
    events = session.scalars(select(NoticeEvent).where(NoticeEvent.notice_id == notice.id)).all()
    sent = [e for e in events if e.kind == "sent"]
    assert sent[0].recipient == "abuse@pirate.example" and sent[0].message_id == notice.message_id
    assert f"smtp 127.0.0.1:{transport.port}" in sent[0].detail
    with pytest.raises(NoticeError, match="only a draft is sent"):
        send_notice(session, notice, settings, actor="test", transport=transport)


def test_a_relay_that_fails_leaves_a_draft_and_a_record(
    session: Session, settings: Settings, seeded: Seeded
) -> None:
    _sender(session)
    add_contact(session, HOST, "abuse@pirate.example")
    notice = _draft(session, settings)
    closed = SmtpTransport("127.0.0.1", _free_port(), starttls=False)
    with pytest.raises(DeliveryError, match="did not take the notice"):
        send_notice(session, notice, settings, actor="test", transport=closed)
    assert notice.state == "draft" and notice.sent_at is None
    assert [e.kind for e in notice.events] == ["drafted", "send_failed"]
    with pytest.raises(DeliveryError, match="FPTRACK_SMTP_HOST"):
        send_notice(session, notice, settings.with_overrides(smtp_host=None), actor="test")


def test_exports_lumen_and_the_url_list(session: Session, settings: Settings, seeded: Seeded) -> None:
    _sender(session)
    notice = _draft(session, settings)
    assert infringing_urls(notice).splitlines() == [item.url for item in notice.items]
    lumen = lumen_json(notice)["notice"]
    assert lumen["type"] == "DMCA"
    urls = [u["url"] for work in lumen["works_attributes"] for u in work["infringing_urls_attributes"]]
    assert sorted(urls) == sorted(item.url for item in notice.items)
    roles = {role["name"]: role["entity_attributes"] for role in lumen["entity_notice_roles_attributes"]}
    assert (
        roles["sender"]["email"] == "rights@shanzhong.example"
        and roles["principal"]["name"] == "山中文化有限公司"
    )


# --------------------------------------------------------------------------------------------- follow-up


def _sent(session: Session, settings: Settings, transport: SmtpTransport, at: datetime) -> Notice:
    _sender(session)
    add_contact(session, HOST, "abuse@pirate.example")
    add_contact(session, HOST, "abuse@hosting.example", kind="hosting", name="Hosting Ltd", language="en")
    notice = _draft(session, settings, now=at)
    send_notice(session, notice, settings, actor="test", transport=transport, now=at)
    session.commit()
    return notice


def test_a_copy_left_up_is_reminded_then_escalated_upstream_on_schedule(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport]
) -> None:
    inbox, transport = smtp
    days = settings.notice_escalate_after
    assert days == 7
    settings = settings.with_overrides(notice_auto_follow_up=True)
    sent_at = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    first = _sent(session, settings, transport, sent_at)

    # one day short of the delay: nothing happens
    early = follow_up(
        session, settings, now=sent_at + timedelta(days=days) - timedelta(hours=1), transport=transport
    )
    assert early.reminders == [] and len(inbox.messages) == 1

    # the delay has passed and both copies are still up: a second notice to the same recipient
    summary = follow_up(session, settings, now=sent_at + timedelta(days=days, hours=1), transport=transport)
    session.commit()
    [reminder_id] = summary.reminders
    assert summary.sent == [reminder_id]
    reminder = load_notice(session, reminder_id)
    assert (reminder.kind, reminder.recipient_address, reminder.parent_id) == (
        "reminder",
        "abuse@pirate.example",
        first.id,
    )
    assert first.state == "escalated" and reminder.state == "sent"
    assert "This is a second notice" in reminder.text and first.message_id in reminder.text
    # a long In-Reply-To is folded onto a continuation line; the whitespace of folding is not part of it
    assert inbox.messages[-1][2]["In-Reply-To"].strip() == first.message_id
    # running again at once changes nothing
    assert (
        follow_up(
            session, settings, now=sent_at + timedelta(days=days, hours=2), transport=transport
        ).reminders
        == []
    )

    # one copy is taken down (the re-checks record it on the match); the other stays up: an escalation to the
    # next contact upstream names only the copy still up
    taken = session.get(Match, seeded.hostile_match_id)
    assert taken is not None
    taken.taken_down_at = sent_at + timedelta(days=9)
    session.commit()
    later = sent_at + timedelta(days=2 * days, hours=2)
    summary = follow_up(session, settings, now=later, transport=transport)
    session.commit()
    assert summary.items_closed >= 1
    [escalation_id] = summary.escalations
    escalation = load_notice(session, escalation_id)
    assert (escalation.kind, escalation.recipient_address, escalation.contact_level) == (
        "escalation",
        "abuse@hosting.example",
        1,
    )
    assert [item.url for item in escalation.items] == [f"http://{HOST}/other.html"]
    assert "You provide services to the site pirate.example" in escalation.text
    assert missing_elements(escalation) == [] and escalation.state == "sent"
    assert inbox.messages[-1][1] == ["abuse@hosting.example"]

    # the last copy comes down: the escalation is done, its copies gone
    other = session.get(Match, escalation.items[0].match_id)
    assert other is not None
    other.taken_down_at = later + timedelta(days=1)
    session.commit()
    summary = follow_up(session, settings, now=later + timedelta(days=2), transport=transport)
    session.commit()
    assert summary.copies_gone == [escalation_id] and escalation.state == "copy_gone"

    # time to removal, per notice and per recipient
    per_notice = {row.key: row for row in notice_removal_times(session, "notice")}
    assert per_notice[f"notice {first.id}"].removed == 2 and per_notice[f"notice {first.id}"].copies == 2
    assert per_notice[f"notice {escalation_id}"].median_seconds == 86400.0
    per_recipient = {row.key: row for row in notice_removal_times(session, "recipient")}
    assert per_recipient["abuse@hosting.example"].notices == 1
    assert per_recipient["abuse@pirate.example"].notices == 2


def test_with_no_contact_upstream_the_chain_stops_and_says_so_once(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport]
) -> None:
    inbox, transport = smtp
    settings = settings.with_overrides(notice_auto_follow_up=True)
    _sender(session)
    add_contact(session, HOST, "abuse@pirate.example")
    sent_at = T0
    notice = _draft(session, settings, now=sent_at)
    send_notice(session, notice, settings, actor="test", transport=transport, now=sent_at)
    mark_notice(
        session, notice, "acknowledged", actor="test", note="ticket 42", now=sent_at + timedelta(days=1)
    )
    reminder_id = follow_up(
        session, settings, now=sent_at + timedelta(days=8), transport=transport
    ).reminders[0]
    stop = follow_up(session, settings, now=sent_at + timedelta(days=16), transport=transport)
    assert stop.no_upstream == [reminder_id] and stop.escalations == []
    assert (
        follow_up(session, settings, now=sent_at + timedelta(days=17), transport=transport).no_upstream == []
    )
    assert len(inbox.messages) == 2


def test_a_follow_up_leaves_out_a_copy_no_longer_confirmed_and_drafts_without_a_relay(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport]
) -> None:
    _inbox, transport = smtp
    first = _sent(session, settings, transport, T0)
    dismissed = session.get(Match, seeded.hostile_match_id)
    assert dismissed is not None
    dismissed.status = "dismissed"
    session.commit()
    summary = follow_up(
        session,
        settings.with_overrides(smtp_host=None, notice_auto_follow_up=True),
        now=T0 + timedelta(days=8),
    )
    [reminder_id] = summary.reminders
    assert "FPTRACK_SMTP_HOST" in summary.not_sent[reminder_id]
    reminder = load_notice(session, reminder_id)
    assert reminder.state == "draft" and [i.url for i in reminder.items] == [f"http://{HOST}/other.html"]
    assert first.state == "escalated"


# ------------------------------------------------------------------------------- no wrong notice is sent


def _ready(session: Session) -> None:
    _sender(session)
    add_contact(session, HOST, "abuse@pirate.example")
    add_contact(session, HOST, "abuse@hosting.example", kind="hosting", language="en")


def _received_urls(inbox: Inbox) -> list[str]:
    body = inbox.messages[-1][2].get_body(preferencelist=("plain",))
    assert body is not None
    return sorted(
        url
        for url in (f"http://{HOST}/book/1.html", f"http://{HOST}/other.html")
        if url in body.get_content()
    )


@pytest.mark.parametrize("change", ["dismissed", "taken_down", "licensed"])
def test_a_draft_sends_only_the_copies_still_noticeable_and_not_at_all_when_none_is(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport], change: str
) -> None:
    inbox, transport = smtp
    _ready(session)
    first = _draft(session, settings)
    # a second draft of the same copies to the same address: drafting again redoes an unsent draft, so only
    # two people drafting at once (or drafts older than that rule) make one
    second = _draft(session, settings, recipient="someone@else.example")
    second.recipient_address = first.recipient_address
    session.commit()
    assert second.id != first.id

    def change_match(match_id: int) -> None:
        match = session.get(Match, match_id)
        assert match is not None
        if change == "dismissed":
            match.status = "dismissed"
        elif change == "taken_down":
            match.taken_down_at = T0 + timedelta(days=1)
        else:
            session.add(LicensedSite(work_id=match.work_id, site=HOST))
        session.commit()

    change_match(seeded.hostile_match_id)
    send_notice(session, first, settings, actor="test", transport=transport)
    session.commit()
    # (licensed: the host is licensed for the hostile copy's work only)
    assert _received_urls(inbox) == [f"http://{HOST}/other.html"]
    assert seeded.hostile_match_id not in {item.match_id for item in first.items}
    assert f"http://{HOST}/book/1.html" not in first.text
    left_out = [e.detail for e in first.events if e.kind == "item_gone"]
    assert len(left_out) == 1 and "left out before sending" in left_out[0]

    # the other draft names the same copies to the same recipient: the notice just sent covers them
    with pytest.raises(NothingLeftError, match=rf"notice {second.id} not sent: nothing left to notice"):
        send_notice(session, second, settings, actor="test", transport=transport)
    assert second.state == "draft" and len(inbox.messages) == 1


def test_a_draft_whose_every_copy_was_dismissed_is_not_sent_and_says_why(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport]
) -> None:
    inbox, transport = smtp
    _ready(session)
    notice = _draft(session, settings)
    session.commit()
    for item in notice.items:
        match = session.get(Match, item.match_id)
        assert match is not None
        match.status = "dismissed"
    session.commit()
    with pytest.raises(NothingLeftError, match=r"nothing left to notice \(match \d+ is dismissed, not conf"):
        send_notice(session, notice, settings, actor="test", transport=transport)
    assert notice.state == "draft" and len(notice.items) == 2 and inbox.messages == []


def test_drafts_leave_out_taken_down_licensed_and_already_noticed_copies(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport]
) -> None:
    _inbox, transport = smtp
    _ready(session)
    hostile = session.get(Match, seeded.hostile_match_id)
    assert hostile is not None
    hostile.taken_down_at = T0 + timedelta(days=1)
    session.commit()
    with pytest.raises(NoticeError, match=rf"match {hostile.id} was found taken down on"):
        _draft(session, settings, host=None, match_ids=[hostile.id])
    notice = _draft(session, settings)
    assert hostile.id not in {item.match_id for item in notice.items}
    assert "left out: match" in notice.events[0].detail

    hostile.taken_down_at = None
    session.add(LicensedSite(work_id=hostile.work_id, site=HOST))
    session.commit()
    with pytest.raises(NoticeError, match=rf"match {hostile.id} is on {HOST}, licensed for its work"):
        _draft(session, settings, host=None, match_ids=[hostile.id])

    # a copy already in a sent notice to the same address: refused by id, left out by host
    send_notice(session, notice, settings, actor="test", transport=transport)
    session.commit()
    [other_id] = [item.match_id for item in notice.items]
    with pytest.raises(NoticeError, match=rf"match {other_id} is in notice {notice.id} to abuse@pirate"):
        _draft(session, settings, host=None, match_ids=[other_id])
    with pytest.raises(NothingLeftError, match=f"nothing to notice on {HOST}"):
        _draft(session, settings)
    # to another recipient (the host's provider) it may be drafted
    assert _draft(session, settings, host=None, match_ids=[other_id], recipient="abuse@hosting.example")


def test_follow_ups_wait_for_a_person_unless_the_setting_allows_them(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport]
) -> None:
    inbox, transport = smtp
    assert settings.notice_auto_follow_up is False
    first = _sent(session, settings, transport, T0)
    summary = follow_up(session, settings, now=T0 + timedelta(days=8), transport=transport)
    session.commit()
    [reminder_id] = summary.reminders
    assert summary.sent == [] and "fptrack notices send" in summary.not_sent[reminder_id]
    assert len(inbox.messages) == 1 and first.state == "escalated"
    reminder = load_notice(session, reminder_id)
    assert reminder.state == "draft"
    # a person approves it by sending it; the notice it follows up does not count as a duplicate
    send_notice(session, reminder, settings, actor="test", transport=transport, now=T0 + timedelta(days=8))
    session.commit()
    assert reminder.state == "sent" and len(inbox.messages) == 2 and len(reminder.items) == 2


def test_a_follow_up_leaves_out_a_copy_on_a_site_since_licensed(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport]
) -> None:
    _inbox, transport = smtp
    _sent(session, settings, transport, T0)
    hostile = session.get(Match, seeded.hostile_match_id)
    assert hostile is not None
    session.add(LicensedSite(work_id=hostile.work_id, site=HOST))
    session.commit()
    [reminder_id] = follow_up(session, settings, now=T0 + timedelta(days=8), transport=transport).reminders
    assert hostile.id not in {item.match_id for item in load_notice(session, reminder_id).items}


@pytest.mark.parametrize("days", ["0", "0.5", "-1"])
def test_the_follow_up_interval_has_a_minimum_of_a_day(days: str) -> None:
    with pytest.raises(ConfigurationError, match="FPTRACK_NOTICE_ESCALATE_AFTER.*>= 1"):
        Settings.from_env({"FPTRACK_NOTICE_ESCALATE_AFTER": days})
    assert Settings.from_env({"FPTRACK_NOTICE_ESCALATE_AFTER": "1"}).notice_escalate_after == 1
