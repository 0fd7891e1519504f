"""Real downloaded files made here, for the tests and the benchmarks of downloads (docs/downloads.md):
zips (with GBK member names as Chinese Windows tools write them), tars, 7z (libarchive's writer), EPUB and
DOCX built as zips, PDFs with a text layer (WeasyPrint), and the hostile ones (a zip bomb, archives nested
deep, a truncated EPUB, random bytes)."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path

__all__ = [
    "docx_of",
    "epub_of",
    "nested_zip",
    "pdf_of",
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


def epub_of(chapters: Sequence[tuple[str, str]], *, version: str = "3.0") -> bytes:
    """An EPUB: one XHTML document per ``(title, body)`` chapter, in the spine in that order."""
    manifest = "".join(
        f'<item id="c{n}" href="text/c{n}.xhtml" media-type="application/xhtml+xml"/>'
        for n in range(len(chapters))
    )
    spine = "".join(f'<itemref idref="c{n}"/>' for n in range(len(chapters)))
    members = {
        "mimetype": b"application/epub+zip",
        "META-INF/container.xml": (
            b'<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
            b'version="1.0"><rootfiles><rootfile full-path="OEBPS/content.opf" '
            b'media-type="application/oebps-package+xml"/></rootfiles></container>'
        ),
        "OEBPS/content.opf": (
            f'<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="{version}">'
            f"<manifest>{manifest}</manifest><spine>{spine}</spine></package>"
        ).encode(),
    }
    for n, (title, body) in enumerate(chapters):
        paragraphs = "".join(f"<p>{escape(line)}</p>" for line in body.splitlines() if line.strip())
        members[f"OEBPS/text/c{n}.xhtml"] = (
            '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head>'
            f"<title>{escape(title)}</title></head><body><h2>{escape(title)}</h2>{paragraphs}</body></html>"
        ).encode()
    return zip_of(members, stored=True)


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
