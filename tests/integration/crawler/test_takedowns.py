"""Takedown re-checks against a real loopback site that changes between checks, on SQLite and PostgreSQL: a
page removed is recorded gone (taken down), a page edited to drop the copy removed, a page still copying
present; the history is kept, nothing is deleted, and a copy that comes back clears its takedown."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from fptrack.analytics.takedowns import takedown_stats
from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import service
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.jobs.rechecks import RecheckError, due_matches, recheck_matches, run_due_rechecks
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.models import Match, MonitorLock, Page, TakedownCheck, as_utc, iso_utc, utcnow
from testbed.sites import render_chapter
from tests.support.env import clean_environ
from tests.support.live_site import LiveSite, serve_live_site

CHAPTERS = demo_chapters("lighthouse.txt")
OTHER = (DEMO_DATA / "library_news.txt").read_text("utf-8").split("\n")


def _markup(title: str, paragraphs: list[str], template: str = "biquge") -> str:
    return render_chapter(title, paragraphs, template=template).decode("utf-8")


@pytest.fixture
def sessions(settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = create_engine_for(settings)
    yield session_factory(engine)
    engine.dispose()


def _copies(sessions: sessionmaker[Session], settings: Settings, site: LiveSite) -> dict[str, int]:
    """Register the work and store one page per path copying a chapter, compared as a crawl would: path ->
    match id."""
    with session_scope(sessions) as session:
        work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
        service.index_work(session, work.work_id, settings)
        ids = []
        for number, path in enumerate(["/a.html", "/b.html", "/c.html"]):
            url = site.url(path)
            page = Page(
                url=url,
                final_url=url,
                host=site.key,
                status=200,
                encoding="utf-8",
                title=path,
                text=CHAPTERS[number],
            )
            session.add(page)
            session.flush()
            ids.append(page.id)
        service.process_pages(session, ids, settings)
    with session_scope(sessions) as session:
        found = {str(url): int(i) for url, i in session.execute(select(Page.url, Match.id).join(Match.page))}
    assert len(found) == 3, found
    return {url.removeprefix(site.base): match_id for url, match_id in found.items()}


def _allowed(settings: Settings, site: LiveSite) -> Settings:
    """Loopback allowed, and a removal confirmed by the next check however soon (the confirmation delay has
    tests of its own: test_recheck_cadence.py)."""
    return settings.with_overrides(allow_private_hosts=(site.key,), recheck_confirm_after=0.0)


def test_removed_edited_and_kept_copies_are_told_apart(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    with serve_live_site() as site:
        for number, path in enumerate(["/a.html", "/b.html", "/c.html"]):
            site.set(path, _markup(f"第{number}章", CHAPTERS[number].split("\n")))
        matches = _copies(sessions, settings, site)
        allowed = _allowed(settings, site)

        first = recheck_matches(allowed, sessions, matches.values())
        assert dict(first.outcomes) == {"present": 3} and first.pages == 3 and first.newly_taken_down == 0

        site.remove("/a.html")  # taken down: 404
        site.set("/b.html", _markup("公告", OTHER))  # the page stays, the copy is replaced by other text
        site.set(
            "/c.html",
            _markup("第3章", ["本站最新地址请收藏", *CHAPTERS[2].split("\n")], template="p-paragraphs"),
        )
        second = recheck_matches(allowed, sessions, matches.values())
        # seen down once: awaiting the confirming fetch, not yet taken down
        assert second.newly_taken_down == 0 and second.pending == 2
        with session_scope(sessions) as session:
            assert session.get(Match, matches["/a.html"]).taken_down_at is None  # type: ignore[union-attr]
        confirming = recheck_matches(allowed, sessions, matches.values())
        assert confirming.newly_taken_down == 2 and confirming.pending == 0

        with session_scope(sessions) as session:
            by_path = {path: session.get(Match, match_id) for path, match_id in matches.items()}
            assert {p: m.recheck_state for p, m in by_path.items()} == {  # type: ignore[union-attr]
                "/a.html": "gone",
                "/b.html": "removed",
                "/c.html": "present",
            }
            gone, removed, present = by_path["/a.html"], by_path["/b.html"], by_path["/c.html"]
            # taken down when first seen down (the second check), confirmed by the third
            first_down = session.scalars(
                select(TakedownCheck.checked_at)
                .where(TakedownCheck.match_id == matches["/a.html"], TakedownCheck.outcome == "gone")
                .order_by(TakedownCheck.id)
            ).first()
            assert gone.taken_down_at is not None and gone.taken_down_at == first_down  # type: ignore[union-attr]
            assert gone.rechecked_at > first_down  # type: ignore[union-attr, operator]
            assert removed.taken_down_at is not None and present.taken_down_at is None  # type: ignore[union-attr]
            assert all(m.status == "flagged" for m in by_path.values())  # type: ignore[union-attr]
            history = session.execute(
                select(
                    TakedownCheck.match_id,
                    TakedownCheck.outcome,
                    TakedownCheck.http_status,
                    TakedownCheck.detail,
                ).order_by(TakedownCheck.id)
            ).all()
            assert len(history) == 9
            latest = {row[0]: row for row in history[6:]}
            assert latest[matches["/a.html"]][1:3] == ("gone", 404)
            assert latest[matches["/b.html"]][1:3] == ("removed", 200)
            assert "no longer copies" in latest[matches["/b.html"]][3]
            assert latest[matches["/c.html"]][1:3] == ("present", 200)
            # evidence untouched: pages keep the text that was copied, no match was deleted
            assert session.scalar(select(func.count()).select_from(Match)) == 3
            assert session.scalar(select(Page.text).where(Page.url == site.url("/b.html"))) == CHAPTERS[1]
            assert session.scalar(select(func.count()).select_from(Page)) == 3
            first_taken_down = removed.taken_down_at  # type: ignore[union-attr]

        with session_scope(sessions) as session:
            rows = {r.key: r for r in takedown_stats(session, "host")}
        assert (rows[site.key].matches, rows[site.key].checked, rows[site.key].taken_down) == (3, 3, 2)

        # a crawl storing the edited page compares it again: the match no longer holds; a fetched text never
        # drops a match, the crawl observes it removed (one more check, source "crawl")
        with session_scope(sessions) as session:
            page = session.scalar(select(Page).where(Page.url == site.url("/b.html")))
            page.text, page.compared_at = "\n".join(OTHER), None  # type: ignore[union-attr]
            session.flush()
            service.process_pages(session, [page.id], settings)  # type: ignore[union-attr]
        with session_scope(sessions) as session:
            assert session.get(Match, matches["/b.html"]) is not None
            assert (
                session.scalar(select(TakedownCheck.outcome).where(TakedownCheck.source == "crawl"))
                == "removed"
            )

        site.set("/a.html", _markup("第1章", CHAPTERS[0].split("\n")))  # the copy is back
        third = recheck_matches(allowed, sessions, matches.values())
        assert dict(third.outcomes) == {"present": 2, "removed": 1} and third.newly_taken_down == 0
        with session_scope(sessions) as session:
            back, still_removed = (
                session.get(Match, matches["/a.html"]),
                session.get(Match, matches["/b.html"]),
            )
            assert back.recheck_state == "present" and back.taken_down_at is None  # type: ignore[union-attr]
            # the first check that found it down stays its takedown time
            assert still_removed.taken_down_at == first_taken_down  # type: ignore[union-attr]
            checks = session.scalar(select(func.count()).select_from(TakedownCheck))
            assert checks == 13  # 12 re-checks, 1 crawl


def test_guard_and_robots_make_errors_not_takedowns(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    with serve_live_site(robots="User-agent: *\nDisallow: /c.html\n") as site:
        for number, path in enumerate(["/a.html", "/b.html", "/c.html"]):
            site.set(path, _markup(f"第{number}章", CHAPTERS[number].split("\n")))
        matches = _copies(sessions, settings, site)

        refused = recheck_matches(settings, sessions, [matches["/a.html"]])  # 127.0.0.1 not allowed
        assert dict(refused.outcomes) == {"error": 1}
        assert site.page_requests() == []  # refused before any connection
        summary = recheck_matches(
            _allowed(settings, site), sessions, [matches["/b.html"], matches["/c.html"]]
        )
        assert dict(summary.outcomes) == {"error": 1, "present": 1}
        assert [path for path, _ in site.page_requests()] == ["/b.html"]  # robots.txt obeyed
        assert all("fptrack" in headers["user-agent"] for _, headers in site.requests)
        with session_scope(sessions) as session:
            details = dict(session.execute(select(TakedownCheck.match_id, TakedownCheck.detail)).all())
            states = dict(session.execute(select(Match.id, Match.taken_down_at)).all())
        assert "private-address guard" in details[matches["/a.html"]]
        assert "robots.txt" in details[matches["/c.html"]]
        assert all(value is None for value in states.values())
        with pytest.raises(RecheckError, match="no match with id 999"):
            recheck_matches(settings, sessions, [999])


def test_a_managed_sites_settings_apply(settings: Settings, sessions: sessionmaker[Session]) -> None:
    """A monitored site's allow_private lets its pages be re-checked; its delay and robots choice are used."""
    from fptrack.jobs.sites import SiteSpec, add_site

    with serve_live_site(robots="User-agent: *\nDisallow: /\n") as site:
        for number, path in enumerate(["/a.html", "/b.html", "/c.html"]):
            site.set(path, _markup(f"第{number}章", CHAPTERS[number].split("\n")))
        matches = _copies(sessions, settings, site)
        with session_scope(sessions) as session:
            add_site(session, SiteSpec("mine", (site.url("/"),), allow_private=True, obey_robots=False))
        summary = recheck_matches(settings, sessions, matches.values())
    assert dict(summary.outcomes) == {"present": 3}
    assert "/robots.txt" not in [path for path, _ in site.requests]  # the site ignores robots.txt


