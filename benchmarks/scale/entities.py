"""The meaning path's entity candidates (``compare.entities.candidates``) at registry size, on PostgreSQL:
the CPU and wall time of a process's first call and of each page after, as the index was read before
migration 0036 (a ``count(id)`` over ``entity_chapters`` per page, the whole vocabulary by a GROUP BY over
every posting at a process's first call and after any removal) and as it is read now (one stamp row per
page, the page's own strings looked up in ``entity_terms`` through a bounded cache).

    python -m benchmarks.scale.entities --quick               # 1,000 chapters: under a minute
    python -m benchmarks.scale.entities --chapters 100000     # ~96 million postings: a quarter of an hour

What it does (in a database of its own, created and dropped: ``--db``, on ``--pg-url``):
1. migrates the real schema; drops the entity tables' foreign keys and indexes (no chapters are stored: the
   rows stand alone) and fills ``entity_postings`` in SQL, ``--batch`` chapters a statement: each work
   (:data:`CHAPTERS_PER_WORK` chapters) has a lexicon of :data:`LEXICON` terms (the first
   :data:`UNIVERSAL` in every work, as 二人 and 将军 are; the next :data:`SHARED` drawn from a pool of
   :data:`POOL` shared across works; the rest its own), each chapter ``--draws`` draws skewed to the lexicon's
   head (rank = L x u^:data:`SKEW`), each term under its Han form and two romanized keys (pinyin and
   Wade-Giles stand-ins), so ~960 rows a chapter as the real index has; then the indexes rebuilt, ANALYZE,
   ``entity_chapters``, ``entity_terms`` and the stamp as ``compare.entities`` keeps them;
2. makes ``--pages`` pages: half English translations of a chapter (its romanized names, capitalised, in
   its order, in filler prose), half English prose naming nothing indexed; and one Chinese page of a
   chapter's Han names in filler (the n-gram look-up's worst case);
3. times, per path, a process's first call (nothing held) and every page after (CPU of this process and of
   the database's backends, wall), and checks both paths return the same chapters.

Prints a table; the last line is JSON with every figure.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Engine, create_engine, func, select, text
from sqlalchemy.orm import Session

from benchmarks.harness import (
    BackendCpu,
    arguments,
    emit,
    machine,
    percentile,
    print_table,
    progress,
    require_service,
)
from fptrack.compare import entities
from fptrack.compare.entities import page_terms, ranked
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for, migrate
from fptrack.storage.models import EntityChapter, EntityPosting

CHAPTERS_PER_WORK = 100
LEXICON = 1_500
UNIVERSAL = 20
SHARED = 300
POOL = 20_000
SKEW = 2.5
OWN_BASE = 100_000  # term ids of the works' own terms start here (below: universal and shared)


def _han(t: str) -> str:
    """SQL: term id ``t``'s Han form (three characters of the CJK block from its id)."""
    return " || ".join(
        f"chr(19968 + ({t}{part})::int)" for part in (" % 3000", " / 3000 % 3000", " / 9000000")
    )


def _latin(prefix: str, t: str) -> str:
    """SQL: a Latin key of term id ``t``, letters only (its hex digits mapped to letters): the stand-in of
    its pinyin (``py``) or Wade-Giles (``wg``) form."""
    return f"'{prefix}' || translate(to_hex({t}), '0123456789', 'ghijklmnop')"


