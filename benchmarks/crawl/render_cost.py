"""What rendering pages in Chromium costs: seconds and CPU per page of a crawl that renders
(``render_js=yes``) against the same crawl fetching statically (``render_js=no``, the baseline measured in the
same run).

    python -m benchmarks.crawl.render_cost --quick     # 6 chapter pages
    python -m benchmarks.crawl.render_cost             # 100 chapter pages
    python -m benchmarks.crawl.render_cost --pages 300 --render-pages 4

The site (served on 127.0.0.1 in this process, ``testbed/sites.py``): an index linking ``--pages``
chapter pages, half of them filled from a JSON endpoint by a script, half printed by ``document.write``
(``testbed/jspages.py``), each about 1,500 characters. Each crawl runs ``run_crawl`` (Scrapy, the sink,
no database: the cost measured is fetching and extracting) in a child process of its own
(``testbed.crawl_child``),
timed from the outside: wall seconds, and CPU seconds of the child and everything it started (the Playwright
driver and Chromium's processes included, ``RUSAGE_CHILDREN``). One-page crawls (static, and rendered) give
the fixed costs (the Python process and Scrapy; plus, rendered, Playwright's driver and the browser): the cost
*per page* is the marginal one, (N-page crawl - one-page crawl) / (N - 1). The rendered crawl must extract
every chapter (checked), the static one none.

Prints a table and ends with one JSON line; ``ratio`` is rendered / static of the marginal cost per page (wall
and CPU)."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import time
from typing import Any

from benchmarks.harness import ROOT, arguments, emit, machine, print_table, progress, skip
from fptrack.cli.demo import demo_chapters
from testbed.jspages import json_chapter, json_endpoint, written_chapter
from testbed.sites import Page, serve_site


def _site(count: int) -> dict[str, Page]:
    # the demo's chapters (lighthouse.txt, alley.txt's first), without their titles: about 1,500 characters
    chapters = [*demo_chapters("lighthouse.txt"), demo_chapters("alley.txt")[0]]
    paragraphs = [line.strip() for chapter in chapters for line in chapter.splitlines()[1:] if line.strip()]
    pages: dict[str, Page] = {}
    links = []
    for n in range(count):
        path = f"/book/{n}.html"
        links.append(f"<a href='{path}'>{n}</a>")
        if n % 2:
            pages[path] = written_chapter(f"第{n}章", paragraphs)
        else:
            pages[path] = json_chapter(f"第{n}章", f"/api/{n}.json")
            pages[f"/api/{n}.json"] = json_endpoint(paragraphs)
    pages["/"] = Page.html("<html><body>" + " ".join(links) + "</body></html>")
    return pages


def _crawl(url: str, key: str, *, mode: str, max_pages: int, render_pages: int) -> dict[str, Any]:
    request = {
        "start_urls": [url],
        "depth": 1,
        "max_pages": max_pages,
        "settings": {
            "render_pages": render_pages,
            "crawl_concurrency": 8,
            "crawl_concurrency_per_site": 8,
            "crawl_autothrottle": False,
        },
        "options": {"allow_private_hosts": [key], "render_js": mode},
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "testbed.crawl_child", json.dumps(request)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode != 0:
        raise SystemExit(f"crawl ({mode}) failed:\n{completed.stderr[-2000:]}")
    result = json.loads(completed.stdout)
    chapters = [p for p in result["pages"] if "/book/" in p["url"]]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "mode": mode,
        "pages": len(result["pages"]),
        "chapters": len(chapters),
        "chapters_with_text": sum(1 for p in chapters if len(p["text"]) > 1000),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
    }


def main() -> int:
    parser = arguments(__doc__, "6 chapter pages")
    parser.add_argument("--pages", type=int, default=100, help="chapter pages (default 100)")
    parser.add_argument("--render-pages", type=int, default=2, help="FPTRACK_RENDER_PAGES (default 2)")
    args = parser.parse_args()
    count = 6 if args.quick else args.pages
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        skip("render_cost", "Chromium not found (Debian package chromium)")

    with serve_site(_site(count)) as site:
        url, key = site + "/", site.key
        progress(f"crawling {count} chapter pages, statically and rendered ...")
        static = _crawl(url, key, mode="no", max_pages=count + 1, render_pages=args.render_pages)
        rendered = _crawl(url, key, mode="yes", max_pages=count + 1, render_pages=args.render_pages)
        one_static = _crawl(url, key, mode="no", max_pages=1, render_pages=args.render_pages)
        startup = _crawl(url, key, mode="yes", max_pages=1, render_pages=args.render_pages)
    if rendered["chapters_with_text"] != count or static["chapters_with_text"] != 0:
        raise SystemExit(f"unexpected extraction: static {static}, rendered {rendered}")

    def marginal(crawl: dict[str, Any], one: dict[str, Any]) -> tuple[float, float]:
        extra = crawl["pages"] - one["pages"]
        return (crawl["wall_s"] - one["wall_s"]) / extra, (crawl["cpu_s"] - one["cpu_s"]) / extra

    per_page = {"no": marginal(static, one_static), "yes": marginal(rendered, startup)}
    wall_ratio = per_page["yes"][0] / per_page["no"][0]
    cpu_ratio = per_page["yes"][1] / per_page["no"][1]
    rows = [
        (
            "static (render_js=no)",
            static["pages"],
            static["chapters_with_text"],
            static["wall_s"],
            static["cpu_s"],
            per_page["no"][0] * 1000,
            per_page["no"][1] * 1000,
        ),
        (
            "rendered (render_js=yes)",
            rendered["pages"],
            rendered["chapters_with_text"],
            rendered["wall_s"],
            rendered["cpu_s"],
            per_page["yes"][0] * 1000,
            per_page["yes"][1] * 1000,
        ),
        (
            "one static page (process start)",
            one_static["pages"],
            "",
            one_static["wall_s"],
            one_static["cpu_s"],
            "",
            "",
        ),
        (
            "one rendered page (+ browser start)",
            startup["pages"],
            "",
            startup["wall_s"],
            startup["cpu_s"],
            "",
            "",
        ),
    ]
    print_table(
        "crawls of the site (wall and CPU of the crawl's processes; per extra page: the marginal cost)",
        [
            "crawl",
            "pages",
            "chapters with text",
            "wall s",
            "CPU s",
            "wall ms/extra page",
            "CPU ms/extra page",
        ],
        [[f"{v:.1f}" if isinstance(v, float) else v for v in row] for row in rows],
    )
    info = machine()
    print(
        f"rendered / static, marginal cost per page: wall x{wall_ratio:.1f}, CPU x{cpu_ratio:.1f} "
        f"({args.render_pages} browser pages at a time; {info['cores']} CPUs, {info['platform']})"
    )
    figures = {
        "benchmark": "render_cost",
        "chapter_pages": count,
        "render_pages": args.render_pages,
        "static": static,
        "rendered": rendered,
        "process_start": one_static,
        "browser_start": startup,
        "wall_ms_per_page": {
            "static": round(per_page["no"][0] * 1000, 1),
            "rendered": round(per_page["yes"][0] * 1000, 1),
        },
        "cpu_ms_per_page": {
            "static": round(per_page["no"][1] * 1000, 1),
            "rendered": round(per_page["yes"][1] * 1000, 1),
        },
        "ratio": {"wall": round(wall_ratio, 2), "cpu": round(cpu_ratio, 2)},
    }
    emit(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
