"""Read a downloaded file as text: plain text in any encoding, archives, e-books and PDFs (pure, bytes in).

What pirate download sites hand out: a whole novel as one ``.txt`` (GB18030, Big5, UTF-8, UTF-16 with a
BOM), often zipped (member names in GBK without zip's UTF-8 flag), in a 7z or rar, in a tar (``.tar.gz``,
``.bz2``, ``.xz``), as an EPUB 2/3 (a zip of XHTML read in its spine's order), a MOBI/AZW3, a DOCX (a zip of
XML) or a PDF with a text layer. :func:`read_download` sniffs the kind from the bytes (not from the name or
the Content-Type, which lie), reads every text it holds, archives inside archives to
:attr:`ContainerLimits.max_depth`, and returns them as :class:`Document` values with the member's path. It
never raises: what it could not read is a one-line ``problem``.

Hostile files cost nothing beyond the caps of :class:`ContainerLimits`: every member is decompressed in
chunks, counted against the caps on its own size, on the bytes unpacked from the whole download and on the
compression ratio (a zip bomb stops after its first megabyte), a member count and a deadline. Nothing is
written to disk: members are read into memory, never beyond the caps. Zip, tar, gzip, bzip2 and xz are read
by the standard library; 7z and rar by libarchive (libarchive-c, Debian's libarchive13); PDFs by pypdf;
MOBI/AZW3 by :mod:`fingerprint.mobi`.
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import io
import lzma
import re
import tarfile
import time
import zipfile
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Protocol
from xml.etree.ElementTree import Element

from fptrack.fingerprint.encoding import UndecodableError, decode_bytes
from fptrack.fingerprint.mobi import MobiError, open_mobi
from fptrack.fingerprint.ocr import OcrLimits, read_images

__all__ = [
    "MEMBER_MARK",
    "ContainerLimits",
    "Document",
    "DownloadReading",
    "file_kind",
    "joined_text",
    "member_at",
    "members_at",
    "read_download",
]

_CHUNK = 256 * 1024
_RATIO_AFTER = 1024 * 1024  # the ratio is judged once this many bytes are out (small files compress well)
MEMBER_MARK = "=== file: "
"""The line that starts each member's text in :func:`joined_text` (``=== file: 书/全本.txt ===``)."""
_MEMBER_LINE = re.compile(r"^=== file: (.*) ===$", re.MULTILINE)


@dataclass(frozen=True)
class ContainerLimits:
    """The caps on reading one download. ``max_unpacked_bytes``: bytes decompressed from the whole download
    (every member, every level); ``max_member_bytes``: one member's bytes kept (a longer one is cut there);
    ``max_ratio``: unpacked bytes per packed byte of one member or stream; ``max_members``: members read (and
    PDF pages); ``max_depth``: archives inside archives; ``max_seconds``: the reading's wall-clock time;
    ``ocr``: how a scanned PDF's page images are read (:mod:`fingerprint.ocr`; None: they are not)."""

    max_unpacked_bytes: int = 256 * 1024 * 1024
    max_member_bytes: int = 32 * 1024 * 1024
    max_ratio: float = 100.0
    max_members: int = 2000
    max_depth: int = 3
    max_seconds: float = 60.0
    ocr: OcrLimits | None = None

    def __post_init__(self) -> None:
        if min(self.max_unpacked_bytes, self.max_member_bytes, self.max_members) < 1:
            raise ValueError("max_unpacked_bytes, max_member_bytes and max_members must be >= 1")
        if self.max_ratio <= 1 or self.max_seconds <= 0 or self.max_depth < 0:
            raise ValueError("max_ratio must be > 1, max_seconds > 0 and max_depth >= 0")


@dataclass(frozen=True)
class Document:
    """One text found in a download: ``member`` is its path inside the download (``''`` for the file itself;
    ``a.zip/b/c.txt`` for a member of a nested archive), ``kind`` what it was read as (``text``, ``epub``,
    ``docx``, ``pdf``, ``mobi``), ``encoding`` the text's (plain text only)."""

    member: str
    kind: str
    text: str
    encoding: str = ""