def test_statuses_and_dead_hosts(settings: Settings, sessions: sessionmaker[Session]) -> None:
    """451 is a takedown (unavailable for legal reasons), 503 is not (the site may be down for a while); a
    host that no longer exists is gone (the fetcher is a stand-in here: a real DNS query would leave the
    machine)."""
    from fptrack.crawler.guarded_http import NoSuchHost

    class DeadHosts:
        def fetch(self, url: str) -> None:
            raise NoSuchHost("DNS lookup failed (no such host pirate.invalid)")

    with serve_live_site() as site:
        for number, path in enumerate(["/a.html", "/b.html", "/c.html"]):
            site.set(path, _markup(f"第{number}章", CHAPTERS[number].split("\n")))
        matches = _copies(sessions, settings, site)
        site.remove("/a.html", status=451)
        site.remove("/b.html", status=503)
        summary = recheck_matches(
            _allowed(settings, site), sessions, [matches["/a.html"], matches["/b.html"]]
        )
        dead = recheck_matches(settings, sessions, [matches["/c.html"]], fetcher=DeadHosts())  # type: ignore[arg-type]
    assert dict(summary.outcomes) == {"gone": 1, "error": 1} and dict(dead.outcomes) == {"gone": 1}
    with session_scope(sessions) as session:
        rows = dict(session.execute(select(Match.id, Match.recheck_state)).all())
        checks = {
            m: (status, detail)
            for m, status, detail in session.execute(
                select(TakedownCheck.match_id, TakedownCheck.http_status, TakedownCheck.detail)
            )
        }
    assert rows == {matches["/a.html"]: "gone", matches["/b.html"]: "error", matches["/c.html"]: "gone"}
    assert checks[matches["/a.html"]] == (451, "HTTP 451 (unavailable for legal reasons)")
    assert checks[matches["/b.html"]] == (503, "HTTP 503")
    assert checks[matches["/c.html"]] == (None, "DNS lookup failed (no such host pirate.invalid)")


