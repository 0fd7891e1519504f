"""Actions the admin offers only when they can succeed, and says why when not (on SQLite and PostgreSQL):
senders and host contacts edited and removed (never what a sent notice rests on), "Send by email" without an
SMTP relay, a notice's preview before its evidence bundles exist, "Run now" clicked twice."""

from __future__ import annotations

import io
from datetime import timedelta

from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.admin.views.sites import _mark_starting
from fptrack.core.settings import Settings
from fptrack.jobs.site_runs import claim
from fptrack.storage.models import CrawlJob, HostContact, MonitorLock, Notice, Sender, utcnow
from tests.support.accounts import add_account, csrf_token_in, log_in
from tests.support.admin_seed import Seeded

SENDER = {
    "name": "山中出版社",
    "address": "北京市东城区 1 号",
    "email": "rights@shan.example",
    "phone": "+86 10 5555",
    "signer_name": "王五",
    "signer_title": "法务总监",
    "language": "zh",
}


def _admin(app: Flask, settings: Settings) -> tuple[FlaskClient, str]:
    add_account(settings, "ada", "admin")
    client = app.test_client()
    log_in(client, "ada")
    return client, csrf_token_in(client.get("/").get_data(as_text=True))


def _set_up(admin: FlaskClient, token: str) -> None:
    assert admin.post("/senders", data={"csrf_token": token, **SENDER}).status_code == 303
    contact = {"csrf_token": token, "host": "pirate.example", "email": "abuse@pirate.example"}
    assert admin.post("/senders/contacts", data=contact).status_code == 303


def test_contacts_are_edited_and_removed_unless_a_notice_sent_to_them_is_pursued(
    app: Flask, settings: Settings, session: Session, seeded: Seeded
) -> None:
    admin, token = _admin(app, settings)
    _set_up(admin, token)
    contact = session.scalars(select(HostContact)).one()
    edited = {
        "csrf_token": token,
        "email": "dmca@pirate.example",
        "kind": "hosting",
        "name": "Host",
        "language": "",
    }
    assert admin.post(f"/senders/contacts/{contact.id}", data=edited).status_code == 303
    session.expire_all()
    assert (contact.email, contact.kind, contact.name) == ("dmca@pirate.example", "hosting", "Host")
    bad = admin.post(f"/senders/contacts/{contact.id}", data={**edited, "email": "a@b.example\nBcc: x@y"})
    assert bad.status_code == 400 and "line break" in bad.get_data(as_text=True)
    assert admin.post(f"/senders/contacts/{contact.id}", data={"csrf_token": "forged"}).status_code == 400

    drafted = admin.post("/notices", data={"csrf_token": token, "host": "pirate.example"})
    notice = session.get(Notice, int(drafted.headers["Location"].rsplit("/", 1)[1]))
    assert notice is not None and notice.recipient_address == "dmca@pirate.example"
    notice.state, notice.sent_at = "sent", utcnow()  # as a send leaves it
    session.commit()
    refused = admin.post(f"/senders/contacts/{contact.id}/remove", data={"csrf_token": token})
    assert refused.status_code == 409
    assert f"Notice(s) {notice.id} to dmca@pirate.example are still pursued" in refused.get_data(as_text=True)
    notice.state = "withdrawn"
    session.commit()
    assert admin.post(f"/senders/contacts/{contact.id}/remove", data={"csrf_token": token}).status_code == 303
    assert session.scalars(select(HostContact)).all() == []
    assert admin.post(f"/senders/contacts/{contact.id}/remove", data={"csrf_token": token}).status_code == 404


