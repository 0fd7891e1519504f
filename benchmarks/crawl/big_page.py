"""Cost of one huge page: a 9 MB chapter page (under the 10 MB download cap) crawled by the real ``fptrack``,
with the text cap switched off (the baseline, as before ``FPTRACK_MAX_PAGE_CHARS``) and at its default.

    python -m benchmarks.crawl.big_page            # 9 MB page
    python -m benchmarks.crawl.big_page --mb 3     # a smaller one
    python -m benchmarks.crawl.big_page --quick    # a 1 MB page

1. A registered work of 5 chapters (synthetic text, about 3,000 characters each) and one page: those chapters
   copied at the top, then synthetic prose (different characters, same shape) up to ``--mb`` megabytes of
   UTF-8 HTML, all in one ``div#content`` of ``<p>`` paragraphs; served on 127.0.0.1.
2. Per run, in a fresh SQLite data folder, the real CLI in subprocesses: ``fptrack init``, ``works add``, then
   the timed ``fptrack crawl URL --depth 0``; its peak memory is the maximum resident set size of that crawl
   process (``getrusage(RUSAGE_CHILDREN)`` of a wrapper that runs only it).
3. Afterwards: the page's text length and note, its rows in ``fingerprints`` and ``code_index`` (the index
   rows per page that the cap bounds), the database file size, and the copies found (``fptrack matches``),
   which must be the same in both runs.

Prints a table and ends with one JSON line (ratios: capped / baseline).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import arguments, emit
from fptrack.storage.compressed import decompress_text
from testbed.sites import Page, serve_site

HAN = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定"
    "行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些"
    "然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公"
)
PUNCT = "，，，。。！？；："


def prose(rng: random.Random, chars: int) -> list[str]:
    """Paragraphs of 80-200 characters of synthetic prose, ``chars`` characters in all."""
    out, total = [], 0
    while total < chars:
        length = rng.randint(80, 200)
        text = (
            "".join(rng.choice(HAN) if rng.random() > 0.08 else rng.choice(PUNCT) for _ in range(length - 1))
            + "。"
        )
        out.append(text)
        total += len(text)
    return out


def build(megabytes: float) -> tuple[list[str], bytes]:
    rng = random.Random(5)
    chapters = ["\n".join(prose(rng, 3000)) for _ in range(5)]
    head = "".join(f"<p>{line}</p>" for chapter in chapters for line in chapter.split("\n"))
    filler_rng = random.Random(11)
    opening = (
        "<html><head><meta charset='utf-8'><title>第一章_某书_书友网</title></head><body>"
        "<div class='nav'><a href='/'>首页</a></div><div id='content'>"
    )
    parts = [opening, head]
    size = sum(len(p.encode()) for p in parts)
    target = int(megabytes * 1024 * 1024) - 200
    while size < target:
        chunk = "".join(f"<p>{line}</p>" for line in prose(filler_rng, 20_000))
        parts.append(chunk)
        size += len(chunk.encode())
    parts.append("</div><div class='footer'>Copyright 2024</div></body></html>")
    return chapters, "".join(parts).encode()[: target + 200]


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args], env=env, capture_output=True, text=True, check=True
    )


def timed_crawl(env: dict[str, str], url: str, key: str) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one ``fptrack crawl`` process."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "sys.stderr.buffer.write(r.stderr)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(r.returncode)\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", wrapper, sys.executable, "-m", "fptrack.cli", "crawl", url, "--depth", "0",
         "--allow-private-host", key, "-q"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"crawl failed: {done.stderr}")
    return elapsed, int(done.stdout.strip().splitlines()[-1]) / 1024


def one_run(label: str, cap: int, url: str, key: str, work: Path) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="fptrack-bigpage-"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FPTRACK_")}
        # the site is our own loopback server: the polite pace (FPTRACK_SITE_RATE) is not what is measured
        env["FPTRACK_SITE_RATE"] = "1000"
        env.update(FPTRACK_DATA_DIR=str(data), FPTRACK_MAX_PAGE_CHARS=str(cap), FPTRACK_CRAWL_TIMEOUT="120")
        run(env, "init")
        run(env, "works", "add", str(work), "--title", "样书")
        print(f"{label}: crawling...", file=sys.stderr)
        seconds, peak_mb = timed_crawl(env, url, key)
        lines = run(env, "matches", "--format", "json").stdout.splitlines()
        matches = [json.loads(line) for line in lines if line.strip()]  # one object per line
        copies = sorted({(m["page_url"], m["chapter_index"]) for m in matches})
        database = data / "fptrack.db"
        with sqlite3.connect(database) as db:
            stored, note = db.execute("SELECT text_z, note FROM pages").fetchone()
            text_chars = len(decompress_text(stored))  # stored compressed (storage.compressed)
            fingerprints = db.execute(
                "SELECT count(*) FROM fingerprints WHERE page_id IS NOT NULL"
            ).fetchone()[0]
            index_rows = db.execute(
                "SELECT count(*) FROM code_index WHERE owner_id IN (SELECT id FROM pages)"
            ).fetchone()[0]
        return {
            "label": label,
            "cap": cap,
            "seconds": round(seconds, 2),
            "peak_mb": round(peak_mb),
            "text_chars": text_chars,
            "note": note,
            "page_fingerprints": fingerprints,
            "page_index_rows": index_rows,
            "db_mb": round(database.stat().st_size / 1024 / 1024, 1),
            "copies": [list(c) for c in copies],
        }
    finally:
        shutil.rmtree(data, ignore_errors=True)


def main() -> int:
    parser = arguments(__doc__, "a 1 MB page")
    parser.add_argument("--mb", type=float, default=9.0, help="page size in megabytes (default 9)")
    args = parser.parse_args()
    if args.quick:
        args.mb = 1.0
    from fptrack.core.settings import Settings

    default_cap = Settings().max_page_chars
    chapters, body = build(args.mb)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder) / "work.txt"
        work.write_text(
            "".join(f"第{n + 1}章\n{text}\n" for n, text in enumerate(chapters)), encoding="utf-8"
        )
        with serve_site({"/": Page(body)}) as site:
            results = [
                one_run("baseline (no cap)", 1_000_000_000, site + "/", site.key, work),
                one_run(f"FPTRACK_MAX_PAGE_CHARS={default_cap}", default_cap, site + "/", site.key, work),
            ]
    print(f"\npage: {len(body) / 1024 / 1024:.1f} MB of HTML\n")
    print("| run | seconds | peak MB | text chars | page index rows | DB MB | copies |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        print(f"| {r['label']} | {r['seconds']} | {r['peak_mb']} | {r['text_chars']} | "
              f"{r['page_index_rows']} | "
              f"{r['db_mb']} | {len(r['copies'])} |")  # fmt: skip
    base, capped = results
    print(f"\nnote on the capped page: {capped['note']}")
    same = base["copies"] == capped["copies"]
    print(f"same copies found: {same}")
    ratios = {
        key: round(float(capped[key]) / float(base[key]), 3) if base[key] else None
        for key in ("seconds", "peak_mb", "page_index_rows", "db_mb")
    }
    emit(
        {
            "benchmark": "big_page",
            "page_mb": round(len(body) / 1024 / 1024, 2),
            "runs": results,
            "ratio_capped_to_baseline": ratios,
            "same_copies": same,
        }
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
