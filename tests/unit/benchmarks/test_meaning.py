"""benchmarks.meaning_data makes each kind of page deterministically from tiny texts of its own (no corpus),
and benchmarks.meaning runs end to end on a tiny synthetic set, with a stand-in for the model (the product
system) and for compare.meaning's index (``--index-all``)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.meaning import run_benchmark
from benchmarks.meaning_data import (
    FUNCTION_WORDS,
    TUNE_SHARE,
    Chapter,
    Example,
    MeaningData,
    changed_share,
    english_review,
    longest_shared_run,
    news_fan_fiction,
    ocr_noise,
    renamed_fan_fiction,
    reorder_and_drop,
    reorder_rewrite,
    review,
    split_of,
    synonym_rewrite,
)

TEXT = (
    "将军骑马出城，遇见敌兵。两军交战，将军大胜而归。百姓听说了，都来城门迎接。"
    "次日将军升帐，众将皆贺，只见一人上前说道：敌兵虽败，其心未死，不可不防。"
)
SYNONYMS = {
    "将军": ("主将", "元帅"),
    "敌兵": ("敌军",),
    "百姓": ("黎民",),
    "迎接": ("欢迎",),
    "城门": ("城关",),
}


def test_synonym_rewrite_swaps_every_word_with_a_synonym_and_edits_function_words() -> None:
    first = synonym_rewrite(TEXT, SYNONYMS, random.Random(1))
    assert first == synonym_rewrite(TEXT, SYNONYMS, random.Random(1))
    for word in SYNONYMS:
        assert word not in first
    assert "敌军" in first and "黎民" in first
    assert "只见" not in first and "但见" in first  # a function word edited (FUNCTION_WORDS)
    assert FUNCTION_WORDS["只见"] == ("但见",)
    assert 0 < changed_share(TEXT, first) < 0.6


def test_one_character_words_are_swapped_only_for_the_share_asked() -> None:
    table = {"马": ("驹",)}
    by_character = list  # every character a word
    assert "驹" not in synonym_rewrite(TEXT, table, random.Random(2), by_character, single=0.0)
    assert "马" not in synonym_rewrite(TEXT, table, random.Random(2), by_character, single=1.0)


def test_reorder_keeps_the_clauses_of_the_sentences_it_keeps() -> None:
    shuffled = reorder_and_drop(TEXT, random.Random(3), drop=0.0)
    assert shuffled == reorder_and_drop(TEXT, random.Random(3), drop=0.0)
    clauses = sorted(c for c in re.split("[，。：]", TEXT) if c)
    assert sorted(c for c in re.split("[，。：]", shuffled) if c) == clauses
    assert shuffled != TEXT
    dropped = reorder_and_drop(TEXT, random.Random(3), drop=0.5)
    assert len(dropped) < len(TEXT)


def test_the_reorder_kind_swaps_every_one_character_word_too_and_drops_sentences() -> None:
    table = {**SYNONYMS, "马": ("驹",)}
    rewritten = reorder_rewrite(TEXT * 4, table, random.Random(4), list)
    assert "马" not in rewritten and "驹" in rewritten
    assert len(re.findall("[。：]", rewritten)) < len(re.findall("[。：]", TEXT * 4))  # sentences dropped


def test_ocr_noise_breaks_lines_loses_punctuation_and_confuses_shapes() -> None:
    text = TEXT * 4
    noisy = ocr_noise(text, random.Random(4), confusion=0.5, punctuation_lost=1.0)
    assert noisy == ocr_noise(text, random.Random(4), confusion=0.5, punctuation_lost=1.0)
    assert "。" not in noisy and "，" not in noisy
    assert all(len(line) <= 30 for line in noisy.split("\n"))
    assert noisy.replace("\n", "") != re.sub("[，。：]", "", text)  # some characters read as their twins
    assert 0 < changed_share(text, noisy) < 0.3


def test_a_review_quotes_one_short_passage_beside_a_synopsis() -> None:
    chapter = Chapter("w", 1, "第一回 将军出城 百姓迎接", TEXT * 6)
    written = review(chapter, random.Random(5), synopsis_chars=60, quote_chars=30)
    assert written == review(chapter, random.Random(5), synopsis_chars=60, quote_chars=30)
    quote = re.search("「(.*)」", written)
    assert quote and len(quote.group(1)) == 30 and quote.group(1) in chapter.text
    assert "将军出城" in written
    assert len(written) < 60 + 30 + 120


ENGLISH = " ".join(
    f"Sentence {i} tells how Liu Bei, Guan Yu and Zhang Fei rode to battle number {i} with their men."
    for i in range(60)
)


def test_an_english_review_is_a_short_synopsis_in_order_with_one_quote() -> None:
    chapter = Chapter("sanguoyanyi", 3, "Dong Zhuo Silences Ding Yuan", ENGLISH)
    text = english_review(chapter, random.Random(5))
    assert text == english_review(chapter, random.Random(5))
    assert text.startswith("Review: Dong Zhuo Silences Ding Yuan") and len(text) < len(ENGLISH) / 2
    numbers = [int(n) for n in re.findall(r"[Ss]entence (\d+) tells", text)]
    synopsis, quote = numbers[:-1], numbers[-1]
    assert len(synopsis) >= 8 and synopsis == sorted(synopsis)  # clauses taken evenly, in order
    assert 0 <= quote < 60


def test_fan_fiction_borrows_the_registered_works_names() -> None:
    renamed = renamed_fan_fiction(
        "宋江与李逵在梁山泊饮酒。", ("刘备", "张飞", "曹操", "孔明", "关羽", "赵云", "吕布", "许昌")
    )
    assert renamed == "刘备与张飞在许昌饮酒。"
    news = "股市今日上涨。专家认为行情向好。成交量放大。" * 3
    mouths = news_fan_fiction(news, ("刘备",), random.Random(6))
    assert mouths == news_fan_fiction(news, ("刘备",), random.Random(6))
    assert "刘备" in mouths and mouths.replace("刘备", "") != news  # names and their verbs put in
    assert all(sentence in mouths for sentence in ("股市今日上涨", "专家认为行情向好"))


def test_the_split_is_fixed_and_about_the_tune_share() -> None:
    splits = [split_of("sanguoyanyi", n) for n in range(1, 121)]
    assert splits == [split_of("sanguoyanyi", n) for n in range(1, 121)]
    assert set(splits) == {"tune", "test"}
    assert abs(splits.count("tune") / len(splits) - TUNE_SHARE) < 0.12


@pytest.mark.parametrize(
    ("a", "b"), [("天地玄黄宇宙洪荒", "玄黄宇宙"), ("abcabc", "xbcay"), ("日月", "星辰")]
)
def test_the_measures_agree_with_brute_force(a: str, b: str) -> None:
    brute = max((k for i in range(len(a)) for k in range(1, len(a) - i + 1) if a[i : i + k] in b), default=0)
    assert longest_shared_run(a, b) == brute


def test_changed_share_counts_han_characters_not_kept_in_order() -> None:
    assert changed_share("天地人和", "天地人和") == 0.0
    assert changed_share("天地人和", "天人和") == 0.25
    assert changed_share("天地人和", "和人地天") == 0.75


# ------------------------------------------------------------------------------------------------ end to end


@dataclass(frozen=True)
class _Alignment:
    coverage: float
    kind: str
    pairs: tuple[tuple[int, int, int, int, float], ...] = ()


def _bigrams(text: str) -> set[str]:
    han = "".join(re.findall(r"[\u4e00-\u9fff]", text))
    return {han[i : i + 2] for i in range(len(han) - 1)}


def _align(page: str, chapter: str) -> _Alignment:
    """A stand-in for compare.meaning.align: the share of the chapter's character bigrams on the page."""
    grams = _bigrams(chapter)
    return _Alignment(len(grams & _bigrams(page)) / len(grams) if grams else 0.0, "rewrite")