@dataclass(frozen=True)
class DownloadReading:
    """What :func:`read_download` found: the download's ``kind`` (``zip``, ``7z``, ``txt``, ``epub``...), its
    ``documents`` in order, and ``problems``: one line for each thing it could not read or stopped reading (a
    cap reached, a damaged member)."""

    kind: str
    documents: tuple[Document, ...]
    problems: tuple[str, ...] = ()
    unpacked_bytes: int = 0


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def _fixed(size: int) -> Callable[[], int]:
    def packed() -> int:
        return size

    return packed


class _Stop(Exception):
    """A cap of the whole reading was reached: nothing more is read."""


class _SkipMember(Exception):
    """This member is not read (over a cap of its own, damaged); the reading goes on."""


@dataclass
class _Reading:
    limits: ContainerLimits
    deadline: float
    documents: list[Document] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unpacked: int = 0
    members: int = 0

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise _Stop(f"stopped after {self.limits.max_seconds:g} s (the reading time cap)")

    def count_member(self) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise _Stop(f"more than {self.limits.max_members} members: the rest not read (the member cap)")

    def drain(self, stream: _Readable, name: str, packed: Callable[[], int]) -> bytes:
        """The bytes of one member read from ``stream`` in chunks, within the caps; ``packed`` tells how many
        compressed bytes stand for them (its size in the archive, or what a stream has consumed so far)."""
        kept = bytearray()
        cut = False
        while True:
            self.check_time()
            chunk = stream.read(_CHUNK)
            if not chunk:
                break
            self.unpacked += len(chunk)
            if self.unpacked > self.limits.max_unpacked_bytes:
                raise _Stop(
                    f"more than {self.limits.max_unpacked_bytes} bytes unpacked: stopped at "
                    f"{name or 'the file'} (the unpacked size cap)"
                )
            out = len(kept) + len(chunk)
            if out >= _RATIO_AFTER:
                consumed = packed()
                if out > self.limits.max_ratio * max(consumed, 1):
                    raise _SkipMember(
                        f"{name or 'the file'}: compressed more than {self.limits.max_ratio:g} to 1, "
                        "not read (the compression ratio cap; a zip bomb?)"
                    )
            room = self.limits.max_member_bytes - len(kept)
            if len(chunk) > room:
                kept += chunk[:room]
                cut = True
                break
            kept += chunk
        if cut:
            self.problems.append(
                f"{name or 'the file'}: cut at {self.limits.max_member_bytes} bytes (the member size cap)"
            )
        return bytes(kept)


def read_download(data: bytes, *, name: str = "", limits: ContainerLimits | None = None) -> DownloadReading:
    """Every text ``data`` holds (see the module docstring); ``name`` is the file's name, used only in
    messages. Never raises for bad input."""
    limits = limits or ContainerLimits()
    reading = _Reading(limits, time.monotonic() + limits.max_seconds)
    kind = file_kind(data)
    try:
        _read_any(reading, data, "", kind, depth=0)
    except _Stop as stop:
        reading.problems.append(str(stop))
    except _SkipMember as skip:
        reading.problems.append(str(skip))
    return DownloadReading(kind, tuple(reading.documents), tuple(reading.problems), reading.unpacked)


def joined_text(documents: tuple[Document, ...] | list[Document]) -> str:
    """The documents' texts as one text, each member's after a :data:`MEMBER_MARK` line naming it (a single
    document that is the file itself gets none): what a crawled page of a download holds."""
    if len(documents) == 1 and not documents[0].member:
        return documents[0].text
    return "\n".join(f"{MEMBER_MARK}{d.member or '.'} ===\n{d.text}" for d in documents)


def member_at(text: str, offset: int) -> str:
    """The member of a :func:`joined_text` that holds character ``offset`` (``''`` when there is none)."""
    found = ""
    for line in _MEMBER_LINE.finditer(text, 0, max(0, offset)):
        found = line.group(1)
    return found


