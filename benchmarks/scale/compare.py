"""Per-page compare time as the registry grows (1,000 -> 10,000 -> 100,000 chapters), with the chapter side of
the code index in the worker's memory (``compare.chapter_index``) and in PostgreSQL (``code_index``), measured
in the same run on the same database (the target: per-page compare within 1.5x from 1,000 to 100,000
chapters).

    python -m benchmarks.scale.compare --quick        # 50 and 100 chapters, one round: seconds
    python -m benchmarks.scale.compare                # and 100,000 (~90M code_index rows: a long load)

What it does, in a PostgreSQL database of its own (created and dropped; ``--keep`` keeps it):
1. chapters from ../shared/corpus: the novels' first copies (西游记, 三国演义) and half the news, cut into
   3,000-6,000-character pieces, registered as they are; past those, each piece again under a substitution
   of its characters (a permutation of the corpus's characters, one per variant: real-looking text whose
   codes are new), so 100,000 chapters hold 100,000 distinct texts. Works of 100 chapters, registered as the
   product does: ``works`` and ``chapters`` rows, then :func:`compare.service.index_work`;
2. 64 pages in two batches of 32, each half copies (a registered piece with site chrome around it and a few
   characters dropped) and half other text (水浒传 and the other half of the news, never registered);
3. at each size: the first look-up of the memory path (the load of the arrays) apart, then ``--rounds``
   rounds of :func:`compare.service._compare_batch` over both batches in each mode, alternating: the client's
   CPU (``time.process_time``), the PostgreSQL backend's CPU (``/proc``: run as root or postgres) and wall
   time, per page; the arrays' bytes; the two modes' verdicts must be the same.

Prints a table; the last line is JSON with every figure, and the ratio 100k/1k (or 10k/1k) per mode.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from benchmarks.corpus import iter_chapters, news_texts, require_corpus
from benchmarks.harness import arguments, emit, print_table, process_cpu_seconds, require_service
from fptrack.compare import chapter_index
from fptrack.compare.service import _compare_batch, index_work
from fptrack.core.settings import Settings
from fptrack.fingerprint.text_fingerprints import TextFingerprints, fingerprint_text
from fptrack.storage.db import create_engine_for, migrate
from fptrack.storage.models import Chapter, Work

CHAPTERS_PER_WORK = 100
BULK_MIN = 20_000
BATCH = 32


def pieces(texts: list[str], rng: random.Random) -> list[str]:
    """The texts joined and cut into pieces of 3,000-6,000 characters."""
    joined = "\n".join(texts)
    out, start = [], 0
    while start + 3000 <= len(joined):
        size = rng.randint(3000, 6000)
        out.append(joined[start : start + size])
        start += size
    return out


def corpus(rng: random.Random) -> tuple[list[str], list[str]]:
    """(registered pieces, other pieces)."""
    require_corpus("compare_scale")
    novels: dict[str, list[str]] = {}
    for chapter in iter_chapters("*__tennessine.jsonl"):
        novels.setdefault(chapter.work_id, []).append(chapter.text)
    news = news_texts()
    registered = pieces(novels.get("xiyouji", []) + novels.get("sanguoyanyi", []), rng)
    registered += pieces(news[: len(news) // 2], rng)
    other = pieces(novels.get("shuihuzhuan", []), rng) + pieces(news[len(news) // 2 :], rng)
    return registered, other


class Variants:
    """Piece ``i`` of the registry: the base pieces as they are, then each again under a character
    substitution of its own (a permutation of the corpus's CJK characters, seeded by the variant number)."""

    def __init__(self, bases: list[str]) -> None:
        self.bases = bases
        self.alphabet = sorted({c for t in bases for c in t if "\u4e00" <= c <= "\u9fff"})

    def text(self, number: int) -> str:
        variant, base = divmod(number, len(self.bases))
        if variant == 0:
            return self.bases[base]
        shuffled = self.alphabet[:]
        random.Random(variant).shuffle(shuffled)
        return self.bases[base].translate(str.maketrans("".join(self.alphabet), "".join(shuffled)))


CODE_INDEX = "ix_code_index_code_owner_kind"


def register(engine: Any, settings: Settings, variants: Variants | _Registry, start: int, stop: int) -> float:
    """Register pieces ``start .. stop - 1`` as works of 100 chapters; returns the seconds it took.

    A load of more than :data:`BULK_MIN` chapters drops the code index's look-up b-tree first and builds it
    again after (its own definition, read from the catalogue): inserting ~90M random keys one by one into it
    is most of the load's time; what is measured afterwards sees the same index."""
    began = time.perf_counter()
    definition = None
    if stop - start > BULK_MIN:
        with engine.begin() as connection:
            definition = connection.exec_driver_sql(
                f"SELECT indexdef FROM pg_indexes WHERE indexname = '{CODE_INDEX}'"
            ).scalar()
            if definition:
                connection.exec_driver_sql(f"DROP INDEX {CODE_INDEX}")
    for first in range(start, stop, CHAPTERS_PER_WORK):
        texts = [variants.text(n) for n in range(first, min(stop, first + CHAPTERS_PER_WORK))]
        with Session(engine) as session:
            session.connection().exec_driver_sql("SET synchronous_commit = off")
            body = "\n".join(texts)
            work = Work(
                title=f"work {first}", content_sha256=uuid.uuid4().hex + uuid.uuid4().hex[:32], text=body
            )
            session.add(work)
            session.flush()
            offset = 0
            for index, piece in enumerate(texts):
                session.add(
                    Chapter(work_id=work.id, index=index + 1, title=f"第{index + 1}章", start=offset,
                            end=offset + len(piece), text=piece)
                )  # fmt: skip
                offset += len(piece) + 1
            session.flush()
            index_work(session, work.id, settings)
            session.commit()
        done = min(stop, first + CHAPTERS_PER_WORK)
        if (done - start) % 5000 < CHAPTERS_PER_WORK:
            print(f"  registered {done:,} chapters ({time.perf_counter() - began:.0f} s)", file=sys.stderr)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        if definition:
            print("  building the code index again", file=sys.stderr)
            connection.exec_driver_sql("SET maintenance_work_mem = '1GB'")
            connection.exec_driver_sql(definition)
        connection.exec_driver_sql("VACUUM ANALYZE code_index")
        connection.exec_driver_sql("VACUUM ANALYZE fingerprints")
    return time.perf_counter() - began


def pirate_pages(registered: list[str], other: list[str], rng: random.Random, count: int) -> list[str]:
    """Half copies of registered pieces (chrome around, a few characters dropped), half other text."""
    out = []
    for number in range(count):
        if number % 2 == 0:
            piece = list(rng.choice(registered))
            for _ in range(5):
                del piece[rng.randrange(len(piece))]
            body = "".join(piece)
            out.append(
                f"首页 > 小说 > 第{number}章\n{body}\n上一章 目录 下一章\n本站域名 www.example-pirate.com"
            )
        else:
            out.append(f"首页 > 新闻\n{rng.choice(other)}\n版权所有")
    return out


def measure(
    engine: Any, settings: Settings, batches: list[list[TextFingerprints]], mode: str, rounds: int
) -> dict[str, Any]:
    """CPU and wall ms per page of ``_compare_batch`` in one mode (the first batch apart as a warm-up)."""
    chapter_index.configure(mode=mode)
    pages = sum(map(len, batches))
    with Session(engine) as session:
        backend = int(session.connection().exec_driver_sql("SELECT pg_backend_pid()").scalar() or 0)
        began = time.perf_counter()
        verdicts = [_compare_batch(session, batch, settings) for batch in batches]  # warm-up (the load)
        warm = time.perf_counter() - began
        session.rollback()
        index = chapter_index.snapshot(session).index if mode == "memory" else None
        nbytes = index.nbytes if index is not None else 0
        session.rollback()
        cpu, server, wall = 0.0, 0.0, 0.0
        for _ in range(rounds):
            for batch in batches:
                c0, s0, w0 = time.process_time(), process_cpu_seconds(backend), time.perf_counter()
                _compare_batch(session, batch, settings)
                cpu += time.process_time() - c0
                server += process_cpu_seconds(backend) - s0
                wall += time.perf_counter() - w0
                session.rollback()
    flagged = [[(v.chapter_id, v.flagged) for v in page] for batch in verdicts for page in batch]
    n = pages * rounds
    return {
        "client_cpu_ms": 1000 * cpu / n,
        "server_cpu_ms": 1000 * server / n,
        "cpu_ms": 1000 * (cpu + server) / n,
        "wall_ms": 1000 * wall / n,
        "first_batches_s": warm,
        "array_mb": nbytes / 2**20,
        "verdicts": flagged,
    }


def sharing(engine: Any, settings: Settings, batch: list[TextFingerprints], folder: Path) -> dict[str, Any]:
    """The memory path's start-up in a worker's first process (load from the database, write the files) and
    in its next ones (map the files), and the registry version check every batch pays."""
    chapter_index.FILE_MIN_PAIRS = 0  # write the files at every size measured
    figures: dict[str, Any] = {}
    for label in ("load_and_write_s", "map_files_s"):
        chapter_index.configure(mode="memory", folder=folder)  # a new process of the worker
        with Session(engine) as session:
            began = time.perf_counter()
            _compare_batch(session, batch, settings)
            figures[label] = time.perf_counter() - began
    figures["file_mb"] = sum(f.stat().st_size for f in folder.glob("*.npy")) / 2**20
    with Session(engine) as session:
        began = time.perf_counter()
        for _ in range(20):
            chapter_index.observe(session)
            session.rollback()
        figures["version_check_ms"] = (time.perf_counter() - began) * 1000 / 20
    for leftover in folder.glob("*.npy"):
        leftover.unlink()
    chapter_index.configure()
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = arguments(__doc__, "50 and 100 chapters, one round")
    parser.add_argument(
        "--sizes", default="", help="comma-separated registry sizes (default 1000,10000,100000)"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("FPTRACK_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--db", default=f"fptrack_bench_compare_scale_{os.getpid()}")
    parser.add_argument("--keep", action="store_true", help="keep the database (and reuse it with --reuse)")
    parser.add_argument(
        "--reuse", action="store_true", help="use the database --db as it is, registering only what it lacks"
    )
    parser.add_argument("--seed", type=int, default=20)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s] or (
        [50, 100] if args.quick else [1000, 10000, 100000]
    )
    if args.quick:
        args.rounds = 1
    require_service("compare_scale", "PostgreSQL", args.pg_url, 5432)

    rng = random.Random(args.seed)
    registered, other = corpus(rng)
    variants = Variants(registered + other)
    admin = create_engine(Settings(database_url=args.pg_url).database_url, isolation_level="AUTOCOMMIT")
    if not args.reuse:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)'))
            c.execute(text(f'CREATE DATABASE "{args.db}"'))
    settings = Settings(database_url=urlsplit(args.pg_url)._replace(path="/" + args.db).geturl())
    engine = create_engine_for(settings)
    migrate(settings, engine)
    # the registry: the registered pieces as they are, then variants of every piece (those of the other texts
    # too: their substitution makes them unrelated to the other pages), never the other texts as they are
    registry = _Registry(variants, len(registered), len(other))
    texts = pirate_pages(registered, other, rng, 2 * BATCH)
    documents = [fingerprint_text(t) for t in texts]
    batches = [documents[:BATCH], documents[BATCH:]]
    results: list[dict[str, Any]] = []
    try:
        with engine.connect() as c:
            held = int(c.exec_driver_sql("SELECT count(*) FROM chapters").scalar() or 0)
        for size in sizes:
            load_s = 0.0
            if held < size:
                print(f"registering chapters {held:,} .. {size:,}", file=sys.stderr)
                load_s = register(engine, settings, registry, held, size)
                held = size
            with engine.connect() as c:
                rows = int(
                    c.exec_driver_sql(
                        "SELECT reltuples::bigint FROM pg_class WHERE relname = 'code_index'"
                    ).scalar()
                    or 0
                )
                db_bytes = int(c.exec_driver_sql("SELECT pg_database_size(current_database())").scalar() or 0)
            point: dict[str, Any] = {"chapters": size, "code_index_rows": rows, "database_gb": db_bytes / 1e9,
                                     "register_s": load_s}  # fmt: skip
            for mode in ("database", "memory"):
                point[mode] = measure(engine, settings, batches, mode, args.rounds)
            point["same_verdicts"] = point["database"].pop("verdicts") == point["memory"].pop("verdicts")
            point["sharing"] = sharing(
                engine, settings, batches[0], Path(tempfile.mkdtemp(prefix="fptrack-bench-"))
            )
            results.append(point)
            print(f"  {size:,} chapters: database {point['database']['cpu_ms']:.2f} ms, memory "
                  f"{point['memory']['cpu_ms']:.2f} ms per page", file=sys.stderr)  # fmt: skip
    finally:
        engine.dispose()
        if not args.keep:
            with admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)'))
        admin.dispose()

    rows_out = []
    for point in results:
        for mode in ("database", "memory"):
            m = point[mode]
            keys = ("client_cpu_ms", "server_cpu_ms", "cpu_ms", "wall_ms", "first_batches_s")
            figures = [f"{m[k]:.2f}" for k in keys]
            label = f"{point['chapters']:,} {mode}"
            same = str(point["same_verdicts"])
            rows_out.append((label, f"{point['code_index_rows']:,}", *figures, f"{m['array_mb']:.0f}", same))
    print_table(
        "per-page compare (_compare_batch, batches of 32: half copies, half other text)",
        ["chapters / mode", "code_index rows", "client CPU ms", "PG CPU ms", "CPU ms", "wall ms",
         "first 2 batches s", "arrays MB", "same verdicts"],
        rows_out,
    )  # fmt: skip
    sharing_keys = ("load_and_write_s", "map_files_s", "file_mb", "version_check_ms")
    print_table(
        "the memory path's start-up and freshness check",
        ["chapters", "load from PostgreSQL + write files s", "map files s", "files MB", "version check ms"],
        [(f"{p['chapters']:,}", *(f"{p['sharing'][k]:.2f}" for k in sharing_keys)) for p in results],
    )
    summary: dict[str, Any] = {"points": results, "batch": BATCH, "rounds": args.rounds}
    if len(results) > 1:
        first, last = results[0], results[-1]
        for mode in ("database", "memory"):
            for figure in ("cpu_ms", "wall_ms"):
                key = f"ratio_{_size(last['chapters'])}_{_size(first['chapters'])}_{mode}_{figure}"
                summary[key] = last[mode][figure] / first[mode][figure]
    print()
    emit(summary, sort_keys=True)


def _size(chapters: int) -> str:
    return f"{chapters // 1000}k" if chapters % 1000 == 0 else str(chapters)


class _Registry:
    """Chapter ``n`` of the registry: registered piece ``n``, then the variants of every piece, skipping the
    other texts as they are (variant 0)."""

    def __init__(self, variants: Variants, registered: int, other: int) -> None:
        self.variants, self.registered, self.other = variants, registered, other

    def text(self, number: int) -> str:
        return self.variants.text(number if number < self.registered else number + self.other)


if __name__ == "__main__":
    main()
