"""The takedown re-check reads a page built by scripts as the crawl read it: rendered in Chromium before it is
judged. A copy still up on such a page is present, never gone or removed (judged on its static HTML it looks
empty: the false takedowns the re-check used to record); once the script fills a removal notice instead, the
re-check sees it removed, and a second re-check after ``FPTRACK_RECHECK_CONFIRM_AFTER`` confirms it. Without
a browser the page is "could not tell", never a removal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import service
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.jobs.rechecks import recheck_matches
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.models import Match, Page, TakedownCheck, as_utc, utcnow
from testbed.jspages import json_chapter
from tests.support.live_site import LiveSite, serve_live_site

CHAPTER = demo_chapters("lighthouse.txt")[0]
NOTICE = ["本章节因版权原因已下架，请阅读其他作品。", "如有疑问请联系本站客服。"]
CONFIRM = 120.0


@pytest.fixture
def sessions(sqlite_settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = create_engine_for(sqlite_settings)
    yield session_factory(engine)
    engine.dispose()


def _endpoint(paragraphs: list[str]) -> str:
    return json.dumps({"paragraphs": paragraphs}, ensure_ascii=False)


def _script_built_copy(sessions: sessionmaker[Session], settings: Settings, site: LiveSite) -> int:
    """Serve the chapter page (an empty box that a script fills from /api/1.json) and record its match
    through the compare path, as a crawl that rendered it stored it: the match id."""
    site.set("/book/1.html", json_chapter("第一章", "/api/1.json", encoding="utf-8").body.decode("utf-8"))
    site.set("/api/1.json", _endpoint(CHAPTER.split("\n")))
    with session_scope(sessions) as session:
        work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
        service.index_work(session, work.work_id, settings)
        url = site.url("/book/1.html")
        page = Page(
            url=url, final_url=url, host=site.key, status=200, encoding="utf-8", title="第一章", text=CHAPTER
        )
        session.add(page)
        session.flush()
        service.process_pages(session, [page.id], settings)
    with session_scope(sessions) as session:
        (match_id,) = session.scalars(select(Match.id))
    return int(match_id)


def _at(moment: datetime):  # type: ignore[no-untyped-def]
    return lambda: moment


@pytest.mark.browser
def test_a_script_built_copy_still_up_is_present_and_its_removal_is_confirmed(
    sqlite_settings: Settings, sessions: sessionmaker[Session]
) -> None:
    t0 = utcnow()
    with serve_live_site() as site:
        match_id = _script_built_copy(sessions, sqlite_settings, site)
        allowed = sqlite_settings.with_overrides(
            allow_private_hosts=(site.key,), recheck_confirm_after=CONFIRM, render_idle_wait=1.0
        )
        # the static HTML holds no chapter text: only the browser sees the copy
        assert CHAPTER.split("\n")[0].encode() not in site.pages["/book/1.html"].body

        for minutes in (0, 60):  # still up, checked twice: present both times, never gone nor removed
            up = recheck_matches(allowed, sessions, [match_id], clock=_at(t0 + timedelta(minutes=minutes)))
            assert dict(up.outcomes) == {"present": 1}, up
            assert up.rendered == 1 and up.pending == 0 and up.newly_taken_down == 0
        match = _session_match(sessions, match_id)
        assert match.taken_down_at is None and match.down_seen_at is None and match.recheck_state == "present"
        # the page itself was downloaded once per check (the browser got the static answer), its JSON too
        requested = [path for path, _ in site.page_requests()]
        assert requested.count("/book/1.html") == 2 and requested.count("/api/1.json") == 2

        site.set("/api/1.json", _endpoint(NOTICE))  # the script now fills a removal notice
        first = t0 + timedelta(hours=2)
        seen = recheck_matches(allowed, sessions, [match_id], clock=_at(first))
        assert dict(seen.outcomes) == {"removed": 1} and seen.pending == 1 and seen.newly_taken_down == 0
        match = _session_match(sessions, match_id)
        assert match.taken_down_at is None and as_utc(match.down_seen_at) == first

        confirmed = recheck_matches(
            allowed, sessions, [match_id], clock=_at(first + timedelta(seconds=CONFIRM))
        )
        assert dict(confirmed.outcomes) == {"removed": 1} and confirmed.newly_taken_down == 1
    match = _session_match(sessions, match_id)
    assert as_utc(match.taken_down_at) == first and match.recheck_state == "removed"
    with session_scope(sessions) as session:
        outcomes = list(
            session.scalars(
                select(TakedownCheck.outcome)
                .where(TakedownCheck.match_id == match_id, TakedownCheck.source == "recheck")
                .order_by(TakedownCheck.id)
            )
        )
    assert outcomes == ["present", "present", "removed", "removed"]


def test_without_a_browser_a_script_built_page_is_not_judged(
    sqlite_settings: Settings, sessions: sessionmaker[Session], tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """No Chromium (FPTRACK_CHROMIUM names nothing): the page the crawl would render is an error, however
    often it is checked, never a removal."""
    t0 = utcnow()
    with serve_live_site() as site:
        match_id = _script_built_copy(sessions, sqlite_settings, site)
        allowed = sqlite_settings.with_overrides(
            allow_private_hosts=(site.key,), recheck_confirm_after=0.0, chromium=str(tmp_path / "no-chromium")
        )
        for minutes in (0, 5):
            summary = recheck_matches(
                allowed, sessions, [match_id], clock=_at(t0 + timedelta(minutes=minutes))
            )
            assert dict(summary.outcomes) == {"error": 1} and summary.pending == 0
    match = _session_match(sessions, match_id)
    assert match.taken_down_at is None and match.down_seen_at is None
    with session_scope(sessions) as session:
        detail = session.scalar(select(TakedownCheck.detail).order_by(TakedownCheck.id.desc()).limit(1))
    assert "could not render" in str(detail) and "not found" in str(detail)


def _session_match(sessions: sessionmaker[Session], match_id: int) -> Match:
    with session_scope(sessions) as session:
        match = session.get(Match, match_id)
        assert match is not None
        session.expunge(match)
        return match
