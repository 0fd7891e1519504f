"""Fuzzing and hostile input: the HTML parser and extractor, the charset decoder, the normaliser,
the chapter splitter and ``fingerprint_text`` end to end, on a fixed budget.

Every input runs in a sandboxed child (:mod:`tests.support.sandbox`) with a 1 GB address space: a hang (no
answer within the time limit), a crash of the child or a ``MemoryError`` fails the test, as does any exception
but the one the target documents (``UndecodableError`` for the decoder; the others never raise) and any broken
invariant (:mod:`tests.support.fuzz_targets`). Hypothesis draws the random inputs (``max_examples`` and a
deadline per test); the adversarial giants (9 MB of nested ``<div>``, 50 MB of one character, a million
attributes, 100,000 levels of nesting, entity bombs, a million links) are plain examples. A report of what was
fed is printed at the end (``make reliability`` shows it)."""

from __future__ import annotations

import codecs
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.sandbox import Sandbox, SandboxFailure, TargetRaised

MEMORY_LIMIT = 1024**3
SMALL_TIMEOUT = 30.0  # seconds of wall-clock time for one small input on a loaded machine: more is a hang
BIG_TIMEOUT = 240.0  # for one adversarial giant
MAX_LINKS, MAX_CHARS = (
    5000,
    300_000,
)  # the crawler's defaults (FPTRACK_CRAWL_MAX_LINKS, FPTRACK_MAX_PAGE_CHARS)
FUZZ = settings(
    max_examples=200,
    deadline=timedelta(seconds=SMALL_TIMEOUT + 5),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

_fed: dict[str, list[float]] = {}  # target -> [inputs, bytes, seconds]
_sandbox: Sandbox | None = None


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    global _sandbox
    _sandbox = Sandbox(memory_bytes=MEMORY_LIMIT)
    yield
    _sandbox.close()
    print("\nfuzzing report: what each target was fed (sandbox: 1 GB address space)")
    print(f"  {'target':<46} {'inputs':>7} {'bytes':>14} {'seconds':>8}")
    for target, (count, size, seconds) in sorted(_fed.items()):
        print(f"  {target:<46} {int(count):>7} {int(size):>14,} {seconds:>8.1f}")


def _size(value: Any) -> int:
    if isinstance(value, tuple):  # a recipe: the size it expands to
        kind, prefix, unit, count, suffix = value
        each = len(unit.format(count)) if kind == "numbered" else len(unit)
        return len(prefix) + each * count + len(suffix)
    return len(value) if isinstance(value, (str, bytes)) else 0


def run(target: str, *args: Any, label: str = "", timeout: float = SMALL_TIMEOUT) -> Any:
    """``fuzz_targets.<target>(*args)`` in the sandbox; counted in the report under ``label`` (else the
    target)."""
    assert _sandbox is not None
    started = time.monotonic()
    try:
        return _sandbox.call(target, *args, timeout=timeout)
    finally:
        entry = _fed.setdefault(label or target, [0, 0, 0.0])
        entry[0] += 1
        entry[1] += _size(args[0])
        entry[2] += time.monotonic() - started


# ------------------------------------------------------------------------------------------------- inputs

FRAGMENTS = [
    "<html>",
    "</html>",
    "<head>",
    "<body>",
    "</body>",
    "<div>",
    "</div>",
    '<div id="content">',
    "<p>",
    "</p>",
    "<br>",
    "<br/>",
    "</br>",
    "<span>",
    '<a href="/next.html">下一章</a>',
    '<a href="',
    '">',
    "</a>",
    "<a href=#x>",
    '<a href="javascript:alert(1)">',
    '<a href="http://[::1">',
    "<base href='//other.test/'>",
    "<script>document.write('<div>');</script>",
    "<script>",
    "</script>",
    "<style>.gg{display:none}</style>",
    "<style>",
    "<template><p>藏</p></template>",
    '<div style="display:none">',
    "<div hidden>",
    '<p class="nav">',
    "<title>第一章 风起_书名_书友网</title>",
    "<h1>第一章</h1>",
    "<!--",
    "-->",
    "<![CDATA[",
    "]]>",
    "<?xml ?>",
    '<?xml version="1.0" encoding="gbk"?>',
    '<meta charset="big5">',
    '<meta http-equiv="Content-Type" content=',
    "&nbsp;",
    "&amp;",
    "&#0;",
    "&#xD800;",
    "&#x110000;",
    "&#99999999999;",
    "&lt;div&gt;",
    "&unknown;",
    "<",
    ">",
    "'",
    '"',
    "=",
    "<div class='unclosed>",
    '<p title="a>b">',
    "<table><tr><td>",
    "</td></tr></table>",
    "<pre>  两个\n  空格</pre>",
    "<textarea>",
    "<svg><text>矢量</text></svg>",
    "<math>",
    "<select><option>",
    "<iframe src=x>",
    "<noscript>",
    "<plaintext>",
    "<xmp>",
    "\u3000",
    "\u200b",
    "\u202e",
    "\ufeff",
    "\x00",
    "河面上起了风，渡船摇得厉害，老周把缆绳又绕了两圈。",
    "對岸的燈一盞一盞亮起來。",
    "ｗww．ｕｕkａnｓhu．coｍ",
    "章节错误,点此举报",
    "The storm came at night, and the lighthouse keeper climbed the stairs.",
    "مرحبا بالعالم",
]
CONTENT_TYPES = [
    "text/html",
    "text/html; charset=utf-8",
    "text/html; charset=gbk",
    "text/html; charset=big5",
    "text/html; charset=utf-16",
    "text/html; charset=latin-1",
    "text/html; charset=bogus",
    "text/html; charset=",
    "text/plain",
    "text/plain; charset=gb2312",
    "application/xhtml+xml",
    "application/xml",
    None,
]
CHARSETS = [
    None,
    "utf-8",
    "utf8",
    "gbk",
    "gb2312",
    "gb18030",
    "big5",
    "big5-hkscs",
    "latin-1",
    "ascii",
    "utf-16",
    "utf-16le",
    "utf-32",
    "utf-7",
    "shift_jis",
    "hz",
    "iso-2022-jp",
    "cp1252",
    "bogus",
    "",
]
CODECS = ["utf-8", "gb18030", "big5", "utf-16", "latin-1", "shift_jis"]
SPECIAL_CHARS = (
    "\u0301\u0308\u20dd"  # combining marks
    "ＡＢＣａｂｃ１２３！？"  # full-width
    "\u200b\u200c\u200d\u2060\ufeff"  # zero-width
    "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"  # direction marks
    "ﬁﬂ①⑩㍻™İẞǅ"  # compatibility forms and case oddities
    "\ud800\udfff\udbff"  # lone surrogates (only the normaliser takes them: no decoder produces one)
    "臺灣萬裏雲龍書讀说風"  # Traditional and Simplified
    "(nèi)^~*"  # the artefact patterns' delimiters
)


def _longer(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Hypothesis keeps most drawn strings short: repeat some of them, up to 40 times, for inputs of
    kilobytes."""
    return st.builds(lambda value, times: value * times, strategy, st.integers(1, 40) | st.just(1))


# every code point, surrogates too
any_text = _longer(st.text(st.characters(blacklist_categories=()), max_size=300))
special_text = _longer(st.text(st.sampled_from(SPECIAL_CHARS) | st.characters(), max_size=300))
cjk_text = _longer(
    st.text(
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF) | st.sampled_from("，。！？、\n "),
        max_size=300,
    )
)
random_bytes = _longer(st.binary(max_size=3000))
markup = st.lists(
    st.sampled_from(FRAGMENTS)
    | st.text(max_size=40)
    | st.integers(1, 3000).map(lambda n: "<div>" * n)  # deep nesting
    | st.integers(1, 200_000).map(lambda n: f'<div class="{"x" * n}">')  # huge attributes
    # many attributes
    | st.integers(1, 2000).map(lambda n: "<p " + " ".join(f"a{i}=v" for i in range(n)) + ">"),
    max_size=60,
).map("".join)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Response bodies: markup in some encoding (lossily: mixed encodings), raw bytes, or markup cut short."""
    kind = draw(st.sampled_from(["encoded", "mixed", "binary", "truncated", "bom"]))
    if kind == "binary":
        return draw(random_bytes)
    text = draw(markup)
    encoded = text.encode(draw(st.sampled_from(CODECS)), errors="replace")
    if kind == "mixed":
        encoded += draw(markup).encode(draw(st.sampled_from(CODECS)), errors="replace")
    if kind == "truncated":
        encoded = encoded[: draw(st.integers(0, max(0, len(encoded) - 1)))]
    if kind == "bom":
        encoded = draw(st.sampled_from([codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE])) + encoded
    return encoded


@st.composite
def byte_inputs(draw: st.DrawFn) -> bytes:
    """Bytes for the decoder: random, BOM + anything, text in one codec, cut inside a multi-byte character, or
    two codecs glued together."""
    kind = draw(st.sampled_from(["random", "bom", "text", "truncated", "mixed"]))
    if kind == "random":
        return draw(random_bytes)
    if kind == "bom":
        bom = draw(st.sampled_from([codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE]))
        return bom + draw(random_bytes | cjk_text.map(str.encode))
    text = draw(cjk_text | special_text.filter(lambda t: not any("\ud800" <= c <= "\udfff" for c in t)))
    data = text.encode(draw(st.sampled_from(CODECS)), errors="replace")
    if kind == "truncated":
        return data[: draw(st.integers(0, len(data)))]
    if kind == "mixed":
        return data + draw(cjk_text).encode(draw(st.sampled_from(CODECS)), errors="replace")
    return data


@st.composite
def books(draw: st.DrawFn) -> str:
    """Texts with headings: none, some, runs of empty ones, headings inside lines, odd numerals."""
    headings = st.sampled_from(
        [
            "第一章 风起",
            "第12回",
            "第１２章：夜",
            "第三卷",
            "第二节",
            "楔子",
            "尾聲",
            "番外 一",
            "Chapter 7 Storm",
            "CHAPTER XII",
            "chapter 3",
            "第零章",
            "第" + "十" * 70 + "章",
            "  第五章  ",
            "\u3000第六章",
        ]
    )
    lines = draw(st.lists(headings | cjk_text | special_text | st.just(""), max_size=80))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- fuzzing


@FUZZ
@given(body=bodies(), content_type=st.sampled_from(CONTENT_TYPES))
def test_fuzz_html_parser_and_extractor(body: bytes, content_type: str | None) -> None:
    run("html_page", body, content_type, MAX_LINKS, MAX_CHARS, label="html_page (parse_response)")


@FUZZ
@given(html=markup | any_text.filter(lambda t: not any("\ud800" <= c <= "\udfff" for c in t)))
def test_fuzz_extractor_on_text(html: str) -> None:
    run("extract", html, "http://fuzz.test/a/b.html", 50, 2000, label="extract_main_text")


@FUZZ
@given(data=byte_inputs(), declared=st.sampled_from(CHARSETS))
def test_fuzz_charset_decoder(data: bytes, declared: str | None) -> None:
    run("decode", data, declared, label="decode_bytes")


@FUZZ
@given(
    text=_longer(st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=300)) | cjk_text,
    declared=st.sampled_from(CHARSETS),
)
@example(text="plain ASCII page", declared="utf-16")
@example(text="a+b-c", declared="utf-7")
def test_fuzz_utf8_text_survives_any_claim(text: str, declared: str | None) -> None:
    """Valid UTF-8 without control characters reads back as itself whatever charset it claims (a leading
    U+FEFF is read as the byte-order mark it is)."""
    result = run("decode", text.encode("utf-8"), declared, label="decode_bytes (UTF-8 round trip)")
    assert result["undecodable"] is None, result
    assert result["text"] == text.removeprefix("\ufeff"), (result["encoding"], result["text"][:80])


@FUZZ
@given(text=any_text | special_text)
def test_fuzz_normaliser(text: str) -> None:
    run("normalise", text, True, label="normalize")


@FUZZ
@given(text=books())
def test_fuzz_chapter_splitter(text: str) -> None:
    run("chapters", text, label="split_chapters")


@settings(FUZZ, max_examples=100)
@given(text=cjk_text | special_text | books())
def test_fuzz_fingerprint_text(text: str) -> None:
    run("fingerprints", text, label="fingerprint_text")


# ----------------------------------------------------------------------------------- adversarial giants


CHAPTER = "河面上起了风，渡船摇得厉害，老周把缆绳又绕了两圈。对岸的灯一盏一盏亮起来，像是有人在数着什么。"


def giant(target: str, *args: Any, label: str) -> Any:
    try:
        return run(target, *args, label=label, timeout=BIG_TIMEOUT)
    except (SandboxFailure, TargetRaised) as failure:
        pytest.fail(f"{label}: {failure}", pytrace=False)


def test_a_9_mb_page_of_nested_divs() -> None:
    page = ("repeat", b"<html><body>", b"<div>", 1_800_000, f"<p>{CHAPTER}</p>".encode())
    result = giant(
        "html_page", page, "text/html; charset=utf-8", MAX_LINKS, MAX_CHARS, label="9 MB nested divs"
    )
    assert CHAPTER in result["text"] and "flattened" in result["note"], result


def test_100000_levels_of_nesting_keep_the_chapter() -> None:
    html = ("repeat", "<html><body>", "<div><span>", 50_000, f"<p>{CHAPTER}</p><p>{CHAPTER}</p>")
    result = giant("extract", html, "http://fuzz.test/", MAX_LINKS, MAX_CHARS, label="100k levels of nesting")
    assert CHAPTER in result["text"], result


def test_50_mb_of_one_character() -> None:
    giant("decode", ("repeat", b"", "字".encode(), 17_000_000, b""), None, label="50 MB of one character")
    giant("chapters", ("repeat", "", "字", 50_000_000, "\n第1章\n正文"), label="50 MB of one character")
    giant(
        "html_page",
        ("repeat", b"<p>", b"a", 10_000_000, b""),
        "text/html",
        MAX_LINKS,
        MAX_CHARS,
        label="10 MB of one character (the crawl's size cap)",
    )
    # a page's text is cut to 300,000 characters; one character repeated is winnowing's worst case (a code per
    # position: ~200 bytes per character, so a 5M-character chapter of it needs more than this sandbox's 1 GB)
    giant("fingerprints", ("repeat", "", "字", MAX_CHARS, ""), label="300k of one character, fingerprinted")


def test_a_million_attributes() -> None:
    page = (
        "numbered",
        b"<html><body><div ",
        "a{}=x ",
        1_000_000,
        f'class="gg">广告</div><p>{CHAPTER}</p>'.encode(),
    )
    result = giant("html_page", page, "text/html", MAX_LINKS, MAX_CHARS, label="a million attributes")
    assert "cut to their first attributes" in result["note"], result


def test_a_million_links() -> None:
    page = ("numbered", b"<html><body>", "<a href={}>", 1_000_000, f"</a><p>{CHAPTER}</p>".encode())  # 15 MB
    result = giant("html_page", page, "text/html", MAX_LINKS, MAX_CHARS, label="a million links")
    assert result["links"] == MAX_LINKS and CHAPTER in result["text"], result


def test_entity_bombs_do_not_expand() -> None:
    """A billion-laughs DOCTYPE (HTML has no custom entities: nothing expands) and a page of a million entity
    references (each one character)."""
    laughs = "".join(f'<!ENTITY l{i} "' + f"&l{i - 1};" * 10 + '">' for i in range(1, 10))
    bomb = f'<!DOCTYPE html [<!ENTITY l0 "ha">{laughs}]><html><body><p>&l9;&l9;</p><p>{CHAPTER}</p>'
    result = giant("html_page", bomb.encode(), "text/html", MAX_LINKS, MAX_CHARS, label="billion laughs")
    assert result["chars"] < 10_000, result
    refs = ("repeat", b"<p>", b"&amp;&#x5b57;&nbsp;", 1_000_000, b"</p>")
    result = giant("html_page", refs, "text/html", MAX_LINKS, MAX_CHARS, label="a million entity references")
    assert result["chars"] <= MAX_CHARS, result


def test_huge_numbers_of_headings() -> None:
    giant("chapters", ("repeat", "", "第1章\n", 200_000, "正文"), label="200k empty headings")
    giant("chapters", ("numbered", "", "第{}章\n正文。\n", 200_000, ""), label="200k chapters")
    giant("chapters", ("repeat", "", "字字字字字字字字。\n", 1_000_000, ""), label="1M lines, no heading")