FILL = f"""
INSERT INTO entity_postings (term, chapter_id, occurrences, "first")
SELECT k.term, p.cid, p.occ, p.first
FROM (
    SELECT c.cid, d.t, count(*)::int AS occ, min(d.pos) AS first
    FROM generate_series(CAST(:lo AS bigint), CAST(:hi AS bigint)) AS c(cid),
    LATERAL (
        SELECT CASE
                 WHEN g.r < {UNIVERSAL} THEN g.r
                 WHEN g.r < {UNIVERSAL + SHARED}
                   THEN {UNIVERSAL} + ((c.cid / {CHAPTERS_PER_WORK}) * 7919 + g.r * 104729) % {POOL}
                 ELSE {OWN_BASE} + (c.cid / {CHAPTERS_PER_WORK}) * {LEXICON} + g.r
               END::bigint AS t,
               (random() * 9999)::int AS pos
        FROM (SELECT floor({LEXICON} * power(random(), {SKEW}))::bigint AS r, c.cid AS owner
              FROM generate_series(1, CAST(:draws AS int))) AS g
    ) AS d
    GROUP BY c.cid, d.t
) AS p,
LATERAL (VALUES ({_han("p.t")}), ({_latin("py", "p.t")}), ({_latin("wg", "p.t")})) AS k(term)
"""
DROPPED = [
    "ALTER TABLE entity_postings DROP CONSTRAINT fk_entity_postings_chapter_id_chapters",
    "ALTER TABLE entity_chapters DROP CONSTRAINT fk_entity_chapters_chapter_id_chapters",
    "ALTER TABLE entity_chapters DROP CONSTRAINT fk_entity_chapters_work_id_works",
    "ALTER TABLE entity_postings DROP CONSTRAINT pk_entity_postings",
    "DROP INDEX ix_entity_postings_chapter_id",
]
REBUILT = [
    "ALTER TABLE entity_postings ADD CONSTRAINT pk_entity_postings PRIMARY KEY (term, chapter_id)",
    "CREATE INDEX ix_entity_postings_chapter_id ON entity_postings (chapter_id)",
    "ANALYZE entity_postings",
    (
        "INSERT INTO entity_chapters (chapter_id, work_id, terms, indexed_at) "
        "SELECT chapter_id, chapter_id / 100 + 1, count(*), now() FROM entity_postings GROUP BY chapter_id"
    ),
    "DELETE FROM entity_terms",
    "INSERT INTO entity_terms (term, chapters) SELECT term, count(*) FROM entity_postings GROUP BY term",
    "UPDATE entity_stamp SET serial = serial + 1, chapters = (SELECT count(*) FROM entity_chapters)",
    "ANALYZE entity_chapters",
    "ANALYZE entity_terms",
]
PROSE = (
    "the army marched at dawn and the river was high so they waited by the bridge until the rain stopped "
    "and then they spoke of the old days and the battles won and lost while the horses rested in the shade"
)


@dataclass
class Before:
    """``compare.entities`` as it read the index before migration 0036: its vocabulary (every term's chapter
    count, and the first two characters of its Han terms) loaded whole by one GROUP BY, held while
    ``entity_chapters``'s largest id and row count stay the same (read at every page)."""

    version: tuple[int, int] | None = None
    df: dict[str, int] = field(default_factory=dict)
    prefixes: frozenset[str] = frozenset()

    def candidates(self, session: Session, page: str, limit: int) -> list[tuple[int, float]]:
        row = session.execute(select(func.max(EntityChapter.id), func.count(EntityChapter.id))).one()
        version = (int(row[0] or 0), int(row[1] or 0))
        if version != self.version:
            counted = select(EntityPosting.term, func.count()).group_by(EntityPosting.term)
            self.df = {str(term): int(n) for term, n in session.execute(counted)}
            self.prefixes = frozenset(t[:2] for t in self.df if "\u4e00" <= t[0] <= "\u9fff")
            self.version = version
        return ranked(session, page_terms(page, self.df, self.prefixes), self.df, version[1], limit)


class After:
    """``compare.entities.candidates`` as it is: its per-process cache emptied for a first call."""

    def __init__(self) -> None:
        entities._caches.clear()

    def candidates(self, session: Session, page: str, limit: int) -> list[tuple[int, float]]:
        return entities.candidates(session, page, limit)


