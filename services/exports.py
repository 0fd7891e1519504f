"""Exports of match lists as CSV, shared by ``fptrack matches`` / ``fptrack report`` and the admin.

Pure functions over plain values, no Flask. Everything in a match record that came from a crawled page (its
URL, and through the work's chapter titles what a rights holder typed) may be hostile. A spreadsheet opens a
CSV cell starting with ``=``, ``+``, ``-``, ``@`` (or a tab or carriage return, which some spreadsheets strip
before looking) as a formula, so :func:`csv_safe_cell` prefixes such a text cell with an apostrophe
(OWASP's "CSV injection" advice); numbers are written as numbers.

Columns: the documented fields of ``compare.records.MATCH_FIELDS`` first, in their order, then ``id`` and
``status``: a reader that takes the documented columns by position still reads them.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from fptrack.compare.records import MATCH_FIELDS

__all__ = [
    "CSV_MATCH_COLUMNS",
    "FORMULA_PREFIXES",
    "csv_lines",
    "csv_match_row",
    "csv_safe_cell",
]

CSV_MATCH_COLUMNS: tuple[str, ...] = (*MATCH_FIELDS, "id", "status")
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


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
    joined by spaces, spans as JSON, every cell made safe."""
    flat = {
        **record,
        "methods": " ".join(str(method) for method in record.get("methods") or []),
        "spans": json.dumps(record.get("spans") or []),
    }
    return {column: csv_safe_cell(flat.get(column)) for column in CSV_MATCH_COLUMNS}


def csv_lines(columns: Sequence[str], rows: Iterable[Mapping[str, object]]) -> Iterator[str]:
    """The header and then one CSV line per row (``\\r\\n``-free: ``\\n`` line ends), cells made safe; a
    generator, so a long export streams."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    yield _drain(buffer)
    for row in rows:
        writer.writerow({column: csv_safe_cell(row.get(column)) for column in columns})
        yield _drain(buffer)


def _drain(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text
