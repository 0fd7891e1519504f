"""End to end: `fptrack crawl` of a loopback site of downloads (whole books as .txt in GB18030, Big5 and
UTF-16, a single chapter as .txt, zips with GBK member names, 7z, tar.gz, EPUB, DOCX, PDF) finds every
registered chapter each file holds, on the file's URL, with the member's path in the page's text; the same
containers holding an unregistered novel, a zip bomb, a zip nested five deep, a truncated EPUB and random
bytes give no match and one line each in the crawl's summary."""

from __future__ import annotations

import io
import zipfile

import pytest
from warcio.archiveiterator import ArchiveIterator

from fptrack.compare.chapters import split_chapters
from testbed.downloads import docx_of, epub_of, nested_zip, pdf_of, sevenz_of, tar_of, zip_bomb, zip_of
from testbed.sites import Page, as_served, serve_site
from tests.support.books import book

pytestmark = pytest.mark.slow

BOOK_A = book(101, 20, title="山海长歌")
BOOK_B = book(102, 15, title="青灯夜话")
BOOK_C = book(103, 15, title="无人知晓")  # never registered


def _chapters(text: str) -> list[tuple[str, str]]:
    return [(s.title, text[s.start : s.end].split("\n", 1)[1]) for s in split_chapters(text) if s.index >= 1]


def _site() -> tuple[dict[str, Page], dict[str, set[tuple[str, int]]], set[str]]:
    a_all = {("山海长歌", n) for n in range(1, 21)}
    b_all = {("青灯夜话", n) for n in range(1, 16)}
    third = _chapters(BOOK_A)[2]
    zip_type, octet = "application/zip", "application/octet-stream"
    files: dict[str, tuple[bytes, str, set[tuple[str, int]]]] = {
        "/txt/a-gbk.txt": (BOOK_A.encode("gb18030"), "text/plain; charset=gbk", a_all),
        "/txt/b-utf16.txt": (BOOK_B.encode("utf-16"), "text/plain", b_all),
        "/txt/b-big5.txt": (as_served(BOOK_B, "big5").encode("big5", "replace"), "text/plain", b_all),
        "/txt/a-3.txt": (f"{third[0]}\n{third[1]}".encode("utf-16"), octet, {("山海长歌", 3)}),
        "/zip/a.zip": (zip_of({"全本/山海长歌.txt": BOOK_A.encode("gbk")}, gbk_names=True), zip_type, a_all),
        "/7z/b.7z": (
            sevenz_of({"青灯夜话/全本.txt": BOOK_B.encode("utf-8")}),
            "application/x-7z-compressed",
            b_all,
        ),
        "/tar/a.tar.gz": (tar_of({"书/a.txt": BOOK_A.encode("utf-8")}), "application/gzip", a_all),
        "/epub/b.epub": (epub_of(_chapters(BOOK_B)), "application/epub+zip", b_all),
        "/docx/a.docx": (docx_of(BOOK_A), octet, a_all),
        "/pdf/b.pdf": (pdf_of(BOOK_B), "application/pdf", b_all),
        # negatives
        "/zip/c.zip": (zip_of({"全本/无人知晓.txt": BOOK_C.encode("gbk")}, gbk_names=True), zip_type, set()),
        "/epub/c.epub": (epub_of(_chapters(BOOK_C)), "application/epub+zip", set()),
        "/pdf/c.pdf": (pdf_of(BOOK_C), "application/pdf", set()),
        "/bomb.zip": (zip_bomb(512), zip_type, set()),
        "/nest.zip": (nested_zip(BOOK_A.encode("utf-8"), 5), zip_type, set()),
        "/broken.epub": (epub_of(_chapters(BOOK_A))[:30_000], "application/epub+zip", set()),
        "/random.zip": (bytes(range(256)) * 200, zip_type, set()),
    }
    links = "".join(f'<li><a href="{path}">{path}</a></li>' for path in files)
    pages: dict[str, Page] = {
        "/": Page.html(f"<html><body><h1>TXT全本下载</h1><ul>{links}</ul></body></html>")
    }
    pages.update({path: Page(data, content_type=mime) for path, (data, mime, _) in files.items()})
    expected = {path: found for path, (_, _, found) in files.items() if found}
    hostile = {"/bomb.zip", "/nest.zip", "/broken.epub", "/random.zip"}
    return pages, expected, hostile


def test_a_download_site_gives_every_chapter_its_files_hold(fptrack, tmp_path) -> None:
    pages, expected, hostile = _site()
    fptrack.run("init")
    for title, text in (("a", BOOK_A), ("b", BOOK_B)):
        path = tmp_path / f"{title}.txt"
        path.write_text(text, encoding="utf-8")
        fptrack.run("works", "add", str(path))
    with serve_site(pages) as base:
        crawl = fptrack.run(
            "crawl", base + "/", "--allow-private-host", base.key, "--depth", "1", "--max-pages", "50"
        )
    found: dict[str, set[tuple[str, int]]] = {}
    matches = fptrack.matches()
    for match in matches:
        found.setdefault(match["page_url"].removeprefix(base), set()).add(
            (match["work_title"], match["chapter_index"])
        )
    assert found == expected
    # one line each for the files not read whole
    notes = [line for line in crawl.stdout.splitlines() if line.startswith("  note: ")]
    for path in hostile:
        assert sum(1 for line in notes if f"{base}{path}:" in line) == 1, (path, crawl.stdout)

    # the evidence of a match on a download: the WARC's response payload is the file as served
    on_zip = next(m for m in matches if m["page_url"] == base + "/zip/a.zip")
    bundle = tmp_path / "bundle.zip"
    fptrack.run("evidence", "bundle", "--match", str(on_zip["id"]), "-o", str(bundle))
    archive = zipfile.ZipFile(io.BytesIO(bundle.read_bytes()))
    payloads = [
        record.raw_stream.read()
        for record in ArchiveIterator(io.BytesIO(archive.read("page.warc.gz")))
        if record.rec_type == "response"
    ]
    assert payloads == [pages["/zip/a.zip"].body]
