"""The named-entity candidates of the meaning path (issue 36, ``compare.entities``): is the right chapter
among a page's candidates, how many negatives pass the gate, and at what CPU cost per page.

    python -m benchmarks.meaning_entities --quick          # 2 pages per kind, 12 chapters of each work
    python -m benchmarks.meaning_entities --split tune     # the pages parameters are chosen on
    python -m benchmarks.meaning_entities                  # 8 pages per kind, every chapter registered

1. The data is ``benchmarks.meaning_data``'s (synonym rewrites, rewrites with reorder and drops, OCR noise,
   the English translation of 三国演义 when ``$FPTRACK_MEANING_DATA`` holds it; negatives: another novel,
   news, fan fiction with the works' names, reviews, held-out chapters, rewrites of unregistered chapters),
   on the split asked (default ``test``; parameters are chosen on ``tune``).
2. The works are registered through the product's command line in a fresh SQLite folder
   (``benchmarks.meaning.register``): ``fptrack works add`` fingerprints them, which fills the entity index.
3. Each page's :func:`compare.entities.candidates` (``--limit``, 12) is timed in CPU seconds (the vocabulary's
   first load reported apart). A positive page is right at 1 when its own chapter comes first, at ``limit``
   when it is among the candidates; a negative passes the gate when it has any candidate.
4. The lexicons: per work, how many terms, which of the works' best-known names (``meaning_data.CHARACTERS``)
   they hold, and which storyteller's formulas slipped in.

The last line is JSON.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.harness import arguments, emit, machine, percentile, print_table
from benchmarks.meaning import Registry, data_arguments, development_data, register
from benchmarks.meaning_data import CHARACTERS, NEGATIVE_KINDS, POSITIVE_KINDS, Example

FORMULAS = (
    "却说", "只见", "说道", "不知", "次日", "原来", "二人", "众人", "左右", "大喜", "大怒", "天下", "如何",
    "不可", "将军", "丞相", "那里", "怎么", "师父", "和尚", "长老",
)  # fmt: skip
"""Words of the storyteller and common titles: a good lexicon holds few of them."""


def lexicon_table(registry: Registry) -> dict[str, Any]:
    """Each registered work's lexicon: its size, the well-known names it holds, the formulas it holds."""
    from fptrack.compare.entities import work_lexicon

    texts: dict[str, list[str]] = defaultdict(list)
    for cid, (work, _number) in sorted(registry.keys.items()):
        texts[work].append(registry.texts[cid])
    out: dict[str, Any] = {}
    rows = []
    for work, chapters in sorted(texts.items()):
        started = time.process_time()
        lexicon = work_lexicon(chapters)
        cpu = time.process_time() - started
        names = CHARACTERS.get(work, ())
        held = [n for n in names if n in lexicon]
        formulas = [f for f in FORMULAS if f in lexicon]
        out[work] = {
            "terms": len(lexicon),
            "names_held": len(held),
            "names": len(names),
            "names_missing": [n for n in names if n not in lexicon],
            "formulas_held": formulas,
            "cpu_seconds_per_chapter": round(cpu / max(1, len(chapters)), 4),
        }
        rows.append([work, len(lexicon), f"{len(held)}/{len(names)}", " ".join(formulas) or "-"])
    print_table("lexicons", ["work", "terms", "names held", "formulas held"], rows)
    return out


def run(registry: Registry, env: dict[str, str], examples: list[Example], limit: int) -> dict[str, Any]:
    """Candidates of every page; the figures by kind."""
    from fptrack.compare.entities import candidates
    from fptrack.core.settings import Settings
    from fptrack.storage.db import create_engine_for, session_factory

    engine = create_engine_for(Settings.from_env(dict(env)))
    id_of = {key: cid for cid, key in registry.keys.items()}
    by_kind: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"pages": 0, "top1": 0, "topk": 0, "passed": 0, "candidates": [], "rank": [], "top_score": []}
    )
    cpu: list[float] = []
    with session_factory(engine)() as session:
        started = time.process_time()
        candidates(session, "预热", limit)  # the vocabulary's first load
        load = time.process_time() - started
        for example in examples:
            started = time.process_time()
            found = candidates(session, example.text, limit)
            cpu.append(time.process_time() - started)
            row = by_kind[example.kind]
            row["pages"] += 1
            row["candidates"].append(len(found))
            row["passed"] += bool(found)
            row["top_score"].append(found[0][1] if found else 0.0)
            if example.positive:
                own = id_of.get((example.work, example.chapter))
                ids = [cid for cid, _ in found]
                rank = ids.index(own) + 1 if own in ids else 0
                row["rank"].append(rank)
                row["top1"] += rank == 1
                row["topk"] += rank >= 1
    engine.dispose()
    table = []
    for kind in (*POSITIVE_KINDS, *NEGATIVE_KINDS):
        if kind not in by_kind:
            continue
        row = by_kind[kind]
        if kind in POSITIVE_KINDS:
            table.append(
                [kind, row["pages"], row["top1"], row["topk"], row["passed"], _median(row["candidates"])]
            )
        else:
            table.append([kind, row["pages"], "-", "-", row["passed"], _median(row["candidates"])])
    print_table(
        f"entity candidates (limit {limit}): right chapter first / among them; pages passing the gate",
        ["kind", "pages", "top 1", f"top {limit}", "passed", "candidates (median)"],
        table,
    )
    positives = [r for k, r in by_kind.items() if k in POSITIVE_KINDS]
    negatives = [r for k, r in by_kind.items() if k in NEGATIVE_KINDS]
    return {
        "by_kind": {k: {**r} for k, r in by_kind.items()},
        "positives": sum(r["pages"] for r in positives),
        "top1": sum(r["top1"] for r in positives),
        "topk": sum(r["topk"] for r in positives),
        "negatives": sum(r["pages"] for r in negatives),
        "negatives_passed": sum(r["passed"] for r in negatives),
        "cpu_ms_per_page_median": round(1000 * statistics.median(cpu), 2) if cpu else None,
        "cpu_ms_per_page_p90": round(1000 * percentile(cpu, 90), 2) if cpu else None,
        "cpu_ms_per_page_max": round(1000 * max(cpu), 2) if cpu else None,
        "vocabulary_load_cpu_ms": round(1000 * load, 1),
    }


def _median(values: list[int]) -> str:
    return f"{statistics.median(values):g}" if values else "-"


def main() -> None:
    parser = arguments(
        __doc__, "2 pages per kind (negatives too), the first 12 chapters of each work registered"
    )
    data_arguments(parser)
    parser.add_argument("--limit", type=int, default=12, help="candidates per page")
    args = parser.parse_args()

    started = time.monotonic()
    data, per_kind, chapters = development_data("meaning_entities", args)
    examples = [e for e in data.examples if args.split == "all" or e.split == args.split]
    workdir = Path(tempfile.mkdtemp(prefix="fptrack-entities-"))
    figures: dict[str, Any] = {
        "benchmark": "meaning_entities",
        "quick": args.quick,
        "per_kind": per_kind,
        "chapters_per_work": chapters,
        "split": args.split,
        "seed": args.seed,
        "missing": list(data.missing),
    }
    try:
        t0 = time.monotonic()
        env, registry = register(data, workdir)
        figures["registered_chapters"] = len(registry.texts)
        figures["register_seconds"] = round(time.monotonic() - t0, 1)
        figures["lexicons"] = lexicon_table(registry)
        figures.update(run(registry, env, examples, args.limit))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    figures["machine"] = machine()
    figures["seconds"] = round(time.monotonic() - started, 1)
    emit(figures)


if __name__ == "__main__":
    main()