class _Index:
    def __init__(self) -> None:
        self.texts: dict[int, str] = {}

    def add(self, chapter_id: int, text: str) -> None:
        self.texts[chapter_id] = text

    def candidates(self, page_text: str, limit: int = 12) -> list[tuple[int, float]]:
        scored = [(cid, _align(page_text, text).coverage) for cid, text in self.texts.items()]
        return sorted(scored, key=lambda s: -s[1])[:limit]


STAND_IN = SimpleNamespace(MeaningIndex=_Index, align=_align, COVERAGE_MIN=0.3)


def _prose(rng: random.Random, chars: int) -> str:
    """Random Han sentences of two to four clauses (4-7 characters each)."""
    pool = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    sentences: list[str] = []
    while sum(map(len, sentences)) < chars:
        clauses = [
            "".join(rng.choice(pool) for _ in range(rng.randint(4, 7))) for _ in range(rng.randint(2, 4))
        ]
        sentences.append("，".join(clauses) + "。")
    return "".join(sentences)


@pytest.mark.slow  # the real command line registers the works (fptrack init, works add): about 30 s
def test_the_benchmark_runs_end_to_end_on_a_tiny_synthetic_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fptrack.compare import meaning

    # the product system's model, stood in by the same bigram share (test_meaning_bench.py checks that
    # system page by page)
    monkeypatch.setattr(
        meaning, "embed_sentences", lambda s: np.ones((len(s), meaning.EMBEDDING_DIM), dtype=np.float32)
    )
    monkeypatch.setattr(
        meaning,
        "sentence_vectors",
        lambda text: ([(0, len(text))], np.ones((1, meaning.EMBEDDING_DIM), dtype=np.float32)),
    )
    monkeypatch.setattr(
        meaning,
        "align_stored",
        lambda page, chapter, spans, vectors: meaning.MeaningAlignment(
            _align(page, chapter).coverage, "rewrite", (), 1, 1
        ),
    )
    rng = random.Random(7)
    numerals = "一二三"
    registered = {
        work: [Chapter(work, n, f"第{numerals[n - 1]}回 {work}{n}", _prose(rng, 1500)) for n in (1, 2, 3)]
        for work in ("alpha", "beta")
    }
    first, second = registered["alpha"][0], registered["beta"][1]
    # a "rewrite" that keeps most bigrams but no run the exact path can see: its sentences in reverse order
    rewrite = "。".join(reversed(first.text.split("。")))
    examples = [
        Example("rewrite", "alpha", 1, "test", rewrite),
        Example("ocr", "beta", 2, "test", ocr_noise(second.text, random.Random(8), confusion=0.0)),
        Example("news", "news", 0, "test", _prose(rng, 1500)),
        Example("review", "alpha", 1, "test", review(first, random.Random(9))),
        Example("rewrite", "alpha", 3, "tune", registered["alpha"][2].text),  # not on the split scored
    ]
    data = MeaningData(registered, {"alpha": "甲书", "beta": "乙书"}, examples)

    figures = run_benchmark(data, STAND_IN, tmp_path, split="test", index_all=True)  # type: ignore[arg-type]

    assert figures["pages"] == 4 and figures["registered_chapters"] == 6
    results = figures["results"]
    assert next(iter(results)) == "product" and figures["system"] == "product"
    assert figures["recall"] == results["product"]["recall"]
    assert results["exact"]["kinds"]["ocr"]["found"] == 1
    assert results["exact"]["kinds"]["ocr"]["chapter_ok"] == 1
    assert results["product"]["kinds"]["ocr"]["chapter_ok"] == 1  # the exact match, read back
    assert figures["product"]["exact_differs"] == []
    assert results["exact"]["kinds"]["rewrite"].get("found", 0) == 0
    assert results["index-all"]["kinds"]["rewrite"]["found"] == 1
    assert results["exact+index-all"]["recall"] == 1.0
    for system in ("product", "exact", "index-all", "minhash", "simhash"):
        assert results[system]["kinds"]["news"].get("false_pos", 0) == 0
        assert results[system]["kinds"]["review"].get("false_pos", 0) == 0
    assert figures["index_all"]["cpu_seconds_per_page_max"] >= 0
    out = capsys.readouterr().out
    assert "exact+index-all" in out and "rewrite" in out and "product, page by page" in out
