"""New copies after a release: a live pirate web of our own on loopback (``_live_web.py``) where the
publisher's releases precede the copies, watched by the product with its defaults, release pacing on, and the
same run with release pacing off (``FPTRACK_RELEASE_WINDOW=0``) as the peer, side by side.

    python -m benchmarks.monitoring.releases          # 3 sites, 3 releases, both modes at once (11-13 min)
    python -m benchmarks.monitoring.releases --quick  # 1 site, 1 release (about 7 min)

What runs, per mode, each in a fresh PostgreSQL database with ``fptrack worker --beat`` on Redis (a queue of
its own) and every setting at its default but the peer's one: ``fptrack init``; ``fptrack works add`` of a
novel's first chapters (../shared/corpus, read at run time); ``fptrack sites add NAME URL --schedule 2m
--allow-private`` for each site, whose table of contents lists those chapters from the start; the worker;
once every site's copies are matched (the sites the product knows copied the work), the releases: each one
``fptrack works add chapter.txt --release-of 1`` of the next chapter, and each site posts its copy some
seconds to a minute and a half after the release is registered (``--delay-max``; the same draws in both
modes). The run ends ``--tail`` seconds after the last copy appears.

Figures per mode: the median and 90th percentile of the time to detect the released chapters' copies (the
match's ``first_seen`` minus the copy's appearance), copies found; requests per second per site over the
release part of the run (from the first release to the end, robots.txt included) and over the whole run;
crawls per site; requests per crawl. Windows of an hour cannot be waited out here: the back-off outside the
windows is not measured but computed, for one release a day, from the requests per crawl measured in each mode
(``day projection``: 120 window crawls at the paced mode's cost, the rest of the day at the back-off's pace at
the peer's cost, against 720 crawls at the peer's cost). The machine is shared (2 cores, several sessions):
times include crawl processes waiting for a CPU. PostgreSQL or Redis unreachable: says so and exits 0."""

from __future__ import annotations

import os
import platform
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks.corpus import require_corpus
from benchmarks.harness import arguments, emit, print_table, progress, require_service
from benchmarks.monitoring._live_web import Copy, LiveWeb, Site, Text
from benchmarks.monitoring.freshness import Product, load_chapters, paragraphs, seconds_at

WORK = ("sanguoyanyi", "三国演义")
SCHEDULE = 120
INITIAL = 4  # chapters up on every site from the start, registered as work #1
SITES = (  # name, kind, template, validators, table of contents, chapter
    ("plain-a", "plain", "box", True, "/book/{b}/", "/book/{b}/{n}.html"),
    ("plain-b", "plain", "article", False, "/read/{b}/", "/read/{b}/{n}/"),
    ("limited", "ratelimited", "split", True, "/txt/{b}/", "/txt/{b}/{n}.htm"),
)
TARGET_DETECT_MEDIAN = 60.0
TARGET_RATE = 0.1
BEFORE = {"detect_median_seconds": 90.0, "requests_per_second_per_site": 0.083}
"""The issue's figures with 2-minute schedules (before release pacing)."""


@dataclass
class Mode:
    """One side of the run: its product, its web and what happened."""

    name: str
    env: dict[str, str]
    web: LiveWeb
    product: Product | None = None
    releases: list[float] = field(default_factory=list)  # wall times the releases were registered
    released: list[Copy] = field(default_factory=list)
    error: str = ""


def build_web(initial: list[Text], sites: int) -> tuple[LiveWeb, list[Site]]:
    """The live web: ``sites`` sites, each with the initial chapters up from the start (book 1)."""
    web = LiveWeb(duration=3600.0)
    made = []
    for name, kind, template, validators, toc, chapter in SITES[:sites]:
        site = Site(web, name, kind, template=template, validators=validators, toc=toc, chapter=chapter)
        site.books[1] = WORK[1]
        for number, text in enumerate(initial, 1):
            site.add(1, number, text, [(0.0, "up")])
        web.sites[name] = site
        made.append(site)
    return web, made


