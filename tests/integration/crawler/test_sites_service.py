"""Managed sites on both backends: settings validated, pages of the host adopted and kept on removal,
schedules taken in turn, one claim per site, claims of dead crawls reaped with their jobs failed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.jobs.site_runs import claim, reap_dead_claims, release
from fptrack.jobs.sites import (
    SiteError,
    SiteSpec,
    add_site,
    crawl_options,
    due_sites,
    edit_site,
    next_due,
    parse_schedule,
    remove_site,
)
from fptrack.storage.models import CrawlJob, MonitorLock, Page, Site

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "normalised"),
    [("3600", "3600"), ("30m", "1800"), ("6h", "21600"), ("1d", "86400"), ("0  3 * * *", "0 3 * * *")],
)
def test_schedules(text: str, normalised: str) -> None:
    assert parse_schedule(text) == normalised


def test_next_due_for_intervals_and_cron() -> None:
    assert next_due("60", T0) == T0 + timedelta(seconds=60)
    assert next_due("0 3 * * *", T0) == datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
    assert next_due("", T0) is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (SiteSpec("a b", ("http://x.test/",)), "without spaces"),
        (SiteSpec("x", ()), "at least one start URL"),
        (SiteSpec("x", ("ftp://x.test/",)), "is not an http"),
        (SiteSpec("x", ("http://x.test/",), schedule="daily"), "schedule 'daily'"),
        (SiteSpec("x", ("http://x.test/",), include=("(",)), "include pattern '('"),
        (SiteSpec("x", ("http://x.test/",), render_js="maybe"), "render_js must be one of auto, yes, no"),
        (SiteSpec("x", ("http://x.test/",), max_pages=0), "max_pages must be >= 1"),
    ],
)
def test_bad_settings_are_refused(spec: SiteSpec, message: str) -> None:
    with pytest.raises(SiteError, match=message.replace("(", r"\(")):
        spec.validated()


def test_a_site_adopts_earlier_pages_and_removal_keeps_them(session: Session) -> None:
    earlier = Site(host="pirate.test:8080", name="pirate.test:8080")
    session.add(earlier)
    session.flush()
    session.add(
        Page(
            url="http://pirate.test:8080/1",
            final_url="http://pirate.test:8080/1",
            status=200,
            site_id=earlier.id,
            host="pirate.test:8080",
        )
    )
    site = add_site(
        session,
        SiteSpec(
            "pirate",
            ("http://pirate.test:8080/",),
            schedule="1h",
            allow_private=True,
            allowed_hosts=("m.pirate.test",),
            exclude=("forum",),
        ),
        now=T0,
    )
    assert site.id == earlier.id and site.managed and site.next_crawl_at == T0  # due at once
    options = crawl_options(site)
    assert options.allow_private_hosts == ("pirate.test:8080", "m.pirate.test")
    assert options.exclude == ("forum",) and options.obey_robots is True
    with pytest.raises(SiteError, match="monitored already as 'pirate'"):
        add_site(session, SiteSpec("other", ("http://pirate.test:8080/x",)))
    with pytest.raises(SiteError, match="a site called 'pirate' is monitored already"):
        add_site(session, SiteSpec("pirate", ("http://another.test/",)))
    edit_site(session, "pirate", depth=4, obey_robots=False)
    assert (site.depth, site.obey_robots, site.schedule) == (4, False, "3600")
    remove_site(session, "pirate")
    assert not site.managed and site.schedule == "" and site.next_crawl_at is None
    assert session.scalar(select(Page.site_id).where(Page.url == "http://pirate.test:8080/1")) == site.id
    with pytest.raises(SiteError, match="no monitored site called 'pirate'"):
        edit_site(session, "pirate", depth=1)


def test_due_sites_take_their_turn_once(session: Session) -> None:
    add_site(session, SiteSpec("a", ("http://a.test/",), schedule="60"), now=T0)
    add_site(session, SiteSpec("b", ("http://b.test/",), schedule="60", enabled=False), now=T0)
    add_site(session, SiteSpec("c", ("http://c.test/",)), now=T0)  # manual only
    assert [name for _, name in due_sites(session, now=T0 + timedelta(seconds=1))] == ["a"]
    assert due_sites(session, now=T0 + timedelta(seconds=2)) == []  # its turn moved on
    # the next turn is the next point of the site's 60-second grid at least 30 s after its last due time
    # (jobs.sites.following_due): within 90 s of T0
    assert [name for _, name in due_sites(session, now=T0 + timedelta(seconds=91))] == ["a"]


def test_one_claim_per_site_and_dead_claims_are_reaped(session: Session, settings: Settings) -> None:
    site = add_site(session, SiteSpec("a", ("http://a.test/",), schedule="60"), now=T0)
    token = claim(session, site.id, settings)
    assert token is not None
    assert claim(session, site.id, settings) is None  # a live claim: no second crawl
    assert due_sites(session, now=utcnow_plus(120)) == []  # still crawling: not started again
    release(session, site.id, token)
    token = claim(session, site.id, settings)
    assert token is not None
    job = CrawlJob(site_id=site.id, status="running", start_urls=["http://a.test/"])
    session.add(job)
    session.flush()
    lock = session.scalar(select(MonitorLock))
    assert lock is not None
    lock.job_id = job.id
    lock.heartbeat_at = datetime.now(UTC) - timedelta(seconds=settings.crawl_stale_seconds + 5)
    session.flush()
    assert reap_dead_claims(session, settings) == [job.id]
    assert job.status == "failed" and "died" in job.error
    assert claim(session, site.id, settings) is not None  # runs again


def utcnow_plus(seconds: int) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)
