"""Exports of match lists as CSV, shared by ``fptrack matches`` / ``fptrack report`` and the admin.

Pure functions over plain values, no Flask. Everything in a match record that came from a crawled page (its
URL, and through the work's chapter titles what a rights holder typed) may be hostile. A spreadsheet opens a
CSV cell starting with ``=``, ``+``, ``-``, ``@`` (or a tab or carriage return, which some spreadsheets strip
before looking) as a formula, so :func:`csv_safe_cell` prefixes such a text cell with an apostrophe
(OWASP's "CSV injection" advice); numbers are written as numbers.

An export is written whole before a byte of it is sent (:func:`spooled`): one that fails midway (the
database lost, a row that cannot be read) is then an error status, never a 200 with a truncated body that a
reader would take for the whole list.

A CSV meant for a spreadsheet starts with a UTF-8 byte order mark (``csv_lines(..., bom=True)``): without it
Excel reads the file in the machine's legacy code page (GBK on Chinese Windows) and garbles every Chinese
cell. The admin's exports and the command line's (``--no-bom`` to leave it out) use the same function.

Columns: the documented fields of ``compare.records.MATCH_FIELDS`` first, in their order, then ``id`` and
``status``: a reader that takes the documented columns by position still reads them.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from fptrack.compare.records import MATCH_FIELDS

__all__ = [
    "CSV_MATCH_COLUMNS",
    "FORMULA_PREFIXES",
    "UTF8_BOM",
    "SpooledExport",
    "csv_lines",
    "csv_match_row",
    "csv_safe_cell",
    "spooled",
]

CSV_MATCH_COLUMNS: tuple[str, ...] = (*MATCH_FIELDS, "id", "status")
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
UTF8_BOM = "\ufeff"
"""The byte order mark a spreadsheet needs to read a CSV file as UTF-8 (EF BB BF once encoded)."""
SPOOL_IN_MEMORY = 16 * 1024 * 1024
"""Bytes of an export kept in memory while it is written; a larger one goes on to a temporary file."""
SPOOL_READ = 64 * 1024


def csv_safe_cell(value: object) -> object:
    """``value`` as a CSV cell a spreadsheet will not run: text starting with a formula character gets a
    leading ``'``; numbers (``int``, ``float``, not ``bool``) pass unchanged, ``None`` becomes empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return value
    text = str(value)
    if text.startswith(FORMULA_PREFIXES):
        return "'" + text
    return text


def csv_match_row(record: Mapping[str, Any]) -> dict[str, object]:
    """A match record (``compare.records.match_to_dict`` plus ``id`` and ``status``) as a CSV row: methods
    joined by spaces, spans and a meaning match's alignment as JSON, every cell made safe."""
    flat = {
        **record,
        "methods": " ".join(str(method) for method in record.get("methods") or []),
        "spans": json.dumps(record.get("spans") or []),
        "alignment": json.dumps(record["alignment"]) if record.get("alignment") else None,
    }
    return {column: csv_safe_cell(flat.get(column)) for column in CSV_MATCH_COLUMNS}


def csv_lines(
    columns: Sequence[str], rows: Iterable[Mapping[str, object]], *, bom: bool = False
) -> Iterator[str]:
    """The header and then one CSV line per row (``\\r\\n``-free: ``\\n`` line ends), cells made safe; a
    generator, so a long export streams. ``bom``: :data:`UTF8_BOM` first, for spreadsheets."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    yield (UTF8_BOM if bom else "") + _drain(buffer)
    for row in rows:
        writer.writerow({column: csv_safe_cell(row.get(column)) for column in columns})
        yield _drain(buffer)


def _drain(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


@dataclass
class SpooledExport:
    """A whole export, written and ready to send: ``size`` bytes of UTF-8, read back by iterating (once),
    which closes the spool at the end or when the iteration is dropped."""

    spool: IO[bytes]
    size: int

    def __iter__(self) -> Iterator[bytes]:
        try:
            self.spool.seek(0)
            while block := self.spool.read(SPOOL_READ):
                yield block
        finally:
            self.spool.close()


def spooled(chunks: Iterable[str]) -> SpooledExport:
    """Every chunk of an export written (UTF-8) before any is sent: in memory up to :data:`SPOOL_IN_MEMORY`
    bytes, then in a temporary file. An error while writing is raised here, before a response has begun."""
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115 (closed by SpooledExport)
    try:
        for chunk in chunks:
            spool.write(chunk.encode("utf-8"))
    except BaseException:
        spool.close()
        raise
    return SpooledExport(spool, spool.tell())
