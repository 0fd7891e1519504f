"""benchmarks.meaning's ``product`` system runs the product's meaning path (store, exact compare, gate,
checks) on a tiny registry and reads back what it did page by page: an exact copy stays the exact path's, a
rewrite that keeps a few runs of its chapter is gated by its near miss and matched by the check, unrelated
text is never gated. The model is a stand-in (as tests/integration/compare/test_meaning_pipeline.py's): a
page covers a chapter when it holds the chapter's marker sentence."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from benchmarks.meaning import Registry, print_pages, product_figures, product_path, score
from benchmarks.meaning_data import Example
from fptrack.compare import meaning, service
from fptrack.compare.meaning import MeaningAlignment
from fptrack.compare.works import register_work
from fptrack.core.settings import Settings
from fptrack.jobs.bootstrap import open_sessions
from fptrack.storage.db import session_scope
from fptrack.storage.models import Chapter
from tests.unit.compare.test_meaning_model import CHAPTER, REWRITE

MARKER = "老周只是笑了笑"
# the rewrite with the chapter's last two sentences kept: runs the exact path verifies below its bar
NEAR_MISS = REWRITE.rstrip() + "\n\n老周只是笑了笑，摸了摸阿梅湿透的头发。雨停了，东边的天空露出一线金光。"
OTHER = (
    "第一回 山中访友\n\n"
    + "清晨，书生背着包袱上山，去寻访隐居多年的老友。山路崎岖，松涛阵阵，溪水潺潺流过青石。" * 8
)
NEWS = "今天天气晴朗，我们去公园散步。公园里的花开得正好，孩子们在草地上放风筝。" * 12


class StandIn:
    """The model's entry points the product calls: every sentence one vector; a page covers a chapter
    (``covered``) when both hold :data:`MARKER`, else 0.1."""

    def __init__(self) -> None:
        self.aligned: list[str] = []
        self.covered = 0.8

    def embed_sentences(self, sentences: list[str]) -> np.ndarray:
        return np.ones((len(sentences), meaning.EMBEDDING_DIM), dtype=np.float32) / 20

    def sentence_vectors(self, text: str) -> tuple[list[tuple[int, int]], np.ndarray]:
        return [(0, len(text))], self.embed_sentences([text])

    def align_stored(self, page: str, chapter: str, spans: Any, vectors: np.ndarray) -> MeaningAlignment:
        self.aligned.append(page)
        if MARKER in page and MARKER in chapter:
            start = page.index(MARKER)
            return MeaningAlignment(self.covered, "rewrite", ((start, start + 7, 0, 7, 0.93),), 20, 1)
        return MeaningAlignment(0.1, "rewrite", (), 20, 1)


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    model = StandIn()
    for name in ("embed_sentences", "sentence_vectors", "align_stored"):
        monkeypatch.setattr(meaning, name, getattr(model, name))
    return model


def _registry(settings: Settings) -> Registry:
    """Two works of one chapter each, registered and indexed in-process (``fptrack works add`` does the
    same through the command line)."""
    sessions = open_sessions(settings)
    keys: dict[int, tuple[str, int]] = {}
    texts: dict[int, str] = {}
    for work, text in (("fengyu", CHAPTER), ("shanzhong", OTHER)):
        with session_scope(sessions) as session:
            registered = register_work(session, f"{work}\n\n{text}".encode(), source_name=f"{work}.txt")
            service.index_work(session, registered.work_id, settings)
            for chapter_id, chapter_text in session.execute(
                select(Chapter.id, Chapter.text).where(Chapter.work_id == registered.work_id)
            ):
                keys[int(chapter_id)] = (work, 3 if work == "fengyu" else 1)
                texts[int(chapter_id)] = str(chapter_text)
    sessions.kw["bind"].dispose()
    return Registry(keys, texts)


def test_the_product_system_gates_checks_and_reads_back_each_page(
    sqlite_settings: Settings, stand_in: StandIn, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = _registry(sqlite_settings)
    examples = [
        Example("rewrite", "fengyu", 3, "test", NEAR_MISS),
        Example("ocr", "shanzhong", 1, "test", OTHER),  # an exact copy
        Example("news", "news", 0, "test", NEWS),
    ]

    run = product_path(sqlite_settings, registry, examples)

    rewrite, copy, news = (run.pages[e.name] for e in examples)
    assert rewrite.gate == "near_miss" and rewrite.gated
    assert rewrite.candidates[0][0] == ("fengyu", 3)
    assert rewrite.exact == frozenset() and rewrite.meaning == {("fengyu", 3)}
    assert (rewrite.coverage, rewrite.kind) == (0.8, "rewrite")
    assert rewrite.check_cpu is not None and rewrite.check_cpu >= 0
    assert copy.gate == "exact" and copy.exact == {("shanzhong", 1)} and copy.check_cpu is None
    assert news.gate.startswith("no (zh, 0 near misses") and news.flagged == set()
    assert stand_in.aligned == [NEAR_MISS]  # only the gated page reached the model
    assert run.checks["checked"] == 1 and run.checks["matches"] == 1

    flagged = {name: page.flagged for name, page in run.pages.items()}
    results = score(examples, flagged)
    assert (results["recall"], results["precision"], results["attribution"]) == (1.0, 1.0, 1.0)

    figures = product_figures(run, examples, sqlite_settings)
    assert figures["gated"] == {"near_miss": 1, "entities": 0}
    assert figures["gated_by_kind"]["rewrite"] == {"pages": 1, "gated": 1, "own_chapter_candidate": 1}
    assert figures["candidates_limit"] == sqlite_settings.meaning_candidates
    assert figures["pages"][0]["meaning"] == ["fengyu:3"] and figures["pages"][0]["coverage"] == 0.8
    print_pages(run, examples)
    out = capsys.readouterr().out
    assert "fengyu:3*" in out and "0.80 rewrite" in out


def test_a_gated_page_below_the_bar_says_how_close_it_came(
    sqlite_settings: Settings, stand_in: StandIn
) -> None:
    registry = _registry(sqlite_settings)
    stand_in.covered = 0.2  # under COVERAGE_MIN: no match
    examples = [Example("rewrite", "fengyu", 3, "test", NEAR_MISS)]

    run = product_path(sqlite_settings, registry, examples)

    checked = run.pages[examples[0].name]
    assert checked.gate == "near_miss" and checked.check_cpu is not None
    assert checked.meaning == frozenset() and checked.coverage is None and checked.kind == ""
    assert checked.below_bar == 0.2  # its candidates aligned again, read-only: nothing recorded
    assert run.checks["checked"] == 1 and run.checks["matches"] == 0
    assert score(examples, {examples[0].name: checked.flagged})["recall"] == 0.0
