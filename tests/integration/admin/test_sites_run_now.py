""" "Run now" on the sites page starts a real crawl the way the scheduler does: a process of its own running
``python -m fptrack.jobs.site_crawl NAME`` (recorded as trigger ``site``), while the request has already
answered. SQLite, in-process tasks, a loopback site."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from flask import Flask
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.admin.web import create_app
from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CrawlJob, Match, MonitorLock, Site
from testbed.sites import Page, chapter_page, serve_site
from tests.support.accounts import add_account, csrf_token_in, log_in
from tests.support.env import clean_environ

pytestmark = [pytest.mark.slow]

CHAPTERS = demo_chapters("lighthouse.txt")


@pytest.fixture
def app(sqlite_settings: Settings) -> Iterator[Flask]:
    app = create_app(sqlite_settings)
    yield app
    app.extensions["fptrack"].engine.dispose()


def _job(settings: Settings) -> CrawlJob | None:
    engine = create_engine_for(settings)
    try:
        with Session(engine, expire_on_commit=False) as session:
            return session.scalar(select(CrawlJob).order_by(CrawlJob.id.desc()))
    finally:
        engine.dispose()


def test_run_now_crawls_the_site_in_a_process_of_its_own(app: Flask, sqlite_settings: Settings) -> None:
    env = clean_environ()
    env.update(
        FPTRACK_DATA_DIR=str(sqlite_settings.data_dir), FPTRACK_DATABASE_URL=sqlite_settings.database_url
    )
    registered = subprocess.run(
        [sys.executable, "-m", "fptrack.cli", "works", "add", str(DEMO_DATA / "lighthouse.txt")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert registered.returncode == 0, registered.stderr
    engine = create_engine_for(sqlite_settings)
    add_account(sqlite_settings, "ada", "admin")
    admin = app.test_client()
    log_in(admin, "ada")
    pages = {f"/c/{n}.html": chapter_page(f"第{n}页", CHAPTERS[n].split("\n")) for n in range(2)}
    pages["/"] = Page.html("".join(f'<a href="{path}">{path}</a> ' for path in pages))
    with serve_site(pages) as base:
        token = csrf_token_in(admin.get("/sites/new").get_data(as_text=True))
        added = admin.post(
            "/sites",
            data={
                "name": "lighthouse",
                "start_urls": base + "/",
                "depth": "1",
                "max_pages": "20",
                "allow_private": "on",
                "obey_robots": "on",
                "render_js": "auto",
                "csrf_token": token,
            },
        )
        assert added.status_code == 303
        with Session(engine) as session:
            site_id = session.scalar(select(Site.id).where(Site.name == "lighthouse"))
        response = admin.post(f"/sites/{site_id}/run", data={"csrf_token": token})
        assert response.status_code == 303
        # the answer came before the crawl could have finished: nothing has been fetched yet, or the job runs
        deadline = time.monotonic() + 120
        job = _job(sqlite_settings)
        while time.monotonic() < deadline and (job is None or job.finished_at is None):
            time.sleep(0.5)
            job = _job(sqlite_settings)
        served = list(base.page_requests)
    assert job is not None and job.finished_at is not None, "the crawl did not finish in time"
    assert (job.trigger, job.site_id, job.status) == ("site", site_id, "finished"), job.error
    assert job.pages_seen == 3 and served.count("/c/0.html") == 1
    with Session(engine) as session:
        assert len(session.scalars(select(Match.id)).all()) == 2
        assert session.scalar(select(MonitorLock.name)) is None  # the claim was released
    page = admin.get(f"/sites/{site_id}").get_data(as_text=True)
    assert "finished" in page and ">site<" in page
    engine.dispose()
