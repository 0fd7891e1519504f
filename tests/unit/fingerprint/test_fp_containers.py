"""fingerprint.containers: every format read from real files made here (zipfile, tarfile, gzip, libarchive's
7z writer, an EPUB and a DOCX built as zips, a PDF drawn by WeasyPrint), and the hostile ones survived within
the caps."""

from __future__ import annotations

import bz2
import io
import lzma
import os
import resource
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.fingerprint.containers import (
    ContainerLimits,
    Document,
    file_kind,
    joined_text,
    member_at,
    read_download,
)
from testbed.downloads import epub_of, zip_of

BOOK = "第一章 山雨欲来\n天下大势，分久必合，合久必分。\n第二章 风满楼\n话说那日风雨交加，众人皆惊。\n"
BOOK_TW = "第一章 山雨欲來\n天下大勢，分久必合，合久必分。\n第二章 風滿樓\n話說那日風雨交加，眾人皆驚。\n"


def _texts(data: bytes, limits: ContainerLimits | None = None) -> list[tuple[str, str]]:
    return [(d.member, d.text) for d in read_download(data, limits=limits).documents]


@pytest.mark.parametrize("codec", ["gb18030", "gbk", "big5", "utf-8", "utf-16", "utf-32"])
def test_a_whole_book_as_text_in_any_encoding_is_read(codec: str) -> None:
    book = BOOK_TW if codec == "big5" else BOOK
    data = book.encode(codec)  # Python's utf-16/utf-32 write a BOM
    reading = read_download(data)
    assert reading.kind == "txt" and not reading.problems
    assert reading.documents[0].text == book


def test_a_zip_with_gbk_member_names_without_the_utf8_flag() -> None:
    data = zip_of({"全本小说.txt": BOOK.encode("gb18030")}, gbk_names=True)
    assert _texts(data) == [("全本小说.txt", BOOK)]


def test_a_zip_with_utf8_names_and_a_directory() -> None:
    data = zip_of(
        {"书/": b"", "书/第一卷.txt": BOOK.encode("utf-8"), "书/封面.jpg": b"\xff\xd8\xff\xe0" + bytes(300)}
    )
    assert _texts(data) == [("书/第一卷.txt", BOOK)]


