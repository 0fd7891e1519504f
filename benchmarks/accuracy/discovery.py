"""Discovery and pirate networks on a generated web: from one known pirate site per network, how many of the
other clone sites does ``jobs.discovery`` find, at what cost, and does ``compare.networks`` group them right?

    python -m benchmarks.accuracy.discovery            # the 40-site web, on PostgreSQL (a scratch database)
    python -m benchmarks.accuracy.discovery --quick    # 3 chapters a work, one discovery round
    python -m benchmarks.accuracy.discovery --scale 1000000  # and the near-duplicate look-up, 1M Simhashes

The web, on loopback (one HTTP server per site), built from ``../shared/corpus``:

- registered: three works, chapters 1-12 of 西游记, 三国演义 and 水浒传 (the ``tennessine`` copies);
- 4 pirate networks of 3, 4, 5 and 6 clone sites. Each network has a content source of its own: another
  real e-text of the novels (``rain8``, the ``hexhero`` family, Project Gutenberg's Traditional copy) or the
  registered text with 5 % random edits and the source's watermark lines; every network pirates all three
  works (the hard case: the same chapters on every network). Each clone serves its source's text under its
  own template (5 templates) with its own ads spliced between and inside paragraphs, and misses ~12 % of the
  chapters at random. Each home page lists its chapters, links two sister sites (友情链接), announces one
  more as its new domain (新域名) half of the time, links an unrelated site, and a fifth of them link a pirate
  site of another network;
- 10 unrelated sites (news articles from the corpus) and 2 licensed partner sites (the registered text,
  licensed for every work);
- a fake search provider (SerpAPI's format, engine=baidu) answering every query of a work with a mix: each
  pirate site carrying the work with probability 0.25, the licensed partners, two unrelated sites.

The run: the licensed partners are crawled (their pages are stored), one site per network is monitored and
crawled; then up to three rounds of ``run_discovery`` (search in the first round only), after each of which
a person accepts every probed candidate scoring >= 0.5 and the accepted sites are crawled (crawls fetch the
home page and every chapter, store the pages and run the crawl stage, ``compare.service.process_pages``).
Reported: pirate sites discovered / all to discover, false candidates (probed as copying while not a pirate
site), candidates proposed, requests per discovered site (every request discovery made: the seeds' pages,
robots.txt, probes of every candidate, clean ones included), network membership precision and recall (pairs
of crawled sites: same network or not) for the product's rule and two alternatives, and the near-duplicate
step's cost per page. ``--scale N`` loads N random Simhashes with ``benchmarks/scale/index.py``'s loader
(binary COPY, indexes rebuilt) into a second scratch database and times ``simhash_candidates`` for the
generated web's real page Simhashes (p50, p99).

Prints tables; the last line is JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session

from benchmarks.corpus import iter_chapters, news_texts, require_corpus
from benchmarks.harness import arguments, print_table
from benchmarks.pirate_web import random_edits, splice_ads
from fptrack.compare import service
from fptrack.compare.licensing import add_licensed_site
from fptrack.compare.networks import (
    components,
    find_networks,
    linked_pairs,
    network_layout,
    observe_pages,
    page_simhash,
)
from fptrack.compare.works import register_work
from fptrack.core.settings import Settings
from fptrack.crawler.extract import extract_main_text
from fptrack.jobs.discovery import accept_candidate, anchors, make_fetcher, run_discovery
from fptrack.jobs.search_providers import configured_providers
from fptrack.jobs.sites import SiteSpec, add_site
from fptrack.research.minhash import MinHashParams, estimate_jaccard, lsh_band_keys, minhash_signature
from fptrack.storage.db import create_engine_for, migrate, session_factory, session_scope
from fptrack.storage.index import to_unsigned64
from fptrack.storage.models import DiscoveryCandidate, Fingerprint, Page, Site
from fptrack.storage.simhash_index import simhash_candidates
from testbed.search_provider import serve_search_provider
from testbed.sites import TEMPLATES, render_chapter

WORKS = ("xiyouji", "sanguoyanyi", "shuihuzhuan")
TITLES = {"xiyouji": "西游记", "sanguoyanyi": "三国演义", "shuihuzhuan": "水浒传"}
# each network's content source: (corpus source per work, or None for the registered text edited)
SOURCES = (
    {"xiyouji": "rain8_liangwe", "sanguoyanyi": "rain8_liangwe", "shuihuzhuan": "rain8_liangwe"},
    {"xiyouji": "xstt5_hexhero", "sanguoyanyi": "webnovel_hexhero", "shuihuzhuan": "tianyabook_hexhero"},
    None,
    {"xiyouji": "pg_crawl_hant", "sanguoyanyi": "pg_crawl_hant", "shuihuzhuan": "pg_crawl_hant"},
)
NETWORK_SIZES = (4, 5, 6, 6)
UNRELATED = 10
OTHER_FICTION = 6
LICENSED = 3
ACCEPT_SCORE = 0.5
SOURCE_EDITS = 0.04
PRODUCT_RULE = "product: close pages (<= 2 bits), >= 3 and >= 50 %"


# ------------------------------------------------------------------------------------------------- the web


@dataclass(frozen=True)
class Candidate:
    host: str
    state: str
    requests: int
    source: str
    score: float


@dataclass
class FakeSite:
    kind: str  # pirate / unrelated / licensed
    network: int | None
    server: ThreadingHTTPServer
    pages: dict[str, bytes] = field(default_factory=dict)
    requests: int = 0

    @property
    def key(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.key}"


def _serve(site: FakeSite) -> None:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            site.requests += 1
            body = site.pages.get(urlsplit(self.path).path)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    site.server.RequestHandlerClass = Handler
    threading.Thread(target=site.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()


def _html(body: str, title: str = "") -> bytes:
    return (
        f"<html><head><meta charset='utf-8'><title>{title}</title></head><body>{body}</body></html>".encode()
    )


@dataclass
class Web:
    sites: list[FakeSite]
    registered: dict[str, list[str]]  # work -> chapter texts (the registered ones)
    seed: int

    def of(self, kind: str) -> list[FakeSite]:
        return [s for s in self.sites if s.kind == kind]

    def by_key(self) -> dict[str, FakeSite]:
        return {s.key: s for s in self.sites}


def _chapters(source: str, chapters: int) -> dict[str, list[str]]:
    wanted = {(w, source) for w in WORKS}
    found: dict[str, dict[int, str]] = defaultdict(dict)
    for chapter in iter_chapters(f"*__{source}.jsonl") if source != "*" else iter_chapters():
        if (chapter.work_id, chapter.source_id) in wanted and 1 <= chapter.chapter <= chapters:
            found[chapter.work_id][chapter.chapter] = chapter.text
    return {w: [found[w][c] for c in sorted(found[w])] for w in found}


def build_web(seed: int, chapters: int) -> Web:
    rng = random.Random(seed)
    registered = _chapters("tennessine", chapters)
    pool = "".join(
        sorted({ch for texts in registered.values() for t in texts for ch in t if "\u4e00" <= ch <= "\u9fff"})
    )
    sources: list[dict[str, list[str]]] = []
    for number, spec in enumerate(SOURCES):
        if spec is None:
            base = registered
        else:
            base = {}
            for work, source in spec.items():
                base.update({w: t for w, t in _chapters(source, chapters).items() if w == work})
        # the content source's own text: its typos and its watermark (what every clone of the network copies)
        edit = random.Random(seed * 31 + number)
        mark = f"天才一秒记住本站地址：www.source{number}.com 最快更新！"
        sources.append(
            {
                w: [mark + "\n" + random_edits(t, SOURCE_EDITS, edit, pool) for t in texts]
                for w, texts in base.items()
            }
        )
    sites: list[FakeSite] = []
    for network, size in enumerate(NETWORK_SIZES):
        for _ in range(size):
            sites.append(
                FakeSite("pirate", network, ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler))
            )
    for _ in range(UNRELATED):
        sites.append(
            FakeSite("unrelated", None, ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler))
        )
    for kind, count in (("licensed", LICENSED), ("other", OTHER_FICTION)):
        for _ in range(count):
            sites.append(FakeSite(kind, None, ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)))
    unregistered = _chapters("tennessine", chapters + 6)
    news = news_texts()
    rng.shuffle(news)
    pirates = [s for s in sites if s.kind == "pirate"]
    unrelated = [s for s in sites if s.kind == "unrelated"]
    others = [s for s in sites if s.kind == "other"]
    for index, site in enumerate(sites):
        if site.kind == "unrelated":
            articles = news[index * 5 : index * 5 + 5]
            links = "".join(f'<li><a href="/news/{i}.html">新闻 {i}</a></li>' for i in range(len(articles)))
            site.pages["/"] = _html(f"<h1>本地新闻</h1><ul>{links}</ul>", "新闻")
            for i, article in enumerate(articles):
                body = "".join(f"<p>{p}</p>" for p in article.split("\n") if p.strip())
                site.pages[f"/news/{i}.html"] = _html(f"<article>{body}</article>", "新闻")
            continue
        first = 1
        if site.kind == "other":  # fiction that is not registered: the same novels' next chapters
            texts, first = {w: t[chapters:] for w, t in unregistered.items()}, chapters + 1
        else:
            texts = registered if site.kind == "licensed" else sources[site.network or 0]
        template = "p-paragraphs" if site.kind == "licensed" else TEMPLATES[index % len(TEMPLATES)]
        ads = random.Random(seed * 1000 + index)
        listing = []
        for work in WORKS:
            for number, chapter in enumerate(texts.get(work, []), start=first):
                if site.kind == "pirate" and ads.random() < 0.12:
                    continue  # a chapter this clone misses
                title = f"第{number}章"
                paragraphs = [p for p in chapter.split("\n") if p.strip()]
                if site.kind == "pirate":
                    paragraphs = splice_ads(paragraphs, ads)
                path = f"/book/{work}/{number}.html"
                site.pages[path] = render_chapter(f"{TITLES[work]} {title}", paragraphs, template=template)
                listing.append(f'<li><a href="{path}">{TITLES[work]} {title}</a></li>')
        extra = ""
        if site.kind == "pirate":
            sisters = [s for s in pirates if s.network == site.network and s is not site]
            friends = rng.sample(sisters, min(2, len(sisters)))
            extra += "<div class='friendlinks'>友情链接：" + "".join(
                f'<a href="{s.url}/">书友{j}</a>' for j, s in enumerate(friends)
            )
            extra += f'<a href="{rng.choice(unrelated).url}/">本地新闻</a>'
            extra += f'<a href="{rng.choice(others).url}/">精品小说</a>'
            if rng.random() < 0.2:
                other = rng.choice([s for s in pirates if s.network != site.network])
                extra += f'<a href="{other.url}/">免费小说</a>'
            extra += "</div>"
            rest = [s for s in sisters if s not in friends]
            if rest and rng.random() < 0.5:
                new = rng.choice(rest)
                extra = (
                    f'<p class="notice">本站新域名：<a href="{new.url}/">{new.key}</a>，请牢记！</p>' + extra
                )
        site.pages["/"] = _html(f"<h1>小说阅读网</h1>{extra}<ul>{''.join(listing)}</ul>", "小说阅读网")
    for site in sites:
        _serve(site)
    return Web(sites, registered, seed)


def search_results(web: Web) -> Callable[[str], list[tuple[str, str, str]]]:
    """The fake provider's answers: per query, pirates carrying the work (p = 0.25 each), the licensed
    partners, two unrelated sites; the same answer for the same query."""
    firsts = {w: [t[:20] for t in texts] for w, texts in web.registered.items()}

    def answer(query: str) -> list[tuple[str, str, str]]:
        work = next((w for w in WORKS if TITLES[w] in query), None)
        if work is None:
            bare = query.strip('"')
            work = next((w for w in WORKS if any(bare[:8] in f or f[:8] in bare for f in firsts[w])), None)
        rng = random.Random(f"{web.seed}:{query}")
        rows: list[tuple[str, str, str]] = []
        if work is not None:
            for site in web.of("pirate"):
                if rng.random() < 0.25:
                    path = next((p for p in site.pages if p.startswith(f"/book/{work}/")), "/")
                    rows.append((site.url + path, f"{TITLES[work]}最新章节", ""))
            rows += [
                (s.url + f"/book/{work}/1.html", f"{TITLES[work]} 正版阅读", "") for s in web.of("licensed")
            ]
        rows += [(s.url + "/", "新闻", "") for s in rng.sample(web.of("unrelated"), 2)]
        rows += [(s.url + "/", "小说", "") for s in rng.sample(web.of("other"), 1)]
        rng.shuffle(rows)
        return rows[:10]

    return answer


# ---------------------------------------------------------------------------------------------- the run


def crawl(sessions: object, settings: Settings, site_id: int, base: str) -> int:
    """What a crawl of a generated site does: its home page, then every chapter it lists, stored and run
    through the crawl stage. Returns the pages stored."""
    fetcher = make_fetcher(settings, ["127.0.0.1"])
    home = fetcher.fetch(base + "/")
    host = urlsplit(base).netloc
    chapters = [
        a.url for a in anchors(home.body.decode("utf-8"), base + "/") if "/book/" in a.url and host in a.url
    ]
    ids = []
    with session_scope(sessions) as session:  # type: ignore[arg-type]
        for url in chapters:
            response = fetcher.fetch(url)
            extracted = extract_main_text(response.body.decode("utf-8"), url)
            page = Page(url=url, final_url=url, host=host, status=200, encoding="utf-8", title="",
                        text=extracted.text, site_id=site_id)  # fmt: skip
            session.add(page)
            session.flush()
            ids.append(page.id)
    for start in range(0, len(ids), 32):
        with session_scope(sessions) as session:  # type: ignore[arg-type]
            service.process_pages(session, ids[start : start + 32], settings)
    return len(ids)


def pair_scores(
    groups: Iterable[Iterable[str]], truth: dict[str, int | None], members: set[str]
) -> tuple[float, float]:
    """Precision and recall of "same network" over the pairs of ``members`` (sites crawled)."""
    predicted: set[tuple[str, str]] = set()
    for group in groups:
        g = sorted(s for s in group if s in members)
        predicted.update((a, b) for i, a in enumerate(g) for b in g[i + 1 :])
    pirates = sorted(s for s in members if truth.get(s) is not None)
    actual = {(a, b) for i, a in enumerate(pirates) for b in pirates[i + 1 :] if truth[a] == truth[b]}
    tp = len(predicted & actual)
    precision = tp / len(predicted) if predicted else 1.0
    recall = tp / len(actual) if actual else 1.0
    return round(precision, 4), round(recall, 4)


def minhash_groups(session: Session, settings: Settings, threshold: float) -> list[list[int]]:
    """The alternative grouping: MinHash LSH over each site's set of page-Simhash index keys (the permuted
    tables' keys: two near-duplicate pages share at least one), pairs kept when the estimated Jaccard
    reaches ``threshold``, then connected components."""
    layout = network_layout(settings)
    keys: dict[int, set[int]] = defaultdict(set)
    rows = session.execute(
        select(Page.site_id, Fingerprint.value)
        .join(Page, Page.id == Fingerprint.page_id)
        .where(Fingerprint.kind == layout.kind)
    )
    for site_id, value in rows:
        if site_id is None or value is None:
            continue
        for t, key in layout.keys(to_unsigned64(int(value))):
            keys[int(site_id)].add((t << 40) ^ key)
    params = MinHashParams(num_perm=128, bands=32, rows=4)
    signatures = {s: minhash_signature(np.array(sorted(v), dtype=np.uint64), params) for s, v in keys.items()}
    buckets: dict[int, list[int]] = defaultdict(list)
    for site_id, signature in signatures.items():
        for band in lsh_band_keys(signature, params):
            buckets[band].append(site_id)
    pairs = set()
    for sites in buckets.values():
        for i, a in enumerate(sites):
            for b in sites[i + 1 :]:
                if estimate_jaccard(signatures[a], signatures[b]) >= threshold:
                    pairs.add((min(a, b), max(a, b)))
    return components(pairs)


def sweep_groups(session: Session, settings: Settings, close: int, share: float) -> list[list[int]]:
    """The network rule with other parameters, from the recorded near duplicates: site pairs with at least 3
    page pairs within ``close`` bits and at least ``share`` of the smaller site's pages, licensed sites
    out."""
    from fptrack.compare.networks import licensed_site_ids, simhashed_pages_per_site
    from fptrack.storage.models import NearDuplicate

    later, earlier = Page.__table__.alias("later"), Page.__table__.alias("earlier")
    rows = session.execute(
        select(later.c.site_id, earlier.c.site_id)
        .select_from(NearDuplicate)
        .join(later, later.c.id == NearDuplicate.page_id)
        .join(earlier, earlier.c.id == NearDuplicate.earlier_page_id)
        .where(NearDuplicate.distance <= close)
    )
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for a, b in rows:
        counts[(min(a, b), max(a, b))] += 1
    licensed = licensed_site_ids(session)
    pages = simhashed_pages_per_site(session, settings, {s for pair in counts for s in pair})
    kept = [
        (a, b)
        for (a, b), n in counts.items()
        if n >= 3
        and a not in licensed
        and b not in licensed
        and n >= share * min(pages.get(a, 0), pages.get(b, 0))
    ]
    return components(kept)


def measure_step(session: Session, settings: Settings, limit: int = 200) -> dict[str, float]:
    """The near-duplicate step per page on the crawled pages: the page Simhash, the look-up, and the whole of
    ``observe_pages`` (Simhash, look-up and writes) for pages observed again."""
    layout = network_layout(settings)
    rows = session.execute(
        select(Page.id, Page.text).where(Page.site_id.is_not(None)).order_by(Page.id).limit(limit)
    ).all()
    compute, lookup = [], []
    for _, body in rows:
        started = time.perf_counter()
        value = page_simhash(body)
        compute.append((time.perf_counter() - started) * 1000)
        if value is None:
            continue
        started = time.perf_counter()
        simhash_candidates(session, value, layout, owner="page")
        lookup.append((time.perf_counter() - started) * 1000)
    ids = [i for i, _ in rows]
    started = time.perf_counter()
    for start in range(0, len(ids), 32):
        observe_pages(session, ids[start : start + 32], settings)
    whole = (time.perf_counter() - started) * 1000 / max(len(ids), 1)
    session.rollback()
    return {
        "pages": len(rows),
        "simhash_ms_mean": round(statistics.fmean(compute), 3),
        "lookup_ms_mean": round(statistics.fmean(lookup), 3),
        "lookup_ms_p99": round(float(np.percentile(lookup, 99)), 3),
        "observe_pages_ms_per_page": round(whole, 3),
        "chars_per_page": round(statistics.fmean(len(b) for _, b in rows)),
    }


def scale(pg_url: str, n: int, values: list[int], seed: int) -> dict[str, object]:
    """``simhash_candidates`` with ``n`` random Simhashes stored (index_scale's loader), for real page
    Simhashes."""
    from index_scale import Bench

    args = argparse.Namespace(n=n, queries=200, layout="f64k3b4", seed=seed, pg_url=pg_url, incremental=0,
                              db=f"fptrack_bench_discovery_{uuid.uuid4().hex[:6]}", keep=False)  # fmt: skip
    bench = Bench(args)
    bench.create_database()
    try:
        bench.make_owners(n)
        bench.make_fingerprints()
        started = time.perf_counter()
        bench.load()
        loaded = time.perf_counter() - started
        latencies = []
        with Session(bench.engine) as session:
            for value in values[:5]:
                simhash_candidates(session, value, bench.layout, owner="page")
            best = []
            for value in values:
                times = []
                for _ in range(3):
                    started = time.perf_counter()
                    simhash_candidates(session, value, bench.layout, owner="page")
                    times.append((time.perf_counter() - started) * 1000)
                latencies.append(times[0])
                best.append(min(times))
        return {
            "stored_simhashes": n,
            "load_s": round(loaded, 1),
            "queries": len(latencies),
            "lookup_ms_p50": round(float(np.percentile(latencies, 50)), 3),
            "lookup_ms_p99": round(float(np.percentile(latencies, 99)), 3),
            "lookup_ms_p99_best_of_3": round(float(np.percentile(best, 99)), 3),
        }
    finally:
        bench.drop_database()


def main(argv: list[str] | None = None) -> None:
    parser = arguments(__doc__, "3 chapters registered per work, one discovery round")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--chapters", type=int, default=12, help="chapters registered per work")
    parser.add_argument("--rounds", type=int, default=3, help="discovery rounds at most")
    parser.add_argument("--scale", type=int, default=0, help="also time the look-up with this many Simhashes")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args(argv)
    if args.quick:
        args.chapters, args.rounds = 3, 1
    require_corpus("discovery")
    started_all = time.perf_counter()
    web = build_web(args.seed, args.chapters)
    name = f"fptrack_bench_discovery_{uuid.uuid4().hex[:8]}"
    parts = urlsplit(args.pg_url)
    admin = create_engine(Settings(database_url=args.pg_url).database_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    settings = Settings(
        data_dir=Path("/tmp") / name,
        database_url=parts._replace(path="/" + name).geturl(),
        site_rate=1000.0,
        crawl_timeout=10.0,
    )
    engine = create_engine_for(settings)
    results: dict[str, Any] = {"seed": args.seed, "sites": len(web.sites)}
    try:
        migrate(settings, engine)
        sessions = session_factory(engine)
        with session_scope(sessions) as session:
            works = {}
            for work, texts in web.registered.items():
                body = "\n\n".join(f"第{i}回\n{t}" for i, t in enumerate(texts, start=1))
                works[work] = register_work(
                    session, body.encode(), source_name=work, title=TITLES[work]
                ).work_id
        with session_scope(sessions) as session:
            for work_id in works.values():
                service.index_work(session, work_id, settings)
            for site in web.of("licensed"):
                for work_id in works.values():
                    add_licensed_site(session, work_id, site.key)
        started = time.perf_counter()
        crawled = 0
        for site in web.of("licensed"):
            with session_scope(sessions) as session:
                spec = SiteSpec(name=f"partner-{site.key.split(':')[1]}", start_urls=(site.url + "/",),
                                allow_private=True)  # fmt: skip
                site_id = add_site(session, spec).id
            crawled += crawl(sessions, settings, site_id, site.url)
        known = []
        for network in range(len(NETWORK_SIZES)):
            site = next(s for s in web.of("pirate") if s.network == network)
            known.append(site.key)
            with session_scope(sessions) as session:
                site_id = add_site(session, SiteSpec(name=f"known-{network}", start_urls=(site.url + "/",),
                                                     allow_private=True)).id  # fmt: skip
            crawled += crawl(sessions, settings, site_id, site.url)
        crawl_s = time.perf_counter() - started
        by_key = web.by_key()
        before = {s.key: s.requests for s in web.sites}
        discovery_requests = 0
        rounds = []
        with serve_search_provider(search_results(web)) as search:
            search_settings = settings.with_overrides(search_providers=("serpapi",), **search.endpoints())
            for round_no in range(args.rounds):
                providers = configured_providers(search_settings) if round_no == 0 else []
                t0 = time.perf_counter()
                report = run_discovery(
                    sessions, search_settings, providers=providers, allow_private=["127.0.0.1"]
                )
                discovery_s = time.perf_counter() - t0
                discovery_requests += report.requests
                accepted = []
                with session_scope(sessions) as session:
                    for candidate in session.scalars(
                        select(DiscoveryCandidate).where(DiscoveryCandidate.state == "probed")
                    ):
                        if candidate.score >= ACCEPT_SCORE:
                            added = accept_candidate(
                                session, candidate.id, settings, by="benchmark", allow_private=True
                            )
                            accepted.append((added.id, candidate.host))
                for site_id, host in accepted:
                    crawled += crawl(sessions, settings, site_id, f"http://{host}")
                rounds.append({"round": round_no + 1, "proposed": report.proposed, "probed": report.probed,
                               "requests": report.requests, "accepted": len(accepted),
                               "seconds": round(discovery_s, 1),
                               "search_queries": len(search.requests) if round_no == 0 else 0,
                               "errors": report.errors})  # fmt: skip
                if not accepted:
                    break
        with session_scope(sessions) as session:
            candidates = [
                Candidate(c.host, c.state, c.requests, c.source, c.score)
                for c in session.scalars(select(DiscoveryCandidate))
            ]
            monitored = set(session.scalars(select(Site.host).where(Site.managed.is_(True))))
            netw = find_networks(session, settings)
            truth = {s.key: s.network for s in web.sites}
            crawled_hosts = {h for h in monitored}
            groups = {PRODUCT_RULE: [[s.host for s in n.sites] for n in netw]}
            host_of = dict(session.execute(select(Site.id, Site.host)).all())
            variants = (
                ("close pages (<= 2 bits), >= 3, no share condition", True, 0.0),
                ("near duplicates (<= k = 3 bits), >= 3 and >= 50 %", False, 0.5),
                ("near duplicates (<= k = 3 bits), >= 3, no share condition", False, 0.0),
            )
            for label, close, share in variants:
                pairs = linked_pairs(session, settings, min_share=share, close=close)
                groups[label] = [[host_of[s] for s in g] for g in components((a, b) for a, b, *_ in pairs)]
            sweep = {}
            for distance in (1, 2, 3):
                for share in (0.1, 0.2, 0.3, 0.5, 0.8):
                    found_groups = [
                        [host_of[x] for x in g] for g in sweep_groups(session, settings, distance, share)
                    ]
                    sweep[f"<= {distance} bits, >= {share:.0%}"] = found_groups
            groups["MinHash LSH over sites' Simhash keys, J >= 0.3"] = [
                [host_of[s] for s in g] for g in minhash_groups(session, settings, 0.3)
            ]
            session.execute(text("ANALYZE fingerprints"))  # what autovacuum would have done by now
            step = measure_step(session, settings)
            values = [to_unsigned64(int(v)) for v in session.scalars(
                select(Fingerprint.value).where(Fingerprint.kind == network_layout(settings).kind)
                .limit(1000)) if v is not None]  # fmt: skip
        to_find = [s.key for s in web.of("pirate") if s.key not in known]
        found = {
            c.host
            for c in candidates
            if c.state in ("probed", "accepted") and by_key.get(c.host) and by_key[c.host].kind == "pirate"
        }
        false = [
            c.host
            for c in candidates
            if c.state in ("probed", "accepted") and (c.host not in by_key or by_key[c.host].kind != "pirate")
        ]
        discovered = len(found & set(to_find))
        per_candidate = [c.requests for c in candidates]
        membership = {label: pair_scores(g, truth, crawled_hosts) for label, g in groups.items()}
        swept = {label: pair_scores(g, truth, crawled_hosts) for label, g in sweep.items()}
        results.update(
            pirate_sites=len(web.of("pirate")),
            known=len(known),
            to_discover=len(to_find),
            discovered=discovered,
            discovered_share=round(discovered / len(to_find), 4),
            false_candidates=len(false),
            candidates_proposed=len(candidates),
            candidates_clean=sum(c.state == "clean" for c in candidates),
            discovery_requests=discovery_requests,
            requests_per_discovered_site=round(discovery_requests / max(discovered, 1), 2),
            probe_requests_max=max(per_candidate) if per_candidate else 0,
            served_requests_during_discovery=sum(s.requests - before[s.key] for s in web.sites),
            rounds=rounds,
            networks_found=len(netw),
            network_sizes=sorted(len(n.sites) for n in netw),
            sources_right=sum(1 for n in netw if n.source.host in known),
            membership={label: {"precision": p, "recall": r} for label, (p, r) in membership.items()},
            sweep={label: {"precision": p, "recall": r} for label, (p, r) in swept.items()},
            near_duplicate_step=step,
            pages_crawled=crawled,
            crawl_seconds=round(crawl_s, 1),
        )
        if args.scale:
            results["scale"] = scale(args.pg_url, args.scale, values, args.seed)
    finally:
        engine.dispose()
        if not args.keep:
            with admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
        for site in web.sites:
            site.server.shutdown()
            site.server.server_close()
    results["seconds"] = round(time.perf_counter() - started_all, 1)
    _report(results)


def _report(r: dict[str, Any]) -> None:
    rows = [
        ("pirate sites discovered / to discover",
         f"{r['discovered']} / {r['to_discover']} ({float(r['discovered_share']):.0%})", ">= 95 %"),
        ("false candidates (probed as copying)", r["false_candidates"], "-"),
        ("candidates proposed (of which clean)",
         f"{r['candidates_proposed']} ({r['candidates_clean']})", "-"),
        ("discovery requests", r["discovery_requests"], "-"),
        ("requests per discovered site", r["requests_per_discovered_site"], "<= 20"),
        ("most requests on one candidate", r["probe_requests_max"], "-"),
        ("networks found (sizes)", f"{r['networks_found']} {r['network_sizes']}", "4 [3, 4, 5, 6]"),
        ("networks whose source is the site seen first", r["sources_right"], "-"),
    ]  # fmt: skip
    print_table("Discovery from one known pirate site per network", ["measure", "value", "target"], rows)
    print_table(
        "Discovery rounds",
        ["round", "proposed", "probed", "requests", "accepted", "search queries", "seconds"],
        [(x["round"], x["proposed"], x["probed"], x["requests"], x["accepted"], x["search_queries"],
          x["seconds"])
         for x in r["rounds"]],
    )  # fmt: skip
    membership = r["membership"]
    print_table(
        "Network membership (pairs of crawled sites)",
        ["grouping", "precision", "recall"],
        [(label, v["precision"], v["recall"]) for label, v in membership.items()],
    )
    sweep = r["sweep"]
    print_table(
        "Network rule sweep (page pairs within the distance; share of the smaller site's pages)",
        ["rule", "precision", "recall"],
        [(label, v["precision"], v["recall"]) for label, v in sweep.items()],
    )
    step = r["near_duplicate_step"]
    rows = [
        ("page Simhash (rjieba + 64-bit tf), ms/page", step["simhash_ms_mean"], "-"),
        (
            "look-up at this web's size, ms mean / p99",
            f"{step['lookup_ms_mean']} / {step['lookup_ms_p99']}",
            "-",
        ),
        ("observe_pages whole, ms/page", step["observe_pages_ms_per_page"], "-"),
    ]
    if "scale" in r:
        s = r["scale"]
        rows.append(
            (
                f"look-up at {s['stored_simhashes']:,} stored, ms p50 / p99 / p99 best of 3",
                f"{s['lookup_ms_p50']} / {s['lookup_ms_p99']} / {s['lookup_ms_p99_best_of_3']}",
                "p99 <= 2 ms",
            )
        )
    print_table("Near-duplicate step", ["measure", "value", "target"], rows)
    print(json.dumps(r, ensure_ascii=False))


if __name__ == "__main__":
    main()
