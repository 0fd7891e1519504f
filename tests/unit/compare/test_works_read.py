"""Reading a work's file is bounded whatever the file is (``fptrack check /dev/zero`` once read 11.5 GB):
devices, FIFOs and pipes report no size, so the read itself stops at the limit, and each case says why in one
line."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from fptrack.compare.works import MAX_WORK_BYTES, WorkError, read_work_file

LINE = "河面上起了风，渡船摇得厉害。\n".encode()


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_an_endless_binary_device_stops_at_its_first_megabyte(device: str) -> None:
    with pytest.raises(WorkError, match=f"^{device}: binary data, not text"):
        read_work_file(Path(device))


def test_an_endless_text_stream_stops_at_the_limit() -> None:
    """A pipe that never ends (as ``<(command)`` gives): at most limit + 1 bytes are taken, then the reader
    gives up."""
    limit = 3 * 1024 * 1024
    read_end, write_end = os.pipe()
    written = [0]

    def write_forever() -> None:
        with open(write_end, "wb") as out:
            try:
                while written[0] < 50 * limit:
                    out.write(LINE * 1000)
                    written[0] += len(LINE) * 1000
            except BrokenPipeError:
                pass  # the reader closed its end: what a bounded read must do

    writer = threading.Thread(target=write_forever, daemon=True)
    writer.start()
    try:
        with pytest.raises(WorkError, match="larger than the 3 MB limit"):
            read_work_file(Path(f"/dev/fd/{read_end}"), limit=limit)
    finally:
        os.close(read_end)
    writer.join(timeout=30)
    assert not writer.is_alive()
    assert written[0] < 2 * limit  # the writer was cut off near the limit, not drained to the end


def test_a_fifo_without_a_writer_reads_as_empty_instead_of_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "nobody-writes"
    os.mkfifo(fifo)
    assert read_work_file(fifo) == b""


def test_a_huge_regular_file_is_refused_from_its_size(tmp_path: Path) -> None:
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as out:
        out.truncate(MAX_WORK_BYTES + 50 * 1024 * 1024)  # sparse: costs no disk
    with pytest.raises(WorkError, match=r"huge.txt: 250 MB is larger than the 200 MB limit"):
        read_work_file(huge)


def test_the_limit_itself_is_allowed(tmp_path: Path) -> None:
    exact, over = tmp_path / "exact.txt", tmp_path / "over.txt"
    exact.write_bytes(LINE * 1000)
    over.write_bytes(LINE * 1000 + b"x")
    assert read_work_file(exact, limit=len(LINE) * 1000) == LINE * 1000
    with pytest.raises(WorkError, match="over.txt: 43,001 bytes is larger than the 43,000 bytes limit"):
        read_work_file(over, limit=len(LINE) * 1000)


def test_a_folder_and_a_missing_file_say_so(tmp_path: Path) -> None:
    with pytest.raises(WorkError, match="is a folder, not a text file"):
        read_work_file(tmp_path)
    with pytest.raises(WorkError, match="no such file"):
        read_work_file(tmp_path / "missing.txt")
