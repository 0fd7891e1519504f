"""Decode bytes of unknown encoding into text: UTF-8, GB18030 (GBK, GB2312) and Big5, detected, not guessed.

Order of evidence: a byte-order mark; a declared charset (HTTP header, ``<meta charset>``) when the bytes
decode under it; strict UTF-8; then every candidate that decodes strictly, ranked by charset_normalizer's
coherence check on a sample. Binary data (NUL bytes, many control bytes) is refused, never decoded into junk,
also after a byte-order mark (a BOM followed by an image is still an image).

The text returned holds no NUL character (PostgreSQL refuses NUL in text; SQLite would keep it): a few stray
NULs in otherwise readable text are damage and are dropped (at most :func:`stray_nul_limit` of them), more
make the input binary. This is the one place where bytes become text for works, checks and crawled pages
alike, so both database backends see the same text, or the same refusal."""

from __future__ import annotations

import codecs
import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "DecodedText",
    "UndecodableError",
    "decode_bytes",
    "looks_binary",
    "normalise_encoding_name",
    "refuse_binary_start",
    "stray_nul_limit",
    "without_stray_nuls",
]

_CANDIDATES = ("utf-8", "gb18030", "big5")
_DOUBLE_BYTE_CJK = ("gb18030", "big5", "big5hkscs")
_SAMPLE_BYTES = 64 * 1024
_ALIASES = {
    "gb2312": "gb18030",  # pirate pages label GBK text as gb2312; gb18030 is a strict superset
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "cp936": "gb18030",
    "big5-hkscs": "big5hkscs",
    "x-x-big5": "big5",
    "utf8": "utf-8",
}
_CONTROL = bytes(range(9)) + bytes(range(14, 32))
# Characters no readable text is made of: C0 controls but tab, line feed, form feed and carriage return, and
# the replacement character; for UTF-16 also unassigned and private-use code points, which binary junk read as
# UTF-16 mostly gives.
_UNREADABLE_CHARS = re.compile("[\x00-\x08\x0b\x0e-\x1f\ufffd]")
_UNREADABLE_CATEGORIES = frozenset({"Cn", "Co", "Cs"})


_BINARY = "binary data, not text (NUL or control bytes)"


class UndecodableError(ValueError):
    """The bytes are not text in any supported encoding (binary, or too damaged to read)."""


@dataclass(frozen=True)
class DecodedText:
    text: str
    encoding: str


def normalise_encoding_name(name: str | None) -> str | None:
    """A Python codec name for a declared charset, or None when it is unknown."""
    if not name:
        return None
    cleaned = name.strip().strip("\"'").lower()
    cleaned = _ALIASES.get(cleaned, cleaned)
    try:
        return codecs.lookup(cleaned).name
    except LookupError:
        return None


def stray_nul_limit(length: int) -> int:
    """How many NUL bytes (or characters) ``length`` of text may hold as damage: 8, or one in a thousand."""
    return max(8, length // 1000)


def without_stray_nuls(data: bytes) -> bytes:
    """``data`` without its NUL bytes when there are only a few (a damaged text file or page); unchanged when
    there are more (binary data, which :func:`looks_binary` then refuses)."""
    nuls = data.count(0)
    return data.replace(b"\x00", b"") if 0 < nuls <= stray_nul_limit(len(data)) else data


def looks_binary(data: bytes) -> bool:
    """True for bytes that are not text: a NUL byte anywhere (drop stray ones first:
    :func:`without_stray_nuls`), or more control bytes than one in a hundred in the first 64 KB."""
    if b"\x00" in data:
        return True
    sample = data[:_SAMPLE_BYTES]
    controls = len(sample) - len(sample.translate(None, _CONTROL))
    return controls > max(8, len(sample) // 100)


def refuse_binary_start(start: bytes, max_length: int) -> None:
    """Raise :class:`UndecodableError` when every input of at most ``max_length`` bytes that begins with
    ``start`` is one :func:`decode_bytes` refuses as binary (too many NULs for any such length, or a first 64
    KB of control bytes): a reader of an endless stream such as ``/dev/zero`` stops at its first megabyte."""
    if start.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE)):
        return
    body = start.removeprefix(codecs.BOM_UTF8)
    visible = body.replace(b"\x00", b"")
    too_many_nuls = len(body) - len(visible) > stray_nul_limit(max_length)
    if too_many_nuls or (len(visible) >= _SAMPLE_BYTES and looks_binary(visible[:_SAMPLE_BYTES])):
        raise UndecodableError(_BINARY)


