"""Rights data per work (services/rights.py, jobs/notice_render.py, jobs/delivery.py), on SQLite and
PostgreSQL, sent to a real SMTP server on loopback: a notice cites the ownership proof of ITS work, never
another's, and is not sent without one; an agent's notice names the work's owner as 权利人 with address and
contacts and the agent as 代理人 with its 授权委托书 attached, and is not sent without that authorisation; a
person speaks as 本人 and signs, a company as 我司 with its credit code, legal representative and seal; every
notice carries the electronic-signature statement (电子签名法 第十三条) with the evidence key's fingerprint;
the admin's work page sets the rights and takes a proof."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from flask import Flask
from sqlalchemy.orm import Session

from fptrack.admin.web import create_app
from fptrack.core.settings import Settings
from fptrack.jobs.delivery import SmtpTransport, attachment_names
from fptrack.jobs.notice_render import key_fingerprints, missing_elements
from fptrack.jobs.notices import NoticeError, add_contact, preview_notice, save_sender, send_notice
from fptrack.services.rights import RightsError, add_proof, check_credit_code, save_work_rights
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.models import Match, RightsProof, Sender, Work
from tests.support.accounts import add_account, csrf_token_in, log_in
from tests.support.admin_seed import Seeded
from tests.unit.jobs.test_notices import HOST, Inbox, _draft, seeded, smtp

__all__ = ["seeded", "smtp"]

SENT = datetime(2026, 11, 25, 18, 0, tzinfo=UTC)
OWNER = {
    "owner_name": "青石文化传媒有限公司",
    "owner_address": "杭州市西湖区文三路 9 号",
    "owner_email": "rights@qingshi.example",
    "owner_phone": "+86 571 5555 0199",
}
CREDIT_CODE = "91110000802100433B"  # a real company's code: its check character holds (GB 32100-2015)


def _sender(session: Session, language: str = "zh", **changes: str) -> Sender:
    fields = {
        "address": "北京市东城区东直门内大街 1 号",
        "email": "rights@shanzhong.example",
        "phone": "+86 10 5555 0100",
        "signer_name": "王五",
        "signer_title": "法务总监",
        "language": language,
    }
    fields.update(changes)
    return save_sender(session, "山中出版社", create=True, **fields)


def _works(session: Session, seeded: Seeded) -> tuple[Work, Work]:
    """(the work the pirate host copies, the other work)."""
    match = session.get(Match, seeded.hostile_match_id)
    assert match is not None
    other_id = seeded.other_work_id if match.work_id == seeded.work_id else seeded.work_id
    work, other = session.get(Work, match.work_id), session.get(Work, other_id)
    assert work is not None and other is not None
    return work, other


def _certificate(session: Session, work: Work, name: str) -> RightsProof:
    return add_proof(
        session, name, f"%PDF certificate of {work.title}".encode(), kind="ownership_certificate", work=work
    )


def test_a_notice_cites_its_own_works_certificate_never_anothers(
    session: Session, settings: Settings, seeded: Seeded, smtp: tuple[Inbox, SmtpTransport]
) -> None:
    inbox, transport = smtp
    work, other = _works(session, seeded)
    _sender(session)
    add_contact(session, HOST, "abuse@pirate.example")
    _certificate(session, other, "other-work-certificate.pdf")
    notice = _draft(session, settings, now=SENT, match_ids=[seeded.hostile_match_id])
    assert {item.work_id for item in notice.items} == {work.id}
    assert "other-work-certificate.pdf" not in notice.text
    missing = missing_elements(notice)
    assert any(
        "第十四条（三）" in line and f"《{work.title}》" in line and "no proof of ownership" in line
        for line in missing
    )
    with pytest.raises(NoticeError, match="no proof of ownership") as refused:
        send_notice(session, notice, settings, actor="test", transport=transport, now=SENT)
    assert "\n" not in str(refused.value) and inbox.messages == []
    # the same check in a preview
    preview = preview_notice(session, match_ids=[seeded.hostile_match_id], recipient="x@y.example", now=SENT)
    assert any("no proof of ownership" in line for line in missing_elements(preview))

    _certificate(session, work, "own-certificate.pdf")
    save_work_rights(session, work.id, author="李四", registration_number="国作登字-2026-A-00000001")
    notice = _draft(session, settings, now=SENT, match_ids=[seeded.hostile_match_id], recipient="a@b.example")
    assert missing_elements(notice) == []
    assert "own-certificate.pdf" in notice.text and "other-work-certificate.pdf" not in notice.text
    assert "作者：李四" in notice.text and "作品登记证书号：国作登字-2026-A-00000001" in notice.text
    send_notice(session, notice, settings, actor="test", transport=transport, now=SENT)
    [(_from, _to, message)] = inbox.messages
    names = attachment_names(message)
    assert "own-certificate.pdf" in names and "other-work-certificate.pdf" not in names


@pytest.mark.parametrize("language", ["zh", "en"])
def test_an_agent_names_the_owner_as_rights_holder_and_attaches_its_authorisation(
    session: Session,
    settings: Settings,
    seeded: Seeded,
    smtp: tuple[Inbox, SmtpTransport],
    language: str,
) -> None:
    inbox, transport = smtp
    work, other = _works(session, seeded)
    sender = _sender(session, language, role="agent", credit_code=CREDIT_CODE, legal_representative="张三")
    add_contact(session, HOST, "abuse@pirate.example")
    save_work_rights(session, work.id, **OWNER)
    _certificate(session, work, "certificate.pdf")
    # an authorisation for another work does not authorise this one
    add_proof(
        session, "other-authorisation.pdf", b"%PDF other", kind="authorisation", sender=sender, work=other
    )
    notice = _draft(session, settings, now=SENT, match_ids=[seeded.hostile_match_id])
    missing = missing_elements(notice)
    assert any("no authorisation (授权委托书)" in line and f"《{work.title}》" in line for line in missing), (
        missing
    )
    with pytest.raises(NoticeError, match="授权委托书"):
        send_notice(session, notice, settings, actor="test", transport=transport, now=SENT)
    assert inbox.messages == []

    add_proof(
        session, "授权委托书.pdf", b"%PDF authorisation", kind="authorisation", sender=sender, work=work
    )
    notice = _draft(session, settings, now=SENT, match_ids=[seeded.hostile_match_id], recipient="a@b.example")
    assert missing_elements(notice) == []
    text = notice.text
    if language == "zh":
        for words in (
            "权利人：青石文化传媒有限公司",
            "地址：杭州市西湖区文三路 9 号",
            "电子邮件：rights@qingshi.example",
            "电话：+86 571 5555 0199",
            "代理人：山中出版社",
            f"统一社会信用代码：{CREDIT_CODE}",
            "法定代表人：张三",
            "授权委托书（附件）：授权委托书.pdf",
            "受著作权人青石文化传媒有限公司委托",
            "著作权人：青石文化传媒有限公司",
        ):
            assert words in text, words
    else:
        for words in (
            "Rights owner: 青石文化传媒有限公司",
            "Postal address: 杭州市西湖区文三路 9 号",
            "Authorised agent: 山中出版社",
            "on behalf of the copyright owner 青石文化传媒有限公司, as its authorised agent",
            "Authorisation of the agent, attached: 授权委托书.pdf",
            "法务总监, 山中出版社, authorised agent of 青石文化传媒有限公司",
        ):
            assert words in text, words
    assert "other-authorisation.pdf" not in text
    send_notice(session, notice, settings, actor="test", transport=transport, now=SENT)
    names = attachment_names(inbox.messages[0][2])
    assert "授权委托书.pdf" in names and "certificate.pdf" in names and "other-authorisation.pdf" not in names


def test_a_general_authorisation_serves_every_work_and_the_principal_needs_an_address(
    session: Session, settings: Settings, seeded: Seeded
) -> None:
    work, _other = _works(session, seeded)
    sender = _sender(session, role="agent")
    _certificate(session, work, "certificate.pdf")
    add_proof(session, "general.pdf", b"%PDF general", kind="authorisation", sender=sender)
    save_work_rights(session, work.id, owner_name=OWNER["owner_name"])
    notice = _draft(session, settings, now=SENT, match_ids=[seeded.hostile_match_id])
    missing = missing_elements(notice)
    assert not any("授权委托书" in line for line in missing)
    assert any("the owner of" in line and "has no address" in line for line in missing), missing
    assert any("neither email nor telephone" in line for line in missing)
    save_work_rights(session, work.id, **OWNER)
    assert (
        missing_elements(
            _draft(session, settings, now=SENT, match_ids=[seeded.hostile_match_id], recipient="x@y.example")
        )
        == []
    )


def test_a_person_speaks_as_benren_and_signs_a_company_as_wosi_and_seals(
    session: Session, settings: Settings, seeded: Seeded
) -> None:
    work, _other = _works(session, seeded)
    _certificate(session, work, "certificate.pdf")
    sender = _sender(session, kind="person", signer_name="王小明", signer_title="")
    person = _draft(session, settings, now=SENT, match_ids=[seeded.hostile_match_id])
    assert "本人" in person.text and "我司" not in person.text and "盖章" not in person.text
    assert "签名：/s/ 王小明" in person.text and "（以下简称“本人”）" in person.text
    assert missing_elements(person) == []  # the statements a person makes are found as such
    with pytest.raises(NoticeError, match="a company's"):
        save_sender(session, sender.name, create=False, credit_code=CREDIT_CODE)
    session.rollback()

    _certificate(session, work, "certificate.pdf")
    _sender(session, signer_name="王五", credit_code=CREDIT_CODE, legal_representative="张三")
    company = _draft(
        session, settings, now=SENT, match_ids=[seeded.hostile_match_id], recipient="x@y.example"
    )
    assert "我司" in company.text and "本人" not in company.text
    assert "山中出版社（盖章）" in company.text and f"统一社会信用代码：{CREDIT_CODE}" in company.text


@pytest.mark.parametrize("language", ["zh", "en"])
def test_the_electronic_signature_statement_names_the_law_and_the_key(
    session: Session, settings: Settings, seeded: Seeded, language: str
) -> None:
    work, _other = _works(session, seeded)
    _certificate(session, work, "certificate.pdf")
    _sender(session, language)
    notice = _draft(session, settings, now=SENT, match_ids=[seeded.hostile_match_id])
    [fingerprint] = key_fingerprints(notice)
    [statement] = [
        line
        for line in notice.text.splitlines()
        if "电子签名法" in line and ("第十三条" in line or "Article 13" in line)
    ]
    assert fingerprint in statement and "/s/ 王五" in statement and "山中出版社" in statement
    if language == "zh":
        assert "属于电子签名人专有" in statement and "仅由电子签名人控制" in statement
    else:
        assert "sole control" in statement and "can be detected" in statement


def test_credit_codes_and_work_rights_are_checked_where_typed(session: Session, seeded: Seeded) -> None:
    assert check_credit_code(CREDIT_CODE.lower()) == CREDIT_CODE
    for bad in ("91110000802100433A", "9111000080210043", "91110000802100433I"):
        with pytest.raises(RightsError):
            check_credit_code(bad)
    with pytest.raises(NoticeError, match="check character"):
        _sender(session, credit_code="91110000802100433A")
    session.rollback()
    for field, value in (
        ("owner_email", "a@x.example, b@y.example"),
        ("original_url", "javascript:alert(1)"),
        ("author", "李四\r\nBcc: x@y.example"),
    ):
        with pytest.raises(RightsError):
            save_work_rights(session, seeded.work_id, **{field: value})
    with pytest.raises(RightsError, match="no work with id"):
        save_work_rights(session, 10**12, author="x")
    with pytest.raises(RightsError, match="attach it to the work"):
        add_proof(session, "c.pdf", b"x", kind="ownership_certificate")


def test_the_admin_work_page_sets_the_rights_and_takes_a_proof(settings: Settings, seeded: Seeded) -> None:
    app: Flask = create_app(settings)
    try:
        add_account(settings, "ada", "admin")
        add_account(settings, "vic", "viewer")
        client = app.test_client()
        log_in(client, "vic")
        page = client.get(f"/works/{seeded.work_id}").get_data(as_text=True)
        assert "no proof of ownership" in page and "work-rights-form" not in page
        client.post("/logout", data={"csrf_token": csrf_token_in(page)})
        client = app.test_client()
        log_in(client, "ada")
        token = csrf_token_in(client.get(f"/works/{seeded.work_id}").get_data(as_text=True))
        form = {"csrf_token": token, "author": "李四", "registration_number": "2026-A-1", **OWNER}
        form["proof"] = (io.BytesIO(b"%PDF certificate"), "certificate.pdf")  # type: ignore[assignment]
        response = client.post(
            f"/works/{seeded.work_id}/rights", data=form, content_type="multipart/form-data"
        )
        assert response.status_code == 303, response.get_data(as_text=True)
        page = client.get(f"/works/{seeded.work_id}").get_data(as_text=True)
        assert "certificate.pdf" in page and "青石文化传媒有限公司" in page and "2026-A-1" in page
        bad = client.post(
            f"/works/{seeded.work_id}/rights", data={"csrf_token": token, "original_url": "ftp://x"}
        )
        assert bad.status_code == 400 and "http(s) URL" in bad.get_data(as_text=True)
        assert client.post(f"/works/{2**63}/rights", data={"csrf_token": token}).status_code == 404
    finally:
        app.extensions["fptrack"].engine.dispose()
    engine = create_engine_for(settings)
    try:
        with session_scope(session_factory(engine)) as session:
            work = session.get(Work, seeded.work_id)
            assert work is not None and work.author == "李四" and work.owner_email == OWNER["owner_email"]
            assert [(p.kind, p.content) for p in work.proofs] == [
                ("ownership_certificate", b"%PDF certificate")
            ]
    finally:
        engine.dispose()


def test_the_admin_senders_page_sets_kind_role_codes_and_typed_proofs(
    settings: Settings, seeded: Seeded
) -> None:
    app: Flask = create_app(settings)
    try:
        add_account(settings, "ada", "admin")
        client = app.test_client()
        log_in(client, "ada")
        token = csrf_token_in(client.get("/senders").get_data(as_text=True))
        sender = {"csrf_token": token, "name": "维权代理公司", "kind": "company", "role": "agent"}
        bad = client.post("/senders", data={**sender, "credit_code": "91110000802100433A"})
        assert bad.status_code == 400 and "check character" in bad.get_data(as_text=True)
        assert client.post("/senders", data={**sender, "credit_code": CREDIT_CODE}).status_code == 303
        page = client.get("/senders").get_data(as_text=True)
        sender_id = page.split('id="sender-')[1].split('"')[0]
        upload = {
            "csrf_token": token,
            "proof": (io.BytesIO(b"%PDF mandate"), "mandate.pdf"),
            "proof_kind": "authorisation",
            "for_work": str(seeded.work_id),
        }
        posted = client.post(f"/senders/{sender_id}", data=upload, content_type="multipart/form-data")
        assert posted.status_code == 303, posted.get_data(as_text=True)
        wrong = {**upload, "proof": (io.BytesIO(b"x"), "x.pdf"), "proof_kind": "ownership_certificate"}
        refused = client.post(f"/senders/{sender_id}", data=wrong, content_type="multipart/form-data")
        assert refused.status_code == 400 and "identity or an authorisation" in refused.get_data(as_text=True)
        page = client.get("/senders").get_data(as_text=True)
        assert "mandate.pdf" in page and CREDIT_CODE in page
    finally:
        app.extensions["fptrack"].engine.dispose()
    engine = create_engine_for(settings)
    try:
        with session_scope(session_factory(engine)) as session:
            saved = session.query(Sender).filter_by(name="维权代理公司").one()
            assert (saved.kind, saved.role, saved.credit_code) == ("company", "agent", CREDIT_CODE)
            assert [(p.kind, p.work_id, p.content) for p in saved.proofs] == [
                ("authorisation", seeded.work_id, b"%PDF mandate")
            ]
    finally:
        engine.dispose()


def test_a_work_whose_rights_proofs_notices_cite_is_not_removed_unasked(session: Session) -> None:
    from fptrack.compare.works import WorkNotRemoved, remove_work

    work = Work(title="无人抄袭", source_name="x.txt", content_sha256="sha-unmatched", text="正文")
    session.add(work)
    session.flush()
    proof = _certificate(session, work, "certificate.pdf")
    with pytest.raises(WorkNotRemoved, match=r"1 proof\(s\) of its rights"):
        remove_work(session, work.id, with_matches=False)
    assert session.get(RightsProof, proof.id) is not None
    remove_work(session, work.id, with_matches=True)
    session.expire_all()
    assert session.get(Work, work.id) is None
