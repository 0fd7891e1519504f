"""compare.multipage, the pure part: chains built from the set of pages alone, spans mapped back to the
parts."""

from __future__ import annotations

import itertools

from fptrack.compare.multipage import ChainPart, chains_of, join_parts, map_spans


def _pages(*links: tuple[str, str], texts: dict[str, str] | None = None) -> dict[str, ChainPart]:
    texts = texts or {}
    return {
        url: ChainPart(n, url, texts.get(url, f"text of {url}"), nxt) for n, (url, nxt) in enumerate(links)
    }


def test_a_chain_is_followed_from_its_first_page_whatever_the_order_of_the_pages() -> None:
    links = [("a/7.html", "a/7_2.html"), ("a/7_2.html", "a/7_3.html"), ("a/7_3.html", ""), ("a/8.html", "")]
    answers = set()
    for order in itertools.permutations(links):
        chains = chains_of(_pages(*order))
        answers.add(tuple(tuple(part.url for part in chain) for chain in chains))
    assert answers == {(("a/7.html", "a/7_2.html", "a/7_3.html"),)}


def test_gaps_cycles_and_empty_parts_end_a_chain() -> None:
    assert chains_of(_pages(("a/1.html", "a/1_2.html"))) == []  # the next part was never stored
    gap = chains_of(_pages(("a/1.html", "a/1_2.html"), ("a/1_2.html", "a/1_3.html")))
    assert [[p.url for p in chain] for chain in gap] == [["a/1.html", "a/1_2.html"]]
    # a cycle has no head
    assert chains_of(_pages(("a/1.html", "a/1_2.html"), ("a/1_2.html", "a/1.html"))) == []
    empty = _pages(("a/1.html", "a/1_2.html"), ("a/1_2.html", ""), texts={"a/1_2.html": ""})
    assert chains_of(empty) == []


def test_spans_of_the_joined_text_map_back_to_their_parts() -> None:
    texts = ["0123456789", "abcdefghij", "KLMNOPQRST"]
    joined, offsets = join_parts(texts)
    assert offsets == [0, 11, 22] and joined[11:21] == texts[1]
    spans = [(2, 8, 100, 106), (15, 18, 200, 203), (5, 25, 300, 320)]
    first, second, third = map_spans(spans, offsets, [len(t) for t in texts])
    # a passage over two page breaks is cut at each, work offsets in proportion
    assert first == [[2, 8, 100, 106], [5, 10, 300, 305]]
    assert second == [[4, 7, 200, 203], [0, 10, 306, 316]]
    assert third == [[0, 3, 317, 320]]
    for text, part in zip(texts, (first, second, third), strict=True):
        assert all(0 <= start < end <= len(text) for start, end, _, _ in part)
