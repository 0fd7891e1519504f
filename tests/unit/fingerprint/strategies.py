"""Hypothesis strategies shared by the fingerprint tests: generated text, never corpus text."""

from __future__ import annotations

import functools
from collections import defaultdict

from hypothesis import strategies as st
from pypinyin import lazy_pinyin

from fptrack.fingerprint.normalize import normalize
from fptrack.fingerprint.pinyin import pinyin_initials

# GB2312 level-1 Han characters (the 3,755 most common), generated from the code table.
COMMON_HAN: tuple[str, ...] = tuple(
    bytes([hi, lo]).decode("gb2312")
    for hi in range(0xB0, 0xD8)
    for lo in range(0xA1, 0xFF)
    if not (hi == 0xD7 and lo > 0xF9)
)
PUNCTUATION = "，。！？、；：“”‘’（）《》…—,.!?;: \n\t"

han_text = st.text(alphabet=st.sampled_from(COMMON_HAN), min_size=0, max_size=300)
prose = st.text(
    alphabet=st.one_of(
        st.sampled_from(COMMON_HAN),
        st.sampled_from(PUNCTUATION),
        st.sampled_from("abcXYZ019ＡＢＣ１２"),
    ),
    min_size=0,
    max_size=300,
)
any_text = st.text(max_size=200)
han_passage = st.lists(st.sampled_from(COMMON_HAN), min_size=40, max_size=400).map("".join)


@functools.cache
def homophones() -> dict[str, list[str]]:
    """Common characters grouped by toneless pinyin (only groups with 2+ members). Polyphones whose reading in
    the per-character table differs from pypinyin's first reading (乾: qian / gan) are left out: swapping them
    is not a same-sound swap; nor are characters that normalisation changes (乾 is read as Traditional 干)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for ch in COMMON_HAN:
        reading = lazy_pinyin(ch)[0]
        if normalize(ch).text == ch and pinyin_initials(ch) == reading[:1]:
            groups[reading].append(ch)
    return {ch: members for members in groups.values() if len(members) > 1 for ch in members}


def same_sound_swaps(text: str, data: st.DataObject) -> str:
    """``text`` with up to 20 characters swapped for others of the same toneless reading (drawn from
    ``data``)."""
    table = homophones()
    swappable = [i for i, c in enumerate(text) if c in table]
    chosen = data.draw(st.lists(st.sampled_from(swappable), max_size=20) if swappable else st.just([]))
    chars = list(text)
    for i in chosen:
        chars[i] = data.draw(st.sampled_from(table[chars[i]]))
    return "".join(chars)
