"""The named-entity candidates (compare.entities) without a database: the Wade-Giles syllable table and its
inverse, the keys Latin pages are read under, the lexicon of a work, the pages' terms, and the order-aware
score."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.compare.entities import (
    Occurrences,
    _capitalised_runs,
    forms,
    page_keys,
    page_terms,
    pinyin_syllables,
    romanized_key,
    score_chapter,
    wade_giles,
    wade_giles_to_pinyin,
    work_lexicon,
)

SYLLABLES = pinyin_syllables()


@pytest.mark.parametrize(
    ("pinyin", "expected"),
    [
        ("bei", "pei"), ("cao", "ts'ao"), ("zhu", "chu"), ("ge", "ko"), ("liang", "liang"),
        ("xiang", "hsiang"), ("quan", "ch'üan"), ("zhuo", "cho"), ("dong", "tung"), ("lv", "lü"),
        ("zhi", "chih"), ("zi", "tzu"),
        ("si", "ssu"), ("ri", "jih"), ("jie", "chieh"), ("xue", "hsüeh"), ("jian", "chien"), ("gui", "kuei"),
        ("yu", "yü"), ("you", "yu"), ("yi", "i"), ("er", "êrh"), ("guo", "kuo"), ("luo", "lo"),
        ("ren", "jen"),
    ],
)  # fmt: skip
def test_wade_giles_spells_the_syllables_as_translators_of_old_did(pinyin: str, expected: str) -> None:
    assert wade_giles(pinyin) == expected


def test_the_syllable_table_is_one_to_one() -> None:
    spelled = [wade_giles(s) for s in SYLLABLES]
    assert len(set(spelled)) == len(SYLLABLES) > 400


@given(st.sampled_from(SYLLABLES))
def test_a_syllable_comes_back_from_its_wade_giles(syllable: str) -> None:
    assert wade_giles_to_pinyin(wade_giles(syllable)) == syllable


@given(st.lists(st.sampled_from(SYLLABLES), min_size=1, max_size=4), st.sampled_from(["", " ", "-"]))
def test_a_name_written_any_way_has_one_key(syllables: list[str], joiner: str) -> None:
    """ "Chu-ko Liang", "Chuko Liang" and "CHU KO LIANG" are one key: the syllables' Wade-Giles joined,
    without apostrophes, hyphens, spaces, diacritics or capitals."""
    written = joiner.join(wade_giles(s) for s in syllables)
    key = romanized_key(written.title())
    assert key == romanized_key(written.upper()) == romanized_key("".join(map(wade_giles, syllables)))
    assert key.isascii() and key.isalpha() and key == key.lower()
    assert romanized_key(key) == key


def test_a_han_entity_is_indexed_under_its_pinyin_and_wade_giles() -> None:
    assert forms("刘备") == {"刘备", "liubei", "liupei"}
    assert {"zhugeliang", "chukoliang"} <= forms("诸葛亮")
    assert "tsaotsao" in forms("曹操")
    assert {"lubu", "lupu"} <= forms("吕布")  # "Lü Bu" and "Lu Pu" as translators write them
    assert romanized_key("Ts'ao Ts'ao") == "tsaotsao" and romanized_key("Chu-ko Liang") == "chukoliang"


def test_a_works_lexicon_holds_its_names_not_the_storytellers_formulas() -> None:
    chapter = "却说刘备与关羽、张飞来到荆州。只见曹操引兵而来，刘备大惊。关羽曰：“张飞何在？”曹操退回许昌。"
    lexicon = work_lexicon([chapter, chapter.replace("荆州", "徐州")])
    assert {"刘备", "关羽", "张飞", "曹操"} <= lexicon
    assert not {"却说", "只见"} & lexicon
    assert "关羽曰" not in lexicon  # a name glued to the word after it


def test_capitalised_runs_break_on_punctuation_and_lower_case_words() -> None:
    runs = [
        [w for w, _ in run] for run in _capitalised_runs("Then Liu Bei met Ts'ao Ts'ao. Chu-ko Liang, Sun")
    ]
    assert runs == [["Then", "Liu", "Bei"], ["Ts'ao", "Ts'ao"], ["Chu-ko", "Liang"], ["Sun"]]


def test_a_translated_page_finds_the_romanized_terms_in_its_order() -> None:
    known = {"liubei": 1, "tsaotsao": 1, "chukoliang": 1, "荆州": 1}
    found = page_terms("When Liu Bei heard that Ts'ao Ts'ao had come, he sent for Chu-ko Liang.", known)
    assert set(found.terms) == {"liubei", "tsaotsao", "chukoliang"}
    order = sorted(found.terms, key=lambda t: found.terms[t].first)
    assert order == ["liubei", "tsaotsao", "chukoliang"]
    assert set(page_terms("刘备到了荊州", known).terms) == {"荆州"}  # Traditional read as Simplified


@settings(max_examples=200)
@given(st.text(max_size=400))
def test_any_text_is_read_without_error(text: str) -> None:
    known = {"liubei": 1, "刘备": 1, "chukoliang": 1}
    found = page_terms(text, known)
    assert set(found.terms) <= set(known)
    assert all(0 <= o.first < 10_000 and o.count >= 1 for o in found.terms.values())


@given(
    st.lists(st.floats(0.1, 5.0), min_size=2, max_size=30),
    st.integers(0, 28),
)
def test_the_score_grows_with_every_entity_shared_in_order(weights: list[float], cut: int) -> None:
    """Terms in the same order on both sides: sharing one more never lowers the score."""
    terms = [f"t{i}" for i in range(len(weights))]
    chapter = {t: 300 * i for i, t in enumerate(terms)}
    w = dict(zip(terms, weights, strict=True))
    cut = min(cut, len(terms) - 1)

    def page(k: int) -> dict[str, Occurrences]:
        return {t: Occurrences(1, 300 * i) for i, t in enumerate(terms[:k])}

    assert score_chapter(page(cut + 1), chapter, w) >= score_chapter(page(cut), chapter, w)


@given(st.lists(st.floats(0.1, 5.0), min_size=3, max_size=20))
def test_the_chapters_order_outscores_its_reverse(weights: list[float]) -> None:
    terms = [f"t{i}" for i in range(len(weights))]
    chapter = {t: 400 * i for i, t in enumerate(terms)}
    w = dict(zip(terms, weights, strict=True))
    in_order = {t: Occurrences(1, 400 * i) for i, t in enumerate(terms)}
    reversed_ = {t: Occurrences(1, 400 * (len(terms) - i)) for i, t in enumerate(terms)}
    assert score_chapter(in_order, chapter, w) > score_chapter(reversed_, chapter, w)


NAMES = [
    "刘备",
    "关羽",
    "诸葛亮",
    "荆州",
    "花果山",
    "孙悟空",
    "liubei",
    "kuanyu",
    "chukoliang",
    "tsaotsao",
    "lubu",
]
PIECES = [
    *NAMES,
    "Liu Bei",
    "Kuan Yü",
    "Chu-ko Liang",
    "Ts'ao Ts'ao",
    "Lü Bu",
    "the",
    "came",
    "。",
    ", ",
    " ",
    "到",
]
PIECES += ["Liu", "Bei", "劉備", "關羽", "諸葛", "Zhuge Kong Ming", "\n", "said"]


@given(st.lists(st.sampled_from(PIECES), max_size=60), st.sets(st.sampled_from(NAMES), min_size=1))
@settings(max_examples=200)
def test_the_page_keys_hold_every_term_the_page_is_read_for(pieces: list[str], indexed: set[str]) -> None:
    """``candidates`` reads a page only for the terms among :func:`page_keys` that are indexed: the page's
    terms are those it would have with the whole vocabulary in hand."""
    text = "".join(pieces)
    known = dict.fromkeys(indexed | {"无关", "zzzz"}, 3)
    looked_up = {k: known[k] for k in page_keys(text) if k in known}
    assert page_terms(text, looked_up).terms == page_terms(text, known).terms


@given(st.text(max_size=300))
def test_page_keys_of_any_text_are_short_and_nonempty(text: str) -> None:
    assert all(0 < len(k) <= 64 for k in page_keys(text))