def members_at(text: str, offsets: Iterable[int]) -> list[str]:
    """The members of a :func:`joined_text` holding the characters at ``offsets`` (a match's passages), as
    :func:`member_at` names them, each once, in the order of the text; ``[]`` for a text that names no member
    (a page, a file that is one text)."""
    if MEMBER_MARK not in text:
        return []
    marks = list(_MEMBER_LINE.finditer(text))
    ends = [mark.end() for mark in marks]
    held = {bisect_right(ends, max(0, offset)) - 1 for offset in offsets} - {-1}
    return list(dict.fromkeys(marks[index].group(1) for index in sorted(held)))


# --------------------------------------------------------------------------------------------- sniffing


def file_kind(data: bytes) -> str:
    """What ``data`` is, from its first bytes: ``zip`` (or ``epub``, ``docx``), ``7z``, ``rar``, ``gz``,
    ``bz2``, ``xz``, ``tar``, ``pdf``, ``mobi``, else ``txt`` (text or not: decoding decides)."""
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        # the central directory (at the end) names every member: an EPUB's container, a DOCX's document
        tail = data[-1024 * 1024 :]
        if b"META-INF/container.xml" in tail or data[30:58] == b"mimetypeapplication/epub+zip":
            return "epub"
        if b"word/document.xml" in tail:
            return "docx"
        return "zip"
    if data.startswith(b"7z\xbc\xaf\x27\x1c"):
        return "7z"
    if data.startswith(b"Rar!\x1a\x07"):
        return "rar"
    if data.startswith(b"\x1f\x8b"):
        return "gz"
    if data.startswith(b"BZh") and data[3:4].isdigit():
        return "bz2"
    if data.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if data[257:262] == b"ustar":
        return "tar"
    if data[:1024].lstrip().startswith(b"%PDF-"):
        return "pdf"
    if data[60:68] in (b"BOOKMOBI", b"TEXtREAd"):
        return "mobi"
    return "txt"


_ARCHIVES = frozenset({"zip", "7z", "rar", "gz", "bz2", "xz", "tar"})


def _read_any(reading: _Reading, data: bytes, path: str, kind: str, *, depth: int) -> None:
    label = path or "the file"
    if kind in _ARCHIVES and depth >= reading.limits.max_depth + 1:
        reading.problems.append(
            f"{label}: archives nested deeper than {reading.limits.max_depth}: not read (the nesting cap)"
        )
        return
    try:
        if kind == "txt":
            _read_text(reading, data, path)
        elif kind == "zip":
            _read_zip(reading, data, path, depth=depth)
        elif kind == "epub":
            _read_epub(reading, data, path)
        elif kind == "docx":
            _read_docx(reading, data, path)
        elif kind == "tar":
            _read_tar(reading, data, path, depth=depth)
        elif kind in ("gz", "bz2", "xz"):
            _read_stream(reading, data, path, kind, depth=depth)
        elif kind in ("7z", "rar"):
            _read_libarchive(reading, data, path, kind, depth=depth)
        elif kind == "pdf":
            _read_pdf(reading, data, path)
        else:
            _read_mobi(reading, data, path)
    except (_Stop, _SkipMember):
        raise
    except Exception as exc:  # noqa: BLE001 (a damaged file is one line, never the crawl; readers differ)
        message = " ".join(str(exc).split())[:200] or type(exc).__name__
        reading.problems.append(f"{label}: damaged or unreadable {kind} ({message})")


def _read_member(reading: _Reading, data: bytes, path: str, *, depth: int) -> None:
    """A member's bytes: read as what they are (an archive one level deeper, a text, an e-book)."""
    kind = file_kind(data)
    if kind == "txt" and not _TEXTUAL_NAME.search(path):
        # a member that is not named as text and does not decode (an image, a font) is passed over quietly
        try:
            decoded = decode_bytes(data)
        except UndecodableError:
            return
        if decoded.text.strip():
            reading.documents.append(Document(path, "text", decoded.text, decoded.encoding))
        return
    _read_any(reading, data, path, kind, depth=depth + 1 if kind in _ARCHIVES else depth)


_TEXTUAL_NAME = re.compile(r"\.(txt|text|md)$", re.IGNORECASE)


