"""The re-checks of a run go side by side, a site each, at each site's own pace (jobs/rechecks.py): a slow
site (one paced at one request every two seconds here) does not hold back the removal found on another, and
on each site the pages waiting for the fetch that confirms a removal are checked first; a site another run is
checking is left to it. On SQLite and PostgreSQL, against two real loopback sites."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import service
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.jobs.rechecks import RecheckProgress, recheck_matches, run_due_rechecks, site_lock_name
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.models import Match, MonitorLock, Page, Site, TakedownCheck, utcnow
from testbed.sites import render_chapter
from tests.support.live_site import LiveSite, serve_live_site

pytestmark = pytest.mark.slow

CHAPTERS = demo_chapters("lighthouse.txt")
PATHS = ["/1.html", "/2.html", "/3.html", "/4.html"]


@pytest.fixture
def sessions(settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = create_engine_for(settings)
    yield session_factory(engine)
    engine.dispose()


def _copies(sessions: sessionmaker[Session], settings: Settings, sites: list[LiveSite]) -> dict[str, int]:
    """A copy of chapter n at each of PATHS on every site, stored and compared as a crawl would: URL -> match
    id."""
    with session_scope(sessions) as session:
        work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
        service.index_work(session, work.work_id, settings)
        ids = []
        for site in sites:
            for number, path in enumerate(PATHS):
                text = CHAPTERS[number % len(CHAPTERS)]
                site.set(path, render_chapter(f"第{number + 1}章", text.split("\n")).decode("utf-8"))
                page = Page(
                    url=site.url(path),
                    final_url=site.url(path),
                    host=site.key,
                    status=200,
                    encoding="utf-8",
                    title=path,
                    text=text,
                )
                session.add(page)
                session.flush()
                ids.append(page.id)
        service.process_pages(session, ids, settings)
    with session_scope(sessions) as session:
        found = {str(url): int(i) for url, i in session.execute(select(Page.url, Match.id).join(Match.page))}
    assert len(found) == len(sites) * len(PATHS), found
    return found


def test_a_slow_site_does_not_hold_back_the_others(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    with serve_live_site() as slow, serve_live_site() as fast:
        ids = _copies(sessions, settings, [slow, fast])
        with session_scope(sessions) as session:
            session.add(Site(host=slow.key, name="slow", rate=0.5))  # a request every 2 s
        allowed = settings.with_overrides(allow_private_hosts=(slow.key, fast.key), site_rate=20.0)
        fast.remove(PATHS[-1])
        seen: list[RecheckProgress] = []
        summary = recheck_matches(allowed, sessions, ids.values(), progress=seen.append)
    assert summary.pages == 8 and summary.pending == 1, summary
    order = [p.url for p in seen]
    # every page of the fast site, its removal included, was checked before the slow site's third page: one
    # after the other, taking the sites in turn, the removal would have waited for the slow site's pages
    third_slow = order.index(slow.url(PATHS[2]))
    assert all(order.index(fast.url(path)) < third_slow for path in PATHS), order
    assert [p.outcomes for p in seen if p.url == fast.url(PATHS[-1])] == [("gone",)]


def test_pages_waiting_for_their_confirming_fetch_go_first(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    with serve_live_site() as site:
        ids = _copies(sessions, settings, [site])
        waiting = ids[site.url(PATHS[-1])]
        with session_scope(sessions) as session:
            session.execute(
                update(Match).where(Match.id == waiting).values(down_seen_at=utcnow() - timedelta(minutes=5))
            )
        site.remove(PATHS[-1])
        allowed = settings.with_overrides(allow_private_hosts=(site.key,), recheck_confirm_after=60.0)
        seen: list[RecheckProgress] = []
        summary = recheck_matches(allowed, sessions, ids.values(), progress=seen.append)
    assert seen[0].url == site.url(PATHS[-1]), [p.url for p in seen]
    assert summary.newly_taken_down == 1, summary


def test_a_site_another_run_is_checking_is_left_to_it(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    """The beat's next turn, in another worker process, takes the sites the run before it is not checking:
    each site has a claim of its own, held while its pages are checked and released when they are."""
    with serve_live_site() as busy, serve_live_site() as free:
        ids = _copies(sessions, settings, [busy, free])
        allowed = settings.with_overrides(allow_private_hosts=(busy.key, free.key), site_rate=20.0)
        with session_scope(sessions) as session:
            session.execute(update(Match).values(recheck_due_at=None))  # all due
            session.add(MonitorLock(name=site_lock_name(busy.key), token="t", owner="elsewhere:1"))
        summary = run_due_rechecks(allowed, sessions)
        assert summary.pages == len(PATHS) and not summary.skipped, summary
        with session_scope(sessions) as session:
            checked = set(session.scalars(select(TakedownCheck.match_id)))
            held = set(session.scalars(select(MonitorLock.name)))
    assert checked == {ids[free.url(path)] for path in PATHS}
    assert held == {site_lock_name(busy.key)}  # its own claims released, the other run's kept
