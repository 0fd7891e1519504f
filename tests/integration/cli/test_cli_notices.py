"""``fptrack senders``, ``fptrack contacts``, ``fptrack notices`` and ``fptrack takedowns stats --by notice``:
a round trip on SQLite and PostgreSQL, through click's runner in this process, with a real SMTP server on
loopback (aiosmtpd)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from click.testing import CliRunner, Result
from sqlalchemy.orm import Session

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from tests.support.admin_seed import Seeded, seed


class _Inbox:
    def __init__(self) -> None:
        self.recipients: list[list[str]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 OK"


@pytest.fixture
def relay() -> Iterator[tuple[_Inbox, int]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    inbox = _Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, port
    controller.stop()


def _run(settings: Settings, port: int, *args: str) -> Result:
    env = {
        "FPTRACK_DATABASE_URL": settings.database_url,
        "FPTRACK_DATA_DIR": str(settings.data_dir),
        "FPTRACK_SMTP_HOST": "127.0.0.1",
        "FPTRACK_SMTP_PORT": str(port),
        "FPTRACK_SMTP_STARTTLS": "false",
        "FPTRACK_SMTP_FROM": "notices@fptrack.example",
    }
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_senders_contacts_notices_round_trip(
    session: Session, settings: Settings, relay: tuple[_Inbox, int], tmp_path: Path
) -> None:
    ids: Seeded = seed(session)
    inbox, port = relay
    proof = tmp_path / "certificate.pdf"
    proof.write_bytes(b"%PDF registration")

    # before any sender: refused in one line that says how, and no draft that could never be sent is kept
    senderless = _run(settings, port, "notices", "draft", "--host", "pirate.example")
    assert senderless.exit_code == 1 and senderless.output == (
        "error: no sender yet: a notice speaks for a rights holder; add it first: fptrack senders add NAME "
        "--address ... --email ... --signer ... --title ... (fptrack senders add --help)\n"
    )
    assert _run(settings, port, "notices", "list", "--format", "json").output == ""

    added = _run(
        settings,
        port,
        "senders",
        "add",
        "Mountain Press",
        "--address",
        "1 Hill Road, Beijing",
        "--email",
        "rights@mountain.example",
        "--signer",
        "Wang Wu",
        "--lang",
        "en",
    )
    assert added.exit_code == 0, added.output
    refused = _run(settings, port, "notices", "draft", "--match", str(ids.hostile_match_id))
    assert refused.exit_code == 1 and "is flagged, not confirmed" in refused.output
    missing = _run(settings, port, "notices", "draft", "--host", "pirate.example")
    assert missing.exit_code == 1
    for named in (
        "512(c)(3)(A)(vi)",
        "512(c)(3)(A)(iv)",
        "no telephone",
        "authority to act",
        "第十四条（三）",
    ):
        assert named in missing.output, named
    assert "NOTICE OF COPYRIGHT INFRINGEMENT" not in missing.output  # refused: nothing printed

    edited = _run(
        settings,
        port,
        "senders",
        "edit",
        "Mountain Press",
        "--phone",
        "+86 10 5555",
        "--title",
        "General Counsel",
    )
    assert edited.exit_code == 0 and "company, owner; 0 proof file(s)" in edited.output
    # a proof of ownership belongs to its work, not to the sender: said in one line
    moved = _run(settings, port, "senders", "edit", "Mountain Press", "--proof", str(proof))
    assert moved.exit_code != 0 and "fptrack works edit WORK_ID --proof FILE" in moved.output
    unproved = _run(settings, port, "notices", "draft", "--host", "pirate.example")
    assert unproved.exit_code == 1 and "has no proof of ownership (fptrack works edit" in unproved.output
    for work_id in (ids.work_id, ids.other_work_id):
        registered = _run(
            settings, port, "works", "edit", str(work_id), "--proof", str(proof), "--registration", "2026-A-1"
        )
        assert registered.exit_code == 0 and "1 proof(s) of ownership" in registered.output, registered.output
    shown_work = json.loads(_run(settings, port, "works", "show", str(ids.work_id)).output)
    assert shown_work["registration_number"] == "2026-A-1"
    assert [(p["kind"], p["filename"]) for p in shown_work["proofs"]] == [
        ("ownership_certificate", "certificate.pdf")
    ]
    listed_works = _run(settings, port, "works", "list", "--format", "json").output.splitlines()
    assert {json.loads(line)["registration_number"] for line in listed_works} == {"2026-A-1"}
    assert _run(settings, port, "contacts", "add", "pirate.example", "abuse@pirate.example").exit_code == 0
    contact = _run(
        settings, port, "contacts", "add", "pirate.example", "abuse@host.example", "--kind", "hosting"
    )
    assert "level 1" in contact.output

    drafted = _run(settings, port, "notices", "draft", "--host", "pirate.example", "--lang", "zh")
    assert drafted.exit_code == 0, drafted.output
    assert "侵权通知书" in drafted.output and "权利人对本通知书的真实性负责" in drafted.output
    notices = [
        json.loads(line)
        for line in _run(settings, port, "notices", "list", "--format", "json").output.splitlines()
    ]
    # drafted three times (twice kept lacking an element), one draft: the same notice redone each time
    assert len(notices) == 1
    latest = notices[0]
    assert latest["state"] == "draft" and latest["recipient"] == "abuse@pirate.example"
    other_id = ids.match_ids_newest_first[0]
    twin = _run(settings, port, "notices", "draft", "--match", str(other_id))
    assert f"send it: fptrack notices send {latest['id']}" in twin.output  # a copy it names: redone again
    redone = _run(settings, port, "notices", "draft", "--host", "pirate.example", "--lang", "zh")
    assert redone.exit_code == 0, redone.output

    sent = _run(settings, port, "notices", "send", str(latest["id"]))
    assert sent.exit_code == 0, sent.output
    assert "Message-ID <" in sent.output and inbox.recipients == [["abuse@pirate.example"]]
    duplicate = _run(settings, port, "notices", "draft", "--match", str(other_id))
    assert (
        duplicate.exit_code == 1
        and f"is in notice {latest['id']} to abuse@pirate.example" in duplicate.output
    )
    shown = json.loads(_run(settings, port, "notices", "show", str(latest["id"]), "--format", "json").output)
    assert shown["state"] == "sent" and [e["kind"] for e in shown["events"]] == ["drafted"] * 5 + ["sent"]
    assert all(e["detail"].startswith("drafted again: ") for e in shown["events"][1:5])
    urls = _run(settings, port, "notices", "export", str(latest["id"]), "--format", "urls").output
    assert urls == "http://pirate.example/other.html\n"
    lumen = json.loads(_run(settings, port, "notices", "export", str(latest["id"])).output)
    assert lumen["notice"]["works_attributes"][0]["infringing_urls_attributes"] == [
        {"url": "http://pirate.example/other.html"}
    ]
    follow = _run(settings, port, "notices", "follow-up")
    assert follow.exit_code == 0 and "reminders: 0" in follow.output  # sent just now: nothing due
    stats = _run(settings, port, "takedowns", "stats", "--by", "recipient", "--format", "json")
    assert json.loads(stats.output)["key"] == "abuse@pirate.example"
    acknowledged = _run(settings, port, "notices", "mark", str(latest["id"]), "acknowledged", "--note", "T-1")
    assert "state acknowledged" in acknowledged.output


def test_a_follow_up_delay_under_a_day_is_refused_in_one_line(settings: Settings) -> None:
    env = {"FPTRACK_DATA_DIR": str(settings.data_dir), "FPTRACK_NOTICE_ESCALATE_AFTER": "0"}
    result = CliRunner().invoke(main, ["notices", "follow-up"], env=env)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: FPTRACK_NOTICE_ESCALATE_AFTER=0 is out of range: expected a number of days >= 1"
    ]


def test_senders_kinds_roles_typed_proofs_and_a_proof_filed_before_taken_over(
    session: Session, settings: Settings, relay: tuple[_Inbox, int], tmp_path: Path
) -> None:
    from fptrack.storage.models import RightsProof, Sender

    ids = seed(session)
    port = relay[1]
    licence, mandate = tmp_path / "licence.png", tmp_path / "mandate.pdf"
    licence.write_bytes(b"\x89PNG licence")
    mandate.write_bytes(b"%PDF mandate")
    refused = _run(
        settings, port, "senders", "add", "Wang", "--kind", "person", "--credit-code", "91110000802100433B"
    )
    assert refused.exit_code == 1 and refused.output.count("\n") == 1 and "a company's" in refused.output
    bad_code = _run(settings, port, "senders", "add", "Agency", "--credit-code", "91110000802100433A")
    assert bad_code.exit_code == 1 and "check character" in bad_code.output
    added = _run(
        settings,
        port,
        "senders",
        "add",
        "Agency",
        "--role",
        "agent",
        "--credit-code",
        "91110000802100433b",
        "--legal-rep",
        "张三",
        "--identity",
        str(licence),
        "--authorisation",
        str(mandate),
        "--for-work",
        str(ids.work_id),
    )
    assert added.exit_code == 0 and "(company, agent; 2 proof file(s))" in added.output, added.output
    [listed] = [
        json.loads(line)
        for line in _run(settings, port, "senders", "list", "--format", "json").output.splitlines()
    ]
    assert listed["credit_code"] == "91110000802100433B" and listed["role"] == "agent"
    assert [(p["kind"], p["work_id"]) for p in listed["proofs"]] == [
        ("identity", None),
        ("authorisation", ids.work_id),
    ]
    # a proof filed for the sender before proofs had kinds (revision 0027 keeps it as kind "other")
    sender = session.query(Sender).filter_by(name="Agency").one()
    old = RightsProof(
        kind="other", sender=sender, filename="old.pdf", sha256="h", content=b"%PDF old \x00\xff"
    )
    session.add(old)
    session.commit()
    taken = _run(settings, port, "works", "edit", str(ids.other_work_id), "--use-proof", str(old.id))
    assert taken.exit_code == 0 and "1 proof(s) of ownership" in taken.output, taken.output
    shown = json.loads(_run(settings, port, "works", "show", str(ids.other_work_id)).output)
    assert [(p["id"], p["kind"], p["bytes"]) for p in shown["proofs"]] == [
        (old.id, "ownership_certificate", 11)
    ]
    missing = _run(settings, port, "works", "edit", str(2**62), "--author", "x")
    assert missing.exit_code == 1 and "no work with id" in missing.output
