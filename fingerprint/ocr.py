"""Read the text drawn in chapter images (图片章节) with Tesseract, run as a subprocess on the CPU.

The engine is Debian's ``tesseract-ocr`` with its ``chi_sim``/``chi_tra`` language data, installed by the
project's set-up (``deploy/ensure-services.sh``, the image); no model is ever downloaded at run time. Without
the ``tesseract`` program :func:`read_images` reads nothing and says so in one problem line.

Each image is checked before it is decoded (its header's width and height against
:attr:`OcrLimits.max_pixels`: a decompression bomb is refused unread), turned grey by Pillow (PNG, JPEG, WebP,
GIF...), cut into slices of at most :attr:`OcrLimits.slice_height` pixels at the whitest row near each cut
(a tall chapter image is one slice per screen, and no line of text is cut in two), and each slice is handed to
``tesseract stdin stdout --psm 6`` with ``OMP_THREAD_LIMIT=1`` (one core per page: the crawl shares the
machine). Cost: about 3 ms of CPU per character recognised (Tesseract 5.3's LSTM on ``chi_sim``), so a
2,500-character chapter costs 7-8 s; :attr:`OcrLimits.max_seconds` bounds one page.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["OcrLimits", "OcrReading", "read_images", "tesseract_path", "tidy_ocr_text"]

_CJK = r"\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f"
_SPACE_BETWEEN_CJK = re.compile(rf"(?<=[{_CJK}])[ \t]+(?=[{_CJK}])")
_FIND_CUT_ROWS = 240  # rows above a slice's end searched for the whitest row to cut at


@dataclass(frozen=True)
class OcrLimits:
    """Caps on reading one page's images (settings ``FPTRACK_OCR_*``, docs/downloads.md)."""

    languages: str = "chi_sim"
    max_pixels: int = 40_000_000  # an image larger than this (width x height) is not decoded
    max_seconds: float = 60.0  # wall time for one page's images; what was read by then is kept
    slice_height: int = 2_000
    binary: str = "tesseract"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z_]+(\+[a-z_]+)*", self.languages):
            raise ValueError(f"OCR languages must look like chi_sim+chi_tra, not {self.languages!r}")
        if self.max_pixels < 1 or self.max_seconds <= 0 or self.slice_height < 100:
            raise ValueError("OCR limits: max_pixels >= 1, max_seconds > 0, slice_height >= 100")


@dataclass(frozen=True)
class OcrReading:
    """The text of a page's images in order (a line per line of text), and what could not be read."""

    text: str
    images_read: int
    problems: tuple[str, ...]


def tesseract_path(binary: str = "tesseract") -> str | None:
    """Where the ``tesseract`` program is, or None when it is not installed."""
    return shutil.which(binary)


def tidy_ocr_text(raw: str) -> str:
    """Tesseract's output as lines of text: the spaces it puts between CJK characters removed, blank lines
    dropped."""
    lines = (_SPACE_BETWEEN_CJK.sub("", line).strip() for line in raw.splitlines())
    return "\n".join(line for line in lines if line)


def read_images(images: Sequence[tuple[str, bytes]], *, limits: OcrLimits | None = None) -> OcrReading:
    """OCR each ``(name, bytes)`` image in order within ``limits``. Never raises for bad images: a broken,
    oversized or unreadable image is one problem line naming it, the others are read."""
    limits = limits or OcrLimits()
    program = tesseract_path(limits.binary)
    if program is None:
        return OcrReading("", 0, (f"OCR: {limits.binary} is not installed; the page's images were not read",))
    deadline = time.monotonic() + limits.max_seconds
    texts: list[str] = []
    problems: list[str] = []
    read = 0
    for name, data in images:
        try:
            slices = _grey_slices(data, limits)
        except _Unreadable as exc:
            problems.append(f"image {name}: {exc}")
            continue
        parts: list[str] = []
        for png in slices:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                problems.append(f"image {name}: not read whole (the OCR time cap, {limits.max_seconds:g} s)")
                break
            try:
                parts.append(_tesseract(program, png, limits.languages, remaining))
            except _Unreadable as exc:
                problems.append(f"image {name}: {exc}")
                break
        text = tidy_ocr_text("\n".join(parts))
        if text:
            texts.append(text)
            read += 1
        if time.monotonic() >= deadline:
            break
    return OcrReading("\n".join(texts), read, tuple(problems))


class _Unreadable(Exception):
    pass


def _grey_slices(data: bytes, limits: OcrLimits) -> list[bytes]:
    """The image as grey PNG slices, each at most ``limits.slice_height`` high, cut at white rows."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > limits.max_pixels:
                raise _Unreadable(
                    f"{width}x{height} pixels, more than {limits.max_pixels} (the OCR pixel cap), not read"
                )
            grey = image.convert("L")
    except _Unreadable:
        raise
    except Image.DecompressionBombError:  # Pillow's own guard, far above ours: refused in its header too
        raise _Unreadable(f"more than {limits.max_pixels} pixels (the OCR pixel cap), not read") from None
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise _Unreadable(f"not an image Pillow can read ({type(exc).__name__})") from None
    slices: list[bytes] = []
    top = 0
    while top < height:
        end = min(height, top + limits.slice_height)
        if end < height:
            end = _whitest_row(grey, max(top + 1, end - _FIND_CUT_ROWS), end)
        out = io.BytesIO()
        grey.crop((0, top, width, end)).save(out, format="PNG")
        slices.append(out.getvalue())
        top = end
    return slices


def _whitest_row(grey: object, start: int, end: int) -> int:
    """The row in ``[start, end)`` with the least ink (the darkest pixel lightest), the last of equals."""
    from PIL import Image

    assert isinstance(grey, Image.Image)
    band = grey.crop((0, start, grey.width, end))
    best, best_row = -1, end
    for row in range(end - start - 1, -1, -1):
        lightest_dark = band.crop((0, row, band.width, row + 1)).getextrema()[0]
        if isinstance(lightest_dark, (int, float)) and lightest_dark > best:
            best, best_row = int(lightest_dark), start + row
            if best >= 250:
                break
    return best_row


def _tesseract(program: str, png: bytes, languages: str, timeout: float) -> str:
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        done = subprocess.run(  # a fixed program and arguments, the image on stdin
            [program, "stdin", "stdout", "-l", languages, "--psm", "6"],
            input=png,
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _Unreadable(f"not read whole (the OCR time cap reached in {timeout:.0f} s)") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _Unreadable(
            f"tesseract failed: {(message[-1] if message else f'exit {done.returncode}')[:200]}"
        )
    return done.stdout.decode("utf-8", "replace")
