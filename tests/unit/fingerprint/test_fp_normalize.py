from __future__ import annotations

import numpy as np
import opencc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.normalize import NormalizedText, normalize

from .strategies import COMMON_HAN, any_text, han_text, prose

_S2T = opencc.OpenCC("s2t")


def test_full_width_case_punctuation_and_traditional():
    n = normalize("內容與軟體，臺灣 ＡＢＣ def\n１２３。")
    assert n.text == "内容与软体台湾abcdef123"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # injected pinyin after a Han character, ASCII and full-width parentheses, tone marks or digits
        ("這段內(nèi)容很重(zhòng)要", "这段内容很重要"),
        ("他說（shuō）話", "他说话"),
        ("我们(wo3 men5)走", "我们走"),
        # an ad spliced into a sentence with ^ ~ * separators and a domain glued to it
        ("他走进大殿小^说^无广告的~顶点*小说~网www.example.com只见众人", "他走进大殿只见众人"),
        # page markers of PDF-to-text copies
        ("第一句\n----------------------- Page 12-----------------------\n第二句", "第一句第二句"),
        # web-novel update stamps
        ("第三回\n更新时间:2010-1-2 3:04:05 本章字数:3210\n正文", "第三回正文"),
        # download banners carry URLs; the URL goes, the words stay
        ("欢迎访问书屋:http://www.example.net/book/1.html 谢谢", "欢迎访问书屋谢谢"),
        ("输入：某某古籍oldbook.example.com", "输入某某古籍"),
    ],
)
def test_piracy_artifacts(raw: str, expected: str):
    assert normalize(raw).text == expected


def test_english_parenthetical_is_not_taken_for_pinyin():
    assert normalize("电脑(computer)很好").text == "电脑computer很好"


def test_offsets_point_at_source_characters():
    raw = "  內(nèi)容，ＡＢ!"
    n = normalize(raw)
    assert n.text == "内容ab"
    assert [raw[i] for i in n.offsets] == ["內", "容", "Ａ", "Ｂ"]
    assert n.original_span(0, 2) == (2, 9)
    assert n.original_span(2, 4) == (10, 12)
    assert n.original_span(4, 4) == (len(raw), len(raw))
    with pytest.raises(ValueError, match="outside"):
        n.original_span(3, 9)


def test_expanding_characters_keep_offsets():
    n = normalize("a⑩ﬁ")
    assert n.text == "a10fi"
    assert n.offsets.tolist() == [0, 1, 1, 2, 2]


def test_rejects_non_text():
    with pytest.raises(TypeError, match="str"):
        normalize(b"bytes")  # type: ignore[arg-type]


@given(any_text)
def test_only_letters_and_digits_remain(text: str):
    out = normalize(text).text
    assert all(c.isalnum() or c.isnumeric() for c in out), out


@given(prose)
def test_deterministic_and_idempotent(text: str):
    a, b = normalize(text), normalize(text)
    assert a.text == b.text and np.array_equal(a.offsets, b.offsets)
    assert normalize(a.text).text == a.text


@given(st.one_of(any_text, prose))
def test_offsets_map_back_to_the_source_character(text: str):
    n = normalize(text)
    assert isinstance(n, NormalizedText)
    assert len(n.offsets) == len(n.text)
    assert np.all(np.diff(n.offsets) >= 0)
    for i, ch in enumerate(n.text):
        # the source character, normalised on its own, produces this character
        assert ch in normalize(text[n.offsets[i]]).text
    if n.text:
        s, e = n.original_span(0, len(n.text))
        assert normalize(text[s:e]).text == n.text


@given(prose)
def test_no_character_is_lost_without_an_artifact(text: str):
    # without artefact triggers, every kept character of the source shows up exactly once, in order
    n = normalize(text)
    expected = "".join(normalize(c).text for c in text)
    if not any(t in text for t in "(（^~*.-更"):
        assert n.text == expected


@settings(max_examples=200)
@given(han_text)
def test_traditional_copy_normalises_like_the_simplified_original(text: str):
    # character by character; OpenCC's s2t phrase table has a few one-way variants (背人 -> 揹人) that
    # character-level t2s cannot undo: the pinyin-initial tests cover those (揹 and 背 are both "b").
    traditional = "".join(_S2T.convert(c) for c in text)
    assert normalize(traditional).text == normalize(text).text


def test_phrase_level_variant_is_a_known_limit():
    assert normalize(_S2T.convert("背人")).text == "揹人"


def test_common_han_survive_unchanged():
    # Character-level t2s maps 乾 (also a Simplified character, 乾坤) to 干; both sides of a comparison
    # go through the same table, so that costs nothing. Every other common character is left alone.
    text = "".join(COMMON_HAN)
    out = normalize(text).text
    assert len(out) == len(text)
    assert {(a, b) for a, b in zip(text, out) if a != b} == {("乾", "干")}
