"""The decoder's promises on hostile bytes: binary input is refused also behind a byte-order mark,
and the text it returns never holds a NUL character (PostgreSQL refuses one; SQLite would keep it)."""

from __future__ import annotations

import codecs
import random

import pytest

from fptrack.fingerprint.encoding import (
    UndecodableError,
    decode_bytes,
    refuse_binary_start,
    stray_nul_limit,
    without_stray_nuls,
)

TEXT = "河面上起了风，渡船摇得厉害，老周把缆绳又绕了两圈。对岸的灯一盏一盏亮起来。\n" * 20


def _junk(size: int, seed: int = 12) -> bytes:
    return random.Random(seed).randbytes(size)


@pytest.mark.parametrize(
    "data",
    [
        codecs.BOM_UTF8 + _junk(4000),  # once registered on SQLite and a DataError on PostgreSQL
        codecs.BOM_UTF8 + b"\x00\x01abc" * 500,
        codecs.BOM_UTF16_LE + _junk(4000),  # any even number of bytes "decodes" as UTF-16
        codecs.BOM_UTF16_BE + _junk(4001),
        codecs.BOM_UTF16_LE + "\x00".join(["字"] * 200).encode("utf-16-le"),  # NUL characters, not stray ones
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + _junk(3000),
        TEXT.encode() + b"\x00" * 100_000,  # NULs past the 64 KB sample
    ],
    ids=["bom-junk", "bom-controls", "utf16le-junk", "utf16be-junk", "utf16-nul-chars", "png", "late-nuls"],
)
def test_binary_input_is_refused_whatever_comes_first(data: bytes) -> None:
    with pytest.raises(UndecodableError):
        decode_bytes(data)


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        (codecs.BOM_UTF8 + TEXT.encode().replace("。".encode(), "。\x00".encode(), 3), "utf-8"),
        (TEXT.encode("gb18030").replace("，".encode("gb18030"), "，\x00".encode("gb18030"), 2), "gb18030"),
        (codecs.BOM_UTF16_LE + TEXT.replace("。", "。\x00", 3).encode("utf-16-le"), "utf-16"),
    ],
    ids=["utf8-bom", "gbk", "utf16"],
)
def test_a_few_stray_nuls_are_dropped_and_the_text_kept(data: bytes, encoding: str) -> None:
    decoded = decode_bytes(data)
    assert decoded.encoding == encoding
    assert decoded.text == TEXT


def test_stray_nuls_are_counted_against_the_whole_length() -> None:
    data = TEXT.encode() * 10
    limit = stray_nul_limit(len(data))
    few, many = b"\x00" * limit + data, b"\x00" * (limit + 1) + data
    assert without_stray_nuls(few) == data
    assert without_stray_nuls(many) == many
    with pytest.raises(UndecodableError):
        decode_bytes(many)


def test_utf16_text_under_its_bom_still_decodes() -> None:
    assert decode_bytes(codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le")).text == TEXT


def test_private_use_characters_are_kept_in_utf8() -> None:
    """Pages drawn in an obfuscating font carry private-use characters: they are text, not junk."""
    text = "".join(ch if i % 3 else "\ue3a1" for i, ch in enumerate(TEXT))
    assert decode_bytes(text.encode()).text == text


@pytest.mark.parametrize(
    ("start", "refused"),
    [
        (b"\x00" * (1 << 20), True),  # /dev/zero: more NULs than any length up to the limit may hold
        (_junk(1 << 20), True),  # /dev/urandom: control bytes in the first 64 KB
        (TEXT.encode() * 400, False),
        (codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le") * 100, False),  # UTF-16 is full of NUL bytes
        (b"\x00" * 1000 + TEXT.encode() * 400, False),  # stray NULs in a file that may still grow long enough
    ],
    ids=["zeros", "random", "text", "utf16", "some-nuls"],
)
def test_a_binary_start_is_refused_before_reading_the_rest(start: bytes, refused: bool) -> None:
    limit = 200 * 1024 * 1024
    if refused:
        with pytest.raises(UndecodableError):
            refuse_binary_start(start, limit)
    else:
        refuse_binary_start(start, limit)


@pytest.mark.parametrize(
    "declared", ["utf-16", "utf-16le", "utf-32", "utf-7", "hz", "latin-1", "shift_jis", "bogus"]
)
def test_ascii_stays_ascii_whatever_charset_it_claims(declared: str) -> None:
    """Found by tests/reliability/test_fuzz.py: a page claiming UTF-16 read "plain page" as "汰楡..."."""
    data = b"plain ASCII page, a+b-c ~{ok}~ 1+1=2"
    assert decode_bytes(data, declared=declared).text == data.decode("ascii")
