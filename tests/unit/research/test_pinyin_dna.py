"""research.pinyin_dna: DNA codes of pinyin-initial segments (checked against a direct count, unchanged by
same-sound swaps and script changes) and the in-memory DNA candidate index the ablation reads."""

from __future__ import annotations

import numpy as np
import opencc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.contract import CandidateParams
from fptrack.fingerprint.normalize import normalize
from fptrack.fingerprint.pinyin import pinyin_initials
from fptrack.research.pinyin_dna import (
    DnaCandidateIndex,
    DnaParams,
    dna_code_distance,
    dna_codes,
    dna_positions,
)
from tests.unit.fingerprint.strategies import han_passage, same_sound_swaps

_S2T = opencc.OpenCC("s2t")

params_strategy = st.builds(
    DnaParams,
    granularity=st.integers(4, 80),
    overlap=st.sampled_from([0.0, 0.25, 0.5, 0.75]),
    levels=st.sampled_from([2, 4]),
    counts_per_level=st.sampled_from([1.0, 2.0, 3.0]),
)


@settings(max_examples=100, deadline=None)
@given(han_passage, st.data(), params_strategy)
def test_same_sound_swaps_do_not_change_the_dna(text: str, data: st.DataObject, params: DnaParams):
    swapped = same_sound_swaps(text, data)
    a, b = pinyin_initials(normalize(text).text), pinyin_initials(normalize(swapped).text)
    assert dna_codes(a, params) == dna_codes(b, params)


@settings(max_examples=100, deadline=None)
@given(han_passage, params_strategy)
def test_traditional_conversion_does_not_change_the_dna(text: str, params: DnaParams):
    a = pinyin_initials(normalize(text).text)
    b = pinyin_initials(normalize(_S2T.convert(text)).text)
    assert dna_codes(a, params) == dna_codes(b, params)


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
    p = DnaParams(granularity=64)
    uniform = dna_codes(initials, p)
    ref = np.zeros(23)
    ref[0] = ref[1] = 0.5  # a and b expected at exactly their observed rate
    centred = dna_codes(initials, p, reference=ref)
    assert uniform != centred
    assert p.levels == 4 and all(((centred[0] >> (j * 2)) & 3) == 2 for j in range(23))
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


owner_codes = st.dictionaries(st.integers(0, 30), st.lists(st.integers(0, 40), max_size=25), max_size=12)


@given(owner_codes, st.lists(st.integers(0, 40), max_size=30), st.integers(1, 4), st.integers(1, 6))
def test_dna_candidates_match_a_direct_count(
    owners: dict[int, list[int]], query: list[int], min_shared: int, max_candidates: int
):
    params = CandidateParams(min_shared=min_shared, max_candidates=max_candidates)
    found = DnaCandidateIndex(owners).candidates(query, params)
    shared = {owner: len(set(codes) & set(query)) for owner, codes in owners.items()}
    eligible = sorted((o for o, n in shared.items() if n >= min_shared), key=lambda o: (-shared[o], o))
    assert list(found) == eligible[:max_candidates]
    assert all(found[o] == shared[o] for o in found)


def test_dna_candidates_find_the_chapter_a_copy_was_taken_from():
    text = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(2000))
    chapters = {1: text[:1000], 2: text[1000:]}
    index = DnaCandidateIndex(
        {cid: dna_codes(pinyin_initials(normalize(t).text)) for cid, t in chapters.items()}
    )
    # 40 characters of other text, then the copy from chapter offset 200: page segment k (start 32k) covers
    # chapter offset 160 + 32k, a segment start of the chapter; exact codes match only on such boundaries
    page = "前言" * 20 + chapters[2][200:800]
    assert list(index.candidates(dna_codes(pinyin_initials(normalize(page).text)))) == [2]
