"""Chapter text drawn as images (图片章节), made with Pillow and the CJK font the set-up installs, for tests
and benchmarks: :func:`chapter_png` draws lines of text on a white page, with slight noise if asked."""

from __future__ import annotations

import io
import random
from functools import lru_cache
from pathlib import Path

__all__ = ["CJK_FONTS", "chapter_png", "cjk_font_path"]

# fonts-wqy-microhei (installed by deploy/ensure-services.sh and the image), else Noto CJK
CJK_FONTS = (
    Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
    Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
    Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"),
)


@lru_cache(maxsize=1)
def cjk_font_path() -> Path:
    for path in CJK_FONTS:
        if path.exists():
            return path
    raise FileNotFoundError("no CJK font: apt-get install fonts-wqy-microhei")


def chapter_png(
    text: str, *, size: int = 22, width: int = 800, noise: float = 0.0, seed: int = 0, fmt: str = "PNG"
) -> bytes:
    """``text`` drawn in black on white, ``size``-pixel characters, wrapped to ``width`` pixels, each pixel
    flipped to a random grey with probability ``noise``; encoded as ``fmt`` (PNG, JPEG, WEBP)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(str(cjk_font_path()), size)
    per_line = max(1, (width - 2 * size) // size)
    lines: list[str] = []
    for paragraph in text.splitlines():
        paragraph = paragraph.strip()
        while paragraph:
            lines.append(paragraph[:per_line])
            paragraph = paragraph[per_line:]
    step = int(size * 1.5)
    image = Image.new("L", (width, step * len(lines) + 2 * size), 255)
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        draw.text((size, size + step * number), line, font=font, fill=0)
    if noise > 0:
        rng = random.Random(seed)
        pixels = image.load()
        assert pixels is not None
        for _ in range(int(noise * image.width * image.height)):
            x, y = rng.randrange(image.width), rng.randrange(image.height)
            pixels[x, y] = rng.randrange(0, 256)
    out = io.BytesIO()
    image.convert("RGB").save(out, format=fmt)
    return out.getvalue()