def matched_sites(product: Product) -> set[str]:
    """Site keys (``127.0.0.1:<port>``) holding a page the product matched."""
    from sqlalchemy import text

    from fptrack.core.settings import Settings
    from fptrack.storage.db import create_engine_for

    engine = create_engine_for(Settings(database_url=product.database_url))
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT DISTINCT p.host FROM matches m JOIN pages p ON p.id = m.page_id")
            )
            return {str(host) for (host,) in rows}
    finally:
        engine.dispose()


def first_seen_by_url(product: Product) -> tuple[dict[str, float], dict[str, int]]:
    """The earliest ``first_seen`` of a match per page URL, and the crawls (jobs) per site key."""
    from sqlalchemy import text

    from fptrack.core.settings import Settings
    from fptrack.storage.db import create_engine_for

    engine = create_engine_for(Settings(database_url=product.database_url))
    try:
        with engine.connect() as connection:
            seen = connection.execute(
                text(
                    "SELECT p.url, min(m.first_seen) FROM matches m JOIN pages p ON p.id = m.page_id "
                    "GROUP BY p.url"
                )
            )
            first = {str(url): at.timestamp() for url, at in seen}
            jobs = connection.execute(
                text(
                    "SELECT s.host, count(*) FROM crawl_jobs j JOIN sites s ON s.id = j.site_id "
                    "GROUP BY s.host"
                )
            )
            return first, {str(host): int(count) for host, count in jobs}
    finally:
        engine.dispose()


def run_mode(
    mode: Mode,
    args: Any,
    initial_file: str,
    chapters: list[tuple[str, str]],
    delays: list[list[float]],
    stop: threading.Event,
) -> None:
    """One mode from start to end (its own thread): set up, warm up, release, watch."""
    web = mode.web
    try:
        product = mode.product = Product(args.pg_url, args.redis, mode.env, args.keep)
        progress(f"{mode.name}: database {product.database}, queue fresh-{product.token}")
        product.cli("init")
        path = product.data / "work.txt"
        path.write_text(initial_file, encoding="utf-8")
        progress(f"{mode.name}: {product.cli('works', 'add', str(path), '--title', WORK[1]).strip()}")
        for site in web.sites.values():
            product.cli(
                "sites", "add", site.name, site.base + "/", "--schedule", f"{SCHEDULE}", "--allow-private"
            )
        web.start()
        product.start_worker()
        keys = {site.key for site in web.sites.values()}
        deadline = time.time() + args.warmup
        while not stop.is_set() and time.time() < deadline and not keys <= matched_sites(product):
            time.sleep(5)
        matched = len(matched_sites(product) & keys)
        waited = time.time() - (web.t0 or 0)
        progress(
            f"{mode.name}: copies matched on {matched}/{len(keys)} sites after {waited:.0f} s; releasing"
        )
        assert web.t0 is not None
        for index, (title, text) in enumerate(chapters):
            if stop.is_set():
                return
            if index:
                time.sleep(max(0.0, mode.releases[-1] + args.every - time.time()))
            chapter = product.data / f"release{index}.txt"
            chapter.write_text(text, encoding="utf-8")
            product.cli("works", "add", str(chapter), "--title", f"{WORK[1]} {title}", "--release-of", "1")
            released = time.time()
            mode.releases.append(released)
            for site, delay in zip(web.sites.values(), delays[index], strict=False):
                copy = next(c for c in site.copies if c.number == INITIAL + index + 1)
                copy.events = [(released + delay - web.t0, "up")]
                mode.released.append(copy)
        end = max(web.t0 + e[0][0] for e in (c.events for c in mode.released)) + args.tail
        while not stop.is_set() and time.time() < end:
            time.sleep(2)
        product.stop_worker()
    except Exception as error:  # noqa: BLE001 - the other mode goes on; the report says what failed
        mode.error = f"{type(error).__name__}: {error}"[:500]
        stop.set()


