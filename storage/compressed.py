"""Texts stored compressed: ``Page.text``, ``PageVersion.text`` and ``Chapter.text`` are kept as zlib bytes.

Why: a crawled page's text is most of its row, and PostgreSQL's own TOAST compression (pglz) barely shrinks
Chinese UTF-8; zlib over the text's smaller raw encoding does (a 6,000-character chapter: 17.6 KB of UTF-8,
about 7.9 KB once zlib-compressed from UTF-16).

The stored value starts with one byte naming its format, so that a later codec can be added while the rows
written before stay readable:

* ``b""`` is the empty text, and the only encoding of it: SQL can tell an empty text by the stored value's
  length alone (:func:`has_text`), which is all the SQL of the readers needs (nothing orders, searches or
  measures the texts in SQL);
* ``0x00`` raw UTF-8 (short texts, where zlib's header would cost more than it saves);
* ``0x01`` zlib over UTF-8 (texts mostly in one-byte characters: Latin, markup);
* ``0x02`` zlib over UTF-16-LE (texts where that is the smaller raw encoding: CJK).

Every ``str`` comes back exactly, NUL and astral characters included (and lone surrogates, through
``surrogatepass``): the evidence's character offsets point into these texts."""

from __future__ import annotations

import zlib
from typing import Any

from sqlalchemy import ColumnElement, LargeBinary, func
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

__all__ = [
    "RAW_UTF8",
    "ZLIB_UTF8",
    "ZLIB_UTF16",
    "CompressedText",
    "compress_text",
    "decompress_text",
    "has_text",
]

RAW_UTF8 = 0x00
ZLIB_UTF8 = 0x01
ZLIB_UTF16 = 0x02
LEVEL = 1  # against 6: a 5,800-character chapter in 0.49 instead of 0.63 ms, for 2 % more bytes

_ERRORS = "surrogatepass"


def compress_text(text: str) -> bytes:
    """The stored form of ``text`` (see the module docstring for the format)."""
    if not text:
        return b""
    utf8 = text.encode("utf-8", _ERRORS)
    # UTF-16 is the smaller raw form once most characters need three UTF-8 bytes; zlib keeps that edge (and
    # runs faster on the shorter input)
    if len(utf8) > 2 * len(text):
        packed, marker = zlib.compress(text.encode("utf-16-le", _ERRORS), LEVEL), ZLIB_UTF16
    else:
        packed, marker = zlib.compress(utf8, LEVEL), ZLIB_UTF8
    if len(packed) >= len(utf8):
        return bytes((RAW_UTF8,)) + utf8
    return bytes((marker,)) + packed


def decompress_text(stored: bytes | memoryview | None) -> str:
    """The text that :func:`compress_text` stored as ``stored`` (``None`` reads as no text)."""
    if not stored:
        return ""
    data = bytes(stored)
    marker, body = data[0], data[1:]
    if marker == RAW_UTF8:
        return body.decode("utf-8", _ERRORS)
    if marker == ZLIB_UTF8:
        return zlib.decompress(body).decode("utf-8", _ERRORS)
    if marker == ZLIB_UTF16:
        return zlib.decompress(body).decode("utf-16-le", _ERRORS)
    raise ValueError(f"unknown stored text format {marker:#04x}")


class CompressedText(TypeDecorator[str]):
    """A ``str`` attribute stored as :func:`compress_text` bytes (``bytea`` on PostgreSQL, ``BLOB`` on
    SQLite). Reading, writing and binding parameters go through the codec; SQL cannot look inside the
    value, so comparisons other than :func:`has_text` are meaningless on such a column."""

    impl = LargeBinary
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> bytes | None:
        return None if value is None else compress_text(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else decompress_text(value)


def has_text(column: Any) -> ColumnElement[bool]:
    """SQL: the compressed text in ``column`` is not empty (``b""`` is the only form of the empty text)."""
    return func.length(column) > 0