def _read_text(reading: _Reading, data: bytes, path: str) -> None:
    try:
        decoded = decode_bytes(data)
    except UndecodableError as exc:
        reading.problems.append(f"{path or 'the file'}: not a file fptrack reads ({exc})")
        return
    if decoded.text.strip():
        reading.documents.append(Document(path, "text", decoded.text, decoded.encoding))


def _joined(path: str, member: str) -> str:
    return f"{path}/{member}" if path else member


# --------------------------------------------------------------------------------------------- archives


def zip_member_name(info: zipfile.ZipInfo) -> str:
    """A zip member's name: zip's UTF-8 flag (bit 11) says UTF-8; without it the standard library read the
    bytes as CP437, and names that are not ASCII or UTF-8 are GBK in practice (Chinese Windows tools): read as
    GB18030."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        raw = info.filename.encode("cp437")
    except UnicodeEncodeError:
        return info.filename
    for codec in ("utf-8", "gb18030"):
        try:
            return raw.decode(codec)
        except UnicodeDecodeError:
            continue
    return info.filename


def _zip_consumed(stream: object, info: zipfile.ZipInfo) -> Callable[[], int]:
    """How many compressed bytes of a zip member its stream has consumed so far: a bomb's ratio shows after
    its first MiB, not once the whole member is out (``zipfile.ZipExtFile`` counts what is left to read in
    ``_compress_left``; without it, the member's whole compressed size)."""

    def consumed() -> int:
        left = getattr(stream, "_compress_left", None)
        return info.compress_size - left if isinstance(left, int) else info.compress_size

    return consumed


def _read_zip(reading: _Reading, data: bytes, path: str, *, depth: int) -> None:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            reading.count_member()
            name = _joined(path, zip_member_name(info))
            try:
                with archive.open(info) as stream:
                    body = reading.drain(stream, name, _zip_consumed(stream, info))
            except _SkipMember as skip:
                reading.problems.append(str(skip))
                continue
            except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
                reading.problems.append(f"{name}: damaged member ({' '.join(str(exc).split())[:200]})")
                continue
            _read_member(reading, body, name, depth=depth)


def _read_tar(reading: _Reading, data: bytes, path: str, *, depth: int) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as archive:
        for info in archive:
            if not info.isfile():
                continue
            reading.count_member()
            name = _joined(path, info.name)
            stream = archive.extractfile(info)
            if stream is None:
                continue
            try:
                body = reading.drain(stream, name, _fixed(info.size))
            except _SkipMember as skip:
                reading.problems.append(str(skip))
                continue
            _read_member(reading, body, name, depth=depth)


_STREAMS: dict[str, Callable[[IO[bytes]], io.BufferedIOBase]] = {
    "gz": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
    "bz2": lambda raw: bz2.BZ2File(raw, mode="rb"),
    "xz": lambda raw: lzma.LZMAFile(raw, mode="rb"),  # noqa: SIM115
}
_STREAM_SUFFIX = re.compile(r"\.(gz|tgz|bz2|tbz2?|xz|txz)$", re.IGNORECASE)


def _read_stream(reading: _Reading, data: bytes, path: str, kind: str, *, depth: int) -> None:
    """A gzip, bzip2 or xz stream: one member (a .tar.gz's tar, a .txt.gz's text), its ratio judged on the
    compressed bytes consumed so far."""
    raw = io.BytesIO(data)
    name = _STREAM_SUFFIX.sub("", path) if path else ""
    reading.count_member()
    with _STREAMS[kind](raw) as stream:
        body = reading.drain(stream, name or path, raw.tell)
    _read_member(reading, body, name, depth=depth)


def _read_libarchive(reading: _Reading, data: bytes, path: str, kind: str, *, depth: int) -> None:
    """7z and rar through libarchive: the ratio is judged on the whole archive (7z packs members together)."""
    import libarchive

    with libarchive.memory_reader(data) as archive:
        for entry in archive:
            if not entry.isfile:
                continue
            reading.count_member()
            name = _joined(path, str(entry.pathname))
            try:
                body = reading.drain(_BlockStream(entry.get_blocks(_CHUNK)), name, _fixed(len(data)))
            except _SkipMember as skip:
                reading.problems.append(str(skip))
                continue
            _read_member(reading, body, name, depth=depth)


class _BlockStream:
    """libarchive's blocks as a stream :meth:`_Reading.drain` reads."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self._blocks = blocks

    def read(self, size: int = -1, /) -> bytes:
        return next(self._blocks, b"")


# --------------------------------------------------------------------------------------------- documents

_BLOCK_TAGS = frozenset(
    {
        "p",
        "div",
        "br",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "li",
        "tr",
        "section",
        "blockquote",
        "pre",
        "title",
    }
)


def _xml_root(data: bytes) -> Element:
    """A document's tree, read safely: no entities expanded, nothing fetched, damage recovered."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, recover=True, huge_tree=False)
    root = etree.fromstring(data, parser=parser)
    if root is None:
        raise ValueError("no XML document")
    return root  # type: ignore[no-any-return]


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


def _xhtml_text(data: bytes) -> str:
    """The text of an XHTML document, a line per block element."""
    return _markup_text(_xml_root(data))


def _markup_text(root: Element) -> str:
    """The text of a parsed (X)HTML document's body, a line per block element."""
    body = next((el for el in root.iter() if _local(el.tag) == "body"), root)
    parts: list[str] = []

    def walk(element: Element) -> None:
        name = _local(element.tag)
        if name in ("script", "style", "head"):
            return
        if name in _BLOCK_TAGS:
            parts.append("\n")
        if element.text:
            parts.append(element.text)
        for child in element:
            walk(child)
            if child.tail:
                parts.append(child.tail)
        if name in _BLOCK_TAGS:
            parts.append("\n")

    walk(body)
    lines = (" ".join(line.split()) for line in "".join(parts).splitlines())
    return "\n".join(line for line in lines if line)


def _zip_read(reading: _Reading, archive: zipfile.ZipFile, member: str, label: str) -> bytes:
    info = archive.getinfo(member)
    reading.count_member()
    with archive.open(info) as stream:
        return reading.drain(stream, label, _zip_consumed(stream, info))


def _read_epub(reading: _Reading, data: bytes, path: str) -> None:
    """EPUB 2 and 3: META-INF/container.xml names the package (OPF), whose spine orders the XHTML
    documents."""
    import posixpath

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        container = _xml_root(
            _zip_read(reading, archive, "META-INF/container.xml", _joined(path, "container"))
        )
        rootfile = next(
            (el.get("full-path") for el in container.iter() if _local(el.tag) == "rootfile"), None
        )
        if not rootfile:
            raise ValueError("container.xml names no package")
        package = _xml_root(_zip_read(reading, archive, rootfile, _joined(path, rootfile)))
        base = posixpath.dirname(rootfile)
        manifest = {
            el.get("id"): el.get("href", "")
            for el in package.iter()
            if _local(el.tag) == "item" and el.get("id")
        }
        spine = [el.get("idref") for el in package.iter() if _local(el.tag) == "itemref"]
        texts = []
        for idref in spine:
            href = manifest.get(idref)
            if not href:
                continue
            member = posixpath.normpath(posixpath.join(base, href.split("#", 1)[0]))
            try:
                texts.append(_xhtml_text(_zip_read(reading, archive, member, _joined(path, member))))
            except KeyError:
                reading.problems.append(f"{_joined(path, member)}: named by the spine, missing from the book")
        text = "\n".join(t for t in texts if t)
        if text:
            reading.documents.append(Document(path, "epub", text))


def _read_docx(reading: _Reading, data: bytes, path: str) -> None:
    """word/document.xml: a line per paragraph (``w:p``), its runs' texts (``w:t``) joined."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        root = _xml_root(_zip_read(reading, archive, "word/document.xml", _joined(path, "word/document.xml")))
    lines = []
    for paragraph in root.iter():
        if _local(paragraph.tag) == "p":
            line = "".join(el.text or "" for el in paragraph.iter() if _local(el.tag) == "t").strip()
            if line:
                lines.append(line)
    if lines:
        reading.documents.append(Document(path, "docx", "\n".join(lines)))


def _read_mobi(reading: _Reading, data: bytes, path: str) -> None:
    """A MOBI/AZW3/PalmDOC book (:mod:`fingerprint.mobi`): its text records decompressed one by one within
    the caps (each counted as unpacked bytes; the whole text is one member), then its markup read as HTML
    (a PalmDOC book's plain text decoded as any text file)."""
    from lxml import html

    try:
        book = open_mobi(data)
    except MobiError as exc:
        reading.problems.append(f"{path or 'the file'}: a MOBI/AZW3 e-book: {exc}")
        return
    reading.count_member()
    label = path or "the file"
    raw = reading.drain(_BlockStream(book.records()), label, _fixed(len(data)))
    if not book.encoding:  # PalmDOC: plain text in whatever encoding its maker used
        _read_text(reading, raw, path)
        return
    parser = html.HTMLParser(encoding=book.encoding, no_network=True)
    text = _markup_text(html.document_fromstring(raw, parser=parser)) if raw.strip() else ""
    if text:
        reading.documents.append(Document(path, "mobi", text))
    else:
        reading.problems.append(f"{label}: a MOBI/AZW3 e-book with no text")


def _read_pdf(reading: _Reading, data: bytes, path: str) -> None:
    """A PDF's text layer, page by page (pypdf); a scanned PDF has none and gives nothing."""
    import logging

    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # a damaged PDF's warnings are its problem line
    document = PdfReader(io.BytesIO(data), strict=False)
    texts: list[str] = []
    try:
        for page in document.pages:
            reading.check_time()
            reading.count_member()
            texts.append(page.extract_text() or "")
    finally:  # a cap reached keeps the pages read so far
        text = "\n".join(t.strip() for t in texts if t.strip())
        if text:
            reading.documents.append(Document(path, "pdf", text))
    if not text and reading.limits.ocr is not None:
        text = _read_scanned_pdf(reading, document, path, reading.limits.ocr)
    if not text:
        reading.problems.append(f"{path or 'the file'}: a PDF without a text layer (scanned?): no text")


def _read_scanned_pdf(reading: _Reading, document: Any, path: str, ocr: OcrLimits) -> str:
    """A PDF without a text layer: its pages' images read by OCR (:func:`fingerprint.ocr.read_images`), page
    by page within the caps (pages count as members; the OCR time is the smaller of its own cap and what is
    left of the reading's)."""
    texts: list[str] = []
    try:
        for number, page in enumerate(document.pages, start=1):
            reading.check_time()
            oversized = _oversized_images(page, ocr.max_pixels)
            if oversized:  # refused before pypdf decodes it (a decompression bomb)
                reading.problems.append(
                    f"{path or 'the file'}: page {number}: an image of {oversized} pixels, more than "
                    f"{ocr.max_pixels} (the OCR pixel cap), not read"
                )
                continue
            try:
                images = [(f"page {number} {image.name}", image.data) for image in page.images]
            except Exception as exc:  # noqa: BLE001 - pypdf's errors on a damaged image vary
                reading.problems.append(
                    f"{path or 'the file'}: page {number}: images unreadable ({exc})"[:300]
                )
                continue
            left = reading.deadline - time.monotonic()
            if not images or left <= 0:
                continue
            seconds = min(ocr.max_seconds, left)
            read = read_images(images, limits=dataclasses.replace(ocr, max_seconds=seconds, max_chars=0))
            reading.problems.extend(f"{path or 'the file'}: {problem}" for problem in read.problems)
            texts.append(read.text)
    finally:  # a cap reached keeps the pages read so far
        text = "\n".join(t for t in texts if t)
        if text:
            reading.documents.append(Document(path, "pdf-ocr", text))
    return text


def _oversized_images(page: Any, max_pixels: int) -> int:
    """The pixels of the largest image a PDF page declares (its ``/XObject`` resources) when over
    ``max_pixels``, else 0."""
    resources = page.get("/Resources")
    xobjects = resources.get_object().get("/XObject") if resources is not None else None
    if xobjects is None:
        return 0
    largest = 0
    for reference in xobjects.get_object().values():
        image = reference.get_object()
        if image.get("/Subtype") == "/Image":
            largest = max(largest, int(image.get("/Width", 0)) * int(image.get("/Height", 0)))
    return largest if largest > max_pixels else 0
