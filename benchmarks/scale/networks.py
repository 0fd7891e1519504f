"""The pirate-networks step's cost per page as stored copies of the same texts grow.

    python -m benchmarks.scale.networks                  # 5, 50, 500 stored copies of a chapter
    python -m benchmarks.scale.networks --sizes 100,1000
    python -m benchmarks.scale.networks --quick          # 40 and 80 pages, one timed batch a mode

After a page is compared, ``compare.networks.observe_pages`` writes its page Simhash, looks up its near
duplicates (``simhash_candidates``, Hamming <= k) and records a ``near_duplicates`` row per hit on another
site. On a pirate web every chapter is copied many times, so a copy page's look-up finds every stored copy of
its chapter: this benchmark shows what that costs as the copies grow.

The web is ``benchmarks/scale/pages.py``'s (``_scale_data``: blocks of 20 pages, half copies of registered
chapters, verbatim, edited, ads spliced, mirrored on three hosts; half unrelated text), filled through the
same bulk path (``PageStore`` + ``process_pages`` in ``--fill-processes`` processes), with a small registry
(``--registry`` chapters) so that the copies per chapter grow quickly: ``size / 2 / registry`` stored copies
of each chapter. Hosts hold ``--host-pages`` pages (scale.py's 20,000 would put a small fill on one host:
most pairs would be on one site and left out).

At each size: ``VACUUM ANALYZE``; then ``--batches`` batches of 32 new pages (half copies) stored and
``process_pages`` run on each (the first untimed: caches), CPU and wall ms per page; the same with the
networks step off (``FPTRACK_NETWORKS=false``) for its share; one more batch under cProfile, whose cumulative
times of the networks step's parts are printed; bytes per stored page of ``near_duplicates`` and
``site_pairs`` (``pg_total_relation_size``), near-duplicate rows per page, and the hits of the look-up per
copy page. Ends with one JSON line.
"""

from __future__ import annotations

import cProfile
import json
import multiprocessing
import os
import pstats
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.corpus import CORPUS, require_corpus
from benchmarks.harness import arguments, emit, print_table, progress, require_service
from benchmarks.scale import _data as _scale_data
from benchmarks.scale import _fill as _scale_fill
from benchmarks.scale._data import PageTexts, Registry
from benchmarks.scale._fill import FILL_BATCH, FillTimes, Plan, crawled_page, page_store, sessions_for

PROBE_BASE = 3_000_000_000  # page numbers of the probes: past any fill and past scale.py's probes
# the networks step's parts, by function name in the profile (cumulative seconds)
PARTS = (
    ("process_pages", "process_pages"),
    ("observe_pages (networks step)", "observe_pages"),
    ("  page Simhash", "normalized_page_simhash"),
    ("  Simhash look-up", "simhash_candidates"),
    ("  pairs: known read + insert", "_insert_new_pairs"),
    ("  site_pairs upserts", "_add_site_evidence"),
    ("  hot-bucket filing", "file_in_hot_buckets"),
)


def _fill_slice(plan: Plan, start: int, stop: int, part: int, parts: int, host_pages: int, out: Any) -> None:
    _scale_data.HOST_PAGES = host_pages  # a forked process: host_of reads the module's value at call time
    counter = multiprocessing.Value("q", 0)
    numbers = list(_scale_data.numbers_between(start, stop, part, parts))
    _scale_fill._fill_part(plan, numbers, start + part, counter, out)


def fill(plan: Plan, start: int, stop: int, parts: int, host_pages: int) -> FillTimes:
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    processes = [
        context.Process(target=_fill_slice, args=(plan, start, stop, part, parts, host_pages, out))
        for part in range(parts)
    ]
    for p in processes:
        p.start()
    total = FillTimes()
    for _ in processes:
        total.add(out.get())
    for p in processes:
        p.join()
    if total.errors:
        raise RuntimeError("; ".join(total.errors))
    return total


def store_batch(sessions: Any, settings: Any, texts: PageTexts, first: int, label: str) -> list[int]:
    dispatched: list[int] = []
    store = page_store(sessions, settings, dispatched)
    for number in range(first, first + FILL_BATCH):
        spec, title, text = texts.page(number)
        store.add(crawled_page(spec.url.replace("/book/", f"/{label}/"), title, text))
    store.flush()
    return dispatched


def run_batch(
    sessions: Any, settings: Any, ids: list[int], profile: cProfile.Profile | None
) -> tuple[float, float]:
    from fptrack.compare.service import process_pages

    with sessions() as session:
        t0, c0 = time.perf_counter(), time.process_time()
        if profile is not None:
            profile.enable()
        process_pages(session, ids, settings)
        session.commit()
        if profile is not None:
            profile.disable()
        return time.perf_counter() - t0, time.process_time() - c0