def test_due_matches_and_one_run_at_a_time(settings: Settings, sessions: sessionmaker[Session]) -> None:
    with serve_live_site() as site:
        for number, path in enumerate(["/a.html", "/b.html", "/c.html"]):
            site.set(path, _markup(f"第{number}章", CHAPTERS[number].split("\n")))
        matches = _copies(sessions, settings, site)
        allowed = _allowed(settings, site).with_overrides(recheck_limit=2)
        with session_scope(sessions) as session:
            session.get(Match, matches["/c.html"]).status = "dismissed"  # type: ignore[union-attr]
            # never scheduled (as matches found before the cadence existed): due at once
            session.execute(update(Match).values(recheck_due_at=None))
            assert due_matches(session, allowed) == sorted([matches["/a.html"], matches["/b.html"]])
            session.add(MonitorLock(name="recheck:takedowns", token="t", owner="elsewhere:1"))
        assert run_due_rechecks(allowed, sessions).skipped  # a live run holds the claim
        with session_scope(sessions) as session:
            session.execute(MonitorLock.__table__.delete())
        done = run_due_rechecks(allowed, sessions)
        assert done.matches == 2 and not done.skipped
        with session_scope(sessions) as session:
            assert due_matches(session, allowed) == []  # next due FPTRACK_RECHECK_YOUNG_EVERY from now
            assert session.scalar(select(func.count()).select_from(MonitorLock)) == 0  # claim released
            later = utcnow() + timedelta(seconds=allowed.recheck_young_every + 1)
            assert due_matches(session, allowed, now=later) != []


