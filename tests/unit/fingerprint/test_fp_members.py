"""fingerprint.containers.members_at: the archive members a match's passages fall in, as member_at names each
passage's, once each, in the order of the text (what a notice and the admin name for a match on a file)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.containers import Document, joined_text, member_at, members_at


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.text("ab/书", min_size=1, max_size=6), st.text(min_size=1, max_size=40)), max_size=6
    ),
    st.lists(st.integers(min_value=-5, max_value=400), max_size=8),
)
def test_members_at_is_member_at_of_each_offset_in_text_order(
    members: list[tuple[str, str]], offsets: list[int]
) -> None:
    text = joined_text([Document(name, "text", body.replace("=", "-")) for name, body in members])
    named = [member_at(text, offset) for offset in sorted(offsets)]
    assert members_at(text, offsets) == list(dict.fromkeys(name for name in named if name))


def test_a_page_names_no_member() -> None:
    assert members_at("第一章\n天下大势", [0, 3]) == []
    text = joined_text(
        [Document("第一卷/003.txt", "text", "甲乙"), Document("第一卷/004.txt", "text", "丙丁")]
    )
    assert members_at(text, [text.index("丙"), text.index("甲"), text.index("丁")]) == [
        "第一卷/003.txt",
        "第一卷/004.txt",
    ]
