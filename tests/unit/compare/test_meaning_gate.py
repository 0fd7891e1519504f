"""The meaning path's gate (compare.meaning_gate.decide): which compared pages go on, with which candidates.
Named-entity candidates come through a stand-in (the real index is compare.entities)."""

from __future__ import annotations

import sys
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session

from fptrack.compare.meaning_gate import (
    FAINT_ASKED,
    FAINT_MIN_SCORE,
    MIN_LETTERS,
    GateDecision,
    decide,
    entity_candidates,
)
from fptrack.compare.service import PageOutcome
from tests.unit.compare.test_meaning_model import CHAPTER, TRANSLATION

NO_SESSION = cast(Session, None)
NEAR = ((7, 0.08), (3, 0.02), (9, 0.01))


def _entities(found: list[tuple[int, float]]) -> tuple[list[str], object]:
    asked: list[str] = []

    def candidates(session: Session, text: str, limit: int) -> list[tuple[int, float]]:
        asked.append(text)
        return found[:limit]

    return asked, candidates


def _outcome(
    text: str,
    matched: tuple[int, ...] = (),
    near: tuple[tuple[int, float], ...] = (),
    faint: tuple[int, ...] = (),
) -> PageOutcome:
    return PageOutcome(1, "http://127.0.0.1/p", matched, near, text, faint)


def _among(scores: dict[int, float]) -> tuple[list[tuple[int, ...]], object]:
    asked: list[tuple[int, ...]] = []

    def among(
        session: Session, text: str, chapter_ids: tuple[int, ...], limit: int
    ) -> list[tuple[int, float]]:
        asked.append(tuple(chapter_ids))
        found = sorted(((c, scores[c]) for c in chapter_ids if c in scores), key=lambda c: -c[1])
        return found[:limit]

    return asked, among


def test_a_chinese_page_with_near_misses_goes_on_with_its_best_ones() -> None:
    asked, entities = _entities([(5, 1.0)])
    decision = decide(NO_SESSION, _outcome(CHAPTER, near=NEAR), 2, entities=entities)  # type: ignore[arg-type]
    assert decision == GateDecision("near_miss", NEAR[:2])
    assert asked == []  # a Chinese page never asks the entity index


@pytest.mark.parametrize(
    ("outcome", "why"),
    [
        (_outcome(CHAPTER), "no near miss"),
        (_outcome(CHAPTER, matched=(7,), near=NEAR), "copied exactly"),
        (_outcome(CHAPTER[: MIN_LETTERS // 2], near=NEAR), "too short"),
        (_outcome("", near=NEAR), "no text"),
        (_outcome("……" * 300, near=NEAR), "no letters"),
    ],
)
def test_no(outcome: PageOutcome, why: str) -> None:
    _, entities = _entities([(5, 1.0)])
    assert decide(NO_SESSION, outcome, 3, entities=entities) is None, why  # type: ignore[arg-type]


def test_a_page_in_another_language_goes_on_with_its_entity_candidates() -> None:
    asked, entities = _entities([(5, 0.9), (6, 0.4)])
    decision = decide(NO_SESSION, _outcome(TRANSLATION, near=NEAR), 3, entities=entities)  # type: ignore[arg-type]
    assert decision == GateDecision("entities", ((5, 0.9), (6, 0.4)))
    assert asked == [TRANSLATION]
    _, none = _entities([])
    assert decide(NO_SESSION, _outcome(TRANSLATION), 3, entities=none) is None  # type: ignore[arg-type]


def test_without_the_entity_index_no_translation_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fptrack.compare.entities", None)  # import fails: not installed
    assert entity_candidates(NO_SESSION, TRANSLATION, 3) == []


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("天地人和风雨山水abc dé。，.!\n"), max_size=3000),
    near=st.lists(st.tuples(st.integers(1, 99), st.floats(0, 1)), max_size=5),
    matched=st.lists(st.integers(1, 99), max_size=2),
    limit=st.integers(1, 4),
)
def test_a_decision_names_at_most_limit_candidates_and_never_for_a_copy(
    text: str, near: list[tuple[int, float]], matched: list[int], limit: int
) -> None:
    _, entities = _entities([(5, 0.5), (6, 0.4), (8, 0.3), (9, 0.2), (10, 0.1)])
    decision = decide(NO_SESSION, _outcome(text, tuple(matched), tuple(near)), limit, entities=entities)  # type: ignore[arg-type]
    if decision is None:
        return
    assert not matched and 0 < len(decision.candidates) <= limit
    assert decision.reason in ("near_miss", "entities")
    if decision.reason == "near_miss":
        assert decision.candidates == tuple(near[:limit])


def test_a_chinese_page_sharing_too_few_codes_goes_on_when_its_names_point_at_those_chapters() -> None:
    faint = tuple(range(20, 20 + FAINT_ASKED + 3))
    asked, among = _among({21: FAINT_MIN_SCORE * 3, 22: FAINT_MIN_SCORE - 1, 40: 500.0})
    decision = decide(NO_SESSION, _outcome(CHAPTER, faint=faint), 3, among=among)  # type: ignore[arg-type]
    assert decision == GateDecision("entities", ((21, FAINT_MIN_SCORE * 3),))  # 22 too weak to go on
    assert asked == [faint[:FAINT_ASKED]]  # the chapters sharing the most codes, a bounded number
    asked, among = _among({22: FAINT_MIN_SCORE - 1})
    assert decide(NO_SESSION, _outcome(CHAPTER, faint=faint), 3, among=among) is None  # type: ignore[arg-type]
    # near misses decide without the names; no faint chapter, no look-up
    asked, among = _among({21: 500.0})
    near = decide(NO_SESSION, _outcome(CHAPTER, near=NEAR, faint=faint), 3, among=among)  # type: ignore[arg-type]
    assert near is not None and near.reason == "near_miss"
    assert decide(NO_SESSION, _outcome(CHAPTER), 3, among=among) is None  # type: ignore[arg-type]
    assert asked == []