def test_a_sender_is_removed_unless_a_sent_notice_names_it(
    app: Flask, settings: Settings, session: Session, seeded: Seeded
) -> None:
    admin, token = _admin(app, settings)
    _set_up(admin, token)
    sender = session.scalars(select(Sender)).one()
    drafted = admin.post("/notices", data={"csrf_token": token, "host": "pirate.example"})
    draft_id = int(drafted.headers["Location"].rsplit("/", 1)[1])
    # a notice this sender sent earlier (the row as a send leaves it)
    sent = Notice(host="copy.example", sender=sender, state="sent", sent_at=utcnow(), language="zh")
    session.add(sent)
    session.commit()
    sent_id = sent.id

    refused = admin.post(f"/senders/{sender.id}/remove", data={"csrf_token": token})
    page = refused.get_data(as_text=True)
    assert refused.status_code == 409 and f"signed notice(s) {sent_id}: a sent notice" in page
    assert session.scalars(select(Sender)).one() is sender

    session.delete(sent)  # (a test's shortcut: the product never deletes a sent notice)
    session.commit()
    removed = admin.post(f"/senders/{sender.id}/remove", data={"csrf_token": token}, follow_redirects=True)
    assert f"Drafts now without a sender: {draft_id}." in removed.get_data(as_text=True)
    session.expire_all()
    assert session.scalars(select(Sender)).all() == []
    draft = session.get(Notice, draft_id)
    assert draft is not None and draft.sender_id is None
    assert "no sender" in admin.get(f"/notices/{draft_id}").get_data(as_text=True)


def test_send_by_email_without_a_relay_is_disabled_with_the_reason(
    app: Flask, settings: Settings, seeded: Seeded
) -> None:
    assert settings.smtp_host is None
    admin, token = _admin(app, settings)
    _set_up(admin, token)
    url = admin.post("/notices", data={"csrf_token": token, "host": "pirate.example"}).headers["Location"]
    page = admin.get(url).get_data(as_text=True)
    assert "disabled" in page.split("Send by email")[0].rsplit("<button", 1)[1]
    assert "No SMTP relay is configured (FPTRACK_SMTP_HOST)" in page
    posted = admin.post(url + "/send", data={"csrf_token": token}, follow_redirects=True)
    assert posted.status_code == 200 and "No SMTP relay is configured" in posted.get_data(as_text=True)


def test_the_preview_of_a_complete_case_asks_for_no_evidence_bundle(
    app: Flask, settings: Settings, seeded: Seeded
) -> None:
    admin, token = _admin(app, settings)
    _set_up(admin, token)
    for work_id in (seeded.work_id, seeded.other_work_id):
        upload = {"csrf_token": token, "proof": (io.BytesIO(b"%PDF proof"), "cert.pdf")}
        posted = admin.post(f"/works/{work_id}/rights", data=upload, content_type="multipart/form-data")
        assert posted.status_code == 303
    preview = admin.get("/reports/notice?host=pirate.example").get_data(as_text=True)
    assert "cannot be sent yet" not in preview and "no evidence bundle" not in preview
    assert "Keep as a draft (with evidence bundles)" in preview
    # a kept draft has its bundles: nothing missing, the button enabled but for the relay
    url = admin.post("/notices", data={"csrf_token": token, "host": "pirate.example"}).headers["Location"]
    assert "cannot be sent" not in admin.get(url).get_data(as_text=True)


def test_run_now_clicked_twice_starts_one_crawl(app: Flask, settings: Settings, session: Session) -> None:
    admin, token = _admin(app, settings)
    form = {"csrf_token": token, "name": "books", "start_urls": "http://books.example/", "schedule": "6h"}
    assert admin.post("/sites", data=form).status_code == 303
    site_id = int(admin.get("/sites").get_data(as_text=True).split('id="site-')[1].split('"')[0])
    # the first click's mark, as it stands while its crawl's process starts (no job yet)
    session.add(MonitorLock(name=f"site-start:{site_id}", token="t", owner="admin", acquired_at=utcnow()))
    session.commit()
    second = admin.post(f"/sites/{site_id}/run", data={"csrf_token": token}, follow_redirects=True)
    assert "A crawl of books was started a moment ago and is beginning." in second.get_data(as_text=True)
    assert session.scalars(select(CrawlJob)).all() == []
    # the crawl removes the mark when it claims the site (whose claim then refuses clicks while it runs)
    token = claim(session, site_id, settings)
    assert token is not None and session.get(MonitorLock, f"site-start:{site_id}") is None
    session.rollback()
    # a mark whose crawl never began stands for a minute only
    mark = session.get(MonitorLock, f"site-start:{site_id}")
    assert mark is not None
    mark.acquired_at = utcnow() - timedelta(minutes=5)
    session.commit()
    assert _mark_starting(session, site_id) is not None
    session.rollback()
