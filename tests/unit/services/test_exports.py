"""``services.exports.spooled``: an export is written whole before it is sent, so an error midway is raised
before anything goes out, and what is read back is every byte written, whatever its size."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fptrack.services.exports import SPOOL_IN_MEMORY, spooled


def _failing_after(lines: list[str]) -> Iterator[str]:
    yield from lines
    raise ConnectionResetError("the database went away")


def test_an_error_midway_is_raised_before_anything_is_sent() -> None:
    with pytest.raises(ConnectionResetError):
        spooled(_failing_after(["id,url\n", "1,https://pirate.example/1\n"]))


@given(st.lists(st.text(max_size=200), max_size=30))
def test_what_is_read_back_is_what_was_written(chunks: list[str]) -> None:
    body = spooled(iter(chunks))
    data = b"".join(body)
    assert data == "".join(chunks).encode("utf-8") and body.size == len(data)


def test_an_export_larger_than_memory_goes_through_a_file_whole() -> None:
    line = "第一章,https://pirate.example/" + "x" * 1000 + "\n"
    count = SPOOL_IN_MEMORY // len(line.encode()) + 10
    body = spooled(line for _ in range(count))
    assert body.size == count * len(line.encode()) > SPOOL_IN_MEMORY
    assert b"".join(body) == line.encode() * count
