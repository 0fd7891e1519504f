"""Fingerprint throughput: MB/s of Chinese text (UTF-8 bytes of the original) per core, for every fingerprint
and for the set the page path computes (fingerprint.text_fingerprints.fingerprint_text, under the contract),
against PyPI `simhash` (Simhash on raw text) and `datasketch` MinHash (128 permutations, character 5-grams),
measured in the same run on the same texts. Also: agreement of our per-character pinyin initial table with
pypinyin's phrase-aware lazy_pinyin, and peak memory (tracemalloc for Python allocations, ru_maxrss for the
process).

Single process, single thread (OPENBLAS/OMP threads pinned to 1 before numpy loads), so MB/s is per core.

    python -m benchmarks.fingerprint.throughput [--quick] [--chapters N] [--repeat N] [--json out.json]

Last output line: JSON with the figures.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import random
import resource
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.corpus import iter_chapters, require_corpus
from benchmarks.harness import arguments, emit, machine
from fptrack.fingerprint.contract import CONTRACT
from fptrack.fingerprint.features import char_shingle_hashes, tokenize
from fptrack.fingerprint.normalize import normalize
from fptrack.fingerprint.pinyin import pinyin_initials
from fptrack.fingerprint.simhash import SimhashParams, simhash_tokens
from fptrack.fingerprint.stats import CorpusStats
from fptrack.fingerprint.text_fingerprints import fingerprint_text
from fptrack.fingerprint.winnowing import winnow
from fptrack.research.ksentence import ksentence
from fptrack.research.minhash import MinHashParams, lsh_band_keys, minhash_signature
from fptrack.research.pinyin_dna import DnaParams, dna_codes


def main() -> None:
    ap = arguments(__doc__, "10 chapters, once: a few seconds")
    ap.add_argument("--chapters", type=int, help="chapters of the sample (default 200; quick 10)")
    ap.add_argument("--repeat", type=int, help="runs of each stage, the best kept (default 3; quick 1)")
    ap.add_argument("--json", type=Path, help="also write the JSON figures to this file")
    args = ap.parse_args()
    require_corpus("fingerprint_throughput")

    rng = random.Random(7)
    chapters = [c for c in iter_chapters() if len(c.text) > 800]
    rng.shuffle(chapters)
    sample = chapters[: args.chapters or (10 if args.quick else 200)]
    texts = [c.text for c in sample]
    repeat = args.repeat or (1 if args.quick else 3)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6

    # warm every lazily built table, and corpus statistics from other chapters (as in production)
    others = chapters[-(20 if args.quick else 100) :]
    stats = CorpusStats.from_documents(normalize(c.text).text for c in others)
    fingerprint_text(texts[0])
    normalized = [normalize(t).text for t in texts]
    tokens = [tokenize(n) for n in normalized]
    initials = [pinyin_initials(n) for n in normalized]
    shingles = [char_shingle_hashes(n, 5) for n in normalized]

    rows: list[tuple[str, float, str]] = []

    def stage(name: str, fn: Callable[[Any], object], inputs: Sequence[Any], note: str = "") -> float:
        seconds = min(_bench_list(fn, inputs) for _ in range(repeat))
        rate = mb / seconds
        rows.append((name, rate, note))
        return rate

    best_scheme = CONTRACT.simhash
    stage("normalize (NFKC, t2s, artefacts, offsets)", normalize, texts)
    stage("segment (rjieba, on normalised text)", tokenize, normalized)
    stage(
        f"simhash 64 {best_scheme.scheme} (from tokens)",
        lambda tk: simhash_tokens(tk, best_scheme, stats),
        tokens,
    )
    stage(
        "simhash 64 entropy (from tokens)",
        lambda tk: simhash_tokens(tk, SimhashParams(scheme="entropy"), stats),
        tokens,
    )
    stage(
        "simhash 128 entropy (from tokens)",
        lambda tk: simhash_tokens(tk, SimhashParams(bits=128, scheme="entropy"), stats),
        tokens,
    )
    stage("char 5-gram hashes", lambda n: char_shingle_hashes(n, 5), normalized)
    mh = MinHashParams()
    stage(
        "minhash 128 oph + band keys (from hashes)",
        lambda h: lsh_band_keys(minhash_signature(h, mh), mh),
        shingles,
    )
    stage(
        "minhash 128 affine (from hashes)",
        lambda h: minhash_signature(h, MinHashParams(scheme="affine")),
        shingles,
    )
    dna_rate = stage(
        "pinyin DNA (initials + codes, from normalised)",
        lambda n: dna_codes(pinyin_initials(n), DnaParams()),
        normalized,
    )
    stage("pinyin initials only", pinyin_initials, normalized)
    wc, wi = CONTRACT.winnow_chars, CONTRACT.winnow_initials
    stage(f"winnowing k={wc.k} w={wc.w} (normalised text)", lambda n: winnow(n, wc.k, wc.w), normalized)
    stage(f"winnowing k={wi.k} w={wi.w} (initials)", lambda s: winnow(s, wi.k, wi.w), initials)
    stage("ksentence k=3 (from original)", ksentence, texts)
    full_rate = stage("the page path: text_fingerprints.fingerprint_text", fingerprint_text, texts)
    # the page path as it was with its Simhash (and so with word segmentation): what taking it off saved
    with_simhash = CONTRACT.with_method("simhash")
    stage("the page path with Simhash (earlier)", lambda t: fingerprint_text(t, with_simhash), texts)

    # reference implementations, same texts, same run
    from datasketch import MinHash
    from simhash import Simhash

    simhash_rate = stage("PyPI simhash 2.x on raw text", lambda t: Simhash(t).value, texts)

    def datasketch_minhash(t: str) -> object:
        m = MinHash(num_perm=128)
        m.update_batch([t[i : i + 5].encode("utf-8") for i in range(len(t) - 4)])
        return m.hashvalues

    datasketch_rate = stage("datasketch MinHash 128, char 5-grams", datasketch_minhash, normalized)

    # pinyin agreement with pypinyin's phrase-aware lazy_pinyin on the Han characters of the sample
    from pypinyin import Style, lazy_pinyin

    han_total = han_agree = 0
    for n, ini in zip(normalized[:20] if args.quick else normalized[:100], initials):
        theirs = lazy_pinyin(n, style=Style.FIRST_LETTER, errors=lambda s: ["_"] * len(s))  # type: ignore[arg-type,return-value]
        if len(theirs) != len(n):
            continue
        for ch, ours, their in zip(n, ini, theirs):
            if "\u4e00" <= ch <= "\u9fff":
                han_total += 1
                han_agree += ours == their[:1]
    agreement = han_agree / max(han_total, 1)

    tracemalloc.start()
    for t in texts[:20]:
        fingerprint_text(t)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    maxrss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    info = machine()
    print(f"machine: {info.get('cpu') or info['machine']}, {info['cores']} cores, Python {info['python']}")
    print(f"sample: {len(texts)} chapters, {mb:.2f} MB UTF-8, best of {repeat}")
    print(f"{'fingerprint':55s} {'MB/s':>8s}")
    for name, rate, _ in rows:
        print(f"{name:55s} {rate:8.2f}")
    print(
        f"page path / PyPI simhash: {full_rate / simhash_rate:.2f}x   "
        f"our minhash / datasketch: {rows[6][1] / datasketch_rate:.1f}x"
    )
    print(f"pinyin initials agree with pypinyin lazy_pinyin on {agreement:.4%} of {han_total} Han characters")
    print(
        f"peak memory: tracemalloc {traced_peak / 1e6:.1f} MB during fingerprint_text, process max RSS "
        f"{maxrss_mb:.0f} MB"
    )
    targets = {
        "page_path_ge_5MBps": full_rate >= 5.0,
        "page_path_ge_4x_simhash": full_rate >= 4 * simhash_rate,
        "dna_ge_20MBps": dna_rate >= 20.0,
        "pinyin_agreement_ge_99_5": agreement >= 0.995,
    }
    print("targets: " + ", ".join(f"{k}={'met' if v else 'MISSED'}" for k, v in targets.items()))
    figures = {
        "benchmark": "fingerprint_throughput",
        "quick": args.quick,
        "mb": round(mb, 3),
        "mb_per_s": {name: round(rate, 2) for name, rate, _ in rows},
        "page_path_over_simhash": round(full_rate / simhash_rate, 2),
        "pinyin_agreement": round(agreement, 5),
        "peak_traced_mb": round(traced_peak / 1e6, 1),
        "max_rss_mb": round(maxrss_mb),
        "targets": targets,
    }
    emit(figures, path=args.json)


def _bench_list(fn: Callable[[Any], object], inputs: Sequence[Any]) -> float:
    t0 = time.perf_counter()
    for x in inputs:
        fn(x)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
