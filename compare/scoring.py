"""From an alignment to a verdict (pure).

A page is flagged for a chapter when it copies at least ``MIN_COPIED`` normalised characters of it (shorter
overlaps are quotations, not piracy) and either a good share of the chapter (``MIN_CHAPTER_COVERAGE``) or a long
passage of it (``MIN_PASSAGE``: an excerpt inside an unrelated article). The score is the share of the chapter
that the page reproduces.

These are the walking skeleton's thresholds; the evaluation (benchmarks/piracy_eval.py) calibrates them.
"""

from __future__ import annotations

from dataclasses import dataclass

from compare.verify import Alignment

__all__ = ["MIN_CHAPTER_COVERAGE", "MIN_COPIED", "MIN_PASSAGE", "Decision", "decide"]

MIN_COPIED = 50
MIN_CHAPTER_COVERAGE = 0.3
MIN_PASSAGE = 300


@dataclass(frozen=True)
class Decision:
    flagged: bool
    score: float
    copied_chars: int


def decide(alignment: Alignment) -> Decision:
    copied = alignment.page_covered
    coverage = min(1.0, alignment.chapter_coverage)
    long_passage = copied >= MIN_PASSAGE
    flagged = copied >= MIN_COPIED and (coverage >= MIN_CHAPTER_COVERAGE or long_passage)
    return Decision(flagged=flagged, score=round(coverage, 4), copied_chars=copied)
