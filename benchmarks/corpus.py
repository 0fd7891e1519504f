"""Loading ../shared/corpus for benchmarks (never for tests): chapters of the novel copies and news texts.

Run directly (``python -m benchmarks.corpus``) it prints what it finds, so ``make bench-quick`` can run
it like a benchmark.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness import emit, skip

CORPUS = Path(os.environ.get("FPTRACK_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus"))


@dataclass(frozen=True)
class Chapter:
    id: str
    work_id: str
    source_id: str
    script: str
    chapter: int
    title: str
    text: str


def corpus_available() -> bool:
    return (CORPUS / "zh_novels").is_dir()


def require_corpus(benchmark: str) -> None:
    """End ``benchmark`` with a skip (a JSON line, exit status 0) when the corpus is not here."""
    if not corpus_available():
        skip(benchmark, f"development corpus not found at {CORPUS} (set FPTRACK_CORPUS)")


def iter_chapters(pattern: str = "*.jsonl") -> Iterator[Chapter]:
    for path in sorted((CORPUS / "zh_novels").glob(pattern)):
        if path.name.startswith("pairs_"):
            continue
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                yield Chapter(
                    r["id"],
                    r["work_id"],
                    r["source_id"],
                    r["script"],
                    int(r["chapter"]),
                    r["title"],
                    r["text"],
                )


def news_texts() -> list[str]:
    path = CORPUS / "zh_news" / "thucnews_sample_1000.jsonl"
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            out.append(r.get("text") or r.get("content") or "")
    return [t for t in out if t]


def pairs(name: str) -> list[dict[str, Any]]:
    with (CORPUS / "zh_novels" / name).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


if __name__ == "__main__":
    require_corpus("corpus")
    chapters = list(iter_chapters())
    news = news_texts()
    summary = {
        "chapters": len(chapters),
        "chapter_chars": sum(len(c.text) for c in chapters),
        "news": len(news),
        "news_chars": sum(map(len, news)),
    }
    print(f"corpus at {CORPUS}: {summary}")
    emit(summary)
