"""Hypothesis strategies shared by the fingerprint tests: generated text, never corpus text."""

from __future__ import annotations

from hypothesis import strategies as st

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
