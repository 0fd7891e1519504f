"""Real downloaded files made here, for the tests and the benchmarks of downloads (docs/downloads.md):
zips (with GBK member names as Chinese Windows tools write them), tars, 7z (libarchive's writer), EPUB and
DOCX built as zips, MOBI/AZW3 and PalmDOC books and stored RAR5 archives written byte by byte (a PalmDOC
compressor of our own; no free rar writer exists),
PDFs with a text layer (WeasyPrint), and the hostile ones (a zip bomb, archives nested deep, a truncated EPUB,
random bytes)."""

from __future__ import annotations

import io
import os
import struct
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path

__all__ = [
    "docx_of",
    "epub_of",
    "mobi_of",
    "nested_zip",
    "palmdoc_compress",
    "palmdoc_of",
    "pdf_of",
    "rar_of",
    "sevenz_of",
    "tar_of",
    "zip_bomb",
    "zip_of",
]


def zip_of(members: Mapping[str, bytes], *, gbk_names: bool = False, stored: bool = False) -> bytes:
    """A zip of ``members``; ``gbk_names``: their names as GBK bytes without the UTF-8 flag."""
    buffer = io.BytesIO()
    placeholders: dict[bytes, bytes] = {}
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as archive:
        for number, (name, data) in enumerate(members.items()):
            if gbk_names and not name.isascii():
                raw = name.encode("gbk")
                placeholder = f"~{number:04d}".ljust(len(raw), "~")[: len(raw)]
                assert len(placeholder) == len(raw), name
                placeholders[placeholder.encode()] = raw
                name = placeholder
            archive.writestr(name, data)
    written = buffer.getvalue()
    for stand_in, gbk in placeholders.items():
        written = written.replace(stand_in, gbk)
    return written