@pytest.mark.postgres
def test_cli_lists_and_checks_takedowns(postgres_settings: Settings, tmp_path: Path) -> None:
    engine = create_engine_for(postgres_settings)
    sessions = session_factory(engine)
    env = clean_environ()
    env.update(
        FPTRACK_DATA_DIR=str(tmp_path / "data"),
        FPTRACK_DATABASE_URL=postgres_settings.database_url,
        FPTRACK_RECHECK_CONFIRM_AFTER="0",
    )

    def fptrack(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fptrack.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    try:
        with serve_live_site() as site:
            for number, path in enumerate(["/a.html", "/b.html", "/c.html"]):
                site.set(path, _markup(f"第{number}章", CHAPTERS[number].split("\n")))
            matches = _copies(sessions, postgres_settings, site)
            site.remove("/a.html", status=410)
            checked = fptrack(
                "takedowns", "check", "--match", str(matches["/a.html"]), "--allow-private-host", site.key
            )
            assert checked.returncode == 0, checked.stderr
            assert "[1/1] " + site.url("/a.html") + ": gone" in checked.stdout
            assert "0 newly taken down, 1 awaiting confirmation" in checked.stdout
            confirmed = fptrack(
                "takedowns", "check", "--match", str(matches["/a.html"]), "--allow-private-host", site.key
            )
            assert confirmed.returncode == 0, confirmed.stderr
            assert "1 newly taken down" in confirmed.stdout
            listed = fptrack("takedowns", "--state", "gone", "--format", "json")
            assert listed.returncode == 0, listed.stderr
            import json

            records = [json.loads(line) for line in listed.stdout.splitlines()]
            assert [(r["id"], r["state"]) for r in records] == [(matches["/a.html"], "gone")]
            # the time to takedown is the stored taken_down_at less first_seen (to the tenth of a second): the
            # copy was first seen when _copies stored it, before the check found it gone, so it is > 0
            with session_scope(sessions) as session:
                taken = session.get(Match, matches["/a.html"])
                assert taken is not None and taken.taken_down_at is not None
                seconds = round((as_utc(taken.taken_down_at) - as_utc(taken.first_seen)).total_seconds(), 1)
                assert records[0]["taken_down_at"] == iso_utc(taken.taken_down_at)
            assert records[0]["time_to_takedown_seconds"] == seconds > 0
            table = fptrack("takedowns", "--domain", site.key)
            assert table.returncode == 0 and table.stdout.count("unchecked") == 2
            csv = fptrack("takedowns", "--format", "csv")
            assert csv.stdout.splitlines()[0].startswith("\ufeffid,page_url,work_id")  # the BOM, for Excel
            stats = fptrack("takedowns", "stats", "--by", "host", "--format", "json")
            assert json.loads(stats.stdout)["taken_down"] == 1
            bad = fptrack("takedowns", "check", "--match", "424242")
            assert bad.returncode == 1 and bad.stderr.startswith("error: no match with id 424242")
            assert "Traceback" not in bad.stderr
    finally:
        engine.dispose()


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.postgres
def test_beat_rechecks_through_a_real_worker(postgres_settings: Settings, tmp_path: Path) -> None:
    """Nobody types a command: Celery beat sends fptrack.recheck_takedowns every FPTRACK_RECHECK_EVERY seconds
    to a real worker over Redis, which records the copy present, then gone once the page is removed."""
    import signal
    import time
    import uuid

    from tests.conftest import REDIS_URL

    engine = create_engine_for(postgres_settings)
    sessions = session_factory(engine)
    try:
        with serve_live_site() as site:
            for number, path in enumerate(["/a.html", "/b.html", "/c.html"]):
                site.set(path, _markup(f"第{number}章", CHAPTERS[number].split("\n")))
            matches = _copies(sessions, postgres_settings, site)
            with session_scope(sessions) as session:  # due now rather than an hour after they were found
                session.execute(update(Match).values(recheck_due_at=None))
            env = clean_environ()
            env.update(
                FPTRACK_DATA_DIR=str(tmp_path / "data"),
                FPTRACK_DATABASE_URL=postgres_settings.database_url,
                FPTRACK_BROKER_URL=REDIS_URL,
                FPTRACK_TASK_QUEUE=f"recheck-{uuid.uuid4().hex[:8]}",
                FPTRACK_RECHECK_EVERY="1",
                FPTRACK_RECHECK_YOUNG_EVERY="1",
                FPTRACK_RECHECK_CONFIRM_AFTER="1",
                FPTRACK_ALLOW_PRIVATE_HOSTS=site.key,
                FPTRACK_SCHEDULE_EVERY="3600",
                FPTRACK_CRAWL_TIMEOUT="5",
            )
            log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - the worker owns it
            worker = subprocess.Popen(
                [sys.executable, "-m", "fptrack.cli", "worker", "--beat", "--concurrency", "2"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

            def outcomes() -> list[str]:
                with session_scope(sessions) as session:
                    return list(
                        session.scalars(
                            select(TakedownCheck.outcome)
                            .where(TakedownCheck.match_id == matches["/a.html"])
                            .order_by(TakedownCheck.id)
                        )
                    )

            def wait_for(condition: object, seconds: float = 90) -> None:
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline and not condition():  # type: ignore[operator]
                    time.sleep(0.5)

            try:
                wait_for(lambda: "present" in outcomes())
                site.remove("/a.html", status=410)
                wait_for(lambda: outcomes().count("gone") >= 2)  # seen gone, then confirmed
            finally:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=60)
                log.close()
        worker_log = (tmp_path / "worker.log").read_text(errors="replace")
        seen = outcomes()
        assert "present" in seen and "gone" in seen, worker_log[-4000:]
        assert seen.index("present") < seen.index("gone")
        assert "fptrack.recheck_takedowns" in worker_log
        with session_scope(sessions) as session:
            match = session.get(Match, matches["/a.html"])
            assert match is not None and match.taken_down_at is not None and match.status == "flagged"
            # each run released its claim
            assert session.scalar(select(func.count()).select_from(MonitorLock)) == 0
    finally:
        engine.dispose()


def test_a_page_decided_without_its_site_template_is_rechecked_without_it(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    """The site's banner quotes 300 characters of chapter 1 on every page: template, never evidence. The copy
    of chapter 1 was flagged with the banner ignored; once the copy is taken off and only the banner is left,
    the re-check must say removed, not present on the strength of the banner alone."""
    import random

    from fptrack.compare.templates import settle_site
    from fptrack.crawler.guarded_http import FetchResult
    from fptrack.jobs.rechecks import judge_text, read_response
    from fptrack.storage.sites import site_ids

    banner = "站长推荐：" + CHAPTERS[0][120:420]
    filler = (
        "春夏秋冬东南西北山川河流草木花鸟风雨雷电日月星辰"
        "城市乡村道路桥梁学校医院工厂商店朋友家人老师学生早晚快慢高低"
    )
    rng = random.Random(5)
    with serve_live_site() as site:
        with session_scope(sessions) as session:
            work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
            service.index_work(session, work.work_id, settings)
            site_id = site_ids(session, [site.key])[site.key]
            texts = {
                f"/notes/{n}.html": [
                    banner,
                    *("".join(rng.choice(filler) for _ in range(60)) + "。" for _ in range(12)),
                ]
                for n in range(7)
            }
            texts["/copy.html"] = [banner, *CHAPTERS[0].split("\n")]
            ids = []
            for path, paragraphs in texts.items():
                page = Page(
                    url=site.url(path),
                    final_url=site.url(path),
                    host=site.key,
                    status=200,
                    encoding="utf-8",
                    title=path,
                    text="\n".join(paragraphs),
                    site_id=site_id,
                )
                session.add(page)
                session.flush()
                ids.append(page.id)
            service.process_pages(session, ids, settings)
            settle_site(session, site_id, settings)
        with session_scope(sessions) as session:
            flagged = session.execute(select(Page.url, Match.id, Page.template_masked).join(Match.page)).all()
        assert [(url.removeprefix(site.base), masked) for url, _, masked in flagged] == [("/copy.html", True)]
        match_id = flagged[0][1]

        left = [banner, "本章节因版权原因已下架，请阅读其他作品。", *texts["/notes/0.html"][1:]]
        site.set("/copy.html", _markup("第1章", left))
        # the banner alone, its template not ignored, looks like a copy
        with session_scope(sessions) as session:
            chapter_id = session.scalar(select(Match.chapter_id).where(Match.id == match_id))
            body = _markup("第1章", left).encode("utf-8")
            response = FetchResult(
                url=site.url("/copy.html"),
                final_url=site.url("/copy.html"),
                status=200,
                headers={"content-type": "text/html; charset=utf-8"},
                body=body,
            )
            read = read_response(response, settings=settings, fetched_at=utcnow())
            assert read.text is not None
            naive = judge_text(session, read.text, {match_id: int(chapter_id)})
        assert naive[match_id][0] == "present", naive

        checked = recheck_matches(_allowed(settings, site), sessions, [match_id])
        assert dict(checked.outcomes) == {"removed": 1} and checked.pending == 1
