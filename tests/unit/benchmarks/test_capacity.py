"""The arithmetic of ``benchmarks.pipeline.capacity`` (bytes per page from table sizes) and the loopback
guard of the load tool: pure parts, no database."""

from __future__ import annotations

import pytest

from benchmarks.admin._server import run_wrk
from benchmarks.pipeline.capacity import storage_figures


def _table(rows: int, table: int, indexes: int) -> dict[str, int]:
    return {"rows": rows, "table": table, "indexes": indexes, "total": table + indexes}


def test_bytes_per_page_adds_each_page_share_of_every_big_table() -> None:
    sizes = {
        "pages": _table(10, 10_000, 1_000),  # 1,100 bytes per page
        "fingerprints": _table(50, 40_000, 10_000),  # 1,000 per row; 40 rows belong to the 10 pages
        "code_index": _table(1_000, 60_000, 40_000),  # 100 per row; 800 rows belong to the pages
        "matches": _table(5, 2_000, 1_000),  # 600 per row
        "chapters": _table(2, 1, 1),
        "_owners": {
            "page_fingerprints": 40,
            "chapter_fingerprints": 10,
            "page_index_rows": 800,
            "chapter_index_rows": 200,
            "simhash_index_bytes": 5_000,
        },
    }
    figures = storage_figures(sizes)
    assert figures["fingerprints_per_page"] == 4 and figures["index_rows_per_page"] == 80
    assert figures["index_rows_per_chapter"] == 100
    assert figures["bytes_per_page"] == 1_100 + 4 * 1_000 + 80 * 100 + 0.5 * 600
    assert figures["index_bytes_per_page"] == 100 + 4 * 200 + 80 * 40 + 0.5 * 200
    assert figures["index_row_bytes_without_indexes"] == 60


def test_the_load_tool_refuses_anything_but_loopback() -> None:
    with pytest.raises(ValueError, match="loopback only"):
        run_wrk("x", "http://example.com/", marker="x", headers={}, connections=1, seconds=1, max_requests=1)
