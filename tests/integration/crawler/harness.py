"""Run a real crawl (real Scrapy, real HTTP on 127.0.0.1) in a child process and read back what it saw."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fptrack.storage.sites import site_of

REPO_ROOT = Path(__file__).resolve().parents[3]

# Written for these tests (not from any corpus): a few sentences of a made-up story.
PARAGRAPHS = [
    "清晨的山谷里雾气很重，李青背着竹篓慢慢走上石阶，露水打湿了他的布鞋。",
    "他想起父亲临走时说过的话：“山里的路要自己走，别回头。”心里一阵发紧。",
    "远处传来寺庙的钟声，一声接着一声，他停下脚步，回头望了一眼来时的村子。",
    "村口那棵老槐树还在，树下坐着几个晒太阳的老人，正眯着眼睛说着闲话。",
]
OTHER_PARAGRAPHS = [
    "午后下起了小雨，集市上的人渐渐散去，卖糖人的老汉收起了摊子。",
    "阿秀撑着油纸伞站在桥头，等了很久，也没有等到那条熟悉的小船。",
]


@dataclass(frozen=True)
class ChildCrawl:
    pages: list[dict[str, Any]]
    progress: list[dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)
    crawl_error: str | None = None
    second_run_error: str | None = None
    browser_handler_loaded: bool = False
    peak_kib: int = 0  # the crawling child's own peak resident memory (VmHWM)

    def page(self, url: str) -> dict[str, Any]:
        found = [p for p in self.pages if p["url"] == url]
        assert len(found) == 1, (
            f"expected one page for {url}, got {len(found)}: {[p['url'] for p in self.pages]}"
        )
        return found[0]

    @property
    def urls(self) -> list[str]:
        return [p["url"] for p in self.pages]


def crawl_in_child(
    start_urls: list[str],
    *,
    timeout: float = 60,
    allow: list[str] | None = None,
    env: dict[str, str] | None = None,
    **options: Any,
) -> ChildCrawl:
    """Crawl in a child process. The test sites live on 127.0.0.1, which the private-address guard refuses:
    the sites of ``start_urls`` are allowed explicitly (``allow``, default: those sites, e.g.
    ``127.0.0.1:41234``)."""
    allowed = [site_of(url) for url in start_urls] if allow is None else allow
    crawl_options = dict(options.pop("options", {}))
    crawl_options.setdefault("allow_private_hosts", allowed)
    request = {"start_urls": start_urls, "options": crawl_options, **options}
    completed = subprocess.run(
        [sys.executable, "-m", "testbed.crawl_child", json.dumps(request)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
    assert completed.returncode == 0, f"crawl child failed:\n{completed.stderr}"
    result = json.loads(completed.stdout)
    return ChildCrawl(
        pages=result["pages"],
        progress=result["progress"],
        stats=result.get("stats", {}),
        crawl_error=result.get("crawl_error"),
        second_run_error=result.get("second_run_error"),
        browser_handler_loaded=result.get("browser_handler_loaded", False),
        peak_kib=result.get("peak_kib", 0),
    )
