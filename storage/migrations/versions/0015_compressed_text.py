"""page, page version and chapter texts stored compressed: ``text`` (TEXT) becomes ``text_z``
(bytea / BLOB, in the format of storage.compressed)

Each table gains ``text_z`` by a plain ADD COLUMN (never a batch copy, which on SQLite would recreate the
tables and cascade deletes), every row's text is compressed into it in batches of rows by id, and ``text`` is
dropped (SQLite 3.35+ drops a column in place). The converting UPDATE also empties the old ``text``, so that
the space of the uncompressed texts is free for reuse after the next VACUUM; PostgreSQL gives it back to the
system only on a ``VACUUM FULL pages, page_versions, chapters`` (an exclusive lock: run it when the crawl can
pause).

The downgrade does the reverse, decompressing into ``text``.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 10:00:00
"""

import zlib
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TABLES = ("pages", "page_versions", "chapters")
BATCH = 500

# The stored format (storage.compressed when this revision was written): one byte naming the codec, then the
# body; ``b""`` is the empty text. The product must keep reading every marker written here.
_RAW_UTF8, _ZLIB_UTF8, _ZLIB_UTF16 = 0x00, 0x01, 0x02
_LEVEL = 6
_ERRORS = "surrogatepass"


def compress_text(text: str) -> bytes:
    """The stored form of ``text``: zlib over its smaller raw encoding (UTF-16-LE once most characters need
    three UTF-8 bytes), or the raw UTF-8 when zlib would not shrink it."""
    if not text:
        return b""
    utf8 = text.encode("utf-8", _ERRORS)
    if len(utf8) > 2 * len(text):
        packed, marker = zlib.compress(text.encode("utf-16-le", _ERRORS), _LEVEL), _ZLIB_UTF16
    else:
        packed, marker = zlib.compress(utf8, _LEVEL), _ZLIB_UTF8
    if len(packed) >= len(utf8):
        return bytes((_RAW_UTF8,)) + utf8
    return bytes((marker,)) + packed


def decompress_text(stored: bytes | memoryview | None) -> str:
    """The text that :func:`compress_text` stored as ``stored`` (``None`` reads as no text)."""
    if not stored:
        return ""
    data = bytes(stored)
    marker, body = data[0], data[1:]
    if marker == _RAW_UTF8:
        return body.decode("utf-8", _ERRORS)
    if marker == _ZLIB_UTF8:
        return zlib.decompress(body).decode("utf-8", _ERRORS)
    if marker == _ZLIB_UTF16:
        return zlib.decompress(body).decode("utf-16-le", _ERRORS)
    raise ValueError(f"unknown stored text format {marker:#04x}")


def _convert(table: str, source: str, target: str, recode: Callable[[Any], Any], empty: str) -> None:
    """Fill ``target`` from ``source`` in every row of ``table``, ``BATCH`` rows at a time by id, leaving
    ``source`` as ``empty``."""
    connection = op.get_bind()
    select = sa.text(f"SELECT id, {source} FROM {table} WHERE id > :last ORDER BY id LIMIT {BATCH}")
    update = sa.text(f"UPDATE {table} SET {target} = :value, {source} = {empty} WHERE id = :id")
    last = -(2**63)
    while True:
        rows = connection.execute(select, {"last": last}).all()
        if not rows:
            return
        connection.execute(update, [{"id": row_id, "value": recode(value)} for row_id, value in rows])
        last = rows[-1][0]


def _empty_blob() -> sa.TextClause:
    return sa.text("X''") if op.get_bind().dialect.name == "sqlite" else sa.text("'\\x'::bytea")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(
            table, sa.Column("text_z", sa.LargeBinary(), nullable=False, server_default=_empty_blob())
        )
        _convert(table, "text", "text_z", lambda value: compress_text(str(value or "")), "''")
        op.drop_column(table, "text")
        if op.get_bind().dialect.name == "postgresql":  # SQLite cannot drop a default in place: X'' stays
            op.alter_column(table, "text_z", server_default=None)


def downgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("text", sa.Text(), nullable=False, server_default=""))
        _convert(table, "text_z", "text", decompress_text, _empty_blob().text)
        op.drop_column(table, "text_z")
        if op.get_bind().dialect.name == "postgresql":
            op.alter_column(table, "text", server_default=None)