def probe(plan: Plan, index: int, batches: int) -> dict[str, Any]:
    """Per-page CPU and wall of process_pages on fresh pages, networks on and off, and a profile."""
    settings, sessions = sessions_for(plan)
    registry = Registry(plan.pools(), plan.registry_chapters, seed=plan.seed)
    texts = PageTexts(registry, {}, seed=plan.seed, stream=PROBE_BASE + index)
    base = PROBE_BASE + index * 100_000
    result: dict[str, Any] = {}
    batch = 0
    for mode, mode_settings in (("on", settings), ("off", settings.with_overrides(networks=False))):
        cpu = wall = 0.0
        pages = 0
        for n in range(batches + (1 if mode == "on" else 0)):
            ids = store_batch(sessions, settings, texts, base + batch * FILL_BATCH, f"probe{index}")
            batch += 1
            w, c = run_batch(sessions, mode_settings, ids, None)
            if mode == "off" or n:
                cpu, wall, pages = cpu + c, wall + w, pages + len(ids)
        result[f"cpu_ms_{mode}"] = round(cpu * 1000 / max(1, pages), 2)
        result[f"wall_ms_{mode}"] = round(wall * 1000 / max(1, pages), 2)
    profile = cProfile.Profile()
    ids = store_batch(sessions, settings, texts, base + batch * FILL_BATCH, f"probe{index}")
    run_batch(sessions, settings, ids, profile)
    stats = pstats.Stats(profile)
    cumulative: dict[str, float] = {}
    for (_, _, name), (_, _, _, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        cumulative[name] = max(cumulative.get(name, 0.0), ct)
    result["profile_ms_per_page"] = {
        label: round(cumulative.get(name, 0.0) * 1000 / len(ids), 3) for label, name in PARTS
    }
    stats.sort_stats("cumulative")
    result["profile_top"] = [
        f"{ct * 1000 / len(ids):7.3f} ms/page  {name} ({Path(file).name}:{line})"
        for (file, line, name), (_, _, _, ct, _) in sorted(
            stats.stats.items(),  # type: ignore[attr-defined]
            key=lambda item: -item[1][3],
        )[:40]
    ]
    return result


def hits_per_copy(plan: Plan) -> dict[str, float]:
    """Look-up hits (any site) and hits on other sites for the stored copy pages' Simhashes (a sample)."""
    from sqlalchemy import select

    from fptrack.compare.networks import network_layout
    from fptrack.storage.index import to_unsigned64
    from fptrack.storage.models import Fingerprint, Page
    from fptrack.storage.simhash_index import simhash_candidates

    settings, sessions = sessions_for(plan)
    layout = network_layout(settings)
    with sessions() as session:
        rows = session.execute(
            select(Page.id, Page.site_id, Fingerprint.value)
            .join(Fingerprint, (Fingerprint.page_id == Page.id) & (Fingerprint.kind == layout.kind))
            .where(Page.title.like("第%章%之%"))
            .order_by(Page.id.desc())
            .limit(64)
        ).all()
        hits = others = 0
        for page_id, site_id, value in rows:
            found = simhash_candidates(
                session, to_unsigned64(value), layout, owner="page", exclude_id=page_id
            )
            ids = [h.owner_id for h in found]
            sites = {
                int(i): s for i, s in session.execute(select(Page.id, Page.site_id).where(Page.id.in_(ids)))
            }
            hits += len(found)
            others += len({sites[i] for i in ids if sites.get(i) != site_id})
    n = max(1, len(rows))
    return {"hits_per_copy": round(hits / n, 1), "other_sites_per_copy": round(others / n, 1)}


def networks_now(plan: Plan) -> dict[str, Any]:
    """The networks as the evidence stands (``find_networks``): how many, their sizes, linked site pairs."""
    from fptrack.compare.networks import find_networks, linked_pairs

    settings, sessions = sessions_for(plan)
    with sessions() as session:
        found = find_networks(session, settings)
        linked = linked_pairs(session, settings)
    return {"networks": [len(n.sites) for n in found], "linked_site_pairs": len(linked)}


def table_bytes(dsn: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")
        one = connection.execute(
            "SELECT (SELECT count(*) FROM pages), (SELECT count(*) FROM near_duplicates), "
            "(SELECT count(*) FROM site_pairs), pg_total_relation_size('near_duplicates'), "
            "pg_total_relation_size('site_pairs')"
        ).fetchone()
    assert one is not None
    pages, pairs, site_pairs, nd_bytes, sp_bytes = (int(x) for x in one)
    return {
        "pages": pages,
        "near_duplicates": pairs,
        "site_pairs": site_pairs,
        "near_duplicates_per_page": round(pairs / max(1, pages), 2),
        "near_duplicates_bytes_per_page": round(nd_bytes / max(1, pages)),
        "site_pairs_bytes_per_page": round(sp_bytes / max(1, pages)),
    }


def main() -> None:
    parser = arguments(__doc__, "40 and 80 stored pages filled by one process, one timed batch a mode")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--registry", type=int, default=10, help="registered chapters")
    parser.add_argument("--sizes", default="100,1000,10000", help="stored pages to measure at")
    parser.add_argument("--host-pages", type=int, default=500, help="pages per host")
    parser.add_argument("--batches", type=int, default=4, help="timed batches of 32 pages per mode")
    parser.add_argument("--fill-processes", type=int, default=2)
    parser.add_argument("--nice", type=int, default=5)
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--generated-text", action="store_true", help="random Han text instead of the corpus")
    parser.add_argument("--label", default="", help="a name for this run in the JSON line")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.batches, args.fill_processes = "40,80", 1, 1
    require_service("near_duplicates", "PostgreSQL", args.pg_url, 5432)
    if not args.generated_text:
        require_corpus("near_duplicates")
    if args.nice:
        os.nice(args.nice)
    import psycopg
    from sqlalchemy.engine import make_url

    from fptrack.core.settings import Settings
    from fptrack.storage.db import create_engine_for, migrate

    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    name = f"fptrack_nd_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin_dsn = make_url(args.pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin_dsn, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    url = make_url(args.pg_url).set(drivername="postgresql+psycopg", database=name)
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    data_dir = Path(f"/tmp/{name}")
    data_dir.mkdir()
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    try:
        plan = Plan(
            url.render_as_string(hide_password=False), str(data_dir), args.registry, (), args.seed,
            "" if args.generated_text else str(CORPUS), 0,
        )  # fmt: skip
        settings = Settings(data_dir=data_dir, database_url=plan.database_url)
        engine = create_engine_for(settings)
        migrate(settings, engine)
        engine.dispose()
        registry = Registry(plan.pools(), args.registry, seed=args.seed)
        _, sessions = sessions_for(plan)
        for work in range(registry.works):
            title, text = registry.work_file(work)
            _scale_fill.register(sessions, settings, title, text)
        filled = 0
        for index, size in enumerate(sizes):
            progress(f"filling {filled:,} -> {size:,} pages")
            t0 = time.monotonic()
            times = fill(plan, filled, size, args.fill_processes, args.host_pages)
            filled = size
            row: dict[str, Any] = {
                "size": size,
                "copies_per_chapter": round(size / 2 / args.registry, 1),
                "fill_s": round(time.monotonic() - t0, 1),
                "fill_cpu_ms_per_page": round(times.process_cpu_s * 1000 / max(1, times.pages), 2),
                **table_bytes(dsn),
            }
            row.update(hits_per_copy(plan))
            row.update(networks_now(plan))
            row["load_before_probe"] = os.getloadavg()[0]
            row.update(probe(plan, index, args.batches))
            row["load_after_probe"] = os.getloadavg()[0]
            progress(json.dumps({k: v for k, v in row.items() if k != "profile_top"}))
            rows.append(row)
    finally:
        if not args.keep:
            with psycopg.connect(admin_dsn, autocommit=True) as connection:
                connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(
        f"near duplicates: registry {args.registry} chapters, {args.host_pages} pages a host, "
        f"{'generated' if args.generated_text else 'corpus'} text, {args.batches} x {FILL_BATCH} pages a mode"
    )
    print_table(
        "Per size (cpu/wall: process_pages ms per page of new pages, networks step on / off; fill: ms CPU "
        "per page of process_pages during the fill; nd: near_duplicates rows and bytes per stored page)",
        ["pages", "copies/ch", "hits/copy", "other sites", "cpu on", "cpu off", "wall on", "wall off",
         "fill cpu", "nd/page", "nd B/page", "sp B/page", "networks", "links", "load"],
        [[f"{r['size']:,}", r["copies_per_chapter"], r["hits_per_copy"], r["other_sites_per_copy"],
          r["cpu_ms_on"], r["cpu_ms_off"], r["wall_ms_on"], r["wall_ms_off"], r["fill_cpu_ms_per_page"],
          r["near_duplicates_per_page"], r["near_duplicates_bytes_per_page"], r["site_pairs_bytes_per_page"],
          str(r["networks"]), r["linked_site_pairs"],
          f"{r['load_before_probe']:.2f}-{r['load_after_probe']:.2f}"] for r in rows],
    )  # fmt: skip
    print_table(
        "The networks step under cProfile (one batch, cumulative ms per page)",
        ["part", *(f"{r['size']:,}" for r in rows)],
        [[label, *(r["profile_ms_per_page"][label] for r in rows)] for label, _ in PARTS],
    )
    for r in rows:
        print(f"\nprofile at {r['size']:,} pages, top by cumulative time:")
        print("\n".join(r["profile_top"]))
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        print(
            f"\nratio cpu on, {last['size']:,} / {first['size']:,} pages: "
            f"{last['cpu_ms_on'] / max(0.01, first['cpu_ms_on']):.2f}x; networks share at {last['size']:,}: "
            f"{last['cpu_ms_on'] - last['cpu_ms_off']:.2f} ms"
        )
    measured = [{k: v for k, v in r.items() if k != "profile_top"} for r in rows]
    seconds = round(time.monotonic() - started, 1)
    emit({"label": args.label, "seconds": seconds, "rows": measured})


if __name__ == "__main__":
    main()
