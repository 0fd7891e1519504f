"""The translations ``benchmarks.meaning_data`` reads, rebuilt from their public sources with one command.

The texts are never committed (docs/meaning.md): each machine rebuilds ``$FPTRACK_MEANING_DATA`` from a copy
of the source it can reach.

    python -m benchmarks.meaning_sources PATH [--out DIR]

``PATH`` is any of:

- a checkout (or a folder laid out like one) of the public repository ``Pokfus/folio`` at a commit that holds
  ``books/three-kingdoms.js`` (the code index holds it at commit ``6f9c253173116f6bdd1ed7e780fdb37a1b0add93``;
  the newest snapshot dropped its ``books/`` folder);
- the file ``three-kingdoms.js`` itself;
- a folder of pages of that file, ``offset-<N>.json``, each the body of a JSON string literal holding the
  file's characters from ``N`` on (how a code index serves a large file, 16,000 characters a page). Pages
  need not reach the end: a chapter cut off by the last page is left out.

The file is the Wikisource transcription of C. H. Brewitt-Taylor's *San Kuo, or Romance of the Three
Kingdoms* (Kelly & Walsh, Shanghai, 1925; public domain in the United States, published before 1929) as the
folio project keeps it: a JavaScript literal whose chapters are ``{ n: N, p: P, t: "title", html: "..." }``,
the Wade-Giles names converted to pinyin by its editor. The converter keeps the text: the chapter number
span, footnote markers and tags go, paragraphs are separated by blank lines, verse lines by line breaks.
It writes ``sanguoyanyi_en_brewitt-taylor.jsonl`` (``{"chapter", "title", "text"}`` per line, by chapter)
and a README saying where the text came from, which chapters it holds and the SHA-256 of what was read.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.meaning_data import MEANING_DATA, TRANSLATIONS

__all__ = [
    "BOOK_PATH",
    "TranslatedChapter",
    "assemble_pages",
    "folio_chapters",
    "html_to_text",
    "main",
    "read_source",
    "write_translations",
]

BOOK_PATH = Path("books") / "three-kingdoms.js"
SOURCE_REPOSITORY = "Pokfus/folio"
OUTPUT_NAME = TRANSLATIONS["sanguoyanyi"][1]

_PAGE = re.compile(r"offset-(\d+)\.json$")
# One chapter of the literal; a chapter whose html string is cut off (the last page) does not match.
_CHAPTER = re.compile(
    r'\{\s*n:\s*(\d+),\s*p:\s*\d+,\s*t:\s*"((?:[^"\\]|\\.)*)",\s*html:\s*"((?:[^"\\]|\\.)*)"', re.DOTALL
)
_DROPPED = re.compile(
    r'<span class="bk-n"[^>]*>.*?</span>|<sup class="fn"[^>]*>.*?</sup>', re.DOTALL | re.IGNORECASE
)
_PARAGRAPH_END = re.compile(r"</p>|</blockquote>|</h\d>|</li>", re.IGNORECASE)
_LINE_BREAK = re.compile(r"<br\s*/?>\s*", re.IGNORECASE)
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class TranslatedChapter:
    chapter: int
    title: str
    text: str


def assemble_pages(folder: Path) -> str:
    """The file's characters from a folder of ``offset-<N>.json`` pages, in order of ``N``.

    Each page is the body of a JSON string literal (one trailing newline tolerated); where pages overlap,
    the later one's characters from its offset on are kept; a gap between pages raises ``ValueError``.
    """
    pages = sorted(
        (int(match.group(1)), path)
        for path in folder.iterdir()
        if (match := _PAGE.search(path.name)) is not None
    )
    if not pages:
        raise ValueError(f"no offset-<N>.json pages in {folder}")
    text = ""
    start = pages[0][0]
    for offset, path in pages:
        body = path.read_text(encoding="utf-8")
        body = body.removesuffix("\n")
        characters = json.loads(f'"{body}"')
        position = offset - start
        if position > len(text):
            raise ValueError(f"{path.name}: characters {start + len(text)}..{offset} are missing")
        text = text[:position] + characters
    return text


def read_source(path: Path) -> str:
    """The text of ``three-kingdoms.js`` from a checkout, the file itself or a folder of pages."""
    if path.is_dir() and (path / BOOK_PATH).is_file():
        return (path / BOOK_PATH).read_text(encoding="utf-8")
    if path.is_dir():
        return assemble_pages(path)
    return path.read_text(encoding="utf-8")


def html_to_text(markup: str) -> str:
    """The chapter's text: its number span and footnote markers dropped, tags stripped, entities decoded;
    a blank line between paragraphs, a line break between verse lines, runs of spaces made one."""
    markup = _DROPPED.sub("", markup)
    markup = _PARAGRAPH_END.sub("\n\n", markup)
    markup = _LINE_BREAK.sub("\n", markup)
    text = html.unescape(_TAG.sub("", markup))
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def folio_chapters(source: str) -> list[TranslatedChapter]:
    """Every complete chapter of the literal, by number (a chapter present twice keeps its first text)."""
    chapters: dict[int, TranslatedChapter] = {}
    for match in _CHAPTER.finditer(source):
        number = int(match.group(1))
        title = json.loads(f'"{match.group(2)}"').strip()
        text = html_to_text(json.loads(f'"{match.group(3)}"'))
        if text and number not in chapters:
            chapters[number] = TranslatedChapter(number, title, text)
    return [chapters[n] for n in sorted(chapters)]


def write_translations(source_path: Path, out: Path) -> list[TranslatedChapter]:
    """Convert the source at ``source_path`` into ``out`` (the JSONL and its README); the chapters written."""
    source = read_source(source_path)
    chapters = folio_chapters(source)
    if not chapters:
        raise ValueError(f"no complete chapter found in {source_path}")
    out.mkdir(parents=True, exist_ok=True)
    with (out / OUTPUT_NAME).open("w", encoding="utf-8") as handle:
        for c in chapters:
            handle.write(
                json.dumps({"chapter": c.chapter, "title": c.title, "text": c.text}, ensure_ascii=False)
                + "\n"
            )
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    numbers = ", ".join(str(c.chapter) for c in chapters)
    (out / "README.md").write_text(
        f"""# Development translations for benchmarks/meaning.py (never commit them)

