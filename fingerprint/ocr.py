"""Read the text drawn in chapter images (图片章节) with Tesseract, run as a subprocess on the CPU.

The engine is Debian's ``tesseract-ocr`` with its ``chi_sim``/``chi_tra`` language data, installed by the
project's set-up (``deploy/ensure-services.sh``, the image); no model is ever downloaded at run time. Without
the ``tesseract`` program :func:`read_images` reads nothing and says so in one problem line.

Each image is checked before it is decoded (its header's width and height against
:attr:`OcrLimits.max_pixels`: a decompression bomb is refused unread), turned grey by Pillow (PNG, JPEG, WebP,
GIF...), cut into slices of at most :attr:`OcrLimits.slice_height` pixels at the whitest row near each cut
(a tall chapter image is one slice per screen, and no line of text is cut in two), and each slice is handed to
``tesseract stdin stdout --psm 6`` with ``OMP_THREAD_LIMIT=1`` (one core per page: the crawl shares the
machine). Cost: about 3 ms of CPU per character recognised (Tesseract 5.3's LSTM on ``chi_sim``: each
character, scaled to the network's 48-pixel rows, is 16 steps of a 512-cell LSTM), so a 2,500-character
chapter costs 7-8 s; :attr:`OcrLimits.max_seconds` bounds one page.

:attr:`OcrLimits.max_chars` reads only what a decision needs: the lines of text in each image are found
from its rows of ink (no OCR), and reading stops at the end of the line where about that many characters
have been read, in the first image or a later one. A copied chapter is recognised from its first few hundred
characters as surely as from all of them (docs/downloads.md measures it), at a fraction of the CPU.
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
    max_chars: int = 0  # stop after the line where about this many characters were read (0: read all)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z_]+(\+[a-z_]+)*", self.languages):
            raise ValueError(f"OCR languages must look like chi_sim+chi_tra, not {self.languages!r}")
        if self.max_pixels < 1 or self.max_seconds <= 0 or self.slice_height < 100 or self.max_chars < 0:
            raise ValueError(
                "OCR limits: max_pixels >= 1, max_seconds > 0, slice_height >= 100, max_chars >= 0"
            )


@dataclass(frozen=True)
class OcrReading:
    """The text of a page's images in order (a line per line of text), and what could not be read;
    ``sampled``: reading stopped at :attr:`OcrLimits.max_chars`, the rest left unread on purpose."""

    text: str
    images_read: int
    problems: tuple[str, ...]
    sampled: bool = False


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
    read = chars = 0
    sampled = False
    for name, data in images:
        wanted = limits.max_chars - chars if limits.max_chars else None
        if wanted is not None and wanted <= 0:
            sampled = True
            break
        try:
            slices, cut = _grey_slices(data, limits, wanted)
            sampled = sampled or cut
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
            chars += len("".join(text.split()))
        if time.monotonic() >= deadline or cut:
            break
    return OcrReading("\n".join(texts), read, tuple(problems), sampled)


class _Unreadable(Exception):
    pass


def _grey_slices(data: bytes, limits: OcrLimits, wanted: int | None) -> tuple[list[bytes], bool]:
    """The image as grey PNG slices, each at most ``limits.slice_height`` high, cut at white rows; with
    ``wanted`` characters, only its top down to the line where about that many are read (and True)."""
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
    bottom = height if wanted is None else _rows_holding(grey, wanted)
    slices: list[bytes] = []
    top = 0
    while top < bottom:
        end = min(bottom, top + limits.slice_height)
        if end < bottom:
            end = _whitest_row(grey, max(top + 1, end - _FIND_CUT_ROWS), end)
        out = io.BytesIO()
        grey.crop((0, top, width, end)).save(out, format="PNG")
        slices.append(out.getvalue())
        top = end
    return slices, bottom < height


def _rows_holding(grey: object, wanted: int) -> int:
    """The row below the line of text where ``wanted`` characters are reached (the image's height when it
    holds fewer). Lines are the runs of rows with ink (more than 0.5 % of the row darker than 128), their
    width from the first to the last column with two dark pixels in the line; a line's characters are that
    width over the advance, a CJK character being square and its ink about 87 % of it high."""
    import numpy as np
    from PIL import Image

    assert isinstance(grey, Image.Image)
    ink = np.asarray(grey) < 128
    inked_rows = np.flatnonzero(ink.sum(axis=1) > max(2, grey.width // 200))
    if inked_rows.size == 0:
        return grey.height
    breaks = np.flatnonzero(np.diff(inked_rows) > 1)
    starts = np.concatenate(([inked_rows[0]], inked_rows[breaks + 1]))
    ends = np.concatenate((inked_rows[breaks], [inked_rows[-1]])) + 1
    total = 0.0
    for number, (top, end) in enumerate(zip(starts, ends, strict=True)):
        columns = np.flatnonzero(ink[top:end].sum(axis=0) > 1)  # a lone speck of noise is no ink
        if columns.size == 0:
            continue
        total += (columns[-1] - columns[0] + 1) / (1.15 * max(1, end - top))
        if total >= wanted:
            below = starts[number + 1] if number + 1 < len(starts) else grey.height
            return int(end + below) // 2  # halfway down the gap under the line
    return grey.height


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
