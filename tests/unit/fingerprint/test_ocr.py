"""fingerprint.ocr: Tesseract on real images drawn by Pillow (no mock of the engine)."""

from __future__ import annotations

import difflib
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fptrack.fingerprint.ocr import OcrLimits, read_images, tesseract_path, tidy_ocr_text
from testbed.images import chapter_png
from tests.support.books import book

needs_tesseract = pytest.mark.skipif(tesseract_path() is None, reason="deploy/ensure-services.sh installs it")
TEXT = book(7, 1, length=300).split("\n", 2)[2]  # one chapter's paragraphs, no line repeated


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header says ``width`` x ``height`` grey pixels, with a few bytes of data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def _similarity(read: str, expected: str) -> float:
    a, b = "".join(read.split()), "".join(expected.split())
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


@needs_tesseract
def test_a_chapter_image_reads_as_its_text() -> None:
    reading = read_images([("a.png", chapter_png(TEXT, noise=0.002))])
    assert reading.problems == () and reading.images_read == 1
    assert _similarity(reading.text, TEXT) >= 0.9, reading.text


@pytest.mark.slow
@needs_tesseract
def test_a_tall_image_is_read_in_slices_cut_between_lines() -> None:
    whole = read_images([("a.png", chapter_png(TEXT))]).text
    sliced = read_images([("a.png", chapter_png(TEXT))], limits=OcrLimits(slice_height=150)).text
    assert _similarity(sliced, whole) >= 0.95, (sliced, whole)


@needs_tesseract
def test_broken_and_oversized_images_are_one_problem_each_and_the_rest_is_read() -> None:
    good = chapter_png(TEXT, fmt="JPEG")
    huge = _png_header_only(100_000, 100_000)
    reading = read_images([("broken.png", good[:200]), ("huge.png", huge), ("good.jpg", good)])
    assert reading.images_read == 1 and _similarity(reading.text, TEXT) >= 0.9
    assert len(reading.problems) == 2
    assert reading.problems[0].startswith("image broken.png: not an image")
    assert reading.problems[1].startswith("image huge.png:") and "pixel cap" in reading.problems[1]
    # below Pillow's own guard, ours refuses it too, by its header
    refused = read_images([("big.png", _png_header_only(8_000, 8_000))], limits=OcrLimits(max_pixels=10**6))
    assert refused.problems == (
        "image big.png: 8000x8000 pixels, more than 1000000 (the OCR pixel cap), not read",
    )


@needs_tesseract
def test_max_chars_reads_the_first_lines_only_and_no_later_image() -> None:
    first = chapter_png(TEXT[:200], noise=0.002)
    reading = read_images(
        [("a.png", first), ("b.png", chapter_png(TEXT[200:]))], limits=OcrLimits(max_chars=60)
    )
    read = "".join(reading.text.split())
    assert reading.sampled and reading.images_read == 1 and reading.problems == ()
    assert 40 <= len(read) <= 100, read  # the lines holding about 60 characters (at most 32 a line)
    assert _similarity(read, TEXT[: len(read)]) >= 0.85, read
    whole = read_images([("a.png", first)], limits=OcrLimits(max_chars=10_000))
    assert not whole.sampled and _similarity(whole.text, TEXT[:200]) >= 0.9


def test_the_lines_of_an_image_are_found_from_its_rows_of_ink() -> None:
    import io

    from PIL import Image

    from fptrack.fingerprint.ocr import _rows_holding

    grey = Image.open(io.BytesIO(chapter_png("天" * 31 * 4, size=24))).convert("L")  # 4 lines of 31
    # lines start every 36 rows from row 24; a cut falls in the gap under the line that reaches the count
    assert 24 + 36 * 1 - 12 < _rows_holding(grey, 40) < 24 + 36 * 2
    assert 24 + 36 * 2 - 12 < _rows_holding(grey, 64) < 24 + 36 * 3
    assert _rows_holding(grey, 10_000) == grey.height
    assert _rows_holding(Image.new("L", (100, 100), 255), 5) == 100


def test_without_tesseract_nothing_is_read_and_one_line_says_why() -> None:
    reading = read_images([("a.png", b"x")], limits=OcrLimits(binary="tesseract-not-installed-here"))
    assert reading.text == "" and len(reading.problems) == 1 and "not installed" in reading.problems[0]


def test_bad_limits_are_refused_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="chi_sim"):
        OcrLimits(languages="chi_sim; rm -rf /")


_HAN = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)


@given(st.lists(st.tuples(_HAN, st.sampled_from(["", " ", "  ", "\t"])), max_size=40))
def test_tidy_removes_spaces_between_han_and_keeps_every_character(pairs: list[tuple[str, str]]) -> None:
    raw = "".join(char + space for char, space in pairs)
    tidy = tidy_ocr_text(raw)
    assert tidy == "".join(char for char, _ in pairs)


def _scanned_pdf(*pages: bytes) -> bytes:
    """A PDF of page images and no text layer, as a scanner writes one (Pillow)."""
    import io

    from PIL import Image

    images = [Image.open(io.BytesIO(page)).convert("RGB") for page in pages]
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:], resolution=150)
    return out.getvalue()


@pytest.mark.slow
@needs_tesseract
def test_a_scanned_pdf_is_read_by_ocr_within_the_caps() -> None:
    from fptrack.fingerprint.containers import ContainerLimits, read_download

    lines = TEXT.splitlines()
    pdf = _scanned_pdf(chapter_png("\n".join(lines[:2])), chapter_png("\n".join(lines[2:])))
    reading = read_download(pdf, name="scan.pdf", limits=ContainerLimits(ocr=OcrLimits()))
    assert [d.kind for d in reading.documents] == ["pdf-ocr"]
    assert _similarity(reading.documents[0].text, TEXT) >= 0.9
    # without OCR (and so before it): no text, and the line that says why
    plain = read_download(pdf, name="scan.pdf")
    assert not plain.documents and any("without a text layer" in p for p in plain.problems)
    # a page image over the pixel cap is refused before it is decoded
    capped = read_download(pdf, name="scan.pdf", limits=ContainerLimits(ocr=OcrLimits(max_pixels=1000)))
    assert not capped.documents and sum("the OCR pixel cap" in p for p in capped.problems) == 2
