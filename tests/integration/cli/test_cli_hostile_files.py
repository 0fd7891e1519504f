"""Hostile files at the command line, on SQLite and on PostgreSQL alike: one line on stderr per file, a
non-zero exit, no traceback, no SQL, nothing stored; ``fptrack check`` reads a bounded amount of any file and
runs in bounded memory."""

from __future__ import annotations

import codecs
import os
import random
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.compare.works import MAX_WORK_BYTES
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Chapter, Work
from tests.support.cli import assert_clean_error
from tests.support.env import clean_environ

MEMORY_LIMIT = 1024**3  # address space of a `fptrack check` child: a read of /dev/zero used to take 11.5 GB
TEXT = (
    "河面上起了风，渡船摇得厉害，老周把缆绳又绕了两圈。\n对岸的灯一盏一盏亮起来，像是有人在数着什么。\n" * 30
)


def _run(
    settings: Settings, *args: str, memory: int | None = None, stdin: Path | None = None
) -> subprocess.CompletedProcess[str]:
    environ = clean_environ()
    environ.update(FPTRACK_DATA_DIR=str(settings.data_dir), FPTRACK_DATABASE_URL=settings.database_url)

    def limit_memory() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    with open(stdin or os.devnull, "rb") as source:
        return subprocess.run(
            [sys.executable, "-m", "fptrack.cli", *args],
            stdin=source,
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            preexec_fn=limit_memory,
        )


def _hostile_files(folder: Path) -> dict[str, bytes]:
    junk = random.Random(12).randbytes(6000)
    files = {
        "bom-junk.txt": codecs.BOM_UTF8 + junk,  # binary junk behind a byte-order mark
        "bom-nuls.txt": codecs.BOM_UTF8 + TEXT.encode().replace(b"\n", b"\x00\n\x00"),
        "nuls.txt": TEXT.encode().replace("，".encode(), b"\x00"),
        "utf16-junk.txt": codecs.BOM_UTF16_LE + junk,
        "surrogates.txt": b"\xed\xa0\x80\xed\xb0\x80" * 300,  # surrogates encoded in UTF-8 (CESU-8)
        "cover.txt": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + junk,  # a PNG renamed
        "empty.txt": b"",
        "blank.txt": " \n\t\u3000\n，。！？……——\n".encode() * 50,
        "underscores.txt": b"____ ---- ____\n" * 20,
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return files


def _stored(settings: Settings) -> tuple[int, int]:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            return session.scalar(select(func.count(Work.id))) or 0, session.scalar(
                select(func.count(Chapter.id))
            ) or 0
    finally:
        engine.dispose()


def test_hostile_work_files_each_get_one_line_and_nothing_is_stored(
    settings: Settings, tmp_path: Path
) -> None:
    files = _hostile_files(tmp_path)
    result = _run(settings, "works", "add", *(str(tmp_path / name) for name in files))
    assert_clean_error(result)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == len(files), result.stderr
    for name, line in zip(files, errors, strict=True):
        assert f"{tmp_path / name}: " in line, line
        assert "SQL" not in line and "unexpected" not in line and "Error" not in line, line
    assert "SELECT" not in result.stderr and "INSERT" not in result.stderr
    assert _stored(settings) == (0, 0)


def test_a_text_with_a_few_stray_nuls_is_stored_without_them(settings: Settings, tmp_path: Path) -> None:
    """Stray NULs in readable text are damage, dropped in the decoder that both backends share (PostgreSQL
    refuses NUL in text; SQLite would have kept it)."""
    damaged = tmp_path / "damaged.txt"
    damaged.write_bytes(TEXT.encode().replace("。".encode(), "。\x00".encode(), 3))
    result = _run(settings, "works", "add", str(damaged))
    assert result.returncode == 0, result.stderr
    engine = create_engine_for(settings)
    with Session(engine) as session:
        assert session.scalars(select(Work.text)).all() == [TEXT]
    engine.dispose()


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("/dev/zero", "/dev/zero: binary data, not text"),
        ("/dev/urandom", "/dev/urandom: binary data, not text"),
        ("{fifo}", "fifo: the file is empty"),  # no writer: refused at once, not waited for
        ("{folder}", "is a folder, not a text file"),
        ("{huge}", "huge.txt: 250 MB is larger than the 200 MB limit"),
        ("{junk}", "binary data, not text"),
    ],
    ids=["dev-zero", "dev-urandom", "fifo", "folder", "huge", "bom-junk"],
)
def test_check_reads_a_bounded_amount_of_any_file(
    sqlite_settings: Settings, tmp_path: Path, fifo: Path, source: str, fragment: str
) -> None:
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as out:
        out.truncate(MAX_WORK_BYTES + 50 * 1024 * 1024)  # sparse
    junk = tmp_path / "junk.txt"
    junk.write_bytes(codecs.BOM_UTF8 + random.Random(5).randbytes(5000))
    path = source.format(fifo=fifo, folder=tmp_path, huge=huge, junk=junk)
    result = _run(sqlite_settings, "check", path, memory=MEMORY_LIMIT)
    assert_clean_error(result, fragment)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_password_from_an_endless_stdin_is_refused_not_read_forever(sqlite_settings: Settings) -> None:
    result = _run(
        sqlite_settings,
        "users",
        "add",
        "ada",
        "--role",
        "admin",
        "--password-stdin",
        memory=MEMORY_LIMIT,
        stdin=Path("/dev/zero"),
    )
    assert_clean_error(result, "at most 1024 characters")
