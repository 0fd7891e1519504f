"""The piracy evaluation: a pirate web built from ../shared/corpus, crawled by the real ``fptrack``.

    python -m benchmarks.accuracy.piracy --quick          # one page per kind, no threshold sweep
    python -m benchmarks.accuracy.piracy --sample         # a sample (~220 pages), a few minutes
    python -m benchmarks.accuracy.piracy                  # everything (~2,000 pages)
    python -m benchmarks.accuracy.piracy --postgres postgresql://postgres@127.0.0.1:5432/postgres
    python -m benchmarks.accuracy.piracy --sample --ablation  # and each method of the page path removed
    python -m benchmarks.accuracy.piracy --ablation --variants '-winnow,+simhash'   # some variants only
    python -m benchmarks.accuracy.piracy --sample --retroactive  # works registered only after the crawl

1. ``benchmarks/pirate_web.py`` builds the web (what is registered, what is published, the ground truth).
2. Five pirate sites are served on 127.0.0.1 (one port each). In a fresh data folder (SQLite, or a fresh
   PostgreSQL database with ``--postgres``) the real command line runs in subprocesses: ``fptrack init``,
   ``fptrack works add``, ``fptrack crawl <site>/... --depth 1``, ``fptrack matches --format json``.
3. The peers see the same page texts as extracted by the crawl (read back from the database) and the same
   registered chapter texts: PyPI ``simhash`` (``Simhash(text)``, ``SimhashIndex`` with k = 3) and
   ``datasketch`` (``MinHashLSH``, threshold 0.5, 128 permutations, character 5-grams of the text without
   whitespace). A peer flags a page for every chapter its index returns.
4. Scores, per kind: recall (positive pages flagged for the right work), chapter accuracy (of those, pages
   whose flagged chapters are all in the truth set), false positives on negatives, span IoU on the excerpt
   kind (page side and work side, against the known copied span). Overall precision counts pages: a negative
   page with any match, or a positive page matched only with chapters of other works, is a false positive.
5. Calibration: every page is compared again in-process (``compare.service.compare_document``, the same code
   the crawl ran, with the site templates the crawl settled on) to get every candidate verdict, flagged or
   not, and the decision rule of the contract (``fingerprint.contract.DecisionRule``) is swept over its
   thresholds: the precision/recall table is printed and written to ``--curve`` (TSV). The thresholds are read
   off this curve (docs/compare.md).
6. Ablation (``--ablation``): the same in-process comparison with each method of the page path removed in turn
   (``CONTRACT.without(method)``: winnowing on characters, winnowing on initials as candidate sources; the
   initials channel of the alignment), the method the product leaves off added (``+simhash``), and each
   candidate source alone (``only m``); recall per kind, false positives, candidates verified per page and the
   seconds of each variant's in-process pass. Pinyin DNA, on the research shelf, is measured the same way as a
   candidate source (``+dna``, ``only dna``: its candidates from ``research.pinyin_dna.DnaCandidateIndex``,
   verified by the product's alignment and rule). ``--variants '-winnow,+simhash'`` runs only those (and the
   product).

The last line of output is JSON with the figures. No corpus text is written into the repository: work files
and the database live in a temporary folder that is deleted afterwards (``--keep`` keeps it).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.corpus import require_corpus
from benchmarks.harness import ROOT, arguments, emit, machine
from benchmarks.pirate_web import NEGATIVE_KINDS, POSITIVE_KINDS, PirateWeb, build_pirate_web
from testbed.sites import serve_site

SYSTEMS = ("fptrack", "simhash", "minhash")


# ------------------------------------------------------------------------------------------------ running


@dataclass
class Run:
    env: dict[str, str]
    database_url: str

    def fptrack(self, *args: str, timeout: float = 7200) -> subprocess.CompletedProcess[str]:
        completed = subprocess.run(
            [sys.executable, "-m", "fptrack.cli", *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if completed.returncode not in (0, 3):
            sys.exit(f"fptrack {' '.join(args)} failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
        return completed


def _fresh_database(postgres: str | None, data_dir: Path) -> tuple[str, Any]:
    """A database URL for this run and a function that drops it afterwards."""
    if not postgres:
        return f"sqlite:///{data_dir / 'fptrack.db'}", lambda: None
    import psycopg
    from sqlalchemy.engine import make_url

    name = f"fptrack_eval_{os.getpid()}"
    admin_url = make_url(postgres)
    dsn = admin_url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name}")
        connection.execute(f"CREATE DATABASE {name}")

    def drop() -> None:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return admin_url.set(database=name).render_as_string(hide_password=False), drop


def _read_back(database_url: str) -> tuple[dict[str, str], dict[int, tuple[str, str, int, str]]]:
    """Page texts by URL, and registered chapters: id -> (work title, chapter title, index, text)."""
    from sqlalchemy import create_engine, text

    from fptrack.core.settings import normalise_database_url
    from fptrack.storage.compressed import decompress_text

    engine = create_engine(normalise_database_url(database_url))
    with engine.connect() as connection:
        pages = {
            url: decompress_text(body)
            for url, body in connection.execute(text("SELECT url, text_z FROM pages WHERE status = 200"))
        }
        chapters = {
            cid: (work, title, index, decompress_text(body))
            for cid, work, title, index, body in connection.execute(
                text(
                    'SELECT c.id, w.title, c.title, c."index", c.text_z FROM chapters c '
                    "JOIN works w ON w.id = c.work_id"
                )
            )
        }
    engine.dispose()
    return pages, chapters


# ------------------------------------------------------------------------------------------------ peers


def run_peers(
    pages: dict[str, str], chapters: dict[int, tuple[str, str, int, str]]
) -> dict[str, dict[str, set[int]]]:
    """Chapter ids each peer returns for each page URL."""
    from datasketch import MinHash, MinHashLSH
    from simhash import Simhash, SimhashIndex

    def shingles(body: str) -> list[bytes]:
        compact = "".join(body.split())
        return [compact[i : i + 5].encode("utf-8") for i in range(max(0, len(compact) - 4))]

    def minhash(body: str) -> MinHash:
        sketch = MinHash(num_perm=128)
        sketch.update_batch(shingles(body))
        return sketch

    index = SimhashIndex([(str(cid), Simhash(c[3])) for cid, c in chapters.items()], k=3)
    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    for cid, c in chapters.items():
        lsh.insert(str(cid), minhash(c[3]))
    found: dict[str, dict[str, set[int]]] = {"simhash": {}, "minhash": {}}
    for url, body in pages.items():
        found["simhash"][url] = {int(x) for x in index.get_near_dups(Simhash(body))}
        found["minhash"][url] = {int(x) for x in lsh.query(minhash(body))} if body.strip() else set()
    return found


# ------------------------------------------------------------------------------------------------ scoring


def _interval_iou(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> float:
    def cover(spans: list[tuple[int, int]]) -> set[int]:
        out: set[int] = set()
        for s, e in spans:
            out.update(range(s, e))
        return out

    x, y = cover(a), cover(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def _excerpt_span(text: str, lines: tuple[str, ...]) -> tuple[int, int] | None:
    """Where the excerpt's lines sit in the extracted page text: each line found after the one before (a short
    line can repeat inside the excerpt, so the last line is never looked up from the start)."""
    start = position = text.find(lines[0])
    if start < 0:
        return None
    for line in lines:
        found = text.find(line, position)
        if found < 0:
            return None
        position = found + len(line)
    return start, position


def score(
    web: PirateWeb,
    bases: list[str],
    flagged: dict[str, dict[str, set[tuple[str, int]]]],
    spans: dict[str, list[tuple[str, int, list[int]]]],
    page_texts: dict[str, str],
) -> dict[str, Any]:
    """Per system and kind: pages, found, chapter-correct, false positives; overall precision and recall."""
    results: dict[str, Any] = {}
    for system, by_url in flagged.items():
        kinds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        tp = fp = fn = 0
        single = [0, 0]
        ious_page: list[float] = []
        ious_work: list[float] = []
        worst: list[tuple[float, str, tuple[int, int], list[list[int]]]] = []
        for spec in web.pages:
            url = bases[spec.site] + spec.path
            got = by_url.get(url, set())
            row = kinds[spec.kind]
            row["pages"] += 1
            if spec.positive:
                works = {w for w, _ in spec.truth}
                hit = any(w in works for w, _ in got)
                if hit:
                    tp += 1
                    row["found"] += 1
                    correct = got <= spec.truth
                    row["chapter_ok"] += correct
                    if len(spec.truth) == 1:
                        single[0] += 1
                        single[1] += correct
                else:
                    fn += 1
                    if got:
                        fp += 1
                        row["false_pos"] += 1
                if spec.kind in ("excerpt_news", "excerpt_short", "kana_excerpt") and system == "fptrack":
                    text = page_texts.get(url, "")
                    truth_page = _excerpt_span(text, spec.excerpt_lines)
                    chosen = [s for w, c, s in spans.get(url, []) if (w, c) in spec.truth]
                    if truth_page is None:
                        continue
                    iou_p = _interval_iou([(s[0], s[1]) for s in chosen], [truth_page]) if chosen else 0.0
                    iou_w = (
                        _interval_iou([(s[2], s[3]) for s in chosen], [spec.excerpt_work_span])
                        if chosen and spec.excerpt_work_span is not None
                        else 0.0
                    )
                    ious_page.append(iou_p)
                    ious_work.append(iou_w)
                    if iou_p < 0.8:
                        worst.append((round(iou_p, 3), url, truth_page, [s for s in chosen]))
            else:
                if got:
                    fp += 1
                    row["false_pos"] += 1
        results[system] = {
            "precision": tp / (tp + fp) if tp + fp else 1.0,
            "recall": tp / (tp + fn) if tp + fn else 0.0,
            "chapter_accuracy_single": single[1] / single[0] if single[0] else 0.0,
            "kinds": {k: dict(v) for k, v in kinds.items()},
        }
        if ious_page:
            results[system]["excerpt_iou_page"] = sum(ious_page) / len(ious_page)
            results[system]["excerpt_iou_work"] = sum(ious_work) / len(ious_work)
            results[system]["excerpt_iou_page_min"] = min(ious_page)
            results[system]["excerpt_iou_below_0.8"] = sum(i < 0.8 for i in ious_page)
            for iou, url, truth_span, matched in sorted(worst)[:5]:
                print(f"excerpt with IoU {iou}: {url} true page span {truth_span}, matched {matched}")
    return results


def print_scores(results: dict[str, Any]) -> None:
    head = f"{'kind':<24}{'pages':>6}" + "".join(f"{s + ' rec/chap':>22}" for s in SYSTEMS)
    print(head)
    print("-" * len(head))
    for kind in POSITIVE_KINDS:
        row = results["fptrack"]["kinds"].get(kind)
        if not row:
            continue
        cells = ""
        for s in SYSTEMS:
            r = results[s]["kinds"][kind]
            found = r.get("found", 0)
            rec = found / r["pages"]
            chap = r.get("chapter_ok", 0) / found if found else 0.0
            cells += f"{rec:>14.3f} / {chap:<5.2f}"
        print(f"{kind:<24}{int(row['pages']):>6}{cells}")
    head2 = f"{'negative kind':<24}{'pages':>6}" + "".join(f"{s + ' false pos':>22}" for s in SYSTEMS)
    print("\n" + head2)
    print("-" * len(head2))
    for kind in NEGATIVE_KINDS:
        row = results["fptrack"]["kinds"].get(kind)
        if not row:
            continue
        cells = "".join(f"{int(results[s]['kinds'][kind].get('false_pos', 0)):>22}" for s in SYSTEMS)
        print(f"{kind:<24}{int(row['pages']):>6}{cells}")
    print()
    for s in SYSTEMS:
        r = results[s]
        extra = ""
        if "excerpt_iou_page" in r:
            extra = f"  excerpt IoU page {r['excerpt_iou_page']:.3f} work {r['excerpt_iou_work']:.3f}"
        print(
            f"{s:<10} precision {r['precision']:.4f}  recall {r['recall']:.4f}  "
            f"chapter accuracy (one-chapter pages) {r['chapter_accuracy_single']:.4f}{extra}"
        )


# ------------------------------------------------------------------------------------------------ calibration


def _crawled_pages(session: Any) -> list[tuple[Any, frozenset[int]]]:
    """Every crawled page (id, url, text...) with the template hashes the crawl ignored on it: the site's
    template as the product reads it (from what its pages store), on pages marked ``template_masked``."""
    from sqlalchemy import select

    from fptrack.compare.templates import site_template
    from fptrack.storage.models import Page

    pages = list(
        session.execute(
            select(Page.id, Page.url, Page.site_id, Page.text, Page.template_masked).where(Page.status == 200)
        )
    )
    templates = {
        site_id: site_template(session, site_id)
        for site_id in {row.site_id for row in pages if row.template_masked}
    }
    return [
        (row, templates.get(row.site_id, frozenset()) if row.template_masked else frozenset())
        for row in pages
    ]


def _all_verdicts(env: dict[str, str], contract: Any) -> dict[str, list[Any]]:
    """Every candidate verdict (flagged or not) of every crawled page, compared in-process under ``contract``
    (the product's, or one with a method off), with the site templates the crawl settled on ignored exactly
    where the crawl ignored them (pages marked ``template_masked``)."""
    from fptrack.compare.service import compare_document
    from fptrack.core.settings import Settings
    from fptrack.fingerprint.contract import METHODS
    from fptrack.fingerprint.text_fingerprints import fingerprint_text
    from fptrack.storage.db import create_engine_for, session_factory

    settings = Settings.from_env(env)
    engine = create_engine_for(settings)
    verdicts: dict[str, list[Any]] = {}
    with session_factory(engine)() as session:
        # every fingerprint of the page, whatever the variant reads (the boilerplate mask needs winnowing even
        # when winnowing is not a candidate source)
        everything = replace(contract, methods=frozenset(METHODS))
        for row, ignored in _crawled_pages(session):
            verdicts[row.url] = (
                compare_document(
                    session,
                    fingerprint_text(row.text, everything),
                    settings,
                    ignored_codes=ignored,
                    contract=contract,
                )
                if (row.text or "").strip()
                else []
            )
    engine.dispose()
    return verdicts


def _flagged_keys(web: PirateWeb, verdicts: list[Any], rule: Any) -> set[tuple[str, int]]:
    from fptrack.compare.scoring import decide_with

    title_to_key = {t: w for w, t in web.work_titles.items()}
    return {
        (
            title_to_key.get(v.work_title, "?"),
            web.chapter_titles.get((title_to_key.get(v.work_title, "?"), v.chapter_title), -1),
        )
        for v in verdicts
        if decide_with(v.evidence, rule).flagged
    }


def score_verdicts(
    web: PirateWeb, bases: list[str], verdicts: dict[str, list[Any]], rule: Any
) -> dict[str, Any]:
    """Precision, recall and chapter accuracy of ``rule`` over in-process verdicts; per kind: pages, found
    (right work), false positives (a negative with any match, a positive matched only with other works)."""
    tp = fp = fn = 0
    chap_ok = chap_n = 0
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for spec in web.pages:
        got = _flagged_keys(web, verdicts.get(bases[spec.site] + spec.path, []), rule)
        row = kinds[spec.kind]
        row["pages"] += 1
        if spec.positive:
            works = {w for w, _ in spec.truth}
            if any(w in works for w, _ in got):
                tp += 1
                row["found"] += 1
                if len(spec.truth) == 1:
                    chap_n += 1
                    chap_ok += got <= spec.truth
            else:
                fn += 1
                if got:
                    fp += 1
                    row["false_pos"] += 1
        elif got:
            fp += 1
            row["false_pos"] += 1
    return {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "chapter_accuracy": chap_ok / chap_n if chap_n else 0.0,
        "fp": fp,
        "fn": fn,
        "kinds": {k: dict(v) for k, v in kinds.items()},
    }


def calibrate(
    web: PirateWeb, bases: list[str], verdicts: dict[str, list[Any]], curve_path: Path | None
) -> list[dict[str, Any]]:
    """The decision rule swept over its thresholds, on every candidate verdict of every page."""
    from fptrack.compare.scoring import candidate_rule_grid

    points = []
    for rule in candidate_rule_grid():
        scored = score_verdicts(web, bases, verdicts, rule)
        points.append({**rule.as_dict(), **{k: v for k, v in scored.items() if k != "kinds"}})
    title_to_key = {t: w for w, t in web.work_titles.items()}
    _print_margins(web, bases, verdicts, title_to_key)
    if curve_path:
        keys = list(points[0])
        curve_path.write_text(
            "\t".join(keys)
            + "\n"
            + "".join("\t".join(str(round(p[k], 4)) for k in keys) + "\n" for p in points)
        )
    return points


def _dna_verdicts(env: dict[str, str], with_product: bool) -> dict[str, list[Any]]:
    """Pinyin DNA as a candidate source, from the research shelf (the product neither computes nor stores DNA
    codes): the registered chapters' DNA codes (``DnaParams()``, uniform reference, as the product computed
    them when DNA was one of its methods) in a ``research.pinyin_dna.DnaCandidateIndex``; each page's DNA
    candidates (the contract's ``min_shared`` and ``max_candidates``) verified by the product's alignment and
    rule (``compare.service.verify_chapters``, with the crawl's template hashes ignored).

    ``with_product``: ``+dna``, the product's verdicts (computed again, so that the seconds compare) plus
    those of the DNA candidates the product did not verify. (When DNA was a method of the product, its votes
    competed with the winnowing votes for the 12 verified candidates; here DNA's own best 12 come on top, so
    ``+dna`` can only verify more.) Without: ``only dna``, the DNA candidates alone."""
    from sqlalchemy import select

    from fptrack.compare.service import verify_chapters
    from fptrack.core.settings import Settings
    from fptrack.fingerprint.contract import CONTRACT
    from fptrack.fingerprint.normalize import normalize
    from fptrack.fingerprint.pinyin import pinyin_initials
    from fptrack.fingerprint.text_fingerprints import fingerprint_text
    from fptrack.research.pinyin_dna import DnaCandidateIndex, dna_codes
    from fptrack.storage.db import create_engine_for, session_factory
    from fptrack.storage.models import Chapter

    settings = Settings.from_env(env)
    base = _all_verdicts(env, CONTRACT) if with_product else {}
    engine = create_engine_for(settings)
    verdicts: dict[str, list[Any]] = {}
    with session_factory(engine)() as session:
        index = DnaCandidateIndex(
            {
                chapter_id: dna_codes(pinyin_initials(normalize(text).text))
                for chapter_id, text in session.execute(select(Chapter.id, Chapter.text))
            }
        )
        for row, ignored in _crawled_pages(session):
            found = list(base.get(row.url, []))
            if (row.text or "").strip():
                document = fingerprint_text(row.text)
                verified = {v.chapter_id for v in found}
                extra = [c for c in index.candidates(dna_codes(document.initials)) if c not in verified]
                if extra:
                    found += verify_chapters(session, document, extra, ignored_codes=ignored).values()
            verdicts[row.url] = found
    engine.dispose()
    return verdicts


def _index_chapters_with_every_method(env: dict[str, str]) -> None:
    """Re-index the registered chapters with every method on (also those the product leaves off: Simhash),
    with the product's own writer, so that a variant reading such a method finds its codes. Variants that do
    not read a kind never look at its codes."""
    from sqlalchemy import select

    from fptrack.compare.service import layout_for
    from fptrack.core.settings import Settings
    from fptrack.fingerprint.contract import CONTRACT, METHODS
    from fptrack.fingerprint.text_fingerprints import fingerprint_text
    from fptrack.storage.db import create_engine_for, session_factory, session_scope
    from fptrack.storage.fingerprints import FingerprintSet, write_fingerprints
    from fptrack.storage.models import Chapter

    settings = Settings.from_env(env)
    everything = replace(CONTRACT, methods=frozenset(METHODS))
    engine = create_engine_for(settings)
    with session_scope(session_factory(engine)) as session:
        items = []
        for chapter_id, text in session.execute(select(Chapter.id, Chapter.text)):
            fingerprints = fingerprint_text(text, everything)
            items.append(FingerprintSet(chapter_id, fingerprints.simhash, fingerprints.index_codes()))
        write_fingerprints(session, owner="chapter", layout=layout_for(settings), items=items)
    engine.dispose()


def ablation(
    web: PirateWeb,
    bases: list[str],
    env: dict[str, str],
    full: dict[str, list[Any]],
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Recall per kind and false positives with each method of the page path removed in turn (the decision
    rule unchanged). ``full`` are the verdicts under the product's contract."""
    from fptrack.fingerprint.contract import CANDIDATE_SOURCES, CONTRACT, METHODS

    _index_chapters_with_every_method(env)
    contracts = {"product": CONTRACT}
    for method in METHODS:
        variant = CONTRACT.without(method) if CONTRACT.uses(method) else CONTRACT.with_method(method)
        contracts[("-" if CONTRACT.uses(method) else "+") + method] = variant
    for source in CANDIDATE_SOURCES:
        contracts["only " + source] = CONTRACT.only(source)
    # pinyin DNA, from the research shelf (no contract method any more)
    research = {"+dna": True, "only dna": False}
    if only:
        unknown = set(only) - set(contracts) - set(research)
        if unknown:
            known = ", ".join([*contracts, *research])
            raise SystemExit(f"unknown ablation variant(s) {sorted(unknown)}; known: {known}")
        contracts = {name: c for name, c in contracts.items() if name == "product" or name in only}
        research = {name: w for name, w in research.items() if name in only}
    variant_verdicts = {
        **{name: functools.partial(_all_verdicts, env, contract) for name, contract in contracts.items()},
        **{name: functools.partial(_dna_verdicts, env, product) for name, product in research.items()},
    }
    results: dict[str, Any] = {}
    for name, compute in variant_verdicts.items():
        # the product's verdicts again, in-process like every variant, so that the costs compare
        started = time.perf_counter()
        verdicts = compute()
        results[name] = score_verdicts(web, bases, verdicts if name != "product" else full, CONTRACT.rule)
        results[name]["seconds"] = time.perf_counter() - started
        results[name]["candidates_per_page"] = sum(map(len, verdicts.values())) / max(1, len(verdicts))
    variants = list(results)
    print(
        "\nablation: recall per kind (false positives per negative kind); -m: the product without m, +m: "
        "with m (off in the product), only m: m the only candidate source; dna: pinyin DNA from the research "
        "shelf"
    )
    print(f"{'kind':<24}{'pages':>6}" + "".join(f"{v:>18}" for v in variants))
    for kind in POSITIVE_KINDS + NEGATIVE_KINDS:
        row = results["product"]["kinds"].get(kind)
        if not row:
            continue
        cells = ""
        for v in variants:
            r = results[v]["kinds"][kind]
            cells += (
                f"{r.get('found', 0) / r['pages']:>18.3f}"
                if kind in POSITIVE_KINDS
                else f"{r.get('false_pos', 0):>18}"
            )
        print(f"{kind:<24}{row['pages']:>6}{cells}")
    print(f"{'precision':<30}" + "".join(f"{results[v]['precision']:>18.4f}" for v in variants))
    print(f"{'recall':<30}" + "".join(f"{results[v]['recall']:>18.4f}" for v in variants))
    print(f"{'chapter accuracy':<30}" + "".join(f"{results[v]['chapter_accuracy']:>18.4f}" for v in variants))
    print(
        f"{'candidates verified / page':<30}"
        + "".join(f"{results[v]['candidates_per_page']:>18.2f}" for v in variants)
    )
    print(
        f"{'seconds (in-process compare)':<30}" + "".join(f"{results[v]['seconds']:>18.1f}" for v in variants)
    )
    return results


def _print_margins(
    web: PirateWeb, bases: list[str], verdicts: dict[str, list[Any]], title_to_key: dict[str, str]
) -> None:
    """Where the evidence of copies and of non-copies lies: per positive kind, the weakest copies (the best
    verdict for a true chapter); per negative kind, the strongest verdict of any chapter."""
    import numpy as np

    rows: dict[str, list[tuple[float, int, int, float]]] = defaultdict(list)
    for spec in web.pages:
        url = bases[spec.site] + spec.path
        best = (0.0, 0, 0, 0.0)
        for v in verdicts.get(url, []):
            key = (
                title_to_key.get(v.work_title, "?"),
                web.chapter_titles.get((title_to_key.get(v.work_title, "?"), v.chapter_title), -1),
            )
            if spec.positive and key not in spec.truth:
                continue
            e = v.evidence
            best = max(
                best,
                (e.chapter_coverage, e.longest_run, e.copied_chars, e.density),
                key=lambda t: (t[1], t[0]),
            )
        rows[spec.kind].append(best)
    print("\nevidence margins (positives: weakest copies; negatives: strongest look-alikes)")
    print(
        f"{'kind':<24}{'coverage p1/min|max':>22}{'longest run p1/min|max':>26}{'copied p1/min|max':>22}"
        f"{'density p1/min|max':>22}"
    )
    for kind, values in rows.items():
        array = np.array(values, dtype=float)
        if kind in POSITIVE_KINDS:
            cells = [f"{np.percentile(array[:, i], 1):>11.2f} / {array[:, i].min():<8.2f}" for i in range(4)]
        else:
            # the strongest look-alike; density of the look-alike with the highest coverage
            cells = [f"{'max':>11} {array[:, i].max():<10.2f}" for i in range(3)]
            cells.append(f"{'at max cov':>11} {array[int(np.argmax(array[:, 0])), 3]:<10.2f}")
        print(f"{kind:<24}{cells[0]:>22}{cells[1]:>26}{cells[2]:>22}{cells[3]:>22}")


def print_curve(points: list[dict[str, Any]]) -> None:
    print("\nprecision/recall of the decision rule over its thresholds (pages):")
    keys = [k for k in points[0] if k not in ("precision", "recall", "chapter_accuracy", "fp", "fn")]
    print(
        "".join(f"{k:>16}" for k in keys) + f"{'precision':>11}{'recall':>9}{'chapter':>9}{'fp':>5}{'fn':>5}"
    )
    for p in points:
        print(
            "".join(f"{p[k]:>16}" for k in keys)
            + (
                f"{p['precision']:>11.4f}{p['recall']:>9.4f}{p['chapter_accuracy']:>9.4f}"
                f"{p['fp']:>5}{p['fn']:>5}"
            )
        )


# ------------------------------------------------------------------------------------------------ main


def _sample_window(env: dict[str, str]) -> int:
    from fptrack.core.settings import Settings

    return Settings.from_env(env).page_sample_window


def main() -> None:
    parser = arguments(__doc__, "one page of every kind (about twice as many negatives), no threshold sweep")
    parser.add_argument("--sample", action="store_true", help="a sample of every kind (a few minutes)")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument(
        "--postgres", metavar="URL", help="run on a fresh database created on this PostgreSQL server"
    )
    parser.add_argument("--curve", type=Path, help="write the threshold sweep (TSV) here")
    parser.add_argument("--no-calibration", action="store_true", help="skip the threshold sweep")
    parser.add_argument(
        "--ablation", action="store_true", help="also compare every page with each method removed in turn"
    )
    parser.add_argument(
        "--variants", help="with --ablation: only these variants, comma-separated (e.g. '-winnow,+simhash')"
    )
    parser.add_argument(
        "--retroactive",
        action="store_true",
        help="register the works only after the crawl: every copy is found by the new works' look-up among "
        "the stored pages (retroactive detection) instead of by the crawl's compare",
    )
    parser.add_argument(
        "--sample-window",
        type=int,
        default=None,
        help="FPTRACK_PAGE_SAMPLE_WINDOW of the run (k-grams per sampled code a stored page keeps for the "
        "retroactive look-up; the product's default unless given)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary data folder")
    args = parser.parse_args()

    started = time.monotonic()
    require_corpus("piracy_eval")
    if args.quick:
        args.no_calibration = True
    web = build_pirate_web(quick=args.quick or args.sample, seed=args.seed, per_kind=1 if args.quick else 4)
    workdir = Path(tempfile.mkdtemp(prefix="fptrack-eval-"))
    database_url, drop_database = _fresh_database(args.postgres, workdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FPTRACK_")}
    # the site is our own loopback server: the polite pace (FPTRACK_SITE_RATE) is not what is measured
    env["FPTRACK_SITE_RATE"] = "1000"
    env.update(FPTRACK_DATA_DIR=str(workdir), FPTRACK_DATABASE_URL=database_url, FPTRACK_CRAWL_TIMEOUT="60")
    if args.sample_window is not None:
        env["FPTRACK_PAGE_SAMPLE_WINDOW"] = str(args.sample_window)
    run = Run(env, database_url)
    figures: dict[str, Any] = {
        "quick": args.quick,
        "sample": args.sample,
        "backend": "postgresql" if args.postgres else "sqlite",
        "pages": len(web.pages),
        "retroactive": args.retroactive,
        "sample_window": _sample_window(env),
    }
    try:
        run.fptrack("init")
        files = []
        for work, text in web.work_files.items():
            path = workdir / f"{work}.txt"
            path.write_text(text, encoding="utf-8")
            files.append(str(path))

        def register() -> None:
            t0 = time.monotonic()
            run.fptrack("works", "add", *files)
            figures["register_seconds"] = round(time.monotonic() - t0, 1)

        if not args.retroactive:
            register()
        with ExitStack() as stack:
            bases: list[str] = [stack.enter_context(serve_site(pages)) for pages in web.sites]
            t0 = time.monotonic()
            crawl = run.fptrack(
                "crawl",
                *(b + "/" for b in bases),
                "--depth",
                "1",
                "--max-pages",
                str(len(web.pages) + len(bases) + 10),
                "--quiet",
                # the pirate web is served on 127.0.0.1: allow its own sites, nothing else
                *(arg for b in bases for arg in ("--allow-private-host", b.split("://", 1)[1])),
            )
            figures["crawl_seconds"] = round(time.monotonic() - t0, 1)
        print(next((line for line in crawl.stdout.splitlines() if line.startswith("crawled")), ""))
        if args.retroactive:
            register()  # looks the works up among the stored pages and compares the candidates again
        matches = [
            json.loads(line)
            for line in run.fptrack("matches", "--format", "json").stdout.splitlines()
            if line.strip()
        ]
        page_texts, chapters = _read_back(database_url)
        figures["pages_crawled"] = len(page_texts)
        figures["pages_per_second"] = round(len(page_texts) / max(figures["crawl_seconds"], 1e-9), 2)

        title_to_key = {t: w for w, t in web.work_titles.items()}
        ours: dict[str, set[tuple[str, int]]] = defaultdict(set)
        spans: dict[str, list[tuple[str, int, list[int]]]] = defaultdict(list)
        for m in matches:
            work = title_to_key.get(m["work_title"], m["work_title"])
            chapter = web.chapter_titles.get((work, m["chapter_title"]), -1)
            ours[m["page_url"]].add((work, chapter))
            spans[m["page_url"]].extend((work, chapter, s) for s in m["spans"])
        key_of = {
            cid: (title_to_key.get(w, w), web.chapter_titles.get((title_to_key.get(w, w), t), -1))
            for cid, (w, t, _i, _b) in chapters.items()
        }
        t0 = time.monotonic()
        peers = run_peers(page_texts, chapters)
        figures["peer_seconds"] = round(time.monotonic() - t0, 1)
        flagged = {"fptrack": dict(ours)}
        for name, found in peers.items():
            flagged[name] = {url: {key_of[c] for c in ids} for url, ids in found.items()}
        results = score(web, bases, flagged, spans, page_texts)
        print_scores(results)
        if not args.no_calibration:
            from fptrack.fingerprint.contract import CONTRACT

            verdicts = _all_verdicts(env, CONTRACT)
            points = calibrate(web, bases, verdicts, args.curve)
            print_curve(points)
            if args.ablation:
                ablated = ablation(
                    web, bases, env, verdicts, args.variants.split(",") if args.variants else None
                )
                figures["ablation"] = {
                    variant: {
                        "precision": round(r["precision"], 4),
                        "recall": round(r["recall"], 4),
                        "recall_by_kind": {
                            k: round(v.get("found", 0) / v["pages"], 4)
                            for k, v in r["kinds"].items()
                            if k in POSITIVE_KINDS
                        },
                        "false_positives": r["fp"],
                        "candidates_per_page": round(r["candidates_per_page"], 3),
                        "seconds": round(r["seconds"], 1),
                    }
                    for variant, r in ablated.items()
                }
        figures["results"] = {
            s: {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items() if k != "kinds"}
            for s, r in results.items()
        }
        figures["recall_by_kind"] = {
            s: {
                k: round(v.get("found", 0) / v["pages"], 4)
                for k, v in r["kinds"].items()
                if k in POSITIVE_KINDS
            }
            for s, r in results.items()
        }
        figures["false_positives_by_kind"] = {
            s: {k: int(v.get("false_pos", 0)) for k, v in r["kinds"].items()} for s, r in results.items()
        }
    finally:
        if not args.keep:
            drop_database()
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept {workdir} ({database_url})")
    figures["machine"] = machine()
    figures["seconds"] = round(time.monotonic() - started, 1)
    emit(figures)


if __name__ == "__main__":
    main()
