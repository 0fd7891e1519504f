"""Schedules kept on average (jobs/sites.py), on both backends: due times anchored on a grid so that late
starts do not add up, a tick that takes what is due within half a tick, sites on one schedule spread over
ticks, a schedule shorter than the tick refused, quiet sites visited less often and back on schedule when they
change; and the command line around them (``sites add`` of a loopback URL warns, ``sites show`` tells the
pace, ``maintain`` picks up a crawl's pages at once)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.jobs.sites import (
    SiteError,
    SiteSpec,
    add_site,
    due_sites,
    edit_site,
    following_due,
    interval_factor,
    record_crawl_result,
)
from fptrack.jobs.sweep import sweep_left_behind
from fptrack.storage.models import CrawlJob, Page, Site, as_utc
from tests.support.cli import assert_clean_error, fptrack

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
TICK = 30.0


def _simulate(session: Session, *, minutes: int, tick: float, late: float) -> dict[str, list[datetime]]:
    """Run the scheduler's tick every ``tick`` seconds (each a little late: ``late`` seconds) for ``minutes``
    and return when each site was started."""
    started: dict[str, list[datetime]] = {}
    moment = T0 + timedelta(seconds=late)
    while moment < T0 + timedelta(minutes=minutes):
        for _, name in due_sites(session, now=moment, tick=tick):
            started.setdefault(name, []).append(moment)
        moment += timedelta(seconds=tick)
    return started


def _take(session: Session, moment: datetime) -> datetime:
    """Start the one site due at ``moment``; return its next due time."""
    assert len(due_sites(session, now=moment)) == 1
    due = session.scalar(select(Site.next_crawl_at))
    assert due is not None
    return as_utc(due)


def test_a_two_minute_schedule_crawls_every_two_minutes_on_a_30_second_tick(session: Session) -> None:
    add_site(session, SiteSpec("a", ("http://a.test/",), schedule="120"), now=T0)
    # ticks land a few milliseconds before or after each due time: neither delays the next crawl
    for late in (0.005, 29.995):
        session.get(Site, 1).next_crawl_at = T0  # type: ignore[union-attr]
        session.flush()
        starts = _simulate(session, minutes=20, tick=TICK, late=late)["a"]
        gaps = [(b - a).total_seconds() for a, b in pairwise(starts)]
        # the first gap may be shorter (the site joins its grid); then every 120 s
        assert all(gap == 120 for gap in gaps[1:]), gaps
        assert len(starts) in (10, 11), starts  # 20 minutes of a 2-minute schedule, not 8 (every 150 s)


def test_a_30_second_schedule_runs_on_every_30_second_tick(session: Session) -> None:
    add_site(session, SiteSpec("fast", ("http://fast.test/",), schedule="30"), now=T0)
    starts = _simulate(session, minutes=10, tick=TICK, late=0.003)["fast"]
    assert len(starts) >= 19, starts  # every tick, not every other one (every 60 s)


def test_due_within_half_a_tick_counts_as_due(session: Session) -> None:
    add_site(session, SiteSpec("a", ("http://a.test/",), schedule="3600"), now=T0 + timedelta(seconds=10))
    assert due_sites(session, now=T0, tick=0) == []  # without a tick, not yet
    assert [name for _, name in due_sites(session, now=T0, tick=TICK)] == ["a"]  # due in 10 s of a 30-s tick


def test_sites_on_one_schedule_start_on_different_ticks(session: Session) -> None:
    for number in range(6):
        add_site(session, SiteSpec(f"s{number}", (f"http://site{number}.test/",), schedule="120"), now=T0)
    started = _simulate(session, minutes=10, tick=TICK, late=0.01)
    assert all(len(times) >= 4 for times in started.values()), started
    # after their first crawl (all due at once, when added), the six sites are spread over the 4 ticks of
    # the 2-minute schedule instead of all starting together
    second_starts = {times[1] for times in started.values()}
    assert len(second_starts) >= 2, started


def test_following_due_keeps_the_grid_and_skips_what_is_past() -> None:
    due = following_due("120", T0, T0, host="a.test")
    assert due is not None and T0 + timedelta(seconds=60) < due <= T0 + timedelta(seconds=180)
    later = following_due("120", due, due + timedelta(seconds=1), host="a.test")
    assert later == due + timedelta(seconds=120)  # anchored on the previous due time, not on the start
    # a crawl that ran long: the next due time is the next grid point after now, not one in the past
    now = due + timedelta(seconds=500)
    skipped = following_due("120", due, now, host="a.test")
    assert skipped is not None and now < skipped <= now + timedelta(seconds=120)
    assert (skipped - due).total_seconds() % 120 == 0
    cron = following_due("0 3 * * *", T0, T0)
    assert cron == datetime(2026, 11, 25, 3, 0, tzinfo=UTC)


def test_a_schedule_shorter_than_the_tick_is_refused(session: Session) -> None:
    with pytest.raises(SiteError, match=r"shorter than the scheduler's tick \(FPTRACK_SCHEDULE_EVERY=30s\)"):
        add_site(session, SiteSpec("a", ("http://a.test/",), schedule="10"), tick=TICK)
    add_site(session, SiteSpec("a", ("http://a.test/",), schedule="30"), tick=TICK)  # one tick is fine
    with pytest.raises(SiteError, match="give --schedule 30 or more"):
        edit_site(session, "a", schedule="5", tick=TICK)


def test_quiet_sites_are_visited_less_often_and_back_on_schedule_when_they_change(session: Session) -> None:
    assert [interval_factor(n) for n in range(7)] == [1, 1, 1, 2, 4, 4, 4]
    assert interval_factor(10, backoff_max=8) == 8
    site = add_site(session, SiteSpec("a", ("http://a.test/",), schedule="120"), now=T0)
    moment = T0
    for _ in range(3):  # three scheduled crawls in a row that found nothing
        record_crawl_result(session, site.id, found=False, scheduled=True, started_at=moment, now=moment)
        moment += timedelta(seconds=120)
    assert site.quiet_crawls == 3
    # the scheduler now steps the site 2 x 120 s apart
    first = _take(session, as_utc(site.next_crawl_at))
    assert first - moment > timedelta(seconds=120 - 1)
    assert _take(session, first) - first == timedelta(seconds=240)
    moment = first
    # a manual crawl that finds nothing counts for nothing; one that finds something resets the count and
    # brings the next crawl back within one schedule
    record_crawl_result(session, site.id, found=False, scheduled=False, started_at=moment, now=moment)
    assert site.quiet_crawls == 3
    record_crawl_result(session, site.id, found=True, scheduled=True, started_at=moment, now=moment)
    assert site.quiet_crawls == 0
    assert as_utc(site.next_crawl_at) - moment <= timedelta(seconds=180)


def test_cli_warns_of_a_loopback_site_refuses_a_short_schedule_and_shows_the_pace(tmp_path: Path) -> None:
    assert fptrack(tmp_path, "init").returncode == 0
    added = fptrack(tmp_path, "sites", "add", "local", "http://127.0.0.1:9/", "--schedule", "2m")
    assert added.returncode == 0, added.stderr
    assert "127.0.0.1 is a private or loopback address" in added.stderr
    assert "fptrack sites edit local --allow-private" in added.stderr
    allowed = fptrack(tmp_path, "sites", "add", "ok", "http://127.0.0.2:9/", "--allow-private")
    assert allowed.returncode == 0 and "warning" not in allowed.stderr, allowed.stderr
    short = fptrack(tmp_path, "sites", "edit", "local", "--schedule", "10")
    assert_clean_error(short, "FPTRACK_SCHEDULE_EVERY=30s")
    assert (
        fptrack(tmp_path, "sites", "edit", "local", "--schedule", "10", FPTRACK_SCHEDULE_EVERY="5").returncode
        == 0
    )

    from fptrack.core.settings import Settings
    from fptrack.storage.db import create_engine_for

    settings = Settings.from_env({"FPTRACK_DATA_DIR": str(tmp_path / "data")})
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session, session.begin():
            site = session.scalar(select(Site).where(Site.name == "local"))
            assert site is not None
            site.schedule, site.quiet_crawls = "120", 4
            session.add(
                CrawlJob(
                    site_id=site.id,
                    status="finished",
                    start_urls=["http://127.0.0.1:9/"],
                    stats={
                        "requests": 57,
                        "requests_per_second": 0.983,
                        "peak_requests_per_second": 1,
                        "retry_after_waits": 2,
                    },
                )
            )
    finally:
        engine.dispose()
    assert fptrack(tmp_path, "sites", "edit", "ok", "--schedule", "0 3 * * *").returncode == 0
    listed = fptrack(tmp_path, "sites", "list").stdout
    # schedules as a person reads them, not the stored seconds (120, 86400)
    assert re.search(r"^local .* every 2m ", listed, re.MULTILINE) and "cron 0 3 * * * (UTC)" in listed, (
        listed
    )
    shown = fptrack(tmp_path, "sites", "show", "local")
    assert shown.returncode == 0, shown.stderr
    assert "visited every  8m (quiet for 4 crawls)" in shown.stdout, shown.stdout
    assert "schedule       every 2m" in shown.stdout, shown.stdout
    assert "requests: 57 (0.98/s, at most 1 in a second, held back 2 time(s) by Retry-After)" in shown.stdout


def test_an_explicit_maintain_takes_pages_of_ended_crawls_at_once(session: Session) -> None:
    now = datetime.now(UTC)
    ended = CrawlJob(status="finished", start_urls=["http://a.test/"])
    running = CrawlJob(status="running", start_urls=["http://a.test/"])
    session.add_all([ended, running])
    session.flush()
    for number, job in enumerate((ended, running, None)):
        session.add(
            Page(
                url=f"http://a.test/{number}",
                final_url=f"http://a.test/{number}",
                status=200,
                host="a.test",
                fetched_at=now,
                crawl_job_id=job.id if job else None,
            )
        )
    session.flush()
    assert sweep_left_behind(session, older_than_seconds=600).pages == []  # the periodic sweep waits
    left = sweep_left_behind(session, older_than_seconds=0, skip_running=True)
    urls = set(session.scalars(select(Page.url).where(Page.id.in_(left.pages))))
    assert urls == {"http://a.test/0", "http://a.test/2"}  # the running crawl hands its own pages on
