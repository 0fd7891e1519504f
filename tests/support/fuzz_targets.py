"""The fuzz targets run inside :class:`tests.support.sandbox.Sandbox`: each calls product code on one input,
checks the invariants that hold for every input, and returns a small summary (never the big output).

An input is either the value itself or a recipe the child expands, so that 50 MB inputs are not pickled
through a pipe: ``("repeat", prefix, unit, count, suffix)`` is ``prefix + unit * count + suffix`` and
``("numbered", prefix, template, count, suffix)`` puts ``template.format(i)`` for ``i`` in ``range(count)``
between them (str or bytes alike; a numbered bytes template is formatted as str and encoded in UTF-8). An
invariant that does not hold raises ``AssertionError``; the only exception a target lets through is the one
its product code documents."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

URL = "http://fuzz.test/book/1/2.html"
Input = str | bytes | tuple[Any, ...]


def warm_up() -> None:
    """Everything built lazily (the normalisation table, pinyin, charset_normalizer), before limits apply."""
    import charset_normalizer  # noqa: F401 - imported lazily by the decoder

    from fptrack.crawler.parse import parse_response  # noqa: F401
    from fptrack.fingerprint.text_fingerprints import fingerprint_text

    fingerprint_text("预热：河面上起了风，渡船摇得厉害。Warm-up 123")


def build(spec: Input) -> str | bytes:
    if not isinstance(spec, tuple):
        return spec
    kind, prefix, unit, count, suffix = spec
    if kind == "repeat":
        return prefix + unit * count + suffix  # type: ignore[no-any-return]
    if kind == "numbered":
        body = "".join(unit.format(i) for i in range(count))
        return prefix + (body.encode() if isinstance(prefix, bytes) else body) + suffix  # type: ignore[no-any-return]
    raise ValueError(f"unknown recipe {kind!r}")


def _storable(text: str, what: str) -> None:
    """Text a database keeps as it is: a str, no NUL (PostgreSQL refuses it), no lone surrogate (UTF-8 refuses
    it)."""
    assert isinstance(text, str), f"{what} is {type(text).__name__}, not str"
    assert "\x00" not in text, f"{what} holds a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise AssertionError(f"{what} holds a lone surrogate at {error.start}") from None


def _check_extracted(
    text: str, title: str, links: tuple[str, ...], max_links: int | None, max_chars: int | None
) -> None:
    from fptrack.crawler.extract import tidy_whitespace

    _storable(text, "text")
    _storable(title, "title")
    assert title == tidy_whitespace(title), "title is not tidied"
    if max_chars is not None:
        assert len(text) <= max_chars, f"text of {len(text)} characters over the {max_chars} cap"
    for line in text.split("\n") if text else ():
        assert line and line == tidy_whitespace(line), f"paragraph not tidied: {line[:80]!r}"
    if max_links is not None:
        assert len(links) <= max_links, f"{len(links)} links over the {max_links} cap"
    assert len(set(links)) == len(links), "duplicate links"
    for link in links:
        _storable(link, "link")
        assert link.startswith(("http://", "https://")) and "#" not in link, f"bad link {link[:80]!r}"


def html_page(
    spec: Input, content_type: str | None, max_links: int | None, max_chars: int | None
) -> dict[str, Any]:
    """A response body through :func:`crawler.parse.parse_response`, which never raises for bad content."""
    from scrapy.http import HtmlResponse

    from fptrack.crawler.parse import parse_response

    body = build(spec)
    assert isinstance(body, bytes)
    headers = {"Content-Type": content_type} if content_type is not None else {}
    response = HtmlResponse(URL, body=body, headers=headers)
    parsed = parse_response(
        response,
        requested_url=URL,
        fetched_at=datetime(2026, 1, 1, tzinfo=UTC),
        max_links=max_links,
        max_chars=max_chars,
    )
    page = parsed.page
    _check_extracted(page.text, page.title, parsed.links, max_links, max_chars)
    _storable(page.error, "error")
    _storable(page.note, "note")
    assert page.text or page.error or not body.strip() or page.status == 200, "no text and no reason"
    return {
        "bytes": len(body),
        "chars": len(page.text),
        "links": len(parsed.links),
        "error": page.error,
        "note": page.note,
        "encoding": page.encoding,
        "text": page.text[:2000],
    }


def extract(spec: Input, base_url: str, max_links: int | None, max_chars: int | None) -> dict[str, Any]:
    """Markup through :func:`crawler.extract.extract_main_text`, which never raises on malformed markup."""
    from fptrack.crawler.extract import extract_main_text

    html = build(spec)
    assert isinstance(html, str)
    extracted = extract_main_text(html, base_url, max_links=max_links, max_chars=max_chars)
    _check_extracted(extracted.text, extracted.title, extracted.links, max_links, max_chars)
    return {
        "chars": len(extracted.text),
        "links": len(extracted.links),
        "text": extracted.text[:2000],
        "notes": extracted.notes,
        "error": extracted.error,
    }


def decode(spec: Input, declared: str | None) -> dict[str, Any]:
    """Bytes through :func:`fingerprint.encoding.decode_bytes`: text, or its documented
    ``UndecodableError``."""
    from fptrack.fingerprint.encoding import UndecodableError, decode_bytes, normalise_encoding_name

    data = build(spec)
    assert isinstance(data, bytes)
    try:
        decoded = decode_bytes(data, declared=declared)
    except UndecodableError as error:
        _storable(str(error), "error")
        return {"undecodable": str(error)}
    _storable(decoded.text, "decoded text")
    assert normalise_encoding_name(decoded.encoding) == decoded.encoding, f"odd encoding {decoded.encoding!r}"
    return {
        "undecodable": None,
        "encoding": decoded.encoding,
        "chars": len(decoded.text),
        "text": decoded.text if len(decoded.text) <= 100_000 else None,
    }


def normalise(spec: Input, provenance: bool) -> dict[str, Any]:
    """:func:`fingerprint.normalize.normalize`: kept characters only, an offset map that points back into the
    source, idempotent; with ``provenance`` (small inputs) each output character comes from its source
    character."""
    import numpy as np

    from fptrack.fingerprint.normalize import is_kept_char, normalize

    text = build(spec)
    assert isinstance(text, str)
    result = normalize(text)
    out, offsets = result.text, result.offsets
    assert isinstance(out, str) and len(offsets) == len(out), "offsets and text differ in length"
    if len(out):
        assert offsets.dtype == np.int64
        assert int(offsets[0]) >= 0 and int(offsets[-1]) < len(text), "offset outside the source"
        assert bool(np.all(np.diff(offsets) >= 0)), "offsets go backwards"
        assert result.original_span(0, len(out))[1] <= len(text)
    again = normalize(out)
    assert again.text == out, "normalising twice changes the text"
    if provenance:
        assert all(is_kept_char(ch) for ch in out), "a dropped character was kept"
        for position, ch in enumerate(out):
            source = text[int(offsets[position])]
            assert ch in normalize(source).text, f"{ch!r} does not come from {source!r}"
    return {"chars": len(text), "normalised": len(out)}


def chapters(spec: Input) -> dict[str, Any]:
    """:func:`compare.chapters.split_chapters`: chapters in order, back to back, covering the text from the
    first chapter to the end; what comes before is short front matter; no chapter without text only for a text
    without words."""
    import re

    from fptrack.compare.chapters import MIN_FRONT_MATTER, split_chapters

    text = build(spec)
    assert isinstance(text, str)
    spans = split_chapters(text)
    words = re.compile(r"\w")
    if not spans:
        assert not words.search(text), "a text with words gave no chapter"
        return {"chars": len(text), "chapters": 0}
    assert spans[-1].end == len(text), "the last chapter does not reach the end"
    for before, after in itertools.pairwise(spans):
        assert before.end == after.start, f"gap or overlap between chapters {before.index} and {after.index}"
    for span in spans:
        assert 0 <= span.start < span.end, f"empty chapter {span.index}"
        assert len(span.title) <= 1000, f"chapter {span.index} has a title of {len(span.title)} characters"
    numbers = [span.index for span in spans]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))) and numbers[0] in (0, 1), numbers[:5]
    if spans[0].start:
        front = sum(1 for _ in zip(range(MIN_FRONT_MATTER), words.finditer(text, 0, spans[0].start)))
        assert front < MIN_FRONT_MATTER, "front matter with words was dropped"
    return {"chars": len(text), "chapters": len(spans)}


def fingerprints(spec: Input) -> dict[str, Any]:
    """:func:`fingerprint.text_fingerprints.fingerprint_text` end to end: one initial per normalised
    character, a 64-bit Simhash, codes that fit a signed BIGINT at positions inside the text."""
    from fptrack.fingerprint.text_fingerprints import fingerprint_text

    text = build(spec)
    assert isinstance(text, str)
    result = fingerprint_text(text)
    size = len(result.normalized.text)
    assert len(result.initials) == size, "not one initial per normalised character"
    assert result.simhash is None or 0 <= result.simhash < 2**64, "Simhash outside 64 bits"
    for kind, codes in result.index_codes().items():
        for code, position in codes:
            assert -(2**63) <= code < 2**63, f"{kind} code outside a BIGINT"
            assert 0 <= position <= max(size, len(result.initials)), (
                f"{kind} position {position} outside the text"
            )
    return {
        "chars": len(text),
        "normalised": size,
        "codes": sum(len(c) for c in result.index_codes().values()),
    }