def tar_of(members: Mapping[str, bytes], *, compression: str = "gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=f"w:{compression}") as archive:  # type: ignore[call-overload]
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def sevenz_of(members: Mapping[str, bytes]) -> bytes:
    """A 7z archive written by libarchive (its writer wants a file: a temporary one, removed)."""
    import libarchive

    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "out.7z"
        with libarchive.file_writer(str(target), "7zip") as writer:
            for name, data in members.items():
                writer.add_file_from_memory(name, len(data), data)
        return target.read_bytes()


def rar_of(members: Mapping[str, bytes]) -> bytes:
    """A RAR5 archive of ``members``, stored (not compressed), written from RARLAB's public format description
    (there is no free RAR writer): the signature, a main header, a file header per member (its data's CRC32,
    Unix mode 0644, UTF-8 name) followed by its bytes, an end header. Each header is its CRC32, its size and
    its fields, the numbers as little-endian 7-bit groups (vint)."""
    import zlib

    def vint(number: int) -> bytes:
        out = bytearray()
        while True:
            low, number = number & 0x7F, number >> 7
            out.append(low | (0x80 if number else 0))
            if not number:
                return bytes(out)

    def header(*fields: int | bytes) -> bytes:
        body = b"".join(f if isinstance(f, bytes) else vint(f) for f in fields)
        size = vint(len(body))
        return struct.pack("<I", zlib.crc32(size + body)) + size + body

    out = bytearray(b"Rar!\x1a\x07\x01\x00")
    out += header(1, 0, 0)  # main: type, header flags, archive flags
    for name, data in members.items():
        raw = name.encode("utf-8")
        crc = struct.pack("<I", zlib.crc32(data))
        # file: type, header flags (a data area), data size, file flags (CRC32 given), size, mode, CRC32,
        # compression (version 0, stored), host OS (Unix), the name's length and the name; then the data
        out += header(2, 0x0002, len(data), 0x0004, len(data), 0o100644, crc, 0, 1, len(raw), raw) + data
    out += header(5, 0, 0)  # end: type, header flags, end flags
    return bytes(out)


def epub_of(
    chapters: Sequence[tuple[str, str]], *, version: str = "3.0", spine: Sequence[int] | None = None
) -> bytes:
    """An EPUB: one XHTML document per ``(title, body)`` chapter, stored in that order; the package's spine
    (the reading order) lists them in that order too, or as the indexes ``spine`` give."""
    manifest = "".join(
        f'<item id="c{n}" href="text/c{n}.xhtml" media-type="application/xhtml+xml"/>'
        for n in range(len(chapters))
    )
    order = range(len(chapters)) if spine is None else spine
    spine_xml = "".join(f'<itemref idref="c{n}"/>' for n in order)
    members = {
        "mimetype": b"application/epub+zip",
        "META-INF/container.xml": (
            b'<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
            b'version="1.0"><rootfiles><rootfile full-path="OEBPS/content.opf" '
            b'media-type="application/oebps-package+xml"/></rootfiles></container>'
        ),
        "OEBPS/content.opf": (
            f'<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="{version}">'
            f"<manifest>{manifest}</manifest><spine>{spine_xml}</spine></package>"
        ).encode(),
    }
    for n, (title, body) in enumerate(chapters):
        paragraphs = "".join(f"<p>{escape(line)}</p>" for line in body.splitlines() if line.strip())
        members[f"OEBPS/text/c{n}.xhtml"] = (
            '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head>'
            f"<title>{escape(title)}</title></head><body><h2>{escape(title)}</h2>{paragraphs}</body></html>"
        ).encode()
    return zip_of(members, stored=True)


def palmdoc_compress(data: bytes) -> bytes:
    """``data`` compressed as PalmDOC's LZ77 (fingerprint/mobi.py's docstring has the format), greedily: at
    each byte the longest earlier run of 3 to 10 bytes within 2,047 bytes back (overlap allowed), else a space
    and a letter as one byte, else the byte itself, escaped in a counted run when it is 0x01-0x08 or above
    0x7f. What a MOBI maker writes, so that the reader is tested on data it did not make itself."""
    out = bytearray()
    i, size = 0, len(data)
    while i < size:
        window = max(0, i - 2047)
        length = 0
        if i + 3 <= size and data.rfind(data[i : i + 3], window, i + 2) >= 0:
            length = 3
            while (
                length < 10
                and i + length < size
                and data.rfind(data[i : i + length + 1], window, i + length) >= 0
            ):
                length += 1
        if length:
            distance = i - data.rfind(data[i : i + length], window, i + length - 1)
            out += (0x8000 | (distance << 3) | (length - 3)).to_bytes(2, "big")
            i += length
        elif data[i] == 0x20 and i + 1 < size and 0x40 <= data[i + 1] <= 0x7F:
            out.append(data[i + 1] ^ 0x80)
            i += 2
        elif data[i] == 0 or 0x09 <= data[i] <= 0x7F:
            out.append(data[i])
            i += 1
        else:
            end = i
            while end < size and end - i < 8 and not (data[end] == 0 or 0x09 <= data[end] <= 0x7F):
                end += 1
            out.append(end - i)
            out += data[i:end]
            i = end
    return bytes(out)


_RECORD = 4096


def mobi_of(
    chapters: Sequence[tuple[str, str]],
    *,
    compression: int = 2,
    kf8: bool = False,
    encryption: int = 0,
    trailing_entry: bool = True,
) -> bytes:
    """A MOBI book (``kf8``: an AZW3's version-8 header and XHTML) of ``(title, body)`` chapters in UTF-8:
    a PDB header, record 0 (PalmDOC header, a MOBI header of 232 bytes with extra data flags), the text in
    records of 4,096 bytes, each PalmDOC-compressed (``compression`` 2; 1: stored), each followed by the
    multibyte overlap (the rest of a character cut at the record's end) and, with ``trailing_entry``, one
    more trailing entry as Kindle tools write (its size backward-encoded at the end); an end-of-file record.
    No index or EXTH records: the reader needs none. A KF8 book's skeleton and fragment tables are not
    written either (its text records hold the XHTML in reading order, as real ones do)."""
    body = "".join(
        f"<h2>{escape(title)}</h2>"
        + "".join(f"<p>{escape(line)}</p>" for line in text.splitlines() if line.strip())
        + ("" if kf8 else "<mbp:pagebreak/>")
        for title, text in chapters
    )
    if kf8:
        markup = (
            '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head>'
            f'<title>book</title></head><body aid="0">{body}</body></html>'
        )
    else:
        markup = f"<html><head><guide></guide></head><body>{body}</body></html>"
    raw = markup.encode("utf-8")
    records = []
    for start in range(0, len(raw), _RECORD):
        end = start + _RECORD
        overlap = 0
        while overlap < 3 and end + overlap < len(raw) and 0x80 <= raw[end + overlap] <= 0xBF:
            overlap += 1
        text = raw[start:end]
        record = palmdoc_compress(text) if compression == 2 else text
        record += raw[end : end + overlap] + bytes([overlap])
        if trailing_entry:
            record += b"\x81\x82\x83"  # two bytes of an entry, then its size (3, itself counted)
        records.append(record)
    flags = 0b11 if trailing_entry else 0b01
    mobi_header = bytearray(232)
    struct.pack_into(">4sIIII", mobi_header, 0, b"MOBI", 232, 2, 65001, 0x5EED)
    struct.pack_into(">I", mobi_header, 20, 8 if kf8 else 6)  # the format version (offset 36 of record 0)
    struct.pack_into(">H", mobi_header, 226, flags)  # offset 242 of record 0
    palm = struct.pack(">HHIHHHH", compression, 0, len(raw), len(records), _RECORD, encryption, 0)
    return _pdb(b"BOOKMOBI", [palm + bytes(mobi_header), *records, b"\xe9\x8e\r\n"])


def palmdoc_of(text: str, *, encoding: str = "gb18030") -> bytes:
    """A PalmDOC (``TEXtREAd``) book: plain text in ``encoding``, no MOBI header, PalmDOC-compressed records
    of 4,096 bytes (a character may be cut between two: the reader joins them before decoding)."""
    raw = text.encode(encoding)
    records = [palmdoc_compress(raw[start : start + _RECORD]) for start in range(0, len(raw), _RECORD)]
    palm = struct.pack(">HHIHHHH", 2, 0, len(raw), len(records), _RECORD, 0, 0)
    return _pdb(b"TEXtREAd", [palm, *records])


def _pdb(type_creator: bytes, records: Sequence[bytes]) -> bytes:
    """A Palm database: its 78-byte header, a record list, two bytes of padding, the records."""
    header = struct.pack(
        ">32sHHIIIIII8sIIH", b"book", 0, 0, 0, 0, 0, 0, 0, 0, type_creator, 0, 0, len(records)
    )
    offset = len(header) + 8 * len(records) + 2
    table = bytearray()
    for number, record in enumerate(records):
        table += struct.pack(">II", offset, 2 * number)
        offset += len(record)
    return header + bytes(table) + b"\0\0" + b"".join(records)


def docx_of(text: str) -> bytes:
    """A DOCX (word/document.xml) with a paragraph per line of ``text``."""
    word = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    paragraphs = "".join(
        f"<w:p><w:r><w:t>{escape(line)}</w:t></w:r></w:p>" for line in text.splitlines() if line.strip()
    )
    document = f'<?xml version="1.0"?><w:document xmlns:w="{word}"><w:body>{paragraphs}</w:body></w:document>'
    return zip_of({"[Content_Types].xml": b"<Types/>", "word/document.xml": document.encode()})


def pdf_of(text: str) -> bytes:
    """A PDF with a text layer, drawn by WeasyPrint (as fptrack draws its notices): a paragraph per line."""
    from weasyprint import HTML

    paragraphs = "".join(f"<p>{escape(line)}</p>" for line in text.splitlines() if line.strip())
    pdf: bytes = HTML(string=f"<html><body>{paragraphs}</body></html>").write_pdf()
    return pdf


def zip_bomb(mebibytes: int = 512) -> bytes:
    """A zip of one member that expands to ``mebibytes`` MiB of one repeated byte (about 1,000 to 1)."""
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("全本.txt", "w", force_zip64=True) as member,
    ):
        block = b"A" * (1 << 20)
        for _ in range(mebibytes):
            member.write(block)
    return buffer.getvalue()


def nested_zip(data: bytes, depth: int, name: str = "book.txt") -> bytes:
    """``data`` as ``name`` in a zip, in a zip..., ``depth`` zips deep."""
    for level in range(depth):
        data = zip_of({name: data})
        name = f"level{level}.zip"
    return data


def random_bytes(size: int, seed: int = 0) -> bytes:
    import random

    return random.Random(seed).randbytes(size) if seed else os.urandom(size)
