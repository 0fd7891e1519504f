"""Freshness of monitoring: a live pirate web of our own on loopback (``_live_web.py``: copies appearing and
disappearing, a mirror, a rate-limited site, a script-built site, a site that moves chapters), watched for
``--duration`` seconds by the product's real processes (``fptrack worker --beat`` on Redis and a fresh
PostgreSQL database), then judged against the web's ground truth.

    python -m benchmarks.monitoring.freshness           # 20 minutes, 2-minute schedules, 24 chapters a site
    python -m benchmarks.monitoring.freshness --quick   # 30 seconds, 10-second schedules, 2 chapters a site
    python -m benchmarks.monitoring.freshness --duration 300 --schedule 60 --env FPTRACK_RECHECK_AFTER=60

What runs: ``fptrack init``, ``fptrack works add`` (chapters of ../shared/corpus, read at run time, never
stored), ``fptrack sites add NAME URL --schedule 2m --allow-private`` for each site (defaults otherwise), then
``fptrack worker --beat`` for the run, with ``FPTRACK_RECHECK_EVERY=15``, ``FPTRACK_RECHECK_YOUNG_EVERY``
(the re-check period: 120 s, quick 60 s), ``FPTRACK_RECHECK_CONFIRM_AFTER=20``, ``FPTRACK_SCHEDULE_EVERY=10``
and any ``--env NAME=VALUE``. Settings the product does not know yet are ignored by it. The run's queues are
named after a random token, so tests sharing the Redis server never see its tasks.

What the product recorded is read through its CLI (``fptrack matches --status all --format json`` and
``fptrack takedowns --format json``, also polled every ``--poll`` seconds during the run so that a takedown
cleared later by the copy's return, or a match dropped, is still seen), and through one database query,
:func:`copied_text_missing`.

Figures (per site and overall): recall (copies ever up that the product matched at the end), precision, time
to detect (the match's first_seen minus the copy's appearance; copies up from the start appear when the worker
starts), removals recorded within two re-check periods (of the removals of copies the product had matched
before they were removed; ``taken_down_at`` minus the removal), false takedowns (a ``taken_down_at`` while the
copy was up at that URL, the whole second the CLI shows), requests per distinct URL (robots.txt left out), the
most requests within one second to one site, requests inside a Retry-After window, matches left without their
copied text, matches dropped (seen during the run, gone at the end). Prints the tables with the issue's
targets and its "before" figures, and ends with one JSON line. PostgreSQL or Redis unreachable: says so and
exits 0 without figures."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.corpus import CORPUS, require_corpus
from benchmarks.harness import ROOT, arguments, emit, percentile, print_table, progress, require_service
from benchmarks.monitoring._live_web import RATE_LIMIT, Copy, LiveWeb, Text, build_live_web

BASELINE = {
    "recall": 0.833,
    "detect_median_seconds": 77.0,
    "requests_per_url": 7.2,
    "requests_in_retry_after": 184,
    "max_requests_per_second": 28,
}
"""The issue's "before" figures (its max requests per second was 24-28: the ratio is against 28)."""

RECORDED_TO = 1.0  # seconds: the resolution of the times the CLI's JSON gives (storage.models.iso_utc)

WORKS = (("sanguoyanyi", "三国演义"), ("xiyouji", "西游记"))
INNOCENT = "shuihuzhuan"  # never registered
SOURCE = "tennessine"


