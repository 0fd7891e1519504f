"""Generated novels for the download tests: whole books of many chapters, each chapter's prose its own
(sentences of characters dealt from the demo prose's vocabulary), never the development corpus."""

from __future__ import annotations

import random

from tests.support.copy_kinds import vocabulary

_NUMERALS = "一二三四五六七八九十"


def chinese_number(number: int) -> str:
    """1..99 in Chinese numerals (第十二章)."""
    tens, ones = divmod(number, 10)
    return (("" if tens == 1 else _NUMERALS[tens - 1]) + "十" if tens else "") + (
        _NUMERALS[ones - 1] if ones else ""
    )


def book(seed: int, chapters: int, *, length: int = 1500, title: str = "") -> str:
    """A novel: a title line, then ``chapters`` chapters of about ``length`` characters under headings
    ``第N章 …``, paragraphs indented with two ideographic spaces."""
    rng = random.Random(seed)
    pool = vocabulary()
    parts = [title or f"无名之书{seed}"]
    for number in range(1, chapters + 1):
        name = "".join(rng.choice(pool) for _ in range(4))
        paragraphs = []
        total = 0
        while total < length:
            sentences = [
                "".join(rng.choice(pool) for _ in range(rng.randint(8, 30))) + rng.choice("。！？")
                for _ in range(rng.randint(2, 5))
            ]
            paragraph = "".join(sentences)
            paragraphs.append("\u3000\u3000" + paragraph)
            total += len(paragraph)
        parts.append(f"第{chinese_number(number)}章 {name}\n" + "\n".join(paragraphs))
    return "\n".join(parts) + "\n"
