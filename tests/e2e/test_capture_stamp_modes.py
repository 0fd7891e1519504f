"""One answer in every run mode for capture time-stamps: the pirate site crawled in-process on SQLite and
with a Celery worker over Redis on PostgreSQL, a local RFC 3161 authority configured, stamps the captures of
the same flagged pages, each once, within seconds of its match being recorded, and no other page's."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CaptureStamp, Match, Page, as_utc
from testbed.sites import serve_site
from tests.conftest import REDIS_URL
from tests.e2e.conftest import Fptrack
from tests.support.pirate_site import pirate_site
from tests.support.tsa import local_tsa
from tests.support.workers import wait_indexed, worker_processes

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _stamped(settings: Settings, base: str) -> tuple[set[str], set[str]]:
    """(paths of the flagged pages, paths of the pages whose capture is stamped), each stamp checked to come
    within a minute of its page's first match."""
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            flagged: dict[int, str] = {}
            first: dict[int, object] = {}
            for match, url in session.execute(select(Match, Page.url).join(Page, Page.id == Match.page_id)):
                flagged[match.page_id] = url.removeprefix(base)
                seen = as_utc(match.first_seen)
                first[match.page_id] = min(seen, first.get(match.page_id, seen))  # type: ignore[call-overload]
            stamped = set()
            for stamp in session.scalars(select(CaptureStamp)):
                sealed = as_utc(stamp.stamped_at)
                seen = first[stamp.page_id]
                assert seen - timedelta(seconds=5) <= sealed <= seen + timedelta(seconds=60)  # type: ignore[operator]
                stamped.add(flagged[stamp.page_id])
            return set(flagged.values()), stamped
    finally:
        engine.dispose()


def _crawl(fptrack: Fptrack, pages: dict[str, object]) -> str:
    with serve_site(pages) as base:
        fptrack.run(
            "crawl", base + "/", "--allow-private-host", base.key, "--depth", "3", "--quiet", timeout=600
        )
        return str(base)


def test_every_run_mode_stamps_the_same_captures(
    sqlite_settings: Settings, postgres_settings: Settings, tmp_path: Path
) -> None:
    pages, _ = pirate_site()
    answers: dict[str, tuple[set[str], set[str]]] = {}
    with local_tsa(tmp_path / "tsa") as tsa:
        in_process = Fptrack(sqlite_settings, {"FPTRACK_TSA_URL": tsa.url})
        sqlite_settings.data_dir.mkdir(parents=True, exist_ok=True)
        in_process.run("init")
        in_process.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
        base = _crawl(in_process, pages)
        answers["in-process, SQLite"] = _stamped(sqlite_settings, base)

        database = f"fptrack_stamps_{uuid.uuid4().hex[:8]}"
        admin = create_engine(postgres_settings.database_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f"CREATE DATABASE {database}"))
        try:
            settings = Settings(
                data_dir=tmp_path / "workers",
                database_url=f"{postgres_settings.database_url.rsplit('/', 1)[0]}/{database}",
            )
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            workers = Fptrack(
                settings,
                {
                    "FPTRACK_BROKER_URL": REDIS_URL,
                    "FPTRACK_TASK_QUEUE": f"fptrack-stamps-{uuid.uuid4().hex[:8]}",
                    "FPTRACK_TSA_URL": tsa.url,
                },
            )
            workers.run("init")
            with worker_processes(workers.env(), tmp_path, 1):
                workers.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
                wait_indexed(settings)
                base = _crawl(workers, pages)
                deadline = time.monotonic() + 120
                while True:  # the stamping task follows the compare task on the worker's queue
                    flagged, stamped = _stamped(settings, base)
                    if (flagged and stamped == flagged) or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
            answers["Celery worker, PostgreSQL"] = (flagged, stamped)
        finally:
            with admin.connect() as connection:
                connection.execute(text(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
            admin.dispose()
    (flagged, stamped), other = answers["in-process, SQLite"], answers["Celery worker, PostgreSQL"]
    assert flagged and stamped == flagged, answers
    assert other == (flagged, stamped), answers
