from __future__ import annotations

import functools
from collections import defaultdict

import numpy as np
import opencc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pypinyin import Style, lazy_pinyin

from fptrack.fingerprint.normalize import normalize
from fptrack.fingerprint.pinyin_dna import (
    DnaParams,
    dna_code_distance,
    dna_codes,
    dna_positions,
    initial_counts,
    pinyin_initials,
)
from fptrack.fingerprint.winnowing import winnow

from .strategies import COMMON_HAN, any_text, prose

_S2T = opencc.OpenCC("s2t")


@functools.cache
def _homophones() -> dict[str, list[str]]:
    """Common characters grouped by toneless pinyin (only groups with 2+ members). Polyphones whose reading in
    the per-character table differs from pypinyin's first reading (乾: qian / gan) are left out: swapping them
    is not a same-sound swap; nor are characters that normalisation changes (乾 is read as Traditional 干)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for ch in COMMON_HAN:
        reading = lazy_pinyin(ch)[0]
        if normalize(ch).text == ch and pinyin_initials(ch) == reading[:1]:
            groups[reading].append(ch)
    return {ch: members for members in groups.values() if len(members) > 1 for ch in members}


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


han_passage = st.lists(st.sampled_from(COMMON_HAN), min_size=40, max_size=400).map("".join)
params_strategy = st.builds(
    DnaParams,
    granularity=st.integers(4, 80),
    overlap=st.sampled_from([0.0, 0.25, 0.5, 0.75]),
    levels=st.sampled_from([2, 4]),
    counts_per_level=st.sampled_from([1.0, 2.0, 3.0]),
)


@settings(max_examples=100, deadline=None)
@given(han_passage, st.data(), params_strategy)
def test_same_sound_swaps_change_neither_dna_nor_initial_winnowing(text: str, data, params: DnaParams):
    homophones = _homophones()
    swappable = [i for i, c in enumerate(text) if c in homophones]
    chosen = data.draw(st.lists(st.sampled_from(swappable), max_size=20) if swappable else st.just([]))
    chars = list(text)
    for i in chosen:
        chars[i] = data.draw(st.sampled_from(homophones[chars[i]]))
    swapped = "".join(chars)
    a, b = pinyin_initials(normalize(text).text), pinyin_initials(normalize(swapped).text)
    assert dna_codes(a, params) == dna_codes(b, params)
    assert winnow(a, 8, 12) == winnow(b, 8, 12)


@settings(max_examples=100, deadline=None)
@given(han_passage, params_strategy)
def test_traditional_conversion_changes_neither_dna_nor_initial_winnowing(text: str, params: DnaParams):
    a = pinyin_initials(normalize(text).text)
    b = pinyin_initials(normalize(_S2T.convert(text)).text)
    assert dna_codes(a, params) == dna_codes(b, params)
    assert winnow(a, 8, 12) == winnow(b, 8, 12)


@given(st.text(alphabet=st.sampled_from("abcdefghjklmnopqrstwxyz_1"), max_size=300), params_strategy)
def test_dna_codes_match_a_direct_count(initials: str, params: DnaParams):
    codes = dna_codes(initials, params)
    starts = dna_positions(len(initials), params)
    assert len(codes) == len(starts)
    a = len(params.alphabet)
    for code, start in zip(codes, starts):
        assert 0 <= code < (1 << 63)
        seg = initials[start : start + params.granularity]
        expected = 0
        for j, letter in enumerate(params.alphabet):
            deviation = seg.count(letter) - len(seg) / a
            q = int(
                np.clip(
                    np.floor(deviation / params.counts_per_level) + params.levels // 2, 0, params.levels - 1
                )
            )
            expected |= q << (j * params.bits_per_letter)
        assert code == expected


def test_segments_and_overlap():
    p = DnaParams(granularity=10, overlap=0.5)
    assert dna_positions(30, p) == (0, 5, 10, 15, 20)
    assert dna_positions(7, p) == (0,)
    assert dna_positions(0, p) == ()
    assert dna_codes("", p) == ()


def test_reference_shifts_the_codes():
    initials = "abab" * 16
    uniform = dna_codes(initials, DnaParams(granularity=64))
    ref = np.zeros(23)
    ref[0] = ref[1] = 0.5  # a and b expected at exactly their observed rate
    centred = dna_codes(initials, DnaParams(granularity=64), reference=ref)
    assert uniform != centred
    p = DnaParams(granularity=64)
    assert all(((centred[0] >> (j * 2)) & 3) == 2 for j in range(23)) or p.levels != 4
    with pytest.raises(ValueError, match="reference"):
        dna_codes(initials, p, reference=np.ones(5))


def test_code_distance():
    p = DnaParams()
    assert dna_code_distance(0, 0, p) == 0
    assert dna_code_distance(0b11, 0b01, p) == 2
    assert dna_code_distance(0b11 << 4, 0, p) == 3


def test_params_validation():
    with pytest.raises(ValueError, match="63 bits"):
        DnaParams(levels=8)
    with pytest.raises(ValueError, match="overlap"):
        DnaParams(overlap=1.0)
    with pytest.raises(ValueError, match="granularity"):
        DnaParams(granularity=0)
    assert DnaParams(levels=8, alphabet="abcdefghjklmnopqrstwx").bits_per_letter == 3


def test_initial_counts():
    assert initial_counts("aab_z").tolist()[:2] == [2, 1]
    assert initial_counts("aab_z")[-1] == 1
