"""fingerprint.pinyin: the pinyin-initial string the page path winnows and aligns (same length as the
normalised text, same letters for same-sound and Traditional/Simplified variants)."""

from __future__ import annotations

import opencc
from hypothesis import given, settings
from hypothesis import strategies as st
from pypinyin import Style, lazy_pinyin

from fptrack.fingerprint.normalize import normalize
from fptrack.fingerprint.pinyin import PINYIN_ALPHABET, initial_counts, letter_indices, pinyin_initials
from fptrack.fingerprint.winnowing import winnow

from .strategies import COMMON_HAN, any_text, han_passage, prose, same_sound_swaps

_S2T = opencc.OpenCC("s2t")


def test_initials_examples():
    assert pinyin_initials("内容重要abc123") == "nrzyabc123"
    assert pinyin_initials("") == ""


@settings(deadline=None)  # a loaded machine is no failure of this property
@given(st.one_of(any_text, prose))
def test_initials_have_the_length_of_the_normalised_text(text: str):
    n = normalize(text)
    initials = pinyin_initials(n.text)
    assert len(initials) == len(n.text)
    assert initials.isascii()


@given(st.text(alphabet=st.sampled_from(COMMON_HAN), min_size=1, max_size=50))
def test_initials_agree_with_pypinyin_per_character(text: str):
    expected = "".join(lazy_pinyin(c, style=Style.FIRST_LETTER)[0][0] for c in text)
    assert pinyin_initials(text) == expected


def test_initials_agree_with_pypinyin_on_common_characters():
    text = "".join(COMMON_HAN)
    ours = pinyin_initials(text)
    theirs = "".join(p[0] for p in lazy_pinyin(text, style=Style.FIRST_LETTER))
    agreement = sum(a == b for a, b in zip(ours, theirs)) / len(text)
    assert len(theirs) == len(text) and agreement >= 0.995


@settings(max_examples=100, deadline=None)
@given(han_passage, st.data())
def test_same_sound_swaps_do_not_change_the_initial_winnowing(text: str, data: st.DataObject):
    swapped = same_sound_swaps(text, data)
    a, b = pinyin_initials(normalize(text).text), pinyin_initials(normalize(swapped).text)
    assert winnow(a, 8, 12) == winnow(b, 8, 12)


@settings(max_examples=100, deadline=None)
@given(han_passage)
def test_traditional_conversion_does_not_change_the_initial_winnowing(text: str):
    a = pinyin_initials(normalize(text).text)
    b = pinyin_initials(normalize(_S2T.convert(text)).text)
    assert winnow(a, 8, 12) == winnow(b, 8, 12)


def test_initial_counts():
    assert initial_counts("aab_z").tolist()[:2] == [2, 1]
    assert initial_counts("aab_z")[-1] == 1


def test_letter_indices_put_everything_outside_the_alphabet_last():
    assert letter_indices("ab_1z").tolist() == [0, 1, 23, 23, 22]
    assert letter_indices("ba", "ab").tolist() == [1, 0]
    assert len(PINYIN_ALPHABET) == 23 and not set("iuv") & set(PINYIN_ALPHABET)