def figures(mode: Mode) -> dict[str, Any]:
    web, product = mode.web, mode.product
    assert product is not None and web.t0 is not None
    first, jobs = first_seen_by_url(product)
    delays = []
    for copy in mode.released:
        site = web.sites[copy.site]
        url = f"{site.base}{copy.path}"
        appeared = web.t0 + copy.events[0][0]
        if url in first:
            delays.append(first[url] - appeared)
    requests = web.requests()
    start, end = (mode.releases[0] if mode.releases else web.t0), time.time()
    per_site: list[dict[str, Any]] = []
    for site in web.sites.values():
        mine = [r for r in requests if r.site == site.name]
        part = [r for r in mine if r.at >= start]
        crawls = jobs.get(site.key, 0)
        per_site.append({
            "site": site.name,
            "requests": len(mine),
            "requests_release_part": len(part),
            "rate_release_part": len(part) / max(1.0, end - start),
            "rate_whole_run": len(mine) / max(1.0, end - web.t0),
            "crawls": crawls,
            "requests_per_crawl": len(mine) / crawls if crawls else None,
        })  # fmt: skip
    rates = [s["rate_release_part"] for s in per_site]
    costs = [s["requests_per_crawl"] for s in per_site if s["requests_per_crawl"]]
    return {
        "copies": len(mode.released),
        "found": len(delays),
        "detect_median_seconds": seconds_at(delays, 50),
        "detect_p90_seconds": seconds_at(delays, 90),
        "requests_per_second_per_site": round(sum(rates) / len(rates), 3) if rates else None,
        "requests_per_crawl": round(sum(costs) / len(costs), 2) if costs else None,
        "sites": per_site,
        "error": mode.error,
    }


def day_projection(paced: dict[str, Any], peer: dict[str, Any], pace: Any) -> dict[str, float] | None:
    """Requests a second per site over a day with one release, from the measured requests per crawl: the
    paced mode's crawls of the window, the back-off's crawls the rest of the day at the peer's cost; against
    720 crawls at the peer's cost (module docstring). ``pace``: the paced mode's :class:`ReleasePace`."""
    from fptrack.jobs.releases import quiet_stretch

    window_cost, plain_cost = paced["requests_per_crawl"], peer["requests_per_crawl"]
    if not window_cost or not plain_cost:
        return None
    stretch = quiet_stretch(SCHEDULE, 1.0, pace)
    window_crawls = pace.window / pace.every
    rest_crawls = (86400 - pace.window) / (SCHEDULE * stretch)
    return {
        "paced": round((window_crawls * window_cost + rest_crawls * plain_cost) / 86400, 3),
        "peer": round(86400 / SCHEDULE * plain_cost / 86400, 3),
        "quiet_every_seconds": round(SCHEDULE * stretch, 1),
    }


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")


