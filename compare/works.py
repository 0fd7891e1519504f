"""Registering works: decode the file, split it into chapters, store it (fingerprinting is a task)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from compare.chapters import split_chapters
from fingerprint.encoding import DecodedText, UndecodableError, decode_bytes
from storage.models import Chapter, Work

__all__ = [
    "RegisteredWork",
    "WorkError",
    "decode_work_text",
    "read_work_file",
    "register_work",
    "register_work_file",
]

MAX_WORK_BYTES = 200 * 1024 * 1024


class WorkError(ValueError):
    """A work cannot be registered; the message names the input and the reason."""


@dataclass(frozen=True)
class RegisteredWork:
    work_id: int
    title: str
    chapters: int
    characters: int
    encoding: str
    already_registered: bool


def read_work_file(path: Path) -> bytes:
    """The bytes of the text file at ``path``; :class:`WorkError` names the path and what is wrong with it."""
    if not path.exists():
        raise WorkError(f"{path}: no such file")
    if path.is_dir():
        raise WorkError(f"{path}: is a folder, not a text file")
    size = path.stat().st_size
    if size > MAX_WORK_BYTES:
        raise WorkError(
            f"{path}: {size // (1024 * 1024)} MB is larger than the {MAX_WORK_BYTES >> 20} MB limit"
        )
    try:
        return path.read_bytes()
    except OSError as error:
        raise WorkError(f"{path}: cannot read ({error.strerror})") from None


def decode_work_text(data: bytes, source_name: str) -> DecodedText:
    """Text of ``data`` (UTF-8, GB18030/GBK or Big5, detected) with ``\n`` line ends; :class:`WorkError` for
    binary or empty input."""
    try:
        decoded = decode_bytes(data)
    except UndecodableError as error:
        raise WorkError(f"{source_name}: {error}") from None
    text = decoded.text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise WorkError(f"{source_name}: the file is empty")
    return DecodedText(text, decoded.encoding)


def register_work_file(session: Session, path: Path, *, title: str | None = None) -> RegisteredWork:
    """Register the text file at ``path`` (UTF-8, GB18030/GBK or Big5, detected)."""
    data = read_work_file(path)
    return register_work(session, data, source_name=str(path), title=title or None, default_title=path.stem)


def register_work(
    session: Session, data: bytes, *, source_name: str, title: str | None = None, default_title: str = ""
) -> RegisteredWork:
    decoded = decode_work_text(data, source_name)
    text = decoded.text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    existing = session.scalar(select(Work).where(Work.content_sha256 == digest))
    if existing is not None:
        return RegisteredWork(
            existing.id, existing.title, len(existing.chapters), len(existing.text), existing.encoding, True
        )
    work_title = (title or _title_line(text) or default_title or source_name).strip()[:500]
    spans = split_chapters(text, default_title=work_title)
    if not spans:
        raise WorkError(f"{source_name}: no text to register (only whitespace or punctuation)")
    work = Work(
        title=work_title, source_name=source_name, encoding=decoded.encoding, content_sha256=digest, text=text
    )
    work.chapters = [
        Chapter(index=s.index, title=s.title[:500], start=s.start, end=s.end, text=text[s.start : s.end])
        for s in spans
    ]
    session.add(work)
    session.flush()
    return RegisteredWork(work.id, work.title, len(spans), len(text), decoded.encoding, False)


def _title_line(text: str) -> str:
    """The first line of the text when it reads like a title (short, not a chapter heading)."""
    from compare.chapters import HEADING

    for line in text.split("\n", 20)[:20]:
        line = line.strip(" \t\u3000《》")
        if line:
            return line if len(line) <= 40 and not HEADING.match(line) else ""
    return ""
