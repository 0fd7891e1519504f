"""The takedown re-check's cadence and confirmation, against a real loopback site on SQLite and PostgreSQL:
which matches are due and in what order, a young copy checked more often than an old one, a removal recorded
only when a second fetch a little later confirms it (taken down at the first sighting), answers that cannot
tell (503, 429, 403, a challenge page, an empty page whose scripts were not run) never taking a copy down,
and a copy that comes back keeping its match, its id and its first-seen."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import service
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.jobs.rechecks import due_matches, recheck_matches
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.models import Match, Page, TakedownCheck, as_utc, utcnow
from testbed.sites import render_chapter
from tests.support.live_site import LiveSite, serve_live_site

CHAPTERS = demo_chapters("lighthouse.txt")
CONFIRM = 120.0  # FPTRACK_RECHECK_CONFIRM_AFTER in these tests (the default)


def _markup(title: str, paragraphs: list[str]) -> str:
    return render_chapter(title, paragraphs, template="biquge").decode("utf-8")


@pytest.fixture
def sessions(settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = create_engine_for(settings)
    yield session_factory(engine)
    engine.dispose()


def _copies(
    sessions: sessionmaker[Session], settings: Settings, site: LiveSite, paths: list[str]
) -> list[int]:
    """Serve a copy of chapter n at each path, store the pages and compare them as a crawl would: the match
    ids, in path order."""
    for number, path in enumerate(paths):
        site.set(path, _markup(f"第{number + 1}章", CHAPTERS[number % len(CHAPTERS)].split("\n")))
    with session_scope(sessions) as session:
        work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
        service.index_work(session, work.work_id, settings)
        ids = []
        for number, path in enumerate(paths):
            url = site.url(path)
            page = Page(
                url=url,
                final_url=url,
                host=site.key,
                status=200,
                encoding="utf-8",
                title=path,
                text=CHAPTERS[number % len(CHAPTERS)],
            )
            session.add(page)
            session.flush()
            ids.append(page.id)
        service.process_pages(session, ids, settings)
    with session_scope(sessions) as session:
        found = dict(session.execute(select(Page.url, Match.id).join(Match.page)).all())
    assert len(found) == len(paths), found
    return [int(found[site.url(path)]) for path in paths]


def _allowed(settings: Settings, site: LiveSite) -> Settings:
    return settings.with_overrides(allow_private_hosts=(site.key,), recheck_confirm_after=CONFIRM)


def _at(moment: datetime):  # type: ignore[no-untyped-def]
    return lambda: moment


def _state(sessions: sessionmaker[Session], match_id: int) -> Match:
    with session_scope(sessions) as session:
        match = session.get(Match, match_id)
        assert match is not None
        session.expunge(match)
        return match


def test_due_order_and_limit(settings: Settings, sessions: sessionmaker[Session]) -> None:
    """Never scheduled first (by id), then the earliest due; not yet due and dismissed matches wait."""
    now = utcnow()
    with serve_live_site() as site:
        ids = _copies(sessions, settings, site, ["/1.html", "/2.html", "/3.html", "/4.html", "/5.html"])
    due = {
        ids[0]: now - timedelta(seconds=10),
        ids[1]: None,
        ids[2]: now - timedelta(hours=3),
        ids[3]: now + timedelta(seconds=30),  # not yet
        ids[4]: None,
    }
    with session_scope(sessions) as session:
        for match_id, at in due.items():
            session.execute(update(Match).where(Match.id == match_id).values(recheck_due_at=at))
        assert due_matches(session, settings, now=now) == [ids[1], ids[4], ids[2], ids[0]]
        assert due_matches(session, settings, now=now, limit=3) == [ids[1], ids[4], ids[2]]
        assert due_matches(session, settings, now=now + timedelta(minutes=1))[-1] == ids[3]
        session.execute(update(Match).where(Match.id == ids[1]).values(status="dismissed"))
        assert ids[1] not in due_matches(session, settings, now=now)


def test_young_copies_are_checked_more_often(settings: Settings, sessions: sessionmaker[Session]) -> None:
    now = utcnow()
    with serve_live_site() as site:
        young, old = _copies(sessions, settings, site, ["/young.html", "/old.html"])
        with session_scope(sessions) as session:
            session.execute(update(Match).where(Match.id == old).values(first_seen=now - timedelta(days=3)))
        allowed = _allowed(settings, site)
        summary = recheck_matches(allowed, sessions, [young, old], clock=_at(now))
    assert dict(summary.outcomes) == {"present": 2}
    young_match, old_match = _state(sessions, young), _state(sessions, old)
    assert as_utc(young_match.recheck_due_at) == now + timedelta(seconds=settings.recheck_young_every)
    assert as_utc(old_match.recheck_due_at) == now + timedelta(seconds=settings.recheck_after)
    assert settings.recheck_young_every < settings.recheck_after
    with session_scope(sessions) as session:
        later = now + timedelta(seconds=settings.recheck_young_every + 1)
        assert due_matches(session, settings, now=later) == [young]  # the old one is not due for hours


def test_a_removal_is_confirmed_by_a_second_fetch_and_a_copy_comes_back(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    t0 = utcnow()
    with serve_live_site() as site:
        (match_id,) = _copies(sessions, settings, site, ["/a.html"])
        with session_scope(sessions) as session:
            first_seen = as_utc(session.get(Match, match_id).first_seen)  # type: ignore[union-attr]
        allowed = _allowed(settings, site)
        site.remove("/a.html")

        seen = recheck_matches(allowed, sessions, [match_id], clock=_at(t0))
        assert (seen.pending, seen.newly_taken_down) == (1, 0)
        match = _state(sessions, match_id)
        assert match.taken_down_at is None and as_utc(match.down_seen_at) == t0
        assert as_utc(match.recheck_due_at) == t0 + timedelta(seconds=CONFIRM)  # due again soon
        with session_scope(sessions) as session:
            assert due_matches(session, allowed, now=t0 + timedelta(seconds=CONFIRM)) == [match_id]

        # seen down again too soon: still pending, the confirming fetch still due at the same time
        early = recheck_matches(allowed, sessions, [match_id], clock=_at(t0 + timedelta(seconds=30)))
        assert (early.pending, early.newly_taken_down) == (0, 0)
        match = _state(sessions, match_id)
        assert match.taken_down_at is None
        assert as_utc(match.recheck_due_at) == t0 + timedelta(seconds=CONFIRM)

        confirmed = recheck_matches(allowed, sessions, [match_id], clock=_at(t0 + timedelta(seconds=CONFIRM)))
        assert confirmed.newly_taken_down == 1
        match = _state(sessions, match_id)
        assert as_utc(match.taken_down_at) == t0 and match.down_seen_at is None  # taken down when first seen
        assert match.recheck_state == "gone"

        site.set("/a.html", _markup("第1章", CHAPTERS[0].split("\n")))  # the copy is put back
        back = recheck_matches(allowed, sessions, [match_id], clock=_at(t0 + timedelta(hours=1)))
        assert back.back == 1 and dict(back.outcomes) == {"present": 1}
    match = _state(sessions, match_id)
    assert match.id == match_id and match.taken_down_at is None and match.recheck_state == "present"
    assert as_utc(match.first_seen) == first_seen
    with session_scope(sessions) as session:
        history = session.execute(
            select(TakedownCheck.outcome, TakedownCheck.source)
            .where(TakedownCheck.match_id == match_id)
            .order_by(TakedownCheck.id)
        ).all()
        assert session.scalar(select(Match.id).where(Match.id != match_id)) is None  # no new match
    assert [tuple(row) for row in history[-4:]] == [
        ("gone", "recheck"),
        ("gone", "recheck"),
        ("gone", "recheck"),
        ("present", "recheck"),
    ]


def test_answers_that_cannot_tell_never_take_a_copy_down(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    """503, 429, 403, a challenge page and an empty page whose scripts were not run are errors however
    often they are seen; a pending removal is neither confirmed nor cleared by them."""
    from fptrack.jobs.sites import SiteSpec, add_site

    t0 = utcnow()
    paths = ["/503.html", "/429.html", "/403.html", "/challenge.html", "/script.html", "/pending.html"]
    with serve_live_site() as site:
        ids = dict(zip(paths, _copies(sessions, settings, site, paths), strict=True))
        with session_scope(sessions) as session:  # a site the crawl reads without a browser
            add_site(session, SiteSpec("plain", (site.url("/"),), render_js="no", allow_private=True))
        allowed = _allowed(settings, site)
        site.remove("/pending.html")
        assert recheck_matches(allowed, sessions, [ids["/pending.html"]], clock=_at(t0)).pending == 1

        site.remove("/503.html", status=503)
        site.remove("/429.html", status=429)
        site.remove("/403.html", status=403)
        site.set(
            "/challenge.html",
            "<html><head><title>Just a moment...</title><script src='/cdn-cgi/challenge-platform/x.js'>"
            "</script></head><body><div id='cf-chl-widget'>Checking your browser</div></body></html>",
        )
        site.set(
            "/script.html",
            "<html><body><div id='content'></div><script>document.getElementById('content')"
            ".textContent = 'x';</script></body></html>",
        )
        site.remove("/pending.html", status=503)  # the pending removal's page fails now: no confirmation
        for minutes in (5, 10, 15):
            summary = recheck_matches(
                allowed, sessions, list(ids.values()), clock=_at(t0 + timedelta(minutes=minutes))
            )
            assert dict(summary.outcomes) == {"error": len(paths)}, summary
            assert summary.newly_taken_down == 0 and summary.pending == 0
        with session_scope(sessions) as session:
            details = dict(
                session.execute(
                    select(TakedownCheck.match_id, TakedownCheck.detail).where(
                        TakedownCheck.checked_at == t0 + timedelta(minutes=15)
                    )
                ).all()
            )
            states = {
                path: session.execute(
                    select(Match.taken_down_at, Match.down_seen_at).where(Match.id == match_id)
                ).one()
                for path, match_id in ids.items()
            }
    assert details[ids["/503.html"]] == "HTTP 503" and details[ids["/403.html"]] == "HTTP 403"
    assert details[ids["/429.html"]].startswith("HTTP 429")  # and the site is held (storage.pacing)
    assert "challenge page" in details[ids["/challenge.html"]]
    assert "scripts were not run" in details[ids["/script.html"]]
    assert all(taken is None for taken, _ in states.values())
    assert as_utc(states["/pending.html"][1]) == t0  # still pending on its first sighting
    assert all(seen is None for path, (_, seen) in states.items() if path != "/pending.html")


def test_an_empty_page_with_nothing_to_fill_it_is_a_removal(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    t0 = utcnow()
    with serve_live_site() as site:
        (match_id,) = _copies(sessions, settings, site, ["/a.html"])
        site.set("/a.html", "<html><head><title>404</title></head><body></body></html>")
        allowed = _allowed(settings, site)
        first = recheck_matches(allowed, sessions, [match_id], clock=_at(t0))
        second = recheck_matches(allowed, sessions, [match_id], clock=_at(t0 + timedelta(seconds=CONFIRM)))
    assert dict(first.outcomes) == {"removed": 1} and first.pending == 1
    assert second.newly_taken_down == 1


def test_a_shorter_cadence_set_later_replans_the_copies_already_planned(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    """Due times stored under an hourly cadence are brought forward when FPTRACK_RECHECK_YOUNG_EVERY is set to
    300 later (issue 37: a copy deleted at 06:32 was still unchecked at 06:45, its stored due time 07:14); a
    pending removal keeps its confirmation time, and a longer cadence moves nothing."""
    now = utcnow()
    with serve_live_site() as site:
        planned, pending = _copies(sessions, settings, site, ["/p.html", "/q.html"])
        hourly = _allowed(settings, site).with_overrides(recheck_young_every=3600.0)
        recheck_matches(hourly, sessions, [planned, pending], clock=_at(now))
    assert as_utc(_state(sessions, planned).recheck_due_at) == now + timedelta(hours=1)
    with session_scope(sessions) as session:
        session.execute(
            update(Match)
            .where(Match.id == pending)
            .values(down_seen_at=now, recheck_due_at=now + timedelta(hours=2))
        )
    shorter = settings.with_overrides(recheck_young_every=300.0)
    with session_scope(sessions) as session:
        assert due_matches(session, shorter, now=now + timedelta(seconds=299)) == []
    with session_scope(sessions) as session:
        assert due_matches(session, shorter, now=now + timedelta(seconds=301)) == [planned]
    assert as_utc(_state(sessions, planned).recheck_due_at) == now + timedelta(seconds=300)
    assert as_utc(_state(sessions, pending).recheck_due_at) == now + timedelta(hours=2)
    longer = settings.with_overrides(recheck_young_every=7200.0)
    with session_scope(sessions) as session:
        assert due_matches(session, longer, now=now + timedelta(seconds=301)) == [planned]
