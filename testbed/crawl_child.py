"""Run one ``run_crawl`` in a fresh process and print its results as JSON (Twisted's reactor runs once per
process, so every crawl of the test suite gets its own child).

    python -m testbed.crawl_child '{"start_urls": [...], "depth": 1, "max_pages": 10,
        "settings": {"crawl_timeout": 2}, "options": {"allow_private_hosts": ["127.0.0.1:8000"]},
        "failing_sink_urls": [...], "run_twice": false}'

``settings`` override :class:`Settings` fields (lists become tuples); ``options`` are :class:`CrawlOptions`
fields."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any

from fptrack.core.settings import Settings
from fptrack.crawler import CrawledPage, CrawlError, CrawlProgress, run_crawl
from fptrack.crawler.pages import CrawlOptions


def _tuples(values: dict[str, Any]) -> dict[str, Any]:
    return {
        key: tuple(tuple(v) if isinstance(v, list) else v for v in value)
        if isinstance(value, list)
        else value
        for key, value in values.items()
    }


def main(argv: list[str]) -> int:
    request: dict[str, Any] = json.loads(argv[1])
    # the test environment's pace (tests/conftest.py sets FPTRACK_SITE_RATE), unless the request sets one
    rate = float(os.environ.get("FPTRACK_SITE_RATE", Settings.site_rate))
    settings = Settings(site_rate=rate).with_overrides(**_tuples(request.get("settings", {})))
    options = CrawlOptions(**_tuples(request.get("options", {})))
    failing = set(request.get("failing_sink_urls", ()))
    pages: list[dict[str, Any]] = []
    progress: list[dict[str, Any]] = []

    def sink(page: CrawledPage) -> None:
        if page.url in failing:
            raise RuntimeError(f"sink refuses {page.url}")
        record = dataclasses.asdict(page)
        record["fetched_at"] = page.fetched_at.isoformat()
        pages.append(record)

    def report(update: CrawlProgress) -> None:
        progress.append(dataclasses.asdict(update))

    result: dict[str, Any] = {"pages": pages, "progress": progress}
    try:
        stats = run_crawl(
            request["start_urls"],
            settings=settings,
            depth=request.get("depth", 2),
            max_pages=request.get("max_pages", 100),
            sink=sink,
            progress=report,
            options=options,
        )
    except CrawlError as exc:
        result["crawl_error"] = str(exc)
    else:
        result["stats"] = dataclasses.asdict(stats)
        result["stats"]["by_status"] = {str(k): v for k, v in stats.by_status.items()}
        if request.get("run_twice"):
            try:
                run_crawl(request["start_urls"], settings=settings, sink=sink)
            except CrawlError as exc:
                result["second_run_error"] = str(exc)
    # whether scrapy-playwright's handler was ever made in this process (the browser on demand)
    result["browser_handler_loaded"] = "scrapy_playwright.handler" in sys.modules
    result["peak_kib"] = _peak_kib()
    json.dump(result, sys.stdout, ensure_ascii=False)
    return 0


def _peak_kib() -> int:
    """This process's own peak resident memory (VmHWM), in KiB: not ``ru_maxrss`` as the parent reads it for
    its children, which is the largest of every child it ever waited for."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