def load_chapters(work: str, first: int, count: int) -> list[tuple[int, str, str]]:
    """``(number, title, text)`` of chapters ``first`` .. ``first + count - 1`` of a corpus work."""
    out = []
    with (CORPUS / "zh_novels" / f"{work}__{SOURCE}.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            number = int(row["chapter"])
            if first <= number < first + count:
                out.append((number, row["title"].strip(), row["text"]))
    return out


def paragraphs(text: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def seconds_at(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile of ``values`` in seconds, to a tenth; None when there are none (JSON null)."""
    return round(percentile(values, q), 1) if values else None


def parse_time(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


# --- what the product holds


_CJK = re.compile(r"[\u3400-\u9fff]")


def _grams(text: str, n: int = 8) -> set[str]:
    chars = "".join(_CJK.findall(text))
    return {chars[i : i + n] for i in range(len(chars) - n + 1)}


def copied_text_missing(database_url: str) -> list[int]:
    """Ids of the matches whose copied text the product no longer holds: the text a match rests on (its kept
    page version, else its page's current text: ``storage.match_life.evidence_of``, what the admin and the
    evidence bundle show) is empty, or a span of the match (``[page_start, page_end, work_start, work_end]``)
    points at text that shares less than 30 % of its 8-character runs with the chapter text it is said to copy
    (the copy overwritten by a later fetch, a removal notice say)."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from fptrack.core.settings import Settings
    from fptrack.storage.db import create_engine_for
    from fptrack.storage.match_life import evidence_of
    from fptrack.storage.models import Match, Work

    engine = create_engine_for(Settings(database_url=database_url))
    missing = []
    try:
        with Session(engine) as session:
            works = {int(i): str(t) for i, t in session.execute(select(Work.id, Work.text))}
            for match in session.scalars(select(Match).order_by(Match.id)):
                text = evidence_of(session, match).text
                if not (text or "").strip():
                    missing.append(int(match.id))
                    continue
                work_text = works[match.work_id]
                for page_start, page_end, work_start, work_end in match.spans or []:
                    original = _grams(work_text[work_start:work_end])
                    copied = _grams(text[page_start:page_end])
                    if original and len(original & copied) < 0.3 * len(original):
                        missing.append(int(match.id))
                        break
    finally:
        engine.dispose()
    return missing


def recheck_fetches(database_url: str) -> dict[str, int]:
    """Fetches of pages holding copies, per site key (``127.0.0.1:<port>``), by the product's own record: each
    is one ``checked_at`` of a page's matches in ``takedown_checks``, made by the re-check or by a crawl that
    fetched a page whose copy was due (incremental re-crawls fetch a known chapter page only then). These are
    the re-check cadence's requests, whatever process sent them; what the server saw minus these is what the
    crawls asked for on their own (entry pages, tables of contents, new links)."""
    from sqlalchemy import text

    from fptrack.core.settings import Settings
    from fptrack.storage.db import create_engine_for

    engine = create_engine_for(Settings(database_url=database_url))
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT host, count(*) FROM (SELECT DISTINCT p.host AS host, m.page_id, c.checked_at "
                    "FROM takedown_checks c JOIN matches m ON m.id = c.match_id "
                    "JOIN pages p ON p.id = m.page_id) AS fetches GROUP BY host"
                )
            ).all()
    finally:
        engine.dispose()
    return {str(host): int(count) for host, count in rows}


class Product:
    """The product's processes for one run: a database, a data folder, a queue name, the worker."""

    def __init__(self, pg_url: str, redis_url: str, extra_env: dict[str, str], keep: bool) -> None:
        from sqlalchemy import create_engine, text

        from fptrack.core.settings import Settings

        self.token = uuid.uuid4().hex[:10]
        self.database = f"fptrack_bench_fresh_{self.token}"
        self.admin = create_engine(Settings(database_url=pg_url).database_url, isolation_level="AUTOCOMMIT")
        with self.admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{self.database}"'))
        self.database_url = urlsplit(pg_url)._replace(path="/" + self.database).geturl()
        self.redis_url = redis_url
        self.keep = keep
        self.data = Path(tempfile.mkdtemp(prefix="fptrack-fresh-"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("FPTRACK_")}
        env.update(FPTRACK_DATA_DIR=str(self.data / "data"), FPTRACK_DATABASE_URL=self.database_url)
        # commands run in-process (no broker); `sites add` checks a schedule against the scheduler's tick
        self.cli_env = {**env, **{k: v for k, v in extra_env.items() if k == "FPTRACK_SCHEDULE_EVERY"}}
        env.update(FPTRACK_BROKER_URL=redis_url, FPTRACK_TASK_QUEUE=f"fresh-{self.token}")
        env.update(extra_env)
        self.worker_env = env
        self.worker: subprocess.Popen[bytes] | None = None
        self.log_path = self.data / "worker.log"

    def cli(self, *args: str, timeout: float = 600) -> str:
        done = subprocess.run([sys.executable, "-m", "fptrack.cli", *args], cwd=ROOT, env=self.cli_env,
                              capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"fptrack {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
        return done.stdout

    def json_lines(self, *args: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.cli(*args, timeout=300).splitlines() if line.strip()]

    def start_worker(self) -> None:
        log = self.log_path.open("wb")
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "fptrack.cli", "worker", "--beat", "--loglevel", "INFO"],
            cwd=ROOT, env=self.worker_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()

    def _stragglers(self) -> list[int]:
        """Processes carrying this run's data folder (unique to it) in their environment: the crawls the
        scheduler started in sessions of their own, which the worker's process group does not hold."""
        marker = f"FPTRACK_DATA_DIR={self.data / 'data'}\0".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if marker in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    def stop_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            try:
                os.killpg(self.worker.pid, signal.SIGTERM)
                self.worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.worker.pid, signal.SIGKILL)
                self.worker.wait(timeout=30)
            except ProcessLookupError:
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self._stragglers()
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 10
            while pids and time.monotonic() < deadline:
                pids = [p for p in pids if Path(f"/proc/{p}").exists() and p in self._stragglers()]
                time.sleep(0.2)

    def worker_log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def cleanup(self) -> None:
        from sqlalchemy import text

        self.stop_worker()
        with self.admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)'))
        self.admin.dispose()
        try:
            import redis

            client = redis.Redis.from_url(self.redis_url)
            for key in list(client.scan_iter(match=f"*{self.token}*")):
                client.delete(key)
            # the results of this run's tasks (the result backend is the broker), by the ids the worker logged
            logged = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
            for task_id in set(re.findall(r"\[([0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})\]", logged)):
                client.delete(f"celery-task-meta-{task_id}")
            client.close()
        except Exception as error:  # noqa: BLE001 - cleanup goes on; say what was left
            progress(f"Redis keys of queue fresh-{self.token} not removed: {error}")
        if self.keep:
            progress(f"kept the data folder and worker log: {self.data}")
        else:
            shutil.rmtree(self.data, ignore_errors=True)


class Recorder:
    """Polls the product's CLI during the run: every match seen (by id, the latest record and the earliest
    first_seen) and every distinct ``taken_down_at`` of each match."""

    def __init__(self, product: Product) -> None:
        self.product = product
        self.matches: dict[int, dict[str, Any]] = {}
        self.takedowns: dict[int, set[float]] = defaultdict(set)
        self.errors: list[str] = []

    def poll(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        matches = self.product.json_lines("matches", "--status", "all", "--format", "json")
        takedowns = self.product.json_lines("takedowns", "--format", "json")
        for record in matches:
            seen = self.matches.get(record["id"])
            if seen is not None and seen["first_seen"] < record["first_seen"]:
                record = {**record, "first_seen": seen["first_seen"]}
            self.matches[record["id"]] = record
        for record in takedowns:
            down = parse_time(record.get("taken_down_at"))
            if down is not None:
                self.takedowns[record["id"]].add(down)
        return matches, takedowns

    def run(self, every: float, until: float, alive: threading.Event) -> None:
        while alive.is_set() and time.time() < until:
            try:
                self.poll()
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as error:
                self.errors.append(str(error)[:300])
            deadline = min(time.time() + every, until)
            while alive.is_set() and time.time() < deadline:
                time.sleep(0.5)


# --- judging


class Judge:
    """The product's matches and takedowns against the web's ground truth."""

    def __init__(self, web: LiveWeb, chapter_keys: dict[tuple[str, str], str]) -> None:
        self.web = web
        self.chapter_keys = chapter_keys  # (work title, chapter title without spaces) -> key

    def key_of(self, record: dict[str, Any]) -> str | None:
        title = "".join(str(record.get("chapter_title", "")).split())
        return self.chapter_keys.get((record["work_title"], title))

    def copy_of(self, page_url: str) -> tuple[str | None, Copy | None]:
        parts = urlsplit(page_url)
        site = self.web.site_of(parts.netloc)
        if site is None:
            return None, None
        copy = next((c for c in site.copies if parts.path in (c.path, c.new_path, c.endpoint)), None)
        return site.name, copy

    def correct(self, record: dict[str, Any]) -> Copy | None:
        """The copy a match is right about, or None (a page that never held that chapter)."""
        _, copy = self.copy_of(record["page_url"])
        if copy is not None and copy.text.registered and copy.text.key == self.key_of(record):
            return copy
        return None


def judge(
    web: LiveWeb,
    judge_: Judge,
    end_matches: list[dict[str, Any]],
    recorder: Recorder,
    missing: list[int],
    period: float,
    rechecked: dict[str, int] | None = None,
) -> dict[str, Any]:
    assert web.t0 is not None
    t0, duration = web.t0, web.duration
    sites = list(web.sites)
    per: dict[str, dict[str, Any]] = {name: {"kind": web.sites[name].kind} for name in sites}

    # recall and time to detect, by (site, chapter): the copy may have moved between URLs
    units: dict[tuple[str, str], float] = {}
    for copy in web.copies():
        if copy.text.registered:
            up = copy.intervals(duration, ("up", "moved301", "moved404"))
            if up:
                key = (copy.site, copy.text.key)
                units[key] = min(units.get(key, duration), up[0][0])
    found_end = {(c.site, c.text.key) for r in end_matches if (c := judge_.correct(r)) is not None}
    first_seen: dict[tuple[str, str], float] = {}
    for record in recorder.matches.values():
        matched = judge_.correct(record)
        seen = parse_time(record["first_seen"])
        if matched is not None and seen is not None:
            key = (matched.site, matched.text.key)
            first_seen[key] = min(first_seen.get(key, seen), seen)
    detect: dict[str, list[float]] = defaultdict(list)
    for key, appeared in units.items():
        if key in first_seen:
            detect[key[0]].append(first_seen[key] - (t0 + appeared))

    # precision over the matches held at the end
    wrong_by_site: dict[str, int] = defaultdict(int)
    right_by_site: dict[str, int] = defaultdict(int)
    for record in end_matches:
        name, _ = judge_.copy_of(record["page_url"])
        bucket = right_by_site if judge_.correct(record) is not None else wrong_by_site
        bucket[name or "(other)"] += 1

    # removals and false takedowns, by URL
    downs_by_url: dict[tuple[str, str], list[float]] = defaultdict(list)
    matched_since: dict[tuple[str, str], float] = {}
    false_takedowns: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for match_id, record in recorder.matches.items():
        matched = judge_.correct(record)
        if matched is None:
            continue
        path = urlsplit(record["page_url"]).path
        seen = parse_time(record["first_seen"]) or 0.0
        url = (matched.site, path)
        matched_since[url] = min(matched_since.get(url, seen), seen)
        up = matched.url_intervals(path, duration)
        for down in sorted(recorder.takedowns.get(match_id, ())):
            downs_by_url[url].append(down)
            t = down - t0
            # the CLI gives times to the second (cut, not rounded): a takedown shown at second S was recorded
            # within [S, S + 1), so it is false only when all of that second lay inside the copy's time up
            if any(start + 2 <= t and t + RECORDED_TO < stop for start, stop in up):
                false_takedowns[matched.site].append({"match": match_id, "path": path, "at": round(t, 1)})
    removals: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for copy in web.copies():
        if not copy.text.registered:
            continue
        for removal in copy.removals():
            at = t0 + removal["at"]
            back = t0 + removal["back"] if removal["back"] is not None else float("inf")
            url = (copy.site, removal["path"])
            # a removal the product had found the copy of, that lasted two re-check periods and left two
            # periods before the end of the run: "recorded within two re-check periods" can be judged
            expected = (
                url in matched_since
                and matched_since[url] < at
                and back - at >= 2 * period
                and t0 + duration - at >= 2 * period
            )
            downs = [d for d in downs_by_url.get(url, []) if at - 1 <= d < back]
            delay = round(min(downs) - at, 1) if downs else None
            removals[copy.site].append({"path": removal["path"], "kind": removal["kind"],
                                        "at": removal["at"], "expected": expected, "delay": delay,
                                        "in_time": delay is not None and delay <= 2 * period})  # fmt: skip

    # requests
    requests = web.requests()
    for name in sites:
        mine = [r for r in requests if r.site == name]
        pages = [r for r in mine if r.path != "/robots.txt"]
        # the re-check cadence's fetches; a script-built page is two requests (the page and its JSON)
        by_recheck = (rechecked or {}).get(web.sites[name].base.split("://", 1)[1], 0)
        by_recheck *= 2 if web.sites[name].kind == "script" else 1
        times = sorted(r.at for r in mine)
        busiest, low = 0, 0
        for high, at in enumerate(times):
            while times[low] <= at - 1.0:
                low += 1
            busiest = max(busiest, high - low + 1)
        site_units = [k for k in units if k[0] == name]
        found = [k for k in site_units if k in found_end]
        delays = detect.get(name, [])
        rem = removals.get(name, [])
        expected = [r for r in rem if r["expected"]]
        rem_delays = [r["delay"] for r in expected if r["delay"] is not None]
        per[name].update(
            copies=len(site_units),
            detected=len(found),
            recall=round(len(found) / len(site_units), 3) if site_units else None,
            matches=right_by_site.get(name, 0) + wrong_by_site.get(name, 0),
            wrong_matches=wrong_by_site.get(name, 0),
            detect_median_seconds=seconds_at(delays, 50),
            detect_p90_seconds=seconds_at(delays, 90),
            removals=len(rem),
            removals_expected=len(expected),
            removals_recorded=sum(r["delay"] is not None for r in expected),
            removals_recorded_in_time=sum(r["in_time"] for r in expected),
            removal_delay_median_seconds=seconds_at(rem_delays, 50),
            removal_delay_max_seconds=max(rem_delays) if rem_delays else None,
            false_takedowns=len(false_takedowns.get(name, [])),
            requests=len(mine),
            urls=len({r.path for r in pages}),
            requests_per_url=round(len(pages) / len({r.path for r in pages}), 2) if pages else None,
            recheck_requests=by_recheck,
            crawl_requests_per_url=(
                round((len(pages) - by_recheck) / len({r.path for r in pages}), 2) if pages else None
            ),
            max_requests_per_second=busiest,
            requests_in_retry_after=sum(r.inside_window for r in mine),
            status_429=sum(r.status == 429 for r in mine),
            status_304=sum(r.status == 304 for r in mine),
        )
    all_delays = [d for values in detect.values() for d in values]
    expected_all = [r for rem in removals.values() for r in rem if r["expected"]]
    rem_delays_all = [r["delay"] for r in expected_all if r["delay"] is not None]
    page_requests = [r for r in requests if r.path != "/robots.txt"]
    distinct = {(r.site, r.path) for r in page_requests}
    right, wrong = sum(right_by_site.values()), sum(wrong_by_site.values())
    end_ids = {r["id"] for r in end_matches}
    overall = {
        "copies": len(units),
        "detected": len(found_end & set(units)),
        "recall": round(len(found_end & set(units)) / len(units), 3) if units else None,
        "recall_ever": round(len(set(first_seen) & set(units)) / len(units), 3) if units else None,
        "precision": round(right / (right + wrong), 3) if right + wrong else None,
        "matches": right + wrong,
        "wrong_matches": wrong,
        "detect_median_seconds": seconds_at(all_delays, 50),
        "detect_p90_seconds": seconds_at(all_delays, 90),
        "removals": sum(len(v) for v in removals.values()),
        "removals_expected": len(expected_all),
        "removals_recorded": len(rem_delays_all),
        "removals_recorded_in_time": sum(r["in_time"] for r in expected_all),
        "removal_delay_median_seconds": seconds_at(rem_delays_all, 50),
        "removal_delay_max_seconds": max(rem_delays_all) if rem_delays_all else None,
        "false_takedowns": sum(len(v) for v in false_takedowns.values()),
        "requests": len(requests),
        "urls": len(distinct),
        "requests_per_url": round(len(page_requests) / len(distinct), 2) if distinct else None,
        "recheck_requests": sum(p["recheck_requests"] for p in per.values()),
        "crawl_requests_per_url": (
            round((len(page_requests) - sum(p["recheck_requests"] for p in per.values())) / len(distinct), 2)
            if distinct
            else None
        ),
        "max_requests_per_second": max((p["max_requests_per_second"] for p in per.values()), default=0),
        "requests_in_retry_after": sum(r.inside_window for r in requests),
        "matches_without_copied_text": len(missing),
        "matches_dropped": len(set(recorder.matches) - end_ids),
    }
    return {
        "overall": overall,
        "sites": per,
        "false_takedown_list": dict(false_takedowns),
        "removal_list": dict(removals),
    }


def targets(figures: dict[str, Any], period: float) -> list[tuple[str, Any, str, bool | None, Any]]:
    """(figure, value, target, passed or None for information, baseline)."""
    o, limited = figures["overall"], figures["sites"].get("limited", {})

    def at_least(value: float | None, bound: float) -> bool:
        return value is not None and value >= bound

    def at_most(value: float | None, bound: float) -> bool:
        return value is not None and value <= bound

    in_time = o["removals_recorded_in_time"] == o["removals_expected"] if o["removals_expected"] else None
    removals = f"{o['removals_recorded_in_time']}/{o['removals_expected']}"
    return [
        ("recall", o["recall"], ">= 0.95", at_least(o["recall"], 0.95), BASELINE["recall"]),
        ("recall, rate-limited site", limited.get("recall"), ">= 0.95", at_least(limited.get("recall"), 0.95),
         None),
        ("precision", o["precision"], "-", None, None),
        ("time to detect, median s", o["detect_median_seconds"], "<= 120",
         at_most(o["detect_median_seconds"], 120), BASELINE["detect_median_seconds"]),
        ("time to detect, p90 s", o["detect_p90_seconds"], "-", None, None),
        (f"removals recorded within {2 * period:g} s", removals, "all", in_time, None),
        ("removal delay, median s", o["removal_delay_median_seconds"], "-", None, None),
        ("removal delay, max s", o["removal_delay_max_seconds"], f"<= {2 * period:g}",
         at_most(o["removal_delay_max_seconds"], 2 * period) if o["removals_expected"] else None, None),
        ("false takedowns", o["false_takedowns"], "0", o["false_takedowns"] == 0, None),
        ("requests per distinct URL, crawls", o["crawl_requests_per_url"], "<= 3",
         at_most(o["crawl_requests_per_url"], 3), BASELINE["requests_per_url"]),
        (f"requests per distinct URL, with re-checks every {period:g} s", o["requests_per_url"], "-", None,
         None),
        ("most requests in 1 s to one site", o["max_requests_per_second"], "-", None,
         BASELINE["max_requests_per_second"]),
        ("requests inside Retry-After", o["requests_in_retry_after"], "0", o["requests_in_retry_after"] == 0,
         BASELINE["requests_in_retry_after"]),
        ("matches without copied text", o["matches_without_copied_text"], "0",
         o["matches_without_copied_text"] == 0, None),
        ("matches dropped during the run", o["matches_dropped"], "0", o["matches_dropped"] == 0, None),
    ]  # fmt: skip


def show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def report(figures: dict[str, Any], period: float) -> list[tuple[str, Any, str, bool | None, Any]]:
    rows = []
    for name, s in [*figures["sites"].items(), ("overall", figures["overall"])]:
        rows.append([
            name, s.get("kind", ""), f"{s['detected']}/{s['copies']}", show(s["recall"]),
            f"{show(s['detect_median_seconds'])}/{show(s['detect_p90_seconds'])}",
            f"{s['removals_recorded_in_time']}/{s['removals_recorded']}/{s['removals_expected']}/{s['removals']}",
            f"{show(s['removal_delay_median_seconds'])}/{show(s['removal_delay_max_seconds'])}",
            str(s["false_takedowns"]), f"{s['matches']}/{s['wrong_matches']}", str(s["requests"]),
            f"{show(s['requests_per_url'])} ({show(s['crawl_requests_per_url'])})",
            str(s["max_requests_per_second"]), str(s["requests_in_retry_after"]),
        ])  # fmt: skip
    print_table(
        "per site (detect s = median/p90; removals = recorded in time/recorded/expected/happened; "
        "matches = held at the end/wrong ones)",
        ["site", "kind", "found", "recall", "detect s", "removals", "delay s med/max", "false td",
         "matches", "requests", "req/URL (crawls)", "max req/s", "in Retry-After"],
        rows,
    )  # fmt: skip
    checks = targets(figures, period)
    ratio_rows = []
    for name, value, target, passed, base in checks:
        ratio = (
            f"{value / base:.2f}"
            if isinstance(value, (int, float)) and isinstance(base, (int, float)) and base
            else "-"
        )
        verdict = "-" if passed is None else ("pass" if passed else "FAIL")
        ratio_rows.append([name, show(value), target, verdict, show(base), ratio])
    print_table(
        "targets (before = the issue's figures; max req/s before was 24-28)",
        ["figure", "value", "target", "", "before", "ratio"],
        ratio_rows,
    )
    return checks


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # unwinds through the clean-up (worker, database)


def main(argv: list[str] | None = None) -> None:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    parser = arguments(__doc__, "30 seconds, 10-second schedules, 2 chapters a site (a smoke run)")
    parser.add_argument("--duration", type=float, help="seconds of monitoring [1200; quick 30]")
    parser.add_argument("--schedule", type=float, help="seconds between a site's crawls [120; quick 10]")
    parser.add_argument("--period", type=float, help="re-check period of a young copy, s [120; quick 10]")
    parser.add_argument("--per-site", type=int, help="registered chapters a site publishes [24; quick 2]")
    parser.add_argument("--innocent", type=int, help="innocent chapters a site publishes [6; quick 1]")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--poll", type=float, default=30.0, help="seconds between two reads of the CLI")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="more worker env")
    parser.add_argument("--keep", action="store_true", help="keep the data folder and the worker log")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("FPTRACK_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12", help="broker (queues named per run)")
    args = parser.parse_args(argv)
    quick = args.quick
    duration = args.duration or (30.0 if quick else 1200.0)
    schedule = args.schedule or (10.0 if quick else 120.0)
    period = args.period or (10.0 if quick else 120.0)
    per_site = args.per_site or (2 if quick else 24)
    innocent_count = args.innocent or (1 if quick else 6)
    if quick:
        args.poll = min(args.poll, 5.0)
    require_service("freshness", "PostgreSQL", args.pg_url, 5432)
    require_service("freshness", "Redis", args.redis, 6379)
    require_corpus("freshness")
    extra = {
        "FPTRACK_RECHECK_EVERY": "15",
        "FPTRACK_RECHECK_YOUNG_EVERY": f"{period:g}",
        "FPTRACK_RECHECK_CONFIRM_AFTER": "20",
        "FPTRACK_SCHEDULE_EVERY": "10",
    }
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error(f"--env wants NAME=VALUE, got {item!r}")
        extra[name] = value

    # the texts: registered works (one in quick mode), innocent chapters of a novel never registered
    work_count, chapters = (1, 8) if quick else (2, 40)
    works: dict[str, list[Text]] = {}
    files: list[tuple[str, str]] = []
    chapter_keys: dict[tuple[str, str], str] = {}
    for slug, title in WORKS[:work_count]:
        loaded = load_chapters(slug, 1, chapters)
        works[title] = [Text(f"{slug}:{n}", t, paragraphs(text)) for n, t, text in loaded]
        files.append((title, "\n\n".join(f"{t}\n{text}" for _, t, text in loaded)))
        chapter_keys.update({(title, "".join(t.split())): f"{slug}:{n}" for n, t, _ in loaded})
    innocent = [Text(f"innocent:{n}", t, paragraphs(text)) for n, t, text in load_chapters(INNOCENT, 1, 20)]
    web = build_live_web(works, innocent, duration=duration, schedule=schedule, period=period,
                         per_site=per_site, innocent_per_site=innocent_count, seed=args.seed)  # fmt: skip
    chromium = bool(shutil.which("chromium") or shutil.which("chromium-browser"))
    if not chromium:
        progress("Chromium not found: the product cannot render the script-built site's chapters")

    web.serve()
    product: Product | None = None
    alive = threading.Event()
    alive.set()
    try:
        product = Product(args.pg_url, args.redis, extra, args.keep)
        progress(f"database {product.database}, data {product.data}, queue fresh-{product.token}")
        product.cli("init")
        for index, (title, text) in enumerate(files):
            path = product.data / f"work{index}.txt"
            path.write_text(text, encoding="utf-8")
            progress(product.cli("works", "add", str(path), "--title", title).strip())
            path.unlink()
        for site in web.sites.values():
            product.cli("sites", "add", site.name, site.base + "/", "--schedule", f"{schedule:g}",
                        "--allow-private")  # fmt: skip
        recorder = Recorder(product)
        web.start()
        assert web.t0 is not None
        product.start_worker()
        progress(f"monitoring for {duration:g} s: {len(web.copies())} copies on {len(web.sites)} sites")
        poller = threading.Thread(
            target=recorder.run, args=(args.poll, web.t0 + duration, alive), daemon=True
        )
        poller.start()
        while time.time() < web.t0 + duration:
            if product.worker is not None and product.worker.poll() is not None:
                progress(f"the worker exited ({product.worker.returncode}):\n{product.worker_log_tail()}")
                break
            time.sleep(2)
        alive.clear()
        poller.join(timeout=300)
        progress("stopping the worker")
        product.stop_worker()
        end_matches, _ = recorder.poll()
        missing = copied_text_missing(product.database_url)
        rechecked = recheck_fetches(product.database_url)
        figures = judge(web, Judge(web, chapter_keys), end_matches, recorder, missing, period, rechecked)
    finally:
        alive.clear()
        web.stop()
        if product is not None:
            product.cleanup()

    print(
        f"freshness: {len(web.sites)} loopback sites, {len(web.copies())} copies, "
        f"{duration:g} s of monitoring, schedules {schedule:g} s, re-check period {period:g} s, "
        f"rate limit {RATE_LIMIT}/s; "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        f"{'' if chromium else '; no Chromium here'}"
    )
    if recorder.errors:
        print(f"CLI reads that failed during the run: {len(recorder.errors)} (first: {recorder.errors[0]})")
    checks = report(figures, period)
    emit(
        {
            "benchmark": "freshness",
            "quick": quick,
            "duration": duration,
            "schedule": schedule,
            "period": period,
            "seed": args.seed,
            "env": extra,
            "chromium": chromium,
            **figures["overall"],
            "sites": figures["sites"],
            "false_takedown_list": figures["false_takedown_list"],
            "removal_list": figures["removal_list"],
            "baseline": BASELINE,
            "targets": {name: passed for name, _, _, passed, _ in checks if passed is not None},
            "all_pass": all(passed is not False for _, _, _, passed, _ in checks),
        }
    )


if __name__ == "__main__":
    main()