@pytest.mark.parametrize("mode", ["w:", "w:gz", "w:bz2", "w:xz"])
def test_tar_and_its_compressed_forms(mode: str) -> None:
    buffer = io.BytesIO()
    data = BOOK.encode("gb18030")
    with tarfile.open(fileobj=buffer, mode=mode) as archive:  # type: ignore[call-overload]
        info = tarfile.TarInfo("全本/book.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    assert _texts(buffer.getvalue()) == [("全本/book.txt", BOOK)]


@pytest.mark.parametrize("compress", [bz2.compress, lzma.compress])
def test_a_single_compressed_text(compress: object) -> None:
    data = compress(BOOK.encode("utf-8"))  # type: ignore[operator]
    assert [text for _, text in _texts(data)] == [BOOK]


def test_a_7z_archive_through_libarchive(tmp_path: Path) -> None:
    import libarchive

    data = BOOK_TW.encode("big5")
    target = tmp_path / "book.7z"
    with libarchive.file_writer(str(target), "7zip") as writer:
        writer.add_file_from_memory("小說/全本.txt", len(data), data)
    reading = read_download(target.read_bytes())
    assert reading.kind == "7z"
    assert [(d.member, d.text, d.encoding) for d in reading.documents] == [("小說/全本.txt", BOOK_TW, "big5")]


@pytest.mark.parametrize("version", ["2.0", "3.0"])
def test_an_epub_is_read_in_its_spines_order(version: str) -> None:
    # the spine's order is the book's, not the manifest's or the zip's
    chapters = [("第二章 风满楼", "话说那日\n风雨交加"), ("第一章 山雨欲来", "天下大势")]
    data = epub_of(chapters, version=version, spine=[1, 0])
    reading = read_download(data)
    assert reading.kind == "epub"
    assert reading.documents == (
        Document("", "epub", "第一章 山雨欲来\n天下大势\n第二章 风满楼\n话说那日\n风雨交加"),
    )


def test_a_rar5_archive_is_read_by_libarchive() -> None:
    from testbed.downloads import rar_of

    data = rar_of({"小说/全本.txt": BOOK.encode("gb18030"), "封面.jpg": b"\xff\xd8\xff\xe0" + bytes(300)})
    reading = read_download(data)
    assert reading.kind == "rar" and reading.problems == ()
    assert [(d.member, d.text, d.encoding) for d in reading.documents] == [("小说/全本.txt", BOOK, "gb18030")]
    # cut short: what was read before the cut is kept or the file is one line, never an exception
    assert len(read_download(data[: len(data) // 2]).problems) <= 1


def test_a_docx_gives_a_line_per_paragraph() -> None:
    word = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    document = (
        f'<?xml version="1.0"?><w:document xmlns:w="{word}"><w:body>'
        "<w:p><w:r><w:t>第一章 </w:t></w:r><w:r><w:t>山雨欲来</w:t></w:r></w:p>"
        "<w:p><w:r><w:t>天下大势</w:t></w:r></w:p></w:body></w:document>"
    )
    data = zip_of({"[Content_Types].xml": b"<Types/>", "word/document.xml": document.encode()})
    assert read_download(data).documents == (Document("", "docx", "第一章 山雨欲来\n天下大势"),)


def test_a_pdf_with_a_text_layer_drawn_by_weasyprint() -> None:
    from weasyprint import HTML

    pdf = HTML(string="<html><body><p>第一章 山雨欲来</p><p>天下大势，分久必合</p></body></html>").write_pdf()
    reading = read_download(pdf)
    assert reading.kind == "pdf"
    assert reading.documents[0].text == "第一章 山雨欲来\n天下大势，分久必合"


def test_an_epub_inside_a_zip_inside_a_tar_gz() -> None:
    inner = zip_of({"book.epub": epub_of([("第一章 山雨欲来", "天下大势")])})
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("downloads/pack.zip")
        info.size = len(inner)
        archive.addfile(info, io.BytesIO(inner))
    assert _texts(buffer.getvalue()) == [("downloads/pack.zip/book.epub", "第一章 山雨欲来\n天下大势")]


# ------------------------------------------------------------------------------------------------- hostile


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_zip_bomb_member_of_512_mib_costs_little() -> None:
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("bomb.txt", "w", force_zip64=True) as member,
    ):
        block = b"A" * (1 << 20)
        for _ in range(512):
            member.write(block)
    data = buffer.getvalue()
    before = _peak_rss_mb()
    started = time.process_time()
    reading = read_download(data)
    spent = time.process_time() - started
    assert reading.documents == () or all(len(d.text) <= 32 * 1024 * 1024 for d in reading.documents)
    assert reading.problems and "cap" in reading.problems[0]
    assert spent < 5  # generous for a loaded machine: the benchmark measures it (<= 2 s)
    assert _peak_rss_mb() - before < 200


def test_a_zip_bomb_is_refused_by_its_ratio() -> None:
    data = zip_of({"bomb.txt": b"A" * (8 << 20)})
    reading = read_download(data, limits=ContainerLimits(max_ratio=50))
    assert reading.documents == ()
    assert reading.problems == (
        "bomb.txt: compressed more than 50 to 1, not read (the compression ratio cap; a zip bomb?)",
    )


def test_archives_nested_five_deep_stop_at_the_depth_cap() -> None:
    data = BOOK.encode("utf-8")
    name = "book.txt"
    for level in range(5):
        data = zip_of({name: data})
        name = f"level{level}.zip"
    reading = read_download(data, limits=ContainerLimits(max_depth=3))
    assert reading.documents == ()
    assert len(reading.problems) == 1 and "the nesting cap" in reading.problems[0]
    assert read_download(data, limits=ContainerLimits(max_depth=5)).documents[0].text == BOOK


def test_a_truncated_epub_is_one_line() -> None:
    data = epub_of([("第一章 山雨欲来", "天下大势" * 200)])
    reading = read_download(data[: len(data) // 2])
    assert reading.documents == ()
    assert len(reading.problems) == 1 and "damaged or unreadable" in reading.problems[0]


def test_random_bytes_named_zip_give_no_text() -> None:
    for data in (
        os.urandom(50_000),
        b"PK\x03\x04" + os.urandom(50_000),
        b"7z\xbc\xaf\x27\x1c" + os.urandom(999),
    ):
        reading = read_download(data)
        assert reading.documents == () and len(reading.problems) == 1


def test_the_member_cap_and_the_unpacked_cap() -> None:
    data = zip_of({f"{n}.txt": BOOK.encode() for n in range(10)})
    reading = read_download(data, limits=ContainerLimits(max_members=3))
    assert len(reading.documents) == 3
    assert reading.problems == ("more than 3 members: the rest not read (the member cap)",)
    reading = read_download(data, limits=ContainerLimits(max_unpacked_bytes=len(BOOK.encode()) * 2))
    assert len(reading.documents) == 2 and "the unpacked size cap" in reading.problems[0]


def test_a_member_over_the_member_cap_is_cut() -> None:
    data = zip_of({"a.txt": ("天下大势\n" * 1000).encode()})
    reading = read_download(data, limits=ContainerLimits(max_member_bytes=1300))
    assert 1200 < len(reading.documents[0].text.encode()) <= 1300
    assert reading.problems == ("a.txt: cut at 1300 bytes (the member size cap)",)


def test_nothing_is_written_to_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    read_download(zip_of({"../../escape.txt": BOOK.encode(), "/abs.txt": BOOK.encode()}))
    assert list(tmp_path.iterdir()) == []


def test_file_kinds() -> None:
    assert file_kind(b"%PDF-1.7\n") == "pdf"
    assert file_kind(bytes(60) + b"BOOKMOBI") == "mobi"
    assert file_kind(bytes(60) + b"TEXtREAd") == "mobi"


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.text("abc/书", min_size=1, max_size=8), st.text(min_size=1, max_size=40)), max_size=5
    )
)
def test_member_at_names_the_member_holding_each_offset(members: list[tuple[str, str]]) -> None:
    documents = [Document(name, "text", text.replace("=", "-")) for name, text in members]
    text = joined_text(documents)
    if len(documents) == 1 and not documents[0].member:
        return
    position = 0
    for document in documents:
        header = f"=== file: {document.member} ===\n"
        start = text.index(header, position) + len(header)
        assert member_at(text, start + len(document.text) // 2) == document.member
        position = start


def test_a_whole_big5_book_whose_sample_ends_inside_a_character() -> None:
    """The encoding is ranked on the first 64 KB: cut inside a double-byte character, every candidate failed
    to decode the sample and a Big5 book was read as GB18030 (nonsense)."""
    from testbed.sites import to_traditional
    from tests.support.books import book

    text = "x" + to_traditional(book(7, 30, length=1500))
    reading = read_download(text.encode("big5", "replace"))
    assert reading.documents[0].encoding == "big5"


def test_a_zip_bomb_is_refused_after_its_first_mib_not_its_member_cap() -> None:
    from testbed.downloads import zip_bomb

    bomb = zip_bomb(512)
    started = time.process_time()
    reading = read_download(bomb)
    assert time.process_time() - started < 0.5
    assert reading.documents == ()
    assert reading.problems == (
        "全本.txt: compressed more than 100 to 1, not read (the compression ratio cap; a zip bomb?)",
    )


def test_a_pdf_stopped_by_the_time_cap_keeps_the_pages_read() -> None:
    from testbed.downloads import pdf_of

    data = pdf_of("\n".join(f"第{n}页的文字内容" for n in range(400)))
    reading = read_download(data, limits=ContainerLimits(max_members=3))
    assert len(reading.documents) == 1 and "第0页" in reading.documents[0].text
    assert reading.problems == ("more than 3 members: the rest not read (the member cap)",)