WORDS = PROSE.split()


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        parts = urlsplit(args.pg_url)
        self.db_url = parts._replace(path="/" + args.db).geturl()
        self.admin = create_engine(
            Settings(database_url=args.pg_url).database_url, isolation_level="AUTOCOMMIT"
        )
        self.results: dict[str, Any] = {"benchmark": "scale.entities", "chapters": args.chapters}
        self.engine: Engine | None = None

    def create_database(self) -> None:
        with self.admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{self.args.db}" WITH (FORCE)'))
            c.execute(text(f'CREATE DATABASE "{self.args.db}"'))
            self.results["postgres"] = c.execute(text("SHOW server_version")).scalar()
        settings = Settings(database_url=self.db_url)
        self.engine = create_engine_for(settings)
        migrate(settings, self.engine)

    def drop_database(self) -> None:
        if self.engine is not None:
            self.engine.dispose()
        if not self.args.keep:
            with self.admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{self.args.db}" WITH (FORCE)'))

    def fill(self) -> None:
        assert self.engine is not None
        started, cpu = time.perf_counter(), time.process_time()
        with self.engine.begin() as c:
            for statement in DROPPED:
                c.execute(text(statement))
        with BackendCpu(self.args.db) as backends:
            for lo in range(1, self.args.chapters + 1, self.args.batch):
                hi = min(self.args.chapters, lo + self.args.batch - 1)
                with self.engine.begin() as c:
                    c.execute(text("SELECT setseed(:s)"), {"s": (self.args.seed % 1000 + lo % 997) / 2000})
                    c.execute(text(FILL), {"lo": lo, "hi": hi, "draws": self.args.draws})
                progress(f"filled chapters {lo}-{hi} ({time.perf_counter() - started:.0f} s)")
            with self.engine.begin() as c:
                for statement in REBUILT:
                    c.execute(text(statement))
        with self.engine.connect() as c:
            rows = int(c.execute(text("SELECT count(*) FROM entity_postings")).scalar_one())
            terms = int(c.execute(text("SELECT count(*) FROM entity_terms")).scalar_one())
            size = int(c.execute(text("SELECT pg_total_relation_size('entity_postings')")).scalar_one())
        self.results["fill"] = {
            "postings": rows,
            "postings_per_chapter": round(rows / self.args.chapters, 1),
            "terms": terms,
            "postings_bytes": size,
            "wall_s": round(time.perf_counter() - started, 1),
            "db_cpu_s": round(backends.seconds, 1),
            "cpu_s": round(time.process_time() - cpu, 2),
        }

    def pages(self) -> list[tuple[str, str]]:
        """(kind, text) of the pages timed: translations and unrelated English, then one Chinese page."""
        assert self.engine is not None
        made: list[tuple[str, str]] = []
        with Session(self.engine) as session:
            for i in range(self.args.pages):
                words = [self.rng.choice(WORDS) for _ in range(500)]
                if i % 2 == 0:
                    chapter = self.rng.randint(1, self.args.chapters)
                    names = session.scalars(
                        select(EntityPosting.term)
                        .where(EntityPosting.chapter_id == chapter, EntityPosting.term.like("py%"))
                        .order_by(EntityPosting.first)
                    ).all()
                    for k, name in enumerate(names[:60]):
                        words.insert(8 * k + 3, name.capitalize() + ".")
                    made.append(("translation", " ".join(words)))
                else:
                    made.append(
                        (
                            "unrelated",
                            " ".join(w.capitalize() if j % 9 == 0 else w for j, w in enumerate(words)),
                        )
                    )
            chapter = self.rng.randint(1, self.args.chapters)
            han = session.scalars(
                select(EntityPosting.term)
                .where(EntityPosting.chapter_id == chapter, ~EntityPosting.term.like("py%"))
                .where(~EntityPosting.term.like("wg%"))
                .order_by(EntityPosting.first)
            ).all()
            filler = "他们来到城下，两军相对，鼓声大作，众人皆惊。"
            made.append(("chinese", "".join(f"{filler}{name}说道：" for name in han[:150]) + filler * 20))
        return made

    def time_path(self, name: str, path: Before | After, pages: list[tuple[str, str]]) -> dict[str, Any]:
        assert self.engine is not None
        figures: dict[str, Any] = {}
        answers: list[list[tuple[int, float]]] = []
        with Session(self.engine) as session:
            session.execute(text("SELECT 1"))  # the connection made outside the timing
            per_kind: dict[str, list[tuple[float, float, float]]] = {}
            for i, (kind, page) in enumerate([pages[0], *pages]):
                with BackendCpu(self.args.db, every=0.05) as backends:
                    wall, cpu = time.perf_counter(), time.process_time()
                    found = path.candidates(session, page, 12)
                    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                session.commit()
                if i == 0:
                    figures["first_call"] = {
                        "cpu_ms": round(1000 * cpu, 1),
                        "db_cpu_ms": round(1000 * backends.seconds, 1),
                        "wall_ms": round(1000 * wall, 1),
                    }
                    progress(f"{name}: first call {1000 * cpu:.0f} ms CPU, {1000 * wall:.0f} ms wall")
                    continue
                answers.append(found)
                per_kind.setdefault(kind, []).append((cpu, backends.seconds, wall))
        for kind, samples in per_kind.items():
            figures[kind] = {
                "pages": len(samples),
                "cpu_ms_median": round(1000 * statistics.median(s[0] for s in samples), 2),
                "cpu_ms_p90": round(1000 * percentile((s[0] for s in samples), 90), 2),
                "db_cpu_ms_median": round(1000 * statistics.median(s[1] for s in samples), 2),
                "wall_ms_median": round(1000 * statistics.median(s[2] for s in samples), 2),
            }
        figures["found"] = sum(1 for a in answers if a)
        self.answers[name] = answers
        return figures

    def run(self) -> None:
        self.answers: dict[str, list[list[tuple[int, float]]]] = {}
        self.create_database()
        try:
            self.fill()
            pages = self.pages()
            for name, path in (("before", Before()), ("after", After())):
                self.results[name] = self.time_path(name, path, pages)
            self.results["same_answers"] = self.answers["before"] == self.answers["after"]
        finally:
            self.drop_database()

    def report(self) -> None:
        rows = []
        for name in ("before", "after"):
            figures = self.results[name]
            first = figures["first_call"]
            rows.append((f"{name}: first call", first["cpu_ms"], first["db_cpu_ms"], first["wall_ms"], ""))
            for kind in ("translation", "unrelated", "chinese"):
                k = figures.get(kind)
                if k:
                    label = f"{name}: {kind} page"
                    rows.append(
                        (label, k["cpu_ms_median"], k["db_cpu_ms_median"], k["wall_ms_median"], k["pages"])
                    )
        fill = self.results["fill"]
        print(
            f"entity index: {self.args.chapters:,} chapters, {fill['postings']:,} postings "
            f"({fill['postings_per_chapter']} a chapter), {fill['terms']:,} terms, "
            f"{fill['postings_bytes'] / 2**30:.2f} GiB; filled in {fill['wall_s']} s"
        )
        print_table("candidates (median per page)", ["", "CPU ms", "db CPU ms", "wall ms", "pages"], rows)
        print(f"\nsame chapters from both paths: {self.results['same_answers']}")
        self.results["machine"] = machine()
        emit(self.results, path=self.args.json)


def main(argv: list[str] | None = None) -> None:
    parser = arguments(__doc__, "1,000 chapters, 12 pages")
    parser.add_argument("--chapters", type=int, default=100_000, help="chapters indexed")
    parser.add_argument("--draws", type=int, default=480, help="skewed term draws a chapter (~960 rows)")
    parser.add_argument("--pages", type=int, default=100, help="English pages timed (half translations)")
    parser.add_argument("--batch", type=int, default=2_000, help="chapters a fill statement")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--db", default="fptrack_bench_entities", help="database to create (and drop)")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--json", type=Path, help="also write the JSON figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.chapters, args.pages = 1_000, 12
    require_service("scale.entities", "PostgreSQL", args.pg_url, 5432)
    bench = Bench(args)
    bench.run()
    bench.report()


if __name__ == "__main__":
    main()
