"""The admin's takedown notices and senders (admin/views/notices.py) through Flask's test client, on SQLite
and PostgreSQL: an admin sets up the sender and the host's contact, a reviewer drafts a notice for a site's
confirmed matches, reads it, sends it to a real SMTP server on loopback (aiosmtpd) and exports it; viewers get
403 everywhere, reviewers on the senders page."""

from __future__ import annotations

import email
import email.policy
import io
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from flask import Flask
from flask.testing import FlaskClient

from fptrack.admin.web import create_app
from fptrack.core.settings import Settings
from tests.support.accounts import add_account, csrf_token_in, log_in
from tests.support.admin_seed import Seeded


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 OK"


@pytest.fixture
def inbox() -> Iterator[tuple[_Inbox, int]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    box = _Inbox()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    yield box, port
    controller.stop()


@pytest.fixture
def app(settings: Settings, inbox: tuple[_Inbox, int]) -> Iterator[Flask]:
    app = create_app(settings.with_overrides(smtp_host="127.0.0.1", smtp_port=inbox[1], smtp_starttls=False))
    yield app
    app.extensions["fptrack"].engine.dispose()


def _client(app: Flask, settings: Settings, name: str, role: str) -> tuple[FlaskClient, str]:
    add_account(settings, name, role)
    client = app.test_client()
    log_in(client, name)
    return client, csrf_token_in(client.get("/").get_data(as_text=True))


def test_senders_contacts_draft_send_and_export(
    app: Flask, settings: Settings, seeded: Seeded, inbox: tuple[_Inbox, int]
) -> None:
    admin, admin_token = _client(app, settings, "ada", "admin")
    reviewer, token = _client(app, settings, "rita", "reviewer")
    viewer, viewer_token = _client(app, settings, "vera", "viewer")

    assert reviewer.get("/senders").status_code == 403
    sender = {
        "csrf_token": admin_token,
        "name": "山中出版社",
        "address": "北京市东城区 1 号",
        "email": "rights@shan.example",
        "phone": "+86 10 5555",
        "signer_name": "王五",
        "signer_title": "法务总监",
        "language": "zh",
    }
    assert admin.post("/senders", data=sender).status_code == 303
    assert admin.post("/senders", data=sender).status_code == 400  # the same name twice
    page = admin.get("/senders").get_data(as_text=True)
    assert "山中出版社" in page and "no proof yet" in page
    contact = {
        "csrf_token": admin_token,
        "host": "pirate.example",
        "email": "abuse@pirate.example",
        "kind": "site",
    }
    assert admin.post("/senders/contacts", data=contact).status_code == 303

    # without proof of ownership the draft cannot be sent, and says so
    response = reviewer.post("/notices", data={"csrf_token": token, "host": "pirate.example"})
    assert response.status_code == 303
    notice_url = response.headers["Location"]
    shown = reviewer.get(notice_url).get_data(as_text=True)
    assert "cannot be sent" in shown and "第十四条（三）" in shown and "no proof of ownership" in shown
    refused = reviewer.post(notice_url + "/send", data={"csrf_token": token})
    assert refused.status_code == 400 and inbox[0].messages == []
    incomplete_url = notice_url

    # the admin uploads the sender's identity (not a proof of ownership: still not sendable), then each
    # work's certificate on the work's page; the draft made again carries every element and is sent
    sender_id = page.split('id="sender-')[1].split('"')[0]
    upload = {
        "csrf_token": admin_token,
        "proof": (io.BytesIO(b"%PDF licence"), "licence.pdf"),
        "proof_kind": "identity",
    }
    assert (
        admin.post(f"/senders/{sender_id}", data=upload, content_type="multipart/form-data").status_code
        == 303
    )
    response = reviewer.post("/notices", data={"csrf_token": token, "host": "pirate.example"})
    assert "no proof of ownership" in reviewer.get(response.headers["Location"]).get_data(as_text=True)
    for work_id in (seeded.work_id, seeded.other_work_id):
        upload = {"csrf_token": admin_token, "proof": (io.BytesIO(b"%PDF proof"), "cert.pdf")}
        posted = admin.post(f"/works/{work_id}/rights", data=upload, content_type="multipart/form-data")
        assert posted.status_code == 303, posted.get_data(as_text=True)
    response = reviewer.post("/notices", data={"csrf_token": token, "host": "pirate.example"})
    notice_url = response.headers["Location"]
    assert "cannot be sent" not in reviewer.get(notice_url).get_data(as_text=True)
    document = reviewer.get(notice_url + "/document").get_data(as_text=True)
    assert "侵权通知书" in document and 'id="notice-host">pirate.example<' in document
    assert reviewer.post(notice_url + "/send", data={"csrf_token": token}).status_code == 303
    [message] = inbox[0].messages
    assert message["To"] == "abuse@pirate.example"
    attached = [part.get_filename() for part in message.iter_attachments()]
    assert "cert.pdf" in attached and "licence.pdf" in attached
    assert "权利人对本通知书的真实性负责" in message.get_body(preferencelist=("plain",)).get_content()
    shown = reviewer.get(notice_url).get_data(as_text=True)
    assert 'id="notice-state">sent<' in shown and message["Message-ID"].strip("<>") in shown
    # drafted three times, one notice: each draft of the same copies redid the unsent one
    assert notice_url == incomplete_url
    assert reviewer.get(notice_url + "/export?format=urls").get_data(as_text=True) == (
        "http://pirate.example/other.html\n"
    )
    # the sender writes in Chinese: a notice under 信息网络传播权保护条例, not a DMCA notice (docs/notices.md)
    assert reviewer.get(notice_url + "/export?format=lumen").get_json()["notice"]["type"] == "Other"
    assert reviewer.get(notice_url + "/notice.txt").get_data(as_text=True).startswith("侵权通知书")
    mark = {"csrf_token": token, "mark": "acknowledged", "note": "ticket 7"}
    assert reviewer.post(notice_url + "/mark", data=mark).status_code == 303

    # a flagged match is refused by number
    refused = reviewer.post("/notices", data={"csrf_token": token, "match": str(seeded.hostile_match_id)})
    assert refused.status_code == 400 and "not confirmed" in refused.get_data(as_text=True)

    # viewers: nothing of it
    for url in ("/notices", notice_url, notice_url + "/document", "/reports/notice?host=pirate.example"):
        assert viewer.get(url).status_code == 403, url
    assert (
        viewer.post("/notices", data={"csrf_token": viewer_token, "host": "pirate.example"}).status_code
        == 403
    )
