"""Each copy fetched again just before a notice is sent and before a follow-up (jobs/notices.py with
jobs/rechecks.refetch_matches), against a real site on 127.0.0.1 whose pages change between the draft and the
send, on SQLite and PostgreSQL, delivered to a real SMTP server (aiosmtpd): a copy deleted since the draft is
left out (and seen once, recorded as a re-check records it, not yet a takedown); every copy deleted: nothing
sent, one line, the attempt recorded; a fetch that tells nothing (503) keeps the copy and says so."""

from __future__ import annotations

import email
import email.policy
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.cli.main import main
from fptrack.compare import service
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.jobs.delivery import SmtpTransport
from fptrack.jobs.notices import (
    NothingLeftError,
    add_contact,
    draft_notice,
    follow_up,
    load_notice,
    save_sender,
    send_notice,
)
from fptrack.services.rights import add_proof
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.models import Match, Notice, Page, TakedownCheck, Work
from testbed.sites import render_chapter
from tests.support.live_site import LiveSite, serve_live_site

CHAPTERS = demo_chapters("lighthouse.txt")
PATHS = ("/a.html", "/b.html")


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[bytes] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(bytes(envelope.content))
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


@pytest.fixture
def sessions(settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = create_engine_for(settings)
    yield session_factory(engine)
    engine.dispose()


@pytest.fixture
def site() -> Iterator[LiveSite]:
    with serve_live_site() as live:
        for number, path in enumerate(PATHS):
            paragraphs = CHAPTERS[number].split("\n")
            live.set(path, render_chapter(f"第{number}章", paragraphs, template="biquge").decode("utf-8"))
        yield live


def _refetching(settings: Settings, site: LiveSite) -> Settings:
    return settings.with_overrides(notice_refetch=True, allow_private_hosts=(site.key,))


def _confirmed_copies(sessions: sessionmaker[Session], settings: Settings, site: LiveSite) -> dict[str, int]:
    """The work registered, one page per path copying a chapter compared as a crawl would, each match
    confirmed; a complete sender and the host's contact: path -> match id."""
    with session_scope(sessions) as session:
        work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
        service.index_work(session, work.work_id, settings)
        ids = []
        for number, path in enumerate(PATHS):
            url = site.url(path)
            page = Page(url=url, final_url=url, host=site.key, status=200, encoding="utf-8", title=path,
                        text=CHAPTERS[number])  # fmt: skip
            session.add(page)
            session.flush()
            ids.append(page.id)
        service.process_pages(session, ids, settings)
    with session_scope(sessions) as session:
        found = {str(url): int(i) for url, i in session.execute(select(Page.url, Match.id).join(Match.page))}
        for match_id in found.values():
            session.get(Match, match_id).status = "confirmed"  # type: ignore[union-attr]
        save_sender(
            session,
            "Lighthouse Press",
            create=True,
            rights_owner="",
            address="1 Harbour Road, Qingdao",
            email="rights@lighthouse.example",
            phone="+86 532 5555 0100",
            signer_name="Li Si",
            signer_title="General Counsel",
            language="en",
        )
        for work in session.scalars(select(Work)):
            add_proof(
                session,
                "registration.pdf",
                b"%PDF-1.4 registration certificate (test)",
                kind="ownership_certificate",
                work=work,
            )
        add_contact(session, site.key.split(":")[0], "abuse@hosting.example")
    assert len(found) == 2, found
    return {url.removeprefix(site.base): match_id for url, match_id in found.items()}


def _draft(sessions: sessionmaker[Session], settings: Settings, match_ids: list[int]) -> int:
    with session_scope(sessions) as session:
        notice = draft_notice(
            session,
            actor="test",
            match_ids=match_ids,
            recipient="abuse@hosting.example",
            bundle_settings=settings,
        )
        return notice.id


def _urls_sent(inbox: _Inbox) -> str:
    message = email.message_from_bytes(inbox.messages[-1], policy=email.policy.default)
    body = message.get_body(preferencelist=("plain",))
    assert body is not None
    return str(body.get_content())


def test_a_copy_deleted_between_draft_and_send_is_left_out(
    settings: Settings, sessions: sessionmaker[Session], site: LiveSite, relay: tuple[_Inbox, int]
) -> None:
    inbox, port = relay
    matches = _confirmed_copies(sessions, settings, site)
    notice_id = _draft(sessions, settings, [matches["/a.html"], matches["/b.html"]])
    site.remove("/a.html")  # the copy is taken down after the draft: 404
    refetching = _refetching(settings, site)
    with session_scope(sessions) as session:
        notice = load_notice(session, notice_id)
        send_notice(session, notice, refetching, actor="test",
                    transport=SmtpTransport("127.0.0.1", port, starttls=False))  # fmt: skip
    text = _urls_sent(inbox)
    assert site.url("/b.html") in text and site.url("/a.html") not in text
    with session_scope(sessions) as session:
        notice = load_notice(session, notice_id)
        assert notice.state == "sent" and [item.url for item in notice.items] == [site.url("/b.html")]
        gone = [e.detail for e in notice.events if e.kind == "item_gone"]
        assert len(gone) == 1 and site.url("/a.html") in gone[0] and "HTTP 404" in gone[0]
        # seen gone once, as a re-check records it: pending, not yet a takedown
        checks = session.execute(
            select(TakedownCheck.match_id, TakedownCheck.outcome).order_by(TakedownCheck.id)
        ).all()
        assert sorted(checks) == sorted([(matches["/a.html"], "gone"), (matches["/b.html"], "present")])
        deleted = session.get(Match, matches["/a.html"])
        assert deleted is not None and deleted.taken_down_at is None and deleted.down_seen_at is not None
    assert site.statuses("/a.html") == [404] and site.statuses("/b.html") == [200]


def test_every_copy_deleted_nothing_is_sent_and_the_attempt_is_recorded(
    settings: Settings, sessions: sessionmaker[Session], site: LiveSite, relay: tuple[_Inbox, int]
) -> None:
    inbox, port = relay
    matches = _confirmed_copies(sessions, settings, site)
    notice_id = _draft(sessions, settings, [matches["/a.html"], matches["/b.html"]])
    site.remove("/a.html")
    site.remove("/b.html", status=410)
    with session_scope(sessions) as session:
        notice = load_notice(session, notice_id)
        with pytest.raises(NothingLeftError, match="not sent: every copy is gone when fetched again"):
            send_notice(session, notice, _refetching(settings, site), actor="test",
                        transport=SmtpTransport("127.0.0.1", port, starttls=False))  # fmt: skip
        session.commit()  # as the CLI and the admin do: the fetches and the refusal are kept
    assert inbox.messages == []
    with session_scope(sessions) as session:
        notice = load_notice(session, notice_id)
        assert notice.state == "draft" and len(notice.items) == 2
        failed = [e.detail for e in notice.events if e.kind == "send_failed"]
        assert len(failed) == 1 and "HTTP 404" in failed[0] and "HTTP 410" in failed[0]
        outcomes = session.scalars(select(TakedownCheck.outcome)).all()
        assert sorted(outcomes) == ["gone", "gone"]


def test_a_fetch_that_tells_nothing_keeps_the_copy_and_says_so(
    settings: Settings, sessions: sessionmaker[Session], site: LiveSite, relay: tuple[_Inbox, int]
) -> None:
    inbox, port = relay
    matches = _confirmed_copies(sessions, settings, site)
    notice_id = _draft(sessions, settings, [matches["/a.html"], matches["/b.html"]])
    site.remove("/a.html", status=503)  # the server fails: the copy is not shown gone
    with session_scope(sessions) as session:
        notice = load_notice(session, notice_id)
        send_notice(session, notice, _refetching(settings, site), actor="test",
                    transport=SmtpTransport("127.0.0.1", port, starttls=False))  # fmt: skip
        assert len(notice.items) == 2
        sent = next(e.detail for e in notice.events if e.kind == "sent")
        assert f"kept though not fetched again: {site.url('/a.html')} (HTTP 503)" in sent
    assert site.url("/a.html") in _urls_sent(inbox)


def test_with_the_setting_off_nothing_is_fetched(
    settings: Settings, sessions: sessionmaker[Session], site: LiveSite, relay: tuple[_Inbox, int]
) -> None:
    inbox, port = relay
    matches = _confirmed_copies(sessions, settings, site)
    notice_id = _draft(sessions, settings, [matches["/a.html"]])
    site.remove("/a.html")
    off = _refetching(settings, site).with_overrides(notice_refetch=False)
    with session_scope(sessions) as session:
        send_notice(session, load_notice(session, notice_id), off, actor="test",
                    transport=SmtpTransport("127.0.0.1", port, starttls=False))  # fmt: skip
    assert site.statuses("/a.html") == [] and len(inbox.messages) == 1


def test_a_follow_up_does_not_carry_a_copy_gone_when_fetched_again(
    settings: Settings, sessions: sessionmaker[Session], site: LiveSite, relay: tuple[_Inbox, int]
) -> None:
    _inbox, port = relay
    matches = _confirmed_copies(sessions, settings, site)
    notice_id = _draft(sessions, settings, [matches["/a.html"], matches["/b.html"]])
    refetching = _refetching(settings, site)
    with session_scope(sessions) as session:
        notice = load_notice(session, notice_id)
        send_notice(session, notice, refetching, actor="test",
                    transport=SmtpTransport("127.0.0.1", port, starttls=False))  # fmt: skip
        sent_at = notice.sent_at
    assert sent_at is not None
    site.remove("/a.html")
    later = sent_at + timedelta(days=refetching.notice_escalate_after, hours=1)
    with session_scope(sessions) as session:
        summary = follow_up(session, refetching, now=later)
    assert len(summary.reminders) == 1
    with session_scope(sessions) as session:
        reminder = session.get(Notice, summary.reminders[0])
        assert reminder is not None and [item.url for item in reminder.items] == [site.url("/b.html")]
        parent = load_notice(session, notice_id)
        gone = [e.detail for e in parent.events if e.kind == "item_gone"]
        assert any(site.url("/a.html") in detail and "not followed up" in detail for detail in gone)
    # all gone: no follow-up at all
    site.remove("/b.html")
    with session_scope(sessions) as session:
        reminder = load_notice(session, summary.reminders[0])
        send_notice(session, reminder, settings, actor="test",
                    transport=SmtpTransport("127.0.0.1", port, starttls=False))  # fmt: skip
    with session_scope(sessions) as session:
        again = follow_up(
            session, refetching, now=later + timedelta(days=refetching.notice_escalate_after, hours=1)
        )
    assert again.escalations == [] and again.reminders == []


def test_the_cli_says_in_one_line_that_nothing_was_sent(
    settings: Settings,
    sessions: sessionmaker[Session],
    site: LiveSite,
    relay: tuple[_Inbox, int],
    tmp_path: Path,
) -> None:
    inbox, port = relay
    matches = _confirmed_copies(sessions, settings, site)
    notice_id = _draft(sessions, settings, [matches["/a.html"]])
    site.remove("/a.html")
    env = {
        "FPTRACK_DATABASE_URL": settings.database_url,
        "FPTRACK_DATA_DIR": str(settings.data_dir),
        "FPTRACK_SMTP_HOST": "127.0.0.1",
        "FPTRACK_SMTP_PORT": str(port),
        "FPTRACK_SMTP_STARTTLS": "false",
        "FPTRACK_SMTP_FROM": "notices@fptrack.example",
        "FPTRACK_NOTICE_REFETCH": "true",
        "FPTRACK_ALLOW_PRIVATE_HOSTS": site.key,
    }
    result = CliRunner().invoke(main, ["notices", "send", str(notice_id)], env=env, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: notice") and "gone when fetched again" in lines[0]
    assert inbox.messages == []
    with session_scope(sessions) as session:
        notice = load_notice(session, notice_id)
        assert [e.kind for e in notice.events][-1] == "send_failed"
