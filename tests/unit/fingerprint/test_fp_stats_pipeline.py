from __future__ import annotations

import numpy as np
import opencc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.contract import CONTRACT, METHODS
from fptrack.fingerprint.features import token_hashes
from fptrack.fingerprint.simhash import SimhashParams, hamming
from fptrack.fingerprint.stats import CorpusStats
from fptrack.fingerprint.text_fingerprints import fingerprint_text

from .strategies import COMMON_HAN

DOCS = [
    "天下大势分久必合合久必分周末七国分争并入于秦",
    "话说天下大势分久必合合久必分英雄豪杰各据一方",
    "今天天气很好我们一起去公园散步看花",
]


def test_document_frequency_idf_and_entropy():
    stats = CorpusStats.from_documents(DOCS)
    assert stats.documents == 3
    h = token_hashes(["天下", "公园", "不存在的词"])
    assert stats.document_frequency(h).tolist() == [2, 1, 0]
    idf = stats.idf(h)
    assert idf[0] == pytest.approx(0.0)  # ln(3 / 3)
    assert idf[1] == pytest.approx(np.log(3 / 2))
    assert idf[2] == pytest.approx(np.log(3))
    assert stats.entropy(token_hashes(["不存在的词"]))[0] == 0.0
    # 天下 is preceded only by 说 (it opens the first document) and followed by 大势 both times; 公园 occurs
    # once: one neighbour word on each side, no uncertainty, 0 bits for both
    assert stats.entropy(h[:2]).tolist() == [0.0, 0.0]


def test_entropy_counts_distinct_neighbours():
    # "乙" is preceded by 甲 and 丙 once each (1 bit) and followed by 丁 twice (0 bits): H = 0.5
    stats = CorpusStats.from_documents(["甲乙丁", "丙乙丁"])
    h = token_hashes(["乙"])
    # tokens depend on the segmenter; check against what it produced
    from fptrack.fingerprint.features import tokenize

    if tokenize("甲乙丁") == ["甲", "乙", "丁"] and tokenize("丙乙丁") == ["丙", "乙", "丁"]:
        assert stats.entropy(h)[0] == pytest.approx(0.5)


doc_lists = st.lists(
    st.lists(st.sampled_from(COMMON_HAN[:200]), min_size=0, max_size=60).map("".join), max_size=6
)


@settings(max_examples=30, deadline=None)
@given(doc_lists, doc_lists)
def test_merge_equals_batch_update_and_round_trips(a: list[str], b: list[str]):
    whole = CorpusStats.from_documents(a + b)
    merged = CorpusStats.from_documents(a).merge(CorpusStats.from_documents(b))
    assert merged == whole
    assert CorpusStats.from_documents(b).merge(CorpusStats.from_documents(a)) == whole
    assert CorpusStats.empty().update(a).update(b) == whole
    assert CorpusStats.from_bytes(whole.to_bytes()) == whole


def test_from_bytes_rejects_garbage():
    with pytest.raises(ValueError, match="CorpusStats"):
        CorpusStats.from_bytes(b"not an archive")


def test_pinyin_reference():
    assert CorpusStats.empty().pinyin_reference() is None
    ref = CorpusStats.from_documents(DOCS).pinyin_reference()
    assert ref is not None and ref.sum() == pytest.approx(1.0) and len(ref) == 23


@settings(max_examples=20, deadline=None)
@given(st.lists(st.sampled_from(COMMON_HAN), min_size=0, max_size=400).map("".join))
def test_fingerprint_text_is_deterministic_and_bigint_safe(text: str):
    with_simhash = CONTRACT.with_method("simhash")
    a, b = fingerprint_text(text, with_simhash), fingerprint_text(text, with_simhash)
    assert a.simhash == b.simhash and a.winnow_chars == b.winnow_chars
    assert a.winnow_initials == b.winnow_initials
    assert len(a.initials) == len(a.normalized.text)
    signed = [h for codes in a.index_codes().values() for h, _ in codes]
    assert all(-(1 << 63) <= v < (1 << 63) for v in signed)
    assert a.simhash is not None and 0 <= a.simhash < (1 << 64)


def test_pirated_copy_fingerprints_stay_close():
    original = "".join(COMMON_HAN[i * 7 % 3000] for i in range(2000))
    chars = list(original)
    chars.insert(500, "(nèi)")
    chars.insert(1200, "小^说^无广告的~顶点*小说~网www.example.com")
    pirate = opencc.OpenCC("s2t").convert("".join(chars))
    with_simhash = CONTRACT.with_method("simhash")
    a, b = fingerprint_text(original, with_simhash), fingerprint_text(pirate, with_simhash)
    assert a.simhash is not None and b.simhash is not None and hamming(a.simhash, b.simhash) <= 3
    assert len({h for h, _ in a.winnow_chars} & {h for h, _ in b.winnow_chars}) >= 0.9 * len(a.winnow_chars)


def test_a_method_the_contract_leaves_out_is_not_computed():
    text = "".join(COMMON_HAN[i * 11 % 3000] for i in range(600))
    everything = CONTRACT.with_method("simhash")
    full = fingerprint_text(text, everything)
    assert full.simhash and full.winnow_chars and full.winnow_initials
    for method, empty in (
        ("simhash", lambda f: f.simhash is None),
        ("winnow", lambda f: f.winnow_chars == ()),
        ("winnow_py", lambda f: f.winnow_initials == ()),
    ):
        reduced = fingerprint_text(text, everything.without(method))
        assert empty(reduced), method
        assert reduced.text == full.text and reduced.initials == full.initials
    assert fingerprint_text(text).simhash is None  # the product leaves Simhash off (ablation, and its cost)
    assert CONTRACT.code_kinds() == ("winnow", "winnow_py")
    assert CONTRACT.only("winnow").methods == {"winnow", "align_initials"}


def test_the_contract_rejects_what_would_break_the_index():
    with pytest.raises(ValueError, match="unknown method"):
        CONTRACT.without("minhash")
    with pytest.raises(ValueError, match="tf-weighted"):
        type(CONTRACT)(simhash=SimhashParams(scheme="entropy"))
    assert set(METHODS) - {"simhash"} == set(CONTRACT.methods)
    with pytest.raises(ValueError, match="unknown method"):
        CONTRACT.with_method("dna")  # pinyin DNA is on the research shelf (research.pinyin_dna)
    assert CONTRACT.winnow_chars.guarantee == CONTRACT.winnow_chars.k + CONTRACT.winnow_chars.w - 1


def test_only_the_code_kinds_the_contract_computes_are_stored() -> None:
    text = "红楼梦第一回甄士隐梦幻识通灵贾雨村风尘怀闺秀。" * 40
    product = fingerprint_text(text).index_codes()
    assert set(product) == {"winnow", "winnow_py"} and all(product.values())
    assert set(fingerprint_text(text, CONTRACT.without("winnow")).index_codes()) == {"winnow_py"}
