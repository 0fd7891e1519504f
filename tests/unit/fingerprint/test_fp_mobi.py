"""fingerprint.mobi: PalmDOC decompression against testbed's own compressor (property-tested), and real MOBI,
AZW3 and PalmDOC books written byte by byte by testbed.downloads, read through read_download."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.containers import ContainerLimits, Document, read_download
from fptrack.fingerprint.mobi import MobiError, open_mobi, palmdoc_decompress
from testbed.downloads import mobi_of, palmdoc_compress, palmdoc_of, zip_of

CHAPTERS = [
    ("第一章 山雨欲来", "天下大势，分久必合，合久必分。\n" * 300),
    ("第二章 风满楼", "话说那日风雨交加，众人皆惊。" * 200 + "\nA & B <tag>"),
]
TEXT = (
    "第一章 山雨欲来\n"
    + "天下大势，分久必合，合久必分。\n" * 300
    + "第二章 风满楼\n"
    + "话说那日风雨交加，众人皆惊。" * 200
    + "\nA & B <tag>"
)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000) | st.text(max_size=1500).map(lambda t: (t * 3).encode("utf-8")))
def test_palmdoc_decompress_undoes_compress(data: bytes) -> None:
    packed = palmdoc_compress(data)
    assert palmdoc_decompress(packed) == data


def test_palmdoc_compress_uses_pairs_and_space_letters() -> None:
    data = b"hello world " * 50
    packed = palmdoc_compress(data)
    assert len(packed) < len(data) / 4
    assert palmdoc_decompress(packed) == data


def test_a_back_reference_before_the_start_is_damage() -> None:
    with pytest.raises(MobiError, match="back-reference"):
        palmdoc_decompress(b"ab\x80\x50")  # distance 10 with 2 bytes out


@pytest.mark.parametrize(
    "options",
    [{}, {"kf8": True}, {"compression": 1}, {"trailing_entry": False}],
    ids=["mobi", "azw3", "stored", "no-trailing-entry"],
)
def test_a_mobi_book_is_read_whole(options: dict[str, object]) -> None:
    data = mobi_of(CHAPTERS, **options)  # type: ignore[arg-type]
    book = open_mobi(data)
    assert book.text_records > 2 and book.kf8 == bool(options.get("kf8"))
    reading = read_download(data)
    assert reading.kind == "mobi" and reading.problems == ()
    assert reading.documents == (Document("", "mobi", TEXT),)


def test_a_palmdoc_book_in_gb18030_is_decoded_as_text() -> None:
    text = "第一章 山雨欲来\n" + "天下大势，分久必合。" * 1000  # records cut inside two-byte characters
    reading = read_download(palmdoc_of(text))
    assert reading.kind == "mobi"
    assert reading.documents == (Document("", "text", text, "gb18030"),)


def test_a_mobi_inside_a_zip() -> None:
    reading = read_download(zip_of({"书/全本.mobi": mobi_of(CHAPTERS[:1])}))
    assert [(d.member, d.kind) for d in reading.documents] == [("书/全本.mobi", "mobi")]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (mobi_of(CHAPTERS, encryption=2), "DRM-encrypted: not read"),
        (
            mobi_of(CHAPTERS, compression=17480),
            "HUFF/CDIC compression: not read (only PalmDOC-compressed and stored books are)",
        ),
        (mobi_of(CHAPTERS)[:3000], "damaged: its record offsets are out of order or past its end"),
        (bytes(60) + b"BOOKMOBI" + bytes(100), "truncated: its header names 0 records"),
    ],
    ids=["drm", "huff-cdic", "truncated", "empty"],
)
def test_what_is_not_read_is_one_line(data: bytes, problem: str) -> None:
    reading = read_download(data)
    assert reading.documents == ()
    assert reading.problems == (f"the file: a MOBI/AZW3 e-book: {problem}",)


def test_a_mobi_is_read_within_the_member_cap() -> None:
    reading = read_download(mobi_of(CHAPTERS), limits=ContainerLimits(max_member_bytes=5000))
    assert reading.problems == ("the file: cut at 5000 bytes (the member size cap)",)
    assert reading.documents[0].text.startswith("第一章 山雨欲来\n天下大势")
