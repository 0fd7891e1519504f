"""Release pacing's arithmetic on a fake clock (jobs/releases.py): a site that copied a released work is
crawled every 30 s for the hour after a release and more slowly than its schedule otherwise, its crawls per
day staying those of its schedule; and the release feeds' formats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fptrack.jobs.releases import FeedError, ReleasePace, pace_factor, parse_feed, quiet_stretch
from fptrack.jobs.sites import following_due

T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)
PACE = ReleasePace(window=3600, every=30, tick=30, backoff_max=4)
SCHEDULE = 120.0


def test_the_window_after_a_release_shortens_the_schedule_to_the_release_pace() -> None:
    released = T0
    assert pace_factor(SCHEDULE, T0 + timedelta(seconds=1), released, 1, PACE) == 30 / 120
    assert pace_factor(SCHEDULE, T0 + timedelta(seconds=3599), released, 1, PACE) == 30 / 120
    after = pace_factor(SCHEDULE, T0 + timedelta(seconds=3600), released, 1, PACE)
    assert after > 1  # out of the window: backing off
    assert pace_factor(SCHEDULE, T0, None, 0, PACE) == 1  # a site that copied no released work
    # never quicker than the scheduler's tick, never slower than the schedule inside the window
    assert pace_factor(SCHEDULE, T0, released, 1, ReleasePace(every=5, tick=30)) == 30 / 120
    assert pace_factor(20.0, T0, released, 1, PACE) == 1


def test_a_site_that_has_reposted_leaves_the_window() -> None:
    assert pace_factor(SCHEDULE, T0 + timedelta(seconds=60), T0, 1, PACE, reposted=True) > 1


def test_release_pacing_off_keeps_the_schedule() -> None:
    off = ReleasePace(window=0)
    assert pace_factor(SCHEDULE, T0, T0, 50, off) == 1
    assert quiet_stretch(SCHEDULE, 3.0, off) == 1


@pytest.mark.parametrize("per_day", [0.5, 1, 2, 4])
def test_the_back_off_pays_for_the_windows(per_day: float) -> None:
    """Window crawls plus stretched crawls over a day are the schedule's 720."""
    stretch = quiet_stretch(SCHEDULE, per_day, PACE)
    windowed = per_day * 3600
    crawls = windowed / 30 + (86400 - windowed) / (SCHEDULE * stretch)
    assert crawls == pytest.approx(86400 / SCHEDULE)
    assert 1 < stretch <= 4


def test_the_back_off_stops_at_its_bound_when_the_windows_spend_the_budget() -> None:
    assert quiet_stretch(SCHEDULE, 6, PACE) == 4
    assert quiet_stretch(SCHEDULE, 24, PACE) == 4
    assert quiet_stretch(SCHEDULE, 0, PACE) == 1


def _crawls(releases: list[datetime], start: datetime, end: datetime, pace: ReleasePace) -> list[datetime]:
    """The scheduler on a fake clock: a tick every 30 s takes the site when due and moves it on its grid."""
    crawls, due, moment = [], start, start
    while moment < end:
        if due <= moment + timedelta(seconds=15):
            seen = [r for r in releases if r <= moment]
            week = [r for r in seen if r >= moment - timedelta(days=7)]
            factor = pace_factor(SCHEDULE, moment, seen[-1] if seen else None, len(week), pace)
            crawls.append(moment)
            following = following_due(str(int(SCHEDULE)), due, moment, host="a.test", factor=factor)
            assert following is not None
            due = following
        for released in releases:  # a release brings the next crawl to 30 s after it
            if moment < released <= moment + timedelta(seconds=30) and pace.on:
                due = min(due, released + timedelta(seconds=30))
        moment += timedelta(seconds=30)
    return crawls


def test_a_simulated_week_of_daily_releases_keeps_the_crawl_budget_and_crawls_every_30_s_after_each() -> None:
    releases = [T0 + timedelta(days=d, hours=9) for d in range(-7, 2)]
    day = (T0 + timedelta(days=1), T0 + timedelta(days=2))
    paced = _crawls(releases, T0, day[1], PACE)
    plain = _crawls(releases, T0, day[1], ReleasePace(window=0))
    on_day = [c for c in paced if day[0] <= c < day[1]]
    assert len([c for c in plain if day[0] <= c < day[1]]) == 720
    assert len(on_day) <= 720 * 1.02  # the same crawls a day, within a grid point or two
    release = T0 + timedelta(days=1, hours=9)
    window = [c for c in on_day if release < c <= release + timedelta(hours=1)]
    assert len(window) >= 118  # every 30 s
    assert window[0] - release <= timedelta(seconds=30)
    quiet = [c for c in on_day if c > release + timedelta(hours=1, minutes=10)]
    mean_gap = (quiet[-1] - quiet[0]).total_seconds() / (len(quiet) - 1)
    assert mean_gap == pytest.approx(SCHEDULE * quiet_stretch(SCHEDULE, 1, PACE), rel=0.03)  # 138 s, not 120


RSS = b"""<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>t</title>
<item><title>\xe7\xac\xac\xe5\x9b\x9b\xe5\x8d\x81\xe4\xb8\x80\xe7\xab\xa0</title><link>https://pub.example/41</link>
<guid>ch-41</guid><pubDate>Sun, 29 Nov 2026 08:00:00 +0800</pubDate></item>
<item><title>ch 40</title><link>https://pub.example/40</link></item></channel></rss>"""
ATOM = b"""<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
<entry><id>urn:ch:41</id><link href="https://pub.example/41"/><updated>2026-11-29T00:00:00Z</updated></entry></feed>"""


def test_feeds_in_rss_atom_and_json_give_their_entries_and_dates() -> None:
    rss = parse_feed(RSS)
    assert [(e.ref, e.published) for e in rss] == [("ch-41", T0), ("https://pub.example/40", None)]
    assert [(e.ref, e.published) for e in parse_feed(ATOM)] == [("urn:ch:41", T0)]
    json_feed = b'{"items": [{"id": "41", "date_published": "2026-11-29T08:00:00+08:00"}]}'
    assert [(e.ref, e.published) for e in parse_feed(json_feed)] == [("41", T0)]
    plain_list = b'[{"url": "https://pub.example/41", "released_at": "2026-11-29T00:00:00Z"}]'
    assert [(e.ref, e.published) for e in parse_feed(plain_list)] == [("https://pub.example/41", T0)]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"<html><body>not a feed</body></html>", "not RSS, Atom or JSON"),
        (b"{broken", "not valid JSON"),
        (b'{"entries": 3}', "JSON Feed"),
        (b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><rss>&e;</rss>', ""),
    ],
)
def test_not_a_feed_is_one_clear_error_and_entities_are_never_resolved(body: bytes, says: str) -> None:
    if not says:  # an external entity stays unresolved: no entry, no file read
        assert parse_feed(body) == []
        return
    with pytest.raises(FeedError, match=says):
        parse_feed(body)
