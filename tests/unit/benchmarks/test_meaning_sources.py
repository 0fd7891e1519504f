"""benchmarks.meaning_sources rebuilds the translation file from the folio literal: from a checkout, the file
itself or pages of it, keeping complete chapters only, text without tags or footnote markers (tiny literals
of its own: no source text in the repository)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.meaning_data import load_translations
from benchmarks.meaning_sources import (
    BOOK_PATH,
    assemble_pages,
    folio_chapters,
    html_to_text,
    main,
    read_source,
    write_translations,
)

LITERAL = (
    "window.FOLIO_BOOKS_IN = window.FOLIO_BOOKS_IN || [];\n"
    "window.FOLIO_BOOKS_IN.push({\n"
    '  id: "three-kingdoms",\n'
    "  chapters: [\n"
    '    { n: 1, p: 1, t: "Feast in the Garden: Brotherhood Sworn.", html: "<p><span class=\\"bk-n\\" '
    'data-n=\\"1\\">1</span></p><p>Empires wax and wane. Said Fei, \\u201cWe three swear.\\u201d</p>\\n'
    "<blockquote>\\n<p>Two heroes new,<br>\\nRide boldly forth.</p>\\n</blockquote>\\n<p>Of old"
    '<sup class=\\"fn\\" data-fn=\\"1\\"></sup> Dai Jia &amp; Yi Yin.</p>" },\n'
    '    { n: 2, p: 1, t: "An Official is Thrashed.", html: "<p>Zhang Fei <i>thrashed</i> him.</p>", '
    'notes: ["1750 B.C."] },\n'
    '    { n: 3, p: 1, t: "Cut off.", html: "<p>This chapter never ends'
)


def test_chapters_of_the_literal_are_complete_ones_with_plain_text() -> None:
    chapters = folio_chapters(LITERAL)
    assert [c.chapter for c in chapters] == [1, 2]  # chapter 3 is cut off: left out
    first = chapters[0]
    assert first.title == "Feast in the Garden: Brotherhood Sworn."
    assert first.text == (
        "Empires wax and wane. Said Fei, \u201cWe three swear.\u201d\n\n"
        "Two heroes new,\nRide boldly forth.\n\n"
        "Of old Dai Jia & Yi Yin."
    )
    assert chapters[1].text == "Zhang Fei thrashed him."


def test_html_to_text_drops_numbers_and_footnote_markers_only() -> None:
    assert html_to_text('<p><span class="bk-n" data-n="9">9</span></p><p>A  b</p>') == "A b"
    assert html_to_text('<p>x<sup class="fn" data-fn="2"></sup> y</p>') == "x y"


def _pages(tmp_path: Path, text: str, size: int) -> Path:
    folder = tmp_path / "pages"
    folder.mkdir()
    for offset in range(0, len(text), size):
        body = json.dumps(text[offset : offset + size], ensure_ascii=False)[1:-1]
        (folder / f"offset-{offset:06d}.json").write_text(body + "\n", encoding="utf-8")
    return folder


def test_pages_assemble_to_the_file_and_a_gap_is_refused(tmp_path: Path) -> None:
    folder = _pages(tmp_path, LITERAL, 97)
    assert assemble_pages(folder) == LITERAL
    assert read_source(folder) == LITERAL
    (folder / "offset-000194.json").unlink()
    with pytest.raises(ValueError, match="missing"):
        assemble_pages(folder)


def test_a_checkout_the_file_and_pages_give_the_same_jsonl(tmp_path: Path) -> None:
    checkout = tmp_path / "folio"
    (checkout / BOOK_PATH).parent.mkdir(parents=True)
    (checkout / BOOK_PATH).write_text(LITERAL, encoding="utf-8")
    outputs = []
    for i, source in enumerate((checkout, checkout / BOOK_PATH, _pages(tmp_path, LITERAL, 50))):
        out = tmp_path / f"out{i}"
        write_translations(source, out)
        outputs.append((out / "sanguoyanyi_en_brewitt-taylor.jsonl").read_text(encoding="utf-8"))
        readme = (out / "README.md").read_text(encoding="utf-8")
        assert "Brewitt-Taylor" in readme and "Chapters: 1, 2 (2;" in readme and "SHA-256" in readme
    assert outputs[0] == outputs[1] == outputs[2]
    assert load_translations(tmp_path / "out0") == {
        ("sanguoyanyi", 1): ("en", folio_chapters(LITERAL)[0].text),
        ("sanguoyanyi", 2): ("en", "Zhang Fei thrashed him."),
    }


def test_the_command_line_writes_and_refuses_a_source_without_chapters(tmp_path: Path) -> None:
    source = tmp_path / "three-kingdoms.js"
    source.write_text(LITERAL, encoding="utf-8")
    main([str(source), "--out", str(tmp_path / "out")])
    assert (tmp_path / "out" / "sanguoyanyi_en_brewitt-taylor.jsonl").is_file()
    source.write_text("window.FOLIO_BOOKS_IN = [];", encoding="utf-8")
    with pytest.raises(SystemExit, match="no complete chapter"):
        main([str(source), "--out", str(tmp_path / "empty")])
