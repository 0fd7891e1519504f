from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.features import token_hashes
from fptrack.fingerprint.simhash import SimhashParams, hamming, simhash, simhash_text, simhash_tokens

from .strategies import COMMON_HAN


def _brute_simhash(words: list[str], weights: list[float], bits: int) -> int:
    hashes = [int(h) for h in token_hashes(words, 0)]
    if bits == 128:
        hashes = [lo | (int(hi) << 64) for lo, hi in zip(hashes, token_hashes(words, 1))]
    v = [0.0] * bits
    for h, w in zip(hashes, weights):
        for i in range(bits):
            v[i] += w if (h >> i) & 1 else -w
    return sum(1 << i for i in range(bits) if v[i] > 0)


@given(
    st.lists(st.text(min_size=1, max_size=4), min_size=0, max_size=30),
    st.sampled_from([64, 128]),
    st.data(),
)
def test_simhash_matches_the_definition(words: list[str], bits: int, data):
    # integer-valued weights keep every sum exact, so ties (V[i] == 0 -> bit 0) are tested too
    weights = data.draw(st.lists(st.integers(1, 50).map(float), min_size=len(words), max_size=len(words)))
    assert simhash(words, weights, bits) == _brute_simhash(words, weights, bits)
    assert simhash(words, None, bits) == _brute_simhash(words, [1.0] * len(words), bits)


def test_simhash_input_checks():
    with pytest.raises(ValueError, match="bits"):
        simhash(["a"], bits=32)
    with pytest.raises(ValueError, match="weights"):
        simhash(["a", "b"], [1.0])
    with pytest.raises(ValueError, match="shape"):
        simhash(np.zeros(3, dtype=np.uint64), bits=128)
    assert simhash([]) == 0


def test_hamming():
    assert hamming(0b1011, 0b0001) == 2
    assert hamming(-1, 0) == 64
    assert hamming(1 << 127, 0) == 1


def test_params_validation():
    with pytest.raises(ValueError, match="weighting"):
        SimhashParams(scheme="bogus")
    with pytest.raises(ValueError, match="bits"):
        SimhashParams(bits=32)


def test_position_option_separates_swapped_terms():
    a, b = "能力比学历重要性高", "学历比能力重要性高"
    assert simhash_text(a) == simhash_text(b)  # classic Simhash cannot tell them apart (E-Simhash fig. 2)
    p = SimhashParams(position=True)
    assert simhash_text(a, params=p) != simhash_text(b, params=p)


sentences = st.lists(st.sampled_from(COMMON_HAN), min_size=200, max_size=600).map("".join)


@settings(max_examples=50, deadline=None)
@given(sentences, st.sampled_from(["tf", "tfidf", "entropy", "termlen"]), st.sampled_from([64, 128]))
def test_identical_input_identical_output(text: str, scheme: str, bits: int):
    p = SimhashParams(bits=bits, scheme=scheme)
    a = simhash_text(text, params=p)
    assert a == simhash_text(text, params=p)
    assert 0 <= a < (1 << bits)


def _edit(text: str, n_edits: int, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(n_edits):
        i = rng.randrange(len(chars))
        chars[i] = rng.choice(COMMON_HAN)
    return "".join(chars)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["tf", "tfidf", "termlen"]))
@example(seed=31268632, scheme="termlen")
def test_hamming_grows_with_edits(seed: int, scheme: str):
    # statistically: the mean distance over many random edits rises with the number of edited characters
    rng = random.Random(seed)
    words = [
        "天下",
        "大势",
        "分久必合",
        "合久必分",
        "英雄",
        "豪杰",
        "兄弟",
        "结义",
        "桃园",
        "刘备",
        "关羽",
        "张飞",
        "黄巾",
        "起义",
        "朝廷",
        "天子",
        "百姓",
        "军马",
        "将军",
        "城池",
    ]
    base = "".join(rng.choice(words) for _ in range(600))
    p = SimhashParams(scheme=scheme)
    fp = simhash_text(base, params=p)
    means = []
    for edits in (5, 60, 600):
        d = [hamming(fp, simhash_text(_edit(base, edits, rng), params=p)) for _ in range(12)]
        means.append(sum(d) / len(d))
    # 5 and 60 edits of 600 words both leave a Simhash a bit or two away, in either order on some draws (seed
    # 31268632, termlen: 2.0 and 1.08 bits); rewriting the whole text moves it further than either
    assert means[0] < means[2] and means[1] < means[2], means


def test_simhash_tokens_ignores_stop_words():
    assert simhash_tokens(["能力", "的", "学历"]) == simhash_tokens(["能力", "学历"])


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.sampled_from(["的", "了", "灯塔", "守望", "老周", "海风", "是", "信", "弟弟", "在"]), max_size=60
    )
)
def test_tf_simhash_of_tokens_is_the_simhash_of_their_content_words(tokens: list[str]) -> None:
    # simhash_tokens counts distinct terms before dropping stop words; the result must be the plain Simhash of
    # every non-stop token with weight 1 per occurrence.
    from fptrack.fingerprint.features import STOP_WORDS
    from fptrack.fingerprint.simhash import simhash, simhash_tokens

    content = [t for t in tokens if t not in STOP_WORDS]
    assert simhash_tokens(tokens) == simhash(content)


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(["的", "了", "是", "在", "和"]), st.text(min_size=1, max_size=4)),
        max_size=80,
    )
)
def test_tf_simhash_counting_strings_is_the_simhash_of_every_content_token(tokens: list[str]) -> None:
    # the tf path counts the distinct tokens as strings and hashes only those: the fingerprint is the one of
    # hashing every non-stop token (any strings, repeats and stop words among them), in any token order
    from fptrack.fingerprint.features import STOP_WORDS
    from fptrack.fingerprint.simhash import simhash, simhash_tokens

    content = [t for t in tokens if t not in STOP_WORDS]
    assert simhash_tokens(tokens) == simhash(content) == simhash_tokens(list(reversed(tokens)))
