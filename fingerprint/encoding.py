"""Decode bytes of unknown encoding into text: UTF-8, GB18030 (GBK, GB2312) and Big5, detected, not guessed.

Order of evidence: a byte-order mark; a declared charset (HTTP header, ``<meta charset>``) when the bytes
decode under it; strict UTF-8; then every candidate that decodes strictly, ranked by charset_normalizer's
coherence check on a sample. Binary data (NUL bytes, many control bytes) is refused, never decoded into junk.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = ["DecodedText", "UndecodableError", "decode_bytes", "normalise_encoding_name"]

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


def looks_binary(data: bytes) -> bool:
    sample = data[:_SAMPLE_BYTES]
    if b"\x00" in sample:
        return True
    controls = sum(sample.count(c) for c in _CONTROL)
    return controls > max(8, len(sample) // 100)


def decode_bytes(data: bytes, declared: str | None = None) -> DecodedText:
    """Decode ``data``; ``declared`` is a charset claimed by the source (it may be wrong).

    Raises :class:`UndecodableError` for binary data or bytes that no candidate decodes.
    """
    if data.startswith(codecs.BOM_UTF8):
        return DecodedText(data[len(codecs.BOM_UTF8) :].decode("utf-8", errors="replace"), "utf-8")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return DecodedText(data.decode("utf-16", errors="replace"), "utf-16")
    if looks_binary(data):
        raise UndecodableError("binary data, not text (NUL or control bytes)")
    if not data:
        return DecodedText("", normalise_encoding_name(declared) or "utf-8")

    declared_codec = normalise_encoding_name(declared)
    if declared_codec in _DOUBLE_BYTE_CJK and not data.isascii():
        # GBK and Big5 bytes often decode strictly under each other (into nonsense), and so may UTF-8 under
        # GB18030: a page declaring one of them while being another is caught by weighing the rivals.
        if declared_codec != "utf-8" and _decodes(data, "utf-8"):
            return DecodedText(data.decode("utf-8"), "utf-8")
        if _decodes(data, declared_codec):
            rivals = [c for c in _DOUBLE_BYTE_CJK[:2] if c != declared_codec and _decodes(data, c)]
            chosen = _declared_unless_garbled(data, declared_codec, rivals) if rivals else declared_codec
            return DecodedText(data.decode(chosen), chosen)
    # A declared single-byte charset (latin-1 on a GBK page) decodes anything: trust it only for ASCII.
    trusted = declared_codec in ("utf-8", "gb18030", "big5", "big5hkscs") or data.isascii()
    if declared_codec and trusted and _decodes(data, declared_codec):
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
    text = data.decode(best, errors="replace")
    if text.count("\ufffd") > max(4, len(text) // 20):
        raise UndecodableError("not text in UTF-8, GB18030 or Big5 (too many invalid byte sequences)")
    return DecodedText(text, best)


def _decodes(data: bytes, codec: str) -> bool:
    try:
        data.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return False
    return True


def _declared_unless_garbled(data: bytes, declared: str, rivals: list[str]) -> str:
    """Keep the declared codec unless charset_normalizer finds its decoding clearly messier than a rival's
    (it drops a candidate whose mess ratio is too high; short samples score alike, and then the claim wins)."""
    from charset_normalizer import from_bytes

    isolation = [c.replace("-", "_") for c in (declared, *rivals)]
    chaos: dict[str, float] = {}
    for match in from_bytes(data[:_SAMPLE_BYTES], cp_isolation=isolation):
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


def _rank(data: bytes, candidates: list[str]) -> str:
    from charset_normalizer import from_bytes

    isolation = [c.replace("-", "_") for c in candidates]
    best = from_bytes(data[:_SAMPLE_BYTES], cp_isolation=isolation).best()
    if best is None:
        return candidates[0]
    found = normalise_encoding_name(best.encoding)
    return found if found in candidates else candidates[0]