`{OUTPUT_NAME}`: C. H. Brewitt-Taylor, *San Kuo, or Romance of the Three Kingdoms*, Kelly & Walsh,
Shanghai, 1925 (public domain in the United States: published before 1929), as transcribed by Wikisource
(https://en.wikisource.org/wiki/San_Kuo) and kept by the public repository `{SOURCE_REPOSITORY}`
(`{BOOK_PATH.as_posix()}`, whose editor converted the Wade-Giles names to pinyin). One JSON line per chapter:
`chapter`, `title`, `text` (HTML, chapter numbers and footnote markers stripped).

- Chapters: {numbers} ({len(chapters)}; {sum(len(c.text) for c in chapters):,} characters).
- Read from: `{source_path}` ({len(source):,} characters, SHA-256 `{digest}`).
- Written: {datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")} by `python -m benchmarks.meaning_sources`.

Which of them are tuned on and which held out is fixed by `benchmarks.meaning_data.split_of`
(docs/meaning.md).
""",
        encoding="utf-8",
    )
    return chapters


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("source", type=Path, help="folio checkout, three-kingdoms.js, or a folder of pages")
    parser.add_argument(
        "--out", type=Path, default=MEANING_DATA, help=f"where to write (default: {MEANING_DATA})"
    )
    args = parser.parse_args(argv)
    try:
        chapters = write_translations(args.source, args.out)
    except (OSError, ValueError) as error:
        sys.exit(f"meaning_sources: {error}")
    print(f"wrote {len(chapters)} chapters to {args.out / OUTPUT_NAME}: {[c.chapter for c in chapters]}")


if __name__ == "__main__":
    main()
