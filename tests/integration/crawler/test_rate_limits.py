"""A site that rate-limits, crawled for real (``fptrack crawl`` in a child process, real Scrapy, real HTTP on
127.0.0.1): it answers 429 with ``Retry-After`` above a few requests a second, and counts the requests that
arrive inside the window it asked for. The crawl fetches every page of it, slowly, sends nothing inside a
window, and its job records the pace; a site that never stops answering 429 ends failed, with the reason."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CrawlJob
from tests.integration.crawler.harness import PARAGRAPHS
from tests.support.env import clean_environ

pytestmark = pytest.mark.slow

CHAPTERS = 10


@dataclass
class LimitedSite:
    """What the site saw: every request's time, the 429s it sent, the requests inside a window it asked
    for, the paths it served with 200."""

    per_second: int
    retry_after: int
    always: bool = False
    times: list[float] = field(default_factory=list)
    too_many: int = 0
    inside_window: int = 0
    served: list[str] = field(default_factory=list)
    window_until: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    key: str = ""

    def answer(self, path: str) -> tuple[int, dict[str, str], bytes]:
        now = time.monotonic()
        with self.lock:
            self.times.append(now)
            if path == "/robots.txt":
                return 404, {}, b""
            inside = now < self.window_until
            self.inside_window += int(inside)
            recent = sum(1 for t in self.times if t > now - 1.0)
            if self.always or inside or recent > self.per_second:
                self.too_many += 1
                if not inside:
                    self.window_until = now + self.retry_after
                return 429, {"Retry-After": str(self.retry_after)}, b"slow down"
            self.served.append(path)
        return 200, {"Content-Type": "text/html; charset=utf-8"}, _page(path)


def _page(path: str) -> bytes:
    if path == "/":
        links = "".join(f"<li><a href='/c/{n}.html'>第{n}章</a></li>" for n in range(1, CHAPTERS + 1))
        return f"<html><head><title>目录</title></head><body><ul>{links}</ul></body></html>".encode()
    body = "".join(f"<p>{p}</p>" for p in PARAGRAPHS)
    return f"<html><head><title>{path}</title></head><body><div>{body}</div></body></html>".encode()


@contextmanager
def _serve(site: LimitedSite) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, headers, body = site.answer(self.path)
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    site.key = f"127.0.0.1:{server.server_address[1]}"
    try:
        yield f"http://{site.key}"
    finally:
        server.shutdown()
        server.server_close()


def _crawl(
    base: str, tmp_path: Path, **env_changes: str
) -> tuple[subprocess.CompletedProcess[str], CrawlJob]:
    env = clean_environ()
    env.update(FPTRACK_DATA_DIR=str(tmp_path / "data"), **env_changes)
    cli = [sys.executable, "-m", "fptrack.cli"]
    assert subprocess.run([*cli, "init"], env=env, capture_output=True, check=False).returncode == 0
    key = base.removeprefix("http://")
    done = subprocess.run(
        [*cli, "crawl", base + "/", "--allow-private-host", key, "--depth", "1", "-q"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    engine = create_engine_for(Settings.from_env(env))
    try:
        with Session(engine) as session:
            job = session.scalars(select(CrawlJob).order_by(CrawlJob.id.desc())).first()
            assert job is not None, done.stdout + done.stderr
            session.expunge(job)
    finally:
        engine.dispose()
    return done, job


def _most_in_one_second(times: list[float]) -> int:
    return max(sum(1 for t in times if start <= t < start + 1.0) for start in times)


def test_a_rate_limited_site_is_crawled_to_the_end_with_no_request_inside_its_window(tmp_path: Path) -> None:
    site = LimitedSite(per_second=3, retry_after=2)
    with _serve(site) as base:
        done, job = _crawl(base, tmp_path, FPTRACK_SITE_RATE="10")
    # the site did ask to slow down, and was obeyed: nothing sent to it inside a window it asked for
    assert site.too_many >= 1
    assert site.inside_window == 0
    # every page fetched, none given up or stored as a 429
    assert sorted(site.served) == sorted(["/", *[f"/c/{n}.html" for n in range(1, CHAPTERS + 1)]])
    assert (job.status, job.error, job.pages_failed) == ("finished", "", 0), done.stdout + done.stderr
    assert job.pages_seen == CHAPTERS + 1
    assert job.stats["by_status"] == {"200": CHAPTERS + 1}
    # the pace recorded: every request the site saw, the holds, a peak within what the site allows
    assert job.stats["requests"] == len(site.times)
    assert job.stats["retry_after_waits"] == site.too_many
    assert 0 < job.stats["peak_requests_per_second"] <= 10
    assert job.stats["requests_per_second"] > 0


def test_a_site_that_always_answers_429_ends_failed_with_the_reason(tmp_path: Path) -> None:
    site = LimitedSite(per_second=100, retry_after=1, always=True)
    with _serve(site) as base:
        done, job = _crawl(base, tmp_path, FPTRACK_SITE_RATE="10", FPTRACK_RETRY_AFTER_MAX="3")
    assert done.returncode == 1
    assert job.status == "failed"
    assert job.pages_seen == 0 and job.pages_failed == 1
    assert "HTTP 429" in job.error and "gave up after 3 tries" in job.error
    assert site.inside_window == 0
    # robots.txt, then the start page three times, each a Retry-After window apart
    page_times = site.times[1:]
    assert len(page_times) == 3
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(page_times))
    assert job.stats["retry_after_waits"] == 3


def test_the_default_pace_is_the_site_rate(tmp_path: Path) -> None:
    site = LimitedSite(per_second=1000, retry_after=1)
    with _serve(site) as base:
        _, job = _crawl(base, tmp_path, FPTRACK_SITE_RATE="4")
    assert job.status == "finished" and job.pages_seen == CHAPTERS + 1
    # robots.txt and 11 pages at 4 a second: 4 in a second as the crawl sent them; as the site saw them, one
    # more at most (a request delayed on its way, the next one on time)
    assert job.stats["peak_requests_per_second"] <= 4
    assert _most_in_one_second(site.times) <= 5
    assert site.times[-1] - site.times[0] >= (len(site.times) - 1) / 4 - 0.1


def test_a_crawl_delay_slower_than_the_rate_wins(tmp_path: Path) -> None:
    site = LimitedSite(per_second=1000, retry_after=1)
    with _serve(site) as base:
        _, job = _crawl(base, tmp_path, FPTRACK_SITE_RATE="50", FPTRACK_CRAWL_DELAY="0.25")
    assert job.status == "finished"
    # 4 a second at most, not 50: the requests span their intervals (one arriving late is not a crawl going
    # faster)
    assert job.stats["peak_requests_per_second"] <= 4
    assert site.times[-1] - site.times[0] >= (len(site.times) - 1) * 0.25 - 0.1
