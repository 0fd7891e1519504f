"""The sites pages through Flask's test client on SQLite and PostgreSQL: everyone reads, admins add, edit and
run; the rules and messages are jobs.sites' (the same as ``fptrack sites add|edit``); crawl details."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from html import unescape

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.admin.web import create_app
from fptrack.core.settings import Settings
from fptrack.jobs.sites import SiteError, SiteSpec
from fptrack.storage.models import CrawlJob, MonitorLock, Site, utcnow
from tests.support.accounts import add_account, csrf_token_in, log_in

SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    app = create_app(settings)
    yield app
    app.extensions["fptrack"].engine.dispose()


def _client(app: Flask, settings: Settings, name: str, role: str) -> FlaskClient:
    add_account(settings, name, role)
    client = app.test_client()
    log_in(client, name)
    return client


@pytest.fixture
def admin(app: Flask, settings: Settings) -> FlaskClient:
    return _client(app, settings, "ada", "admin")


def _form(client: FlaskClient, **fields: str) -> dict[str, str]:
    token = csrf_token_in(client.get("/sites/new").get_data(as_text=True))
    base = {
        "name": "books",
        "start_urls": "http://pirate.example/\nhttp://pirate.example/list",
        "depth": "3",
        "max_pages": "50",
        "schedule": "6h",
        "render_js": "auto",
        "obey_robots": "on",
        "enabled": "on",
    }
    return {**base, **fields, "csrf_token": token}


def _sites(session: Session) -> list[Site]:
    session.expire_all()
    return list(session.scalars(select(Site).where(Site.managed.is_(True))))


def test_admin_adds_a_site_and_everyone_reads_it(
    app: Flask, settings: Settings, admin: FlaskClient, session: Session
) -> None:
    response = admin.post("/sites", data=_form(admin, include="/book/\n/chapter/", delay="0.5"))
    assert response.status_code == 303
    [site] = _sites(session)
    assert (site.name, site.host, site.depth, site.max_pages, site.schedule) == (
        "books",
        "pirate.example",
        3,
        50,
        "21600",
    )
    assert site.start_urls == ["http://pirate.example/", "http://pirate.example/list"]
    assert (site.include_patterns, site.delay, site.obey_robots, site.allow_private) == (
        ["/book/", "/chapter/"],
        0.5,
        True,
        False,
    )
    assert site.next_crawl_at is not None  # a new schedule is due at once
    viewer = _client(app, settings, "vera", "viewer")
    listing = viewer.get("/sites").get_data(as_text=True)
    assert "books" in listing and "every 6 h" in listing and "never crawled" in listing
    assert "Run now" not in listing and "Add a site" not in listing
    assert viewer.get(f"/sites/{site.id}").status_code == 200
    assert "Run now" in admin.get("/sites").get_data(as_text=True)


@pytest.mark.parametrize(
    ("fields", "spec"),
    [
        (
            {"schedule": "sometimes"},
            SiteSpec(name="books", start_urls=("http://x.example/",), schedule="sometimes"),
        ),
        ({"depth": "99"}, SiteSpec(name="books", start_urls=("http://x.example/",), depth=99)),
        ({"name": "two words"}, SiteSpec(name="two words", start_urls=("http://x.example/",))),
        ({"start_urls": "ftp://x.example/"}, SiteSpec(name="books", start_urls=("ftp://x.example/",))),
        ({"include": "(["}, SiteSpec(name="books", start_urls=("http://x.example/",), include=("([",))),
    ],
)
def test_bad_settings_get_the_cli_message_and_change_nothing(
    admin: FlaskClient, session: Session, fields: dict[str, str], spec: SiteSpec
) -> None:
    with pytest.raises(SiteError) as expected:
        spec.validated()
    data = _form(admin, start_urls="http://x.example/")
    response = admin.post("/sites", data={**data, **fields})
    assert response.status_code == 400
    page = response.get_data(as_text=True)
    assert str(expected.value).split(": ", 1)[1] in unescape(page)
    assert _sites(session) == []


def test_a_field_that_is_not_a_number_is_a_400(admin: FlaskClient, session: Session) -> None:
    response = admin.post("/sites", data=_form(admin, max_pages="lots"))
    assert response.status_code == 400
    assert "max pages: expected a whole number, got &#39;lots&#39;" in response.get_data(as_text=True)
    assert _sites(session) == []


def test_admin_edits_a_site(admin: FlaskClient, session: Session) -> None:
    admin.post("/sites", data=_form(admin))
    [site] = _sites(session)
    form = admin.get(f"/sites/{site.id}/edit").get_data(as_text=True)
    assert "http://pirate.example/list" in form and 'value="21600"' in form
    refused = admin.post(f"/sites/{site.id}", data=_form(admin, depth="51"))
    assert refused.status_code == 400 and "depth must be between 0 and 50" in refused.get_data(as_text=True)
    assert _sites(session)[0].depth == 3
    # unticking "enabled" and clearing the schedule: a manual site
    fields = _form(admin, name="books2", schedule="", depth="1")
    del fields["enabled"]
    assert admin.post(f"/sites/{site.id}", data=fields).status_code == 303
    [edited] = _sites(session)
    assert (edited.name, edited.depth, edited.enabled, edited.schedule, edited.next_crawl_at) == (
        "books2",
        1,
        False,
        "",
        None,
    )
    assert admin.get("/sites/999999/edit").status_code == 404


def test_run_now_refuses_a_site_being_crawled(admin: FlaskClient, session: Session) -> None:
    admin.post("/sites", data=_form(admin))
    [site] = _sites(session)
    now = utcnow()
    job = CrawlJob(site_id=site.id, start_urls=site.start_urls, status="running", max_pages=50, pages_seen=20)
    session.add(job)
    session.flush()
    session.add(
        MonitorLock(
            name=f"site:{site.id}",
            token="t",
            owner="elsewhere",
            job_id=job.id,
            acquired_at=now,
            heartbeat_at=now,
        )
    )
    session.commit()
    token = csrf_token_in(admin.get("/sites").get_data(as_text=True))
    response = admin.post(f"/sites/{site.id}/run", data={"csrf_token": token}, follow_redirects=True)
    page = response.get_data(as_text=True)
    assert f"books is being crawled already (crawl #{job.id})" in page
    assert session.scalar(select(CrawlJob.id).where(CrawlJob.id != job.id)) is None  # nothing else started
    assert "running" in admin.get("/sites").get_data(as_text=True)


def test_crawl_detail_shows_progress_stats_and_escaped_errors(admin: FlaskClient, session: Session) -> None:
    job = CrawlJob(
        start_urls=[f"http://evil.example/{SCRIPT}"],
        status="finished",
        max_pages=40,
        pages_seen=30,
        pages_failed=2,
        finished_at=utcnow() + timedelta(seconds=5),
        error="",
        stats={
            "by_status": {"200": 28, "404": 2},
            "counters": {"guard/refused_private": 1},
            "failures": [[f"http://evil.example/{SCRIPT}", f"HTTP 404 {SCRIPT}"]],
            "failures_total": 3,
            "finish_reason": "finished",
            "elapsed_seconds": 4.2,
        },
    )
    session.add(job)
    session.commit()
    page = admin.get(f"/crawls/{job.id}").get_data(as_text=True)
    assert 'id="crawl-progress">30 of at most 40 pages' in page
    assert '<progress max="40" value="30"' in page
    assert "guard/refused_private" in page and ">404<" in page
    assert f"HTTP 404 {ESCAPED}" in page and SCRIPT not in page
    assert "The first 1 of 3 failures are kept." in page
    assert admin.get("/crawls/999999").status_code == 404
    assert f'href="/crawls/{job.id}"' in admin.get("/crawls").get_data(as_text=True)


def test_admin_stops_monitoring_a_site_and_keeps_its_crawls(admin: FlaskClient, session: Session) -> None:
    admin.post("/sites", data=_form(admin))
    [site] = _sites(session)
    session.add(CrawlJob(site_id=site.id, status="finished", max_pages=5, pages_seen=5, finished_at=utcnow()))
    session.commit()
    token = csrf_token_in(admin.get(f"/sites/{site.id}").get_data(as_text=True))
    page = admin.post(f"/sites/{site.id}/remove", data={"csrf_token": token}, follow_redirects=True)
    assert "Stopped monitoring books" in page.get_data(as_text=True)
    assert _sites(session) == []
    assert session.scalar(select(CrawlJob.id).where(CrawlJob.site_id == site.id)) is not None
    assert admin.get(f"/sites/{site.id}").status_code == 404
