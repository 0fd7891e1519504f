"""The permuted-prefix Simhash index at scale, on PostgreSQL: load rate, bytes per fingerprint, k-bit query
latency and recall against a brute-force scan and against the PyPI ``simhash`` package's in-memory
``SimhashIndex``.

    python -m benchmarks.scale.index --quick            # N = 20k, 100 queries: seconds
    python -m benchmarks.scale.index --n 1000000
    python -m benchmarks.scale.index --n 10000000 --simhash-max-n 0
    python -m benchmarks.scale.index --n 1000000 --layout f64k3b5 --compare-rows

What it does (in a database of its own, created and dropped: ``--db``, on ``--pg-url``):
1. migrates the real schema (Alembic), inserts N bare pages to own the fingerprints (untimed);
2. generates N fingerprints: uniform random 64-bit values, plus for each of Q query values planted neighbours
   at distances 0..k (found) and k + 1 (not to be found);
3. loads them with ``storage.simhash_index.bulk_load_simhashes`` (binary COPY; indexes rebuilt after the
   load), then VACUUM ANALYZE (index-only scans need the visibility map); then an incremental load with the
   indexes in place;
4. sizes: the fingerprints heap and every index, per fingerprint;
5. latency of ``simhash_candidates`` (the store's real query path, Python included) for the Q queries;
6. a brute-force ``bit_count((value # q)::bit(64)) <= k`` scan for some of the queries: its latency and the
   index answer's recall against it; the same against ``simhash.SimhashIndex`` while N <= ``--simhash-max-n``;
7. an overloaded bucket (near-duplicate boilerplate pages, ``--hot``) and the latency of unlucky queries that
   fall into it, before and after ``split_hot_buckets``;
8. optionally (``--compare-rows``) the alternative storage: a table of (table_no, key, value, id) rows with a
   covering b-tree, as ALGORITHMS.md 4 sketches it, for size and latency.

Prints a table; the last line is JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from benchmarks.harness import arguments, emit, percentile, progress, require_service
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for, migrate
from fptrack.storage.hot_buckets import split_hot_buckets
from fptrack.storage.index import DEFAULT_LAYOUT, IndexLayout, to_signed64
from fptrack.storage.models import simhash_index_names
from fptrack.storage.simhash_index import bulk_load_simhashes, simhash_candidates


def flip_bits(rng: np.random.Generator, values: np.ndarray, distance: int) -> np.ndarray:
    """Each value with ``distance`` distinct random bits flipped."""
    out = values.copy()
    for i in range(len(values)):
        mask = 0
        for bit in rng.choice(64, size=distance, replace=False):
            mask |= 1 << int(bit)
        out[i] ^= np.uint64(mask)
    return out


def machine() -> dict[str, object]:
    info: dict[str, object] = {"nproc": os.cpu_count(), "python": platform.python_version()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        info["cpu"] = next(
            (line.split(":", 1)[1].strip() for line in lscpu.splitlines() if "Model name" in line), ""
        )
        meminfo = Path("/proc/meminfo").read_text().split()
        info["ram_gb"] = round(int(meminfo[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return info


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.layout = IndexLayout.from_name(args.layout)
        self.rng = np.random.default_rng(args.seed)
        parts = urlsplit(args.pg_url)
        self.db_url = parts._replace(path="/" + args.db).geturl()
        self.admin = create_engine(
            Settings(database_url=args.pg_url).database_url, isolation_level="AUTOCOMMIT"
        )
        self.results: dict[str, Any] = {"n": args.n, "layout": self.layout.name, "k": self.layout.k}

    # ------------------------------------------------------------------------------------------- set-up

    def create_database(self) -> None:
        with self.admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{self.args.db}" WITH (FORCE)'))
            c.execute(text(f'CREATE DATABASE "{self.args.db}"'))
            self.results["postgres"] = c.execute(text("SHOW server_version")).scalar()
        self.settings = Settings(
            database_url=self.db_url, simhash_k=self.layout.k, simhash_blocks=self.layout.blocks
        )
        self.engine = create_engine_for(self.settings)
        migrate(self.settings, self.engine)
        if self.layout != DEFAULT_LAYOUT:  # keep only the measured layout's indexes
            with self.engine.begin() as c:
                for name in simhash_index_names(DEFAULT_LAYOUT):
                    c.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")

    def drop_database(self) -> None:
        self.engine.dispose()
        if not self.args.keep:
            with self.admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{self.args.db}" WITH (FORCE)'))

    def make_owners(self, count: int) -> None:
        self.make_extra_owners(1, count)
        with self.engine.begin() as c:
            c.execute(text("SELECT setval(pg_get_serial_sequence('pages', 'id'), :n)"), {"n": count})

    def make_fingerprints(self) -> None:
        n, q, k = self.args.n, self.args.queries, self.layout.k
        planted_per_query = k + 2  # distances 0..k and k + 1
        random_count = n - q * planted_per_query
        if random_count < q:
            raise SystemExit(f"--n {n} is too small for {q} queries")
        values = self.rng.integers(0, 2**64, size=random_count, dtype=np.uint64)
        self.queries = self.rng.integers(0, 2**64, size=q, dtype=np.uint64)
        planted = [flip_bits(self.rng, self.queries, d) for d in range(k + 2)]
        self.planted = planted
        self.values = np.concatenate([values, *planted])
        self.owner_ids = np.arange(1, n + 1, dtype=np.int64)
        order = self.rng.permutation(n)  # planted rows spread through the load
        self.values, self.owner_ids = self.values[order], self.owner_ids[order]
        self.expected_found = {int(d) for d in range(k + 1)}

    # -------------------------------------------------------------------------------------------- steps

    def load(self) -> None:
        pairs = np.stack([self.owner_ids, self.values.view(np.int64)], axis=1)
        incremental = min(self.args.incremental, len(pairs) // 10)
        bulk, rest = pairs[: len(pairs) - incremental], pairs[len(pairs) - incremental :]
        started = time.perf_counter()
        with self.engine.begin() as c:
            bulk_load_simhashes(c, bulk, owner="page", layout=self.layout, rebuild_indexes=True)
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.exec_driver_sql("VACUUM ANALYZE fingerprints")
        vacuum_s = time.perf_counter() - started
        started = time.perf_counter()
        with self.engine.begin() as c:
            bulk_load_simhashes(c, rest, owner="page", layout=self.layout)
        incr_s = time.perf_counter() - started
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.exec_driver_sql("VACUUM ANALYZE fingerprints")
        self.results.update(
            load_rows=len(bulk),
            load_s=round(load_s, 2),
            load_fps_per_s=round(len(bulk) / load_s),
            vacuum_analyze_s=round(vacuum_s, 2),
            load_incl_vacuum_fps_per_s=round(len(bulk) / (load_s + vacuum_s)),
            incremental_rows=len(rest),
            incremental_fps_per_s=round(len(rest) / incr_s) if len(rest) else None,
        )

    def sizes(self) -> None:
        n = self.args.n
        with self.engine.connect() as c:
            heap = int(c.execute(text("SELECT pg_table_size('fingerprints')")).scalar() or 0)
            rows = c.execute(
                text(
                    "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index "
                    "WHERE indrelid = 'fingerprints'::regclass"
                )
            ).all()
        indexes = {name: int(size) for name, size in rows}
        simhash = {name: size for name, size in indexes.items() if name in simhash_index_names(self.layout)}
        per_table = [size / n for size in simhash.values()]
        self.results.update(
            heap_bytes_per_fp=round(heap / n, 1),
            index_bytes_per_fp={name: round(size / n, 1) for name, size in indexes.items()},
            simhash_index_bytes_per_fp_per_table=round(max(per_table), 1),
            simhash_index_bytes_per_fp_all_tables=round(sum(per_table), 1),
            fingerprints_total_bytes_per_fp=round((heap + sum(indexes.values())) / n, 1),
        )

    def query_latency(self) -> None:
        latencies, answers = [], {}
        with Session(self.engine) as session:
            for _ in range(3):  # warm the connection, the prepared statement and the cache
                simhash_candidates(session, int(self.queries[0]), self.layout, owner="page")
            for value in self.queries.tolist():
                started = time.perf_counter()
                hits = simhash_candidates(session, int(value), self.layout, owner="page")
                latencies.append((time.perf_counter() - started) * 1000)
                answers[int(value)] = {h.owner_id for h in hits}
        self.index_answers = answers
        self.results.update(
            queries=len(latencies),
            query_ms_median=round(statistics.median(latencies), 3),
            query_ms_p99=round(percentile(latencies, 99), 3),
            query_ms_max=round(max(latencies), 3),
        )
        # planted neighbours: every one at distance <= k must be among the hits, none at k + 1
        owners = dict(zip(self.values.tolist(), self.owner_ids.tolist(), strict=True))
        missed = sum(
            owners[v] not in answers[q]
            for d in range(self.layout.k + 1)
            for q, v in zip(self.queries.tolist(), self.planted[d].tolist(), strict=True)
        )
        wrong = sum(
            owners[v] in answers[q]
            for q, v in zip(self.queries.tolist(), self.planted[self.layout.k + 1].tolist(), strict=True)
        )
        self.results["planted_missed"] = missed
        self.results["planted_beyond_k_returned"] = wrong

    def brute_force(self) -> None:
        count = min(self.args.brute_queries, len(self.queries))
        latencies, found, truth = [], 0, 0
        with self.engine.connect() as c:
            c.exec_driver_sql("SET max_parallel_workers_per_gather = 2")
            for value in self.queries[:count].tolist():
                started = time.perf_counter()
                owners = {
                    int(o)
                    for (o,) in c.execute(
                        text(
                            "SELECT page_id FROM fingerprints WHERE kind = 'simhash64' "
                            "AND bit_count((value # :q)::bit(64)) <= :k"
                        ),
                        {"q": to_signed64(value), "k": self.layout.k},
                    )
                }
                latencies.append((time.perf_counter() - started) * 1000)
                truth += len(owners)
                found += len(owners & self.index_answers[value])
                if self.index_answers[value] - owners:
                    raise AssertionError("the index returned something the brute force scan did not")
        median = statistics.median(latencies)
        self.results.update(
            brute_queries=count,
            brute_ms_median=round(median, 1),
            brute_true_neighbours=truth,
            recall_vs_brute=round(found / truth, 6) if truth else None,
            speedup_vs_brute=round(median / float(self.results["query_ms_median"]), 1),
        )

    def pypi_simhash(self) -> None:
        if self.args.n > self.args.simhash_max_n:
            self.results["pypi_simhash"] = f"skipped: N > --simhash-max-n {self.args.simhash_max_n}"
            return
        import resource

        from simhash import Simhash, SimhashIndex

        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        objs = [
            (str(o), Simhash(int(v), f=64))
            for o, v in zip(self.owner_ids.tolist(), self.values.tolist(), strict=True)
        ]
        index = SimhashIndex(objs, f=64, k=self.layout.k)
        build_s = time.perf_counter() - started
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        latencies, agree = [], 0
        for value in self.queries.tolist():
            started = time.perf_counter()
            dups = {int(o) for o in index.get_near_dups(Simhash(int(value), f=64))}
            latencies.append((time.perf_counter() - started) * 1000)
            agree += dups == self.index_answers[value]
        self.results["pypi_simhash"] = {
            "build_s": round(build_s, 1),
            "rss_growth_mb": round((rss_after - rss_before) / 1024),
            "query_ms_median": round(statistics.median(latencies), 3),
            "query_ms_p99": round(percentile(latencies, 99), 3),
            "same_answer_share": round(agree / len(latencies), 4),
        }
        del index, objs

    def hot_bucket(self) -> None:
        """Near-duplicate boilerplate pages crowd one bucket of every table; unrelated queries that share a
        block with them pay for scanning it until it is re-split."""
        size = self.args.hot
        if size <= 0:
            return
        base = int(self.rng.integers(0, 2**64, dtype=np.uint64))
        cluster = np.concatenate(
            [flip_bits(self.rng, np.full(size // 4, base, dtype=np.uint64), d) for d in range(4)]
        )
        size = len(cluster)
        # which tables the cluster crowds: those whose key equals the base's
        first_owner = self.args.n + 1
        self.make_extra_owners(first_owner, size)
        pairs = np.stack(
            [np.arange(first_owner, first_owner + size, dtype=np.int64), cluster.view(np.int64)], 1
        )
        with self.engine.begin() as c:
            bulk_load_simhashes(c, pairs, owner="page", layout=self.layout)
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.exec_driver_sql("VACUUM ANALYZE fingerprints")
        # unlucky queries: random values that share table 0's key with the boilerplate (far from it otherwise)
        mask = np.uint64(((1 << self.layout.key_bits(0)) - 1) << (64 - self.layout.key_bits(0)))
        unlucky = (self.rng.integers(0, 2**64, size=200, dtype=np.uint64) & ~mask) | (np.uint64(base) & mask)
        before = self.latencies(unlucky)
        started = time.perf_counter()
        with self.engine.begin() as c:
            report = split_hot_buckets(c, self.layout, mu=self.args.mu, min_size=self.args.hot_min_size)
        split_s = time.perf_counter() - started
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.exec_driver_sql("VACUUM ANALYZE simhash_hot_index")
        after = self.latencies(unlucky)
        self.results["hot_bucket"] = {
            "cluster": size,
            "threshold": round(report.threshold, 1),
            "largest_bucket": report.largest_bucket,
            "buckets_split": len(report.split),
            "rows_filed": report.rows_filed,
            "split_s": round(split_s, 2),
            "unlucky_ms_median_before": round(statistics.median(before), 3),
            "unlucky_ms_p99_before": round(percentile(before, 99), 3),
            "unlucky_ms_median_after": round(statistics.median(after), 3),
            "unlucky_ms_p99_after": round(percentile(after, 99), 3),
        }
        # recall still complete after the split (planted queries, brute force agreement already checked)
        with Session(self.engine) as session:
            lost = sum(
                not {h.owner_id for h in simhash_candidates(session, int(v), self.layout, owner="page")}
                >= self.index_answers[int(v)]
                for v in self.queries[: self.args.brute_queries].tolist()
            )
        self.results["hot_bucket"]["answers_lost_after_split"] = lost

    def make_extra_owners(self, first: int, count: int) -> None:
        with self.engine.begin() as c:
            c.execute(
                text(
                    "INSERT INTO pages (id, url, final_url, host, status, encoding, title, text_z, "
                    "content_sha256, snapshot_sha256, fetched_at, content_type, error) "
                    "SELECT g, 'b:' || g, '', '', 200, '', '', ''::bytea, '', '', now(), '', '' "
                    "FROM generate_series(CAST(:a AS bigint), CAST(:b AS bigint)) AS g"
                ),
                {"a": first, "b": first + count - 1},
            )

    def latencies(self, values: np.ndarray) -> list[float]:
        result = []
        with Session(self.engine) as session:
            simhash_candidates(session, int(values[0]), self.layout, owner="page")
            for value in values.tolist():
                started = time.perf_counter()
                simhash_candidates(session, int(value), self.layout, owner="page")
                result.append((time.perf_counter() - started) * 1000)
        return result

    def rows_storage(self) -> None:
        """The alternative: one (table_no, key, value, fingerprint id) row per table and fingerprint."""
        layout = self.layout
        selects = " UNION ALL ".join(
            f"SELECT {t}::smallint, {layout.key_sql(t, 'value')}::bigint, value, id FROM fingerprints "
            f"WHERE kind = 'simhash64'"
            for t in range(layout.table_count)
        )
        with self.engine.begin() as c:
            started = time.perf_counter()
            c.exec_driver_sql(
                "CREATE TABLE bench_rows (table_no smallint NOT NULL, key bigint NOT NULL, value bigint NOT "
                "NULL, fingerprint_id bigint NOT NULL)"
            )
            c.exec_driver_sql(f"INSERT INTO bench_rows {selects}")
            c.exec_driver_sql(
                "CREATE INDEX bench_rows_lookup ON bench_rows (table_no, key) INCLUDE (value, fingerprint_id)"
            )
            build_s = time.perf_counter() - started
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.exec_driver_sql("VACUUM ANALYZE bench_rows")
            heap = int(c.execute(text("SELECT pg_table_size('bench_rows')")).scalar() or 0)
            index = int(c.execute(text("SELECT pg_relation_size('bench_rows_lookup')")).scalar() or 0)
        branch = (
            "SELECT fingerprint_id FROM bench_rows WHERE table_no = {t} AND key = :k{t} "
            "AND bit_count((value # :q)::bit(64)) <= :maxd"
        )
        sql = text(
            "SELECT f.page_id FROM ("
            + " UNION ".join(branch.format(t=t) for t in range(layout.table_count))
            + ") c JOIN fingerprints f ON f.id = c.fingerprint_id"
        )
        latencies = []
        with self.engine.connect() as c:
            for value in self.queries.tolist():
                params = {
                    "q": to_signed64(value),
                    "maxd": layout.k,
                    **{f"k{t}": key for t, key in layout.keys(value)},
                }
                started = time.perf_counter()
                owners = {int(o) for (o,) in c.execute(sql, params)}
                latencies.append((time.perf_counter() - started) * 1000)
                if owners != self.index_answers[int(value)]:
                    raise AssertionError("rows storage and expression indexes disagree")
            c.exec_driver_sql("DROP TABLE bench_rows")
            c.commit()
        n = self.args.n + max(self.args.hot, 0)
        self.results["rows_storage"] = {
            "build_s": round(build_s, 1),
            "bytes_per_fp_per_table": round((heap + index) / n / layout.table_count, 1),
            "heap_bytes_per_fp_per_table": round(heap / n / layout.table_count, 1),
            "query_ms_median": round(statistics.median(latencies), 3),
            "query_ms_p99": round(percentile(latencies, 99), 3),
        }


def real_bucket_profile(mu: float, min_size: int) -> dict[str, object]:
    """Bucket sizes of real page fingerprints (development corpus): novel chapters and news articles, plus the
    template pages pirate sites serve around them (navigation, watermark, disclaimer and one chapter title,
    from the artifacts observed in the corpus), fingerprinted as compare does."""
    from benchmarks.corpus import corpus_available, iter_chapters, news_texts
    from fptrack.fingerprint.normalize import normalize
    from fptrack.fingerprint.simhash import simhash_text

    if not corpus_available():
        return {"skipped": "development corpus not found"}
    layout = DEFAULT_LAYOUT
    texts = [c.text for c in iter_chapters("*tennessine.jsonl")] + news_texts()
    titles = [c.title for c in iter_chapters("*rain8_liangwe.jsonl")]
    template = (
        "首页|原创书库|现代|言情 本站长期招收作品更新管理员 {title} 更新时间:2007-11-16 7:55:51 "
        "TXT小说天堂 https://www.xstt5.com 作品仅供读者预览,请在下载24小时内删除 后一页"
    )
    boilerplate = [template.format(title=t) for t in titles]
    started = time.perf_counter()
    values = [simhash_text(normalize(t).text) for t in texts + boilerplate]
    elapsed = time.perf_counter() - started
    is_boilerplate = [False] * len(texts) + [True] * len(boilerplate)
    n = len(values)
    mean = layout.expected_bucket_size(n)
    buckets: dict[tuple[int, int], list[int]] = {}
    for i, value in enumerate(values):
        for t, key in layout.keys(value):
            buckets.setdefault((t, key), []).append(i)
    sizes = sorted((len(members) for members in buckets.values()), reverse=True)
    largest = max(buckets.values(), key=len)
    return {
        "documents": len(texts),
        "boilerplate_pages": len(boilerplate),
        "fingerprint_s": round(elapsed, 1),
        "seed_mean_bucket": round(mean, 4),
        "relative_trigger": round((1 + mu) * mean, 4),
        "buckets_over_relative_trigger": sum(s > (1 + mu) * mean for s in sizes),
        "non_empty_buckets": len(sizes),
        "largest_buckets": sizes[:8],
        "largest_bucket_boilerplate_share": round(sum(is_boilerplate[i] for i in largest) / len(largest), 3),
        "buckets_over_min_size": sum(s > min_size for s in sizes),
        "buckets_of_documents_only_max": max(
            (len(m) for m in buckets.values() if not any(is_boilerplate[i] for i in m)), default=0
        ),
    }


def main(argv: list[str] | None = None) -> None:
    parser = arguments(__doc__, "N = 20k, 100 queries, a 1,000-page hot bucket: seconds")
    parser.add_argument("--n", type=int, default=1_000_000, help="fingerprints to load")
    parser.add_argument("--queries", type=int, default=1000, help="k-bit look-ups to time")
    parser.add_argument("--brute-queries", type=int, default=30, help="look-ups also answered by brute force")
    parser.add_argument("--layout", default=DEFAULT_LAYOUT.name, help="index layout, e.g. f64k3b4 or f64k3b5")
    parser.add_argument(
        "--incremental", type=int, default=100_000, help="rows loaded with the indexes in place"
    )
    parser.add_argument(
        "--simhash-max-n", type=int, default=1_000_000, help="largest N for PyPI SimhashIndex"
    )
    parser.add_argument(
        "--hot", type=int, default=-1, help="near-duplicate boilerplate cluster size (0: none)"
    )
    parser.add_argument("--mu", type=float, default=2.0, help="re-split trigger: (1 + mu) x mean bucket size")
    parser.add_argument("--hot-min-size", type=int, default=None, help="smallest bucket re-split")
    parser.add_argument("--compare-rows", action="store_true", help="also measure the table-of-rows storage")
    parser.add_argument(
        "--real-buckets",
        action="store_true",
        help="only profile bucket sizes of real pages from the development corpus (no database)",
    )
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("FPTRACK_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--db", default="fptrack_bench_index", help="database to create (and drop)")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--seed", type=int, default=20071)
    parser.add_argument("--json", type=Path, help="also write the JSON figures to this file")
    args = parser.parse_args(argv)
    if not args.real_buckets:
        require_service("index_scale", "PostgreSQL", args.pg_url, 5432)
    if args.quick:
        args.n, args.queries, args.brute_queries, args.incremental = 20_000, 100, 10, 2_000
        args.hot = 1_000 if args.hot < 0 else args.hot
    if args.hot < 0:
        args.hot = max(5_000, args.n // 200)
    if args.hot_min_size is None:
        from fptrack.storage.hot_buckets import HOT_BUCKET_MIN_SIZE

        args.hot_min_size = HOT_BUCKET_MIN_SIZE

    if args.real_buckets:
        profile = real_bucket_profile(args.mu, args.hot_min_size)
        for name, value in profile.items():
            print(f"{name:<36} {value}")
        emit({"real_buckets": profile}, sort_keys=True)
        return

    bench = Bench(args)
    bench.results["machine"] = machine()
    started = time.perf_counter()
    bench.create_database()
    try:
        bench.make_owners(args.n)
        bench.make_fingerprints()
        steps = [
            bench.load,
            bench.sizes,
            bench.query_latency,
            bench.brute_force,
            bench.pypi_simhash,
            bench.hot_bucket,
        ]
        if args.compare_rows:
            steps.append(bench.rows_storage)
        for step in steps:
            t0 = time.perf_counter()
            step()
            progress(f"{step.__name__}: {time.perf_counter() - t0:.1f}s")
    finally:
        bench.drop_database()
    r = bench.results
    r["total_s"] = round(time.perf_counter() - started, 1)

    targets = {
        "recall_100pct_of_brute_force": r.get("recall_vs_brute") == 1.0,
        "p99_le_5ms": float(r["query_ms_p99"]) <= 5.0,
        "speedup_ge_100x": float(r["speedup_vs_brute"]) >= 100,
        "load_ge_100k_per_s": int(r["load_fps_per_s"]) >= 100_000,
        "le_100_bytes_per_fp_per_table": float(r["simhash_index_bytes_per_fp_per_table"]) <= 100,
    }
    r["targets"] = targets
    rows = [
        ("fingerprints (N)", f"{args.n:,}"),
        (
            "layout",
            f"{bench.layout.name} ({bench.layout.table_count} tables, {bench.layout.key_bits(0)}-bit keys)",
        ),
        ("bulk load (COPY binary + index build)", f"{r['load_fps_per_s']:,} fps/s ({r['load_s']} s)"),
        ("VACUUM ANALYZE after load", f"{r['vacuum_analyze_s']} s"),
        (
            "incremental load (indexes in place)",
            f"{r['incremental_fps_per_s']:,} fps/s" if r["incremental_fps_per_s"] else "-",
        ),
        ("heap bytes / fp", r["heap_bytes_per_fp"]),
        ("Simhash index bytes / fp / table", r["simhash_index_bytes_per_fp_per_table"]),
        ("Simhash index bytes / fp, all tables", r["simhash_index_bytes_per_fp_all_tables"]),
        ("k-bit query median / p99 (ms)", f"{r['query_ms_median']} / {r['query_ms_p99']}"),
        ("brute force median (ms)", r["brute_ms_median"]),
        ("speed-up vs brute force", f"{r['speedup_vs_brute']}x"),
        ("recall vs brute force", r["recall_vs_brute"]),
        ("planted neighbours missed", r["planted_missed"]),
        ("PyPI SimhashIndex", json.dumps(r["pypi_simhash"])),
        ("hot bucket", json.dumps(r.get("hot_bucket"))),
    ]
    if "rows_storage" in r:
        rows.append(("rows storage (alternative)", json.dumps(r["rows_storage"])))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print("targets: " + ", ".join(f"{k}={'yes' if v else 'NO'}" for k, v in targets.items()))
    emit(r, path=args.json, sort_keys=True)


if __name__ == "__main__":
    main()
