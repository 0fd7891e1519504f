"""A copy that keeps the meaning, not the words (issue 36), as a person judges it: its kind (a 洗稿 rewrite,
a translation into a language), the share of the chapter it covers, and the page's sentences beside the
chapter's, in order, each pair with its similarity. The admin's match page, ``fptrack matches --id`` and a
takedown notice all read a meaning match through :func:`read_alignment`, so that each shows the same pairs.

The match stores offsets only (``Match.alignment``: ``{"coverage", "pairs": [[page_start, page_end,
chapter_start, chapter_end, similarity], ...], "page_sentences", "chapter_sentences", "model"}``, chapter
offsets into the chapter's text); the texts are cut here from the page's text as copied
(:func:`storage.match_life.evidence_of`) and the chapter's. A pair that does not fit the texts (a malformed
row, a chapter edited since) is left out rather than shown cut wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from fptrack.storage.models import Match

__all__ = [
    "LANGUAGE_NAMES",
    "AlignedPair",
    "Alignment",
    "chapter_text_of",
    "kind_label",
    "match_alignment",
    "quoted_pairs",
    "read_alignment",
    "translation_language",
]

# The languages compare.meaning.detect_language tells apart, as each side of a notice names them.
LANGUAGE_NAMES: Mapping[str, Mapping[str, str]] = {
    "en": {
        "en": "English",
        "vi": "Vietnamese",
        "id": "Indonesian",
        "th": "Thai",
        "ko": "Korean",
        "ja": "Japanese",
        "ru": "Russian",
        "ar": "Arabic",
        "zh": "Chinese",
    },
    "zh": {
        "en": "英文",
        "vi": "越南文",
        "id": "印尼文",
        "th": "泰文",
        "ko": "韩文",
        "ja": "日文",
        "ru": "俄文",
        "ar": "阿拉伯文",
        "zh": "中文",
    },
}
_KIND_LABELS = {
    "en": {"rewrite": "Rewrite", "translation": "Translation ({language})"},
    "zh": {"rewrite": "洗稿改写", "translation": "翻译（{language}）"},
}


def translation_language(kind: str | None) -> str | None:
    """The language code of a translation's kind (``translation:en`` -> ``en``); None for any other kind."""
    if kind and kind.startswith("translation:"):
        return kind.partition(":")[2] or None
    return None


def kind_label(kind: str | None, language: str = "en") -> str:
    """A meaning match's kind as a reader of ``language`` (en or zh) names it: ``Rewrite`` / ``洗稿改写``,
    ``Translation (English)`` / ``翻译（英文）``; a language without a name keeps its code. Empty for an exact
    copy (None)."""
    if not kind:
        return ""
    labels = _KIND_LABELS.get(language, _KIND_LABELS["en"])
    code = translation_language(kind)
    if code is not None:
        name = LANGUAGE_NAMES.get(language, LANGUAGE_NAMES["en"]).get(code, code)
        return labels["translation"].format(language=name)
    return labels.get(kind, kind)


@dataclass(frozen=True)
class AlignedPair:
    """One step of the alignment: the page's sentence(s) beside the chapter's, numbered from 1 in order."""

    number: int
    page_start: int
    page_end: int
    chapter_start: int
    chapter_end: int
    similarity: float
    page_text: str
    chapter_text: str


@dataclass(frozen=True)
class Alignment:
    """A meaning match's kind, coverage (the share of the chapter's letters inside aligned pairs, 0-1) and
    its pairs, with the counts of sentences on each side and the model that embedded them."""

    kind: str
    coverage: float
    pairs: tuple[AlignedPair, ...]
    page_sentences: int
    chapter_sentences: int
    model: str


def _number(value: object, default: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


def _pair(raw: object, page_text: str, chapter_text: str, number: int) -> AlignedPair | None:
    if not isinstance(raw, Sequence) or isinstance(raw, str) or len(raw) < 4:
        return None
    offsets = [_number(value, -1.0) for value in raw[:4]]
    if any(value < 0 or value != int(value) for value in offsets):
        return None
    page_start, page_end, chapter_start, chapter_end = (int(value) for value in offsets)
    if not (page_start < page_end <= len(page_text) and chapter_start < chapter_end <= len(chapter_text)):
        return None
    similarity = min(1.0, max(0.0, _number(raw[4]) if len(raw) > 4 else 0.0))
    return AlignedPair(
        number,
        page_start,
        page_end,
        chapter_start,
        chapter_end,
        similarity,
        page_text[page_start:page_end].strip(),
        chapter_text[chapter_start:chapter_end].strip(),
    )


def read_alignment(
    kind: str | None, alignment: Mapping[str, Any] | None, page_text: str, chapter_text: str
) -> Alignment | None:
    """The alignment of a meaning match (``kind`` and ``alignment`` as stored) with its pairs' texts cut from
    ``page_text`` and ``chapter_text``; None for an exact copy (no kind or no alignment)."""
    if not kind or not isinstance(alignment, Mapping):
        return None
    pairs: list[AlignedPair] = []
    raw_pairs = alignment.get("pairs")
    for raw in raw_pairs if isinstance(raw_pairs, list) else []:
        pair = _pair(raw, page_text, chapter_text, len(pairs) + 1)
        if pair is not None:
            pairs.append(pair)
    model = alignment.get("model")
    return Alignment(
        kind=kind,
        coverage=min(1.0, max(0.0, _number(alignment.get("coverage")))),
        pairs=tuple(pairs),
        page_sentences=int(_number(alignment.get("page_sentences"))),
        chapter_sentences=int(_number(alignment.get("chapter_sentences"))),
        model=model if isinstance(model, str) else "",
    )


def chapter_text_of(match: Match) -> str:
    """The chapter's text the alignment's chapter offsets point into: ``Work.text[start:end]`` (what the
    evidence page shows), the chapter's own text when the work's is not kept."""
    chapter = match.chapter
    work_text = match.work.text or ""
    return work_text[chapter.start : chapter.end] if work_text else (chapter.text or "")


def match_alignment(session: Session, match: Match) -> Alignment | None:
    """:func:`read_alignment` of ``match`` in the page's text as copied (the version kept when the page has
    changed since: :func:`storage.match_life.evidence_of`) and its chapter's text; None for an exact copy."""
    if not match.kind or match.alignment is None:
        return None
    from fptrack.storage.match_life import evidence_of

    page_text = evidence_of(session, match).text or ""
    return read_alignment(match.kind, match.alignment, page_text, chapter_text_of(match))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def quoted_pairs(alignment: Alignment, count: int, limit: int) -> list[list[Any]]:
    """``count`` pairs for a notice, ``[original, copy, similarity]`` each (the chapter's sentence first, as a
    notice quotes 原文 before 侵权内容), spread evenly over the alignment from its first pair to its last (a
    recipient sees the copy follow the chapter from beginning to end), each side cut to ``limit``
    characters."""
    pairs = alignment.pairs
    if count <= 0 or not pairs:
        return []
    if len(pairs) <= count:
        chosen = list(pairs)
    else:
        step = (len(pairs) - 1) / max(1, count - 1)
        chosen = [pairs[round(index * step)] for index in range(count)] if count > 1 else [pairs[0]]
    return [
        [_cut(pair.chapter_text, limit), _cut(pair.page_text, limit), round(pair.similarity, 2)]
        for pair in chosen
    ]
