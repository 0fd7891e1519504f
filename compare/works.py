"""Registering works: decode the file, split it into chapters, store it (fingerprinting is a task)."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from fptrack.compare.chapters import split_chapters
from fptrack.core.errors import FptrackError
from fptrack.fingerprint.contract import CONTRACT
from fptrack.fingerprint.encoding import DecodedText, UndecodableError, decode_bytes, refuse_binary_start
from fptrack.fingerprint.normalize import is_kept_char, normalize
from fptrack.storage.housekeeping import delete_works
from fptrack.storage.models import Chapter, Match, RightsProof, Work

__all__ = [
    "RegisteredWork",
    "RemovedWork",
    "WorkError",
    "WorkNotRemoved",
    "decode_work_text",
    "read_work_file",
    "register_work",
    "register_work_file",
    "remove_work",
    "short_chapters",
]

MAX_WORK_BYTES = 200 * 1024 * 1024
_READ_CHUNK = 1024 * 1024


class WorkError(FptrackError, ValueError):
    """A work cannot be registered; the message names the input and the reason."""


@dataclass(frozen=True)
class RegisteredWork:
    work_id: int
    title: str
    chapters: int
    characters: int
    encoding: str
    already_registered: bool


def read_work_file(path: Path, limit: int = MAX_WORK_BYTES) -> bytes:
    """The bytes of the text file at ``path``; :class:`WorkError` names the path and what is wrong with it.

    At most ``limit + 1`` bytes are read from any file: a device (``/dev/zero``), a FIFO or a pipe reports no
    size, so the size a regular file states is checked first and the read itself stops at the limit. Input
    whose first megabyte is already binary for any length up to the limit stops there (``/dev/urandom``). A
    FIFO is opened without waiting for a writer: with none, it reads as empty."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise WorkError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise WorkError(f"{path}: is a folder, not a text file") from None
    except OSError as error:
        raise WorkError(f"{path}: cannot read ({error.strerror})") from None
    try:
        status = os.fstat(descriptor)
        if stat.S_ISDIR(status.st_mode):
            raise WorkError(f"{path}: is a folder, not a text file")
        if status.st_size > limit and stat.S_ISREG(status.st_mode):
            raise WorkError(f"{path}: {_size(status.st_size)} is larger than the {_size(limit)} limit")
        os.set_blocking(descriptor, True)  # non-blocking only for the open; reads wait for a FIFO's writer
        handle = os.fdopen(descriptor, "rb", buffering=0)
    except BaseException:
        os.close(descriptor)
        raise
    with handle:
        try:
            data = _read_at_most(handle, limit + 1)
        except OSError as error:
            raise WorkError(f"{path}: cannot read ({error.strerror})") from None
        except UndecodableError as error:
            raise WorkError(f"{path}: {error}") from None
    if len(data) > limit:
        raise WorkError(f"{path}: larger than the {_size(limit)} limit (read stopped there)")
    return data


def _read_at_most(handle: BinaryIO, most: int) -> bytes:
    """Up to ``most`` bytes of ``handle``, refusing binary input as soon as its first megabyte shows it."""
    chunks: list[bytes] = []
    total, checked = 0, False
    while total < most:
        chunk = handle.read(min(_READ_CHUNK, most - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if not checked and total >= _READ_CHUNK:
            refuse_binary_start(b"".join(chunks), most)
            checked = True
    return b"".join(chunks)


def _size(count: int) -> str:
    return f"{count >> 20} MB" if count >= 1 << 20 else f"{count:,} bytes"


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
    if not spans or not any(is_kept_char(ch) for ch in text):  # "____" has word characters, no letter
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
    from fptrack.compare.chapters import HEADING

    for line in text.split("\n", 20)[:20]:
        line = line.strip(" \t\u3000《》")
        if line:
            return line if len(line) <= 40 and not HEADING.match(line) else ""
    return ""


def short_chapters(session: Session, work_id: int) -> list[int]:
    """The indexes of the chapters of work ``work_id`` that no copy can be flagged for: fewer normalised
    characters (letters and digits, :func:`fingerprint.normalize.normalize`) than the least a page must copy,
    ``DecisionRule.min_copied`` of the fingerprint contract (shorter overlaps are taken for quotations)."""
    least = CONTRACT.rule.min_copied
    chapters = session.execute(select(Chapter.index, Chapter.text).where(Chapter.work_id == work_id))
    return sorted(int(index) for index, text in chapters if len(normalize(text)) < least)


class WorkNotRemoved(FptrackError, LookupError):
    """A work that does not exist, or has matches and ``with_matches`` was not given."""


@dataclass(frozen=True)
class RemovedWork:
    """What :func:`remove_work` deleted: the work, how many chapters and how many matches it had."""

    work_id: int
    title: str
    chapters: int
    matches: int


def remove_work(session: Session, work_id: int, *, with_matches: bool) -> RemovedWork:
    """Delete work ``work_id`` with its chapters, their fingerprints and code index rows, and its licensed
    sites (the foreign keys cascade, a trigger clears ``code_index``:
    :func:`storage.housekeeping.delete_works`); :class:`WorkNotRemoved` when there is no such work, or when it
    has matches or proofs of its rights (``rights_proofs``) and ``with_matches`` is False.
    With ``with_matches`` its matches go too, with their review decisions, notes and takedown checks (the
    match roll-ups follow through their triggers).

    The work's row is locked first (PostgreSQL): a match that a worker is inserting for it (its foreign key
    takes a share lock on that row) is either committed before the count, and counted, or waits and then
    fails, so a refusal never misses a match and a removal never takes one that was not counted."""
    title = session.scalar(select(Work.title).where(Work.id == work_id).with_for_update())
    if title is None:
        raise WorkNotRemoved(f"there is no work #{work_id}; see `fptrack works list`")
    matches = _count(session, Match, Match.work_id == work_id)
    if matches and not with_matches:
        raise WorkNotRemoved(
            f"work #{work_id} {title!r} has {matches} match(es), evidence with their "
            "reviews and takedown history: not removed (--with-matches removes them "
            "too)"
        )
    proofs = _count(session, RightsProof, RightsProof.work_id == work_id)
    if proofs and not with_matches:
        raise WorkNotRemoved(
            f"work #{work_id} {title!r} has {proofs} proof(s) of its rights that notices cite: not removed "
            "(--with-matches removes them too)"
        )
    chapters = _count(session, Chapter, Chapter.work_id == work_id)
    delete_works(session, [work_id])
    return RemovedWork(work_id, title, chapters, matches)


def _count(session: Session, model: type[Any], condition: ColumnElement[bool]) -> int:
    return int(session.scalar(select(func.count()).select_from(model).where(condition)) or 0)
