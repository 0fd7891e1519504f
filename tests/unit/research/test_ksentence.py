"""research.ksentence: the k-longest-sentences fingerprint."""

from __future__ import annotations

import opencc
import pytest

from fptrack.research.ksentence import ksentence


def test_ksentence_survives_traditional_and_punctuation():
    text = "第一句话写得比较短。第二句话要写得长一些才能入选！第三句话是全文里面最长的一句话没有之一？短句。"
    a = ksentence(text, k=2)
    b = ksentence(opencc.OpenCC("s2t").convert(text).replace("。", "．\n"), k=2)
    assert a.fingerprint == b.fingerprint
    assert len(a.spans) == 2 and -(1 << 63) <= a.fingerprint < (1 << 63)
    assert ksentence(text, k=3).fingerprint != a.fingerprint
    with pytest.raises(ValueError):
        ksentence(text, k=0)


def test_ksentence_ignores_sentence_order():
    s1, s2, s3 = "甲乙丙丁戊己庚辛壬癸", "子丑寅卯辰巳午未申酉戌亥", "春夏秋冬东南西北上下"
    assert (
        ksentence(f"{s1}。{s2}。{s3}。", k=3).fingerprint == ksentence(f"{s3}。{s1}。{s2}。", k=3).fingerprint
    )