def decode_bytes(data: bytes, declared: str | None = None) -> DecodedText:
    """Decode ``data``; ``declared`` is a charset claimed by the source (it may be wrong).

    Raises :class:`UndecodableError` for binary data or bytes that no candidate decodes. The text has no NUL
    character (see the module docstring).
    """
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):  # before UTF-16's: FF FE starts both
        return DecodedText(_readable(data.decode("utf-32", errors="replace"), strict=True), "utf-32")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return DecodedText(_readable(data.decode("utf-16", errors="replace"), strict=True), "utf-16")
    has_bom = data.startswith(codecs.BOM_UTF8)
    data = without_stray_nuls(data[len(codecs.BOM_UTF8) :] if has_bom else data)
    if looks_binary(data):
        raise UndecodableError(_BINARY)
    if has_bom:
        return DecodedText(_readable(data.decode("utf-8", errors="replace"), strict=False), "utf-8")
    if not data:
        return DecodedText("", normalise_encoding_name(declared) or "utf-8")

    declared_codec = normalise_encoding_name(declared)
    if data.isascii():
        # ASCII reads alike under every charset a page may sensibly claim; a claim that reads it otherwise
        # (UTF-16, UTF-7, HZ: "plain page" as "汰楡..."), is wrong, and the bytes stay the ASCII they are.
        text = data.decode("ascii")
        kept = (
            declared_codec is not None
            and _decodes(data, declared_codec)
            and data.decode(declared_codec) == text
        )
        return DecodedText(text, declared_codec if kept and declared_codec else "utf-8")
    if declared_codec in _DOUBLE_BYTE_CJK:
        # GBK and Big5 bytes often decode strictly under each other (into nonsense), and so may UTF-8 under
        # GB18030: a page declaring one of them while being another is caught by weighing the rivals.
        if declared_codec != "utf-8" and _decodes(data, "utf-8"):
            return DecodedText(data.decode("utf-8"), "utf-8")
        if _decodes(data, declared_codec):
            rivals = [c for c in _DOUBLE_BYTE_CJK[:2] if c != declared_codec and _decodes(data, c)]
            chosen = _declared_unless_garbled(data, declared_codec, rivals) if rivals else declared_codec
            return DecodedText(data.decode(chosen), chosen)
    # A declared single-byte charset (latin-1 on a GBK page) decodes anything: not trusted.
    if declared_codec in ("utf-8", "gb18030", "big5", "big5hkscs") and _decodes(data, declared_codec):
        return DecodedText(data.decode(declared_codec), declared_codec)
    if _decodes(data, "utf-8"):
        return DecodedText(data.decode("utf-8"), "utf-8")

    strict = [c for c in _CANDIDATES[1:] if _decodes(data, c)]
    if len(strict) == 1:
        return DecodedText(data.decode(strict[0]), strict[0])
    if len(strict) > 1:
        ranked = _rank(data, strict)
        return DecodedText(data.decode(ranked), ranked)
    # Damaged text (a truncated multi-byte character, a stray byte): keep going with the best guess,
    # replacing only the bad bytes, unless most of it is unreadable.
    best = _rank(data, list(_CANDIDATES))
    return DecodedText(_readable(data.decode(best, errors="replace"), strict=False), best)


def _readable(text: str, *, strict: bool) -> str:
    """``text`` when it reads as text (stray NULs dropped), else :class:`UndecodableError`.

    Refused: more than one character in twenty (and more than four) that is a control or a replacement
    character; when ``strict`` (UTF-16 under its byte-order mark: any bytes decode, so nothing else vouches
    for them), also when the first 64K characters hold as many unassigned or private-use ones. UTF-8 keeps
    private-use characters: pages drawn in an obfuscating font use them."""
    if len(_UNREADABLE_CHARS.findall(text)) > max(4, len(text) // 20):
        raise UndecodableError("not text in UTF-8, GB18030, Big5 or UTF-16 (too many invalid byte sequences)")
    if strict:
        sample = text[:_SAMPLE_BYTES]
        junk = sum(1 for ch in sample if unicodedata.category(ch) in _UNREADABLE_CATEGORIES)
        if junk > max(4, len(sample) // 20):
            raise UndecodableError("not text: unassigned or private-use characters after a UTF-16 BOM")
    nuls = text.count("\x00")
    if nuls > stray_nul_limit(len(text)):
        raise UndecodableError(_BINARY)
    return text.replace("\x00", "") if nuls else text


def _decodes(data: bytes, codec: str) -> bool:
    try:
        data.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return False
    return True


def _declared_unless_garbled(data: bytes, declared: str, rivals: list[str]) -> str:
    """Keep the declared codec unless charset_normalizer finds its decoding clearly messier than a rival's (it
    drops a candidate whose mess ratio is too high; short samples score alike, and then the claim wins)."""
    from charset_normalizer import from_bytes

    isolation = [c.replace("-", "_") for c in (declared, *rivals)]
    chaos: dict[str, float] = {}
    for match in from_bytes(_sample(data), cp_isolation=isolation):
        name = normalise_encoding_name(match.encoding)
        if name is not None:
            chaos[name] = min(match.chaos, chaos.get(name, 1.0))
    rival_chaos = {c: chaos[c] for c in rivals if c in chaos}
    if not rival_chaos:
        return declared
    best_rival = min(rival_chaos, key=rival_chaos.__getitem__)
    if declared in chaos and chaos[declared] <= rival_chaos[best_rival] + 0.05:
        return declared
    return best_rival


def _sample(data: bytes) -> bytes:
    """The first 64 KB of ``data``, cut after its last line feed when longer: a cut inside a double-byte
    character makes every candidate fail to decode the sample (a line feed is never a GBK or Big5 trail
    byte), and a whole book read as text went to the first candidate."""
    if len(data) <= _SAMPLE_BYTES:
        return data
    sample = data[:_SAMPLE_BYTES]
    cut = sample.rfind(b"\n")
    return sample[: cut + 1] if cut > 0 else sample


def _rank(data: bytes, candidates: list[str]) -> str:
    from charset_normalizer import from_bytes

    isolation = [c.replace("-", "_") for c in candidates]
    best = from_bytes(_sample(data), cp_isolation=isolation).best()
    if best is None:
        return candidates[0]
    found = normalise_encoding_name(best.encoding)
    return found if found in candidates else candidates[0]