def main(argv: list[str] | None = None) -> None:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    parser = arguments(__doc__, "1 site, 1 release (about 7 minutes on a busy machine)")
    parser.add_argument("--sites", type=int, help=f"pirate sites [{len(SITES)}; quick 1]")
    parser.add_argument("--releases", type=int, help="releases of a new chapter [3; quick 1]")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between two releases [60]")
    parser.add_argument("--delay-max", type=float, default=90.0, help="a copy appears 5 s to this after [90]")
    parser.add_argument("--tail", type=float, default=150.0, help="seconds watched after the last copy [150]")
    parser.add_argument("--warmup", type=float, default=240.0, help="seconds at most for the first matches")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the paced mode's product",
    )
    parser.add_argument("--keep", action="store_true", help="keep the data folders and worker logs")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("FPTRACK_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12", help="broker (queues named per run)")
    args = parser.parse_args(argv)
    sites = args.sites or (1 if args.quick else len(SITES))
    count = args.releases or (1 if args.quick else 3)
    require_service("releases", "PostgreSQL", args.pg_url, 5432)
    require_service("releases", "Redis", args.redis, 6379)
    require_corpus("releases")

    loaded = load_chapters(WORK[0], 1, INITIAL + count)
    initial = [Text(f"{WORK[0]}:{n}", t, paragraphs(x)) for n, t, x in loaded[:INITIAL]]
    initial_file = "\n\n".join(f"{t}\n{x}" for _, t, x in loaded[:INITIAL])
    later = [(t, f"{t}\n{x}") for _, t, x in loaded[INITIAL:]]
    rng = random.Random(args.seed)
    delays = [[round(rng.uniform(5, args.delay_max), 1) for _ in range(sites)] for _ in later]
    paced_env = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith("FPTRACK_"):
            parser.error(f"--env wants FPTRACK_NAME=VALUE, got {item!r}")
        paced_env[name] = value
    paced_name = "release pacing (" + (" ".join(args.env) or "defaults") + ")"
    modes = []
    for name, env in ((paced_name, paced_env), ("pacing off (peer)", {"FPTRACK_RELEASE_WINDOW": "0"})):
        web, made = build_web(initial, sites)
        for site in made:
            for number, (title, text) in enumerate(later, len(initial) + 1):
                site.add(
                    1, number, Text(f"{WORK[0]}:{number}", title, paragraphs(text.split("\n", 1)[1])), []
                )
        modes.append(Mode(name, env, web))
    stop = threading.Event()
    for mode in modes:
        mode.web.serve()
    threads = [
        threading.Thread(target=run_mode, args=(m, args, initial_file, later, delays, stop))
        for m in modes
    ]  # fmt: skip
    started = time.time()
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=1)
        results = {mode.name: figures(mode) for mode in modes}
    except BaseException:
        stop.set()
        raise
    finally:
        for mode in modes:
            mode.web.stop()
            if mode.product is not None:
                mode.product.cleanup()
    paced, peer = results[modes[0].name], results[modes[1].name]
    from fptrack.core.settings import Settings
    from fptrack.jobs.releases import ReleasePace

    pace = ReleasePace.from_settings(Settings.from_env(paced_env))
    projection = day_projection(paced, peer, pace)
    print(
        f"releases: {sites} loopback site(s), {count} release(s) {args.every:g} s apart, copies 5-"
        f"{args.delay_max:g} s after each, schedules {SCHEDULE} s, every other setting at its default; both "
        f"modes side by side in {time.time() - started:.0f} s; {platform.machine()}, {os.cpu_count()} cores "
        "shared with other sessions"
    )
    rows = []
    for name, f in results.items():
        rows.append([
            name, f"{f['found']}/{f['copies']}",
            str(f["detect_median_seconds"]), str(f["detect_p90_seconds"]),
            str(f["requests_per_second_per_site"]), str(f["requests_per_crawl"]),
            " ".join(str(s["crawls"]) for s in f["sites"]), f["error"] or "-",
        ])  # fmt: skip
    print_table(
        "time to detect a released chapter's copy, and requests per site from the first release on",
        ["mode", "found", "detect median s", "detect p90 s", "req/s per site", "req per crawl", "crawls",
         "error"],
        rows,
    )  # fmt: skip
    if projection:
        print_table(
            "a day with one release (computed from the requests per crawl measured above)",
            ["mode", "req/s per site", "crawls outside the window every"],
            [["release pacing", str(projection["paced"]), f"{projection['quiet_every_seconds']:g} s"],
             ["pacing off", str(projection["peer"]), f"{SCHEDULE} s"]],
        )  # fmt: skip
    emit({
        "benchmark": "releases",
        "quick": args.quick,
        "sites": sites,
        "releases": count,
        "seed": args.seed,
        "paced_env": paced_env,
        "targets": {
            "detect_median_seconds": TARGET_DETECT_MEDIAN, "requests_per_second_per_site": TARGET_RATE,
        },
        "before": BEFORE,
        "paced": paced,
        "peer": peer,
        "day_projection": projection,
        "paced_meets_detect_target": (paced["detect_median_seconds"] or 1e9) <= TARGET_DETECT_MEDIAN,
        "paced_meets_rate_target_in_run": (paced["requests_per_second_per_site"] or 1e9) <= TARGET_RATE,
    })  # fmt: skip


if __name__ == "__main__":
    main()
