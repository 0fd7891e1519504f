"""From an alignment to a verdict (pure).

A page is flagged for a chapter when it copies at least ``min_copied`` normalised characters of it (shorter
overlaps are quotations, not piracy) and either one long passage of it (``min_passage``: an excerpt inside an
unrelated article) or a good share of the chapter (``min_coverage``) in a dense stretch of the page
(``min_density``: a review that quotes many short passages between its own comments covers a share of the
chapter too, but sparsely). The score is the share of the chapter that the page reproduces.

The thresholds are the contract's (``fingerprint.contract.DecisionRule``, :data:`DEFAULT_RULE`), read off the
precision/recall sweep that ``benchmarks.accuracy.piracy`` prints over :func:`candidate_rule_grid` (see
docs/compare.md for the curve and the reasoning), not tuned to make a test pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from fptrack.compare.verify import Alignment
from fptrack.fingerprint.contract import CONTRACT, DecisionRule

__all__ = [
    "DEFAULT_RULE",
    "Decision",
    "DecisionRule",
    "Evidence",
    "candidate_rule_grid",
    "decide",
    "decide_with",
    "evidence_of",
]


@dataclass(frozen=True)
class Evidence:
    """What an alignment says, in numbers a decision rule reads.

    ``copied_chars``: normalised page characters inside copied runs; ``chapter_coverage``: share of the
    chapter's normalised characters that those runs reproduce; ``longest_run``: the longest single copied run
    (page characters); ``density``: the copied share of the page stretch from the first copied character to
    the last (a copy, even edited or with ads spliced in, is dense; a review quoting passages between its own
    comments is not)."""

    copied_chars: int
    chapter_coverage: float
    longest_run: int
    density: float = 1.0


DEFAULT_RULE = CONTRACT.rule


@dataclass(frozen=True)
class Decision:
    flagged: bool
    score: float
    copied_chars: int


def evidence_of(alignment: Alignment) -> Evidence:
    runs = alignment.runs
    longest = max((end - start for start, end, _, _ in runs), default=0)
    extent = max((end for _, end, _, _ in runs), default=0) - min(
        (start for start, _, _, _ in runs), default=0
    )
    density = alignment.page_covered / extent if extent > 0 else 0.0
    return Evidence(alignment.page_covered, min(1.0, alignment.chapter_coverage), longest, min(1.0, density))


def decide_with(evidence: Evidence, rule: DecisionRule = DEFAULT_RULE) -> Decision:
    flagged = evidence.copied_chars >= rule.min_copied and (
        evidence.longest_run >= rule.min_passage
        or (evidence.chapter_coverage >= rule.min_coverage and evidence.density >= rule.min_density)
    )
    return Decision(
        flagged=flagged, score=round(evidence.chapter_coverage, 4), copied_chars=evidence.copied_chars
    )


def decide(alignment: Alignment, rule: DecisionRule = DEFAULT_RULE) -> Decision:
    return decide_with(evidence_of(alignment), rule)


def candidate_rule_grid() -> list[DecisionRule]:
    """The thresholds the evaluation sweeps: the quotation floor is fixed by the product (50 characters), the
    other three vary (density only where coverage is the deciding signal)."""
    return [
        DecisionRule(50, coverage, passage, density)
        for coverage in (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.8)
        for passage in (60, 90, 100, 150, 200, 300, 400, 600)
        for density in (0.0, 0.3, 0.5, 0.7, 0.9)
        if density == 0.0 or passage == 150
    ]
