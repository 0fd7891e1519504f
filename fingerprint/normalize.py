"""Text normalisation before every fingerprint, with a map back to the original text (ALGORITHMS.md 1).

``normalize(text)`` keeps only letters, digits and CJK characters, so every fingerprint sees the same
stream whatever a pirate site did to the surface of the text:

1. Artefacts that pirate sites inject are cut out of the *original* text first, because their
   delimiters (parentheses, ``^~*`` separators) are gone after step 2: pinyin annotations right after a
   CJK character (``內(nèi)容`` -> ``內容``), ads spliced into sentences with ``^ ~ *`` separators
   (``小^说^无广告的~顶点*小说~网``), URLs and bare domains, PDF page markers (``---- Page 12 ----``) and
   web-novel update stamps. The patterns are modelled on ``shared/corpus/observed_piracy_artifacts.tsv``.
2. Each remaining code point is mapped through one table built once per process: Unicode NFKC
   (per code point), lower case, OpenCC ``t2s`` character conversion (Traditional -> Simplified), and
   dropping everything that is not a letter or a digit (whitespace, punctuation, symbols, marks,
   controls). The table is applied with numpy gathers, never a Python loop per character.

Why per code point and not OpenCC's phrase conversion: it keeps the output aligned with the input (one
output character never comes from two input characters), which is what the offset map needs, and it is
a pure function of the character, so a Traditional pirate copy and the Simplified original normalise to
the same string wherever OpenCC's character table is unambiguous.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fptrack.fingerprint.table_files import save_table_file, table_cache_file, use_table_cache

__all__ = ["ARTIFACT_PATTERNS", "NormalizedText", "is_kept_char", "normalize", "use_table_cache"]

_MAX_CODE_POINT = 0x110000

# Ranges where the Han characters live (URO, Ext A, compatibility block, Ext B-H in the SIP/TIP).
_CJK_RANGES = (
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2EBEF),
    (0x2F800, 0x2FA1F),
    (0x30000, 0x323AF),
)
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_PINYIN_VOWEL = "aeiouvüêāáǎàēéěèīíǐìōóǒòūúǔùǖǘǚǜ"
# initial? + 1-3 vowels + (ng|n|r)? + tone digit?; rejects English words such as "computer"
_SYLLABLE = rf"(?:zh|ch|sh|[bpmfdtnlgkhjqxrzcsyw])?[{_PINYIN_VOWEL}]{{1,3}}(?:ng|n|r)?[1-5]?"

# name -> compiled pattern; every match is removed from the original text before mapping.
ARTIFACT_PATTERNS: dict[str, re.Pattern[str]] = {
    # 內(nèi)容 / 內（nèi）容: one to four syllables in ASCII or full-width parentheses right after a Han
    # char.
    "pinyin_annotation": re.compile(
        rf"(?<=[{_HAN}])[(（]\s*{_SYLLABLE}(?:[\s']?{_SYLLABLE}){{0,3}}\s*[)）]",
        re.IGNORECASE,
    ),
    # Ads spliced into a sentence: short Han runs glued together by at least two ^ ~ * separators,
    # plus a domain stuck to the end.
    "obfuscated_ad": re.compile(
        rf"[{_HAN}]\s?[\^~*＾～＊]\s?(?:[{_HAN}]{{1,8}}\s?[\^~*＾～＊]\s?)+[{_HAN}]{{1,4}}?"
        r"(?:\s?(?:https?://)?(?:www\.)?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)?"
    ),
    "url": re.compile(r"(?:https?://|www\.)[A-Za-z0-9\-._~/?#=&%:+]+"),
    "domain": re.compile(
        r"(?<![A-Za-z0-9])[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.(?:com|net|org|cn|cc|info|me|tv|biz|top|xyz|la)"
        r"(?![A-Za-z0-9])(?:/[A-Za-z0-9\-._~/?#=&%]*)?"
    ),
    "page_marker": re.compile(r"-{3,}\s*Page\s*\d+\s*-{3,}", re.IGNORECASE),
    "update_stamp": re.compile(
        r"更新时间\s*[:：]\s*\d{4}-\d{1,2}-\d{1,2}(?:\s+\d{1,2}:\d{2}(?::\d{2})?)?(?:\s*本章字数\s*[:：]\s*\d+)?"
    ),
}


# A pattern can only match when its trigger substring occurs: a cheap `in` test skips most regex scans.
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "pinyin_annotation": ("(", "（"),
    "obfuscated_ad": ("^", "~", "*", "＾", "～", "＊"),
    "url": ("www.", "WWW.", "://"),
    "domain": (".",),
    "page_marker": ("---",),
    "update_stamp": ("更新时间",),
}


def is_kept_char(ch: str) -> bool:
    """True for the characters normalisation keeps: letters (all scripts, CJK included) and digits."""
    return unicodedata.category(ch)[0] in "LN"


@dataclass(frozen=True, eq=False)
class NormalizedText:
    """Normalised text and, for every normalised character, the index of the original character it came from.

    ``offsets`` is an int64 array with ``len(offsets) == len(text)``, non-decreasing. ``source_length`` is
    the length of the original text, so that spans ending at the end of the text map back exactly.
    """

    text: str
    offsets: np.ndarray
    source_length: int

    def __len__(self) -> int:
        return len(self.text)

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """Map the normalised half-open span ``[start, end)`` to the original half-open span ``[s, e)``.

        ``s`` is the original index of the first normalised character, ``e`` one past the original index of
        the last one, so the original span covers every source character (and whatever was stripped
        between them). An empty span maps to an empty span at the corresponding original position.
        """
        n = len(self.text)
        if not 0 <= start <= end <= n:
            raise ValueError(f"span [{start}, {end}) is outside the normalised text of length {n}")
        if start == end:
            pos = int(self.offsets[start]) if start < n else self.source_length
            return pos, pos
        return int(self.offsets[start]), int(self.offsets[end - 1]) + 1


@dataclass(frozen=True)
class _Table:
    single: np.ndarray  # uint32[code point] -> the one output code point (valid where length == 1)
    length: np.ndarray  # uint8[code point] -> number of output characters (0 = dropped)
    expansions: dict[int, str]  # code points whose output has 2+ characters (ligatures, ⑩, ㍻ ...)


@functools.cache
def _t2s_characters() -> dict[int, int]:
    """OpenCC t2s applied to each Han character on its own (no phrase context): code point -> code point."""
    import opencc  # imported lazily: only the table build needs it

    chars = [chr(c) for lo, hi in _CJK_RANGES for c in range(lo, hi + 1)]
    converted = opencc.OpenCC("t2s").convert("\n".join(chars)).split("\n")
    if len(converted) != len(chars):  # pragma: no cover - would mean OpenCC merged lines
        raise RuntimeError("OpenCC t2s changed the number of lines while building the character table")
    mapping = {ord(a): ord(b) for a, b in zip(chars, converted) if len(b) == 1 and a != b}
    # Follow chains (薴 -> 苧 -> 苎) to their end so that normalising twice changes nothing.
    for src in list(mapping):
        dst, seen = mapping[src], {src}
        while dst in mapping and dst not in seen:
            seen.add(dst)
            dst = mapping[dst]
        mapping[src] = dst
    return {src: dst for src, dst in mapping.items() if src != dst}


def _map_char(ch: str, t2s: dict[int, int]) -> str:
    out = []
    for c in unicodedata.normalize("NFKC", ch).lower():
        if is_kept_char(c):
            out.append(chr(t2s.get(ord(c), ord(c))))
    return "".join(out)


@functools.cache
def _table() -> _Table:
    """The per-code-point table, read from the cache folder when one is set and holds it (see
    :func:`use_table_cache`), else built (and then saved there)."""
    path = _table_cache_path()
    if path is not None:
        try:
            with np.load(path) as cached:
                keys, values = cached["expansion_keys"], str(cached["expansion_values"])
                return _Table(
                    cached["single"], cached["length"], dict(zip(keys.tolist(), values.split("\0")))
                )
        except (OSError, KeyError, ValueError):
            pass  # absent or damaged: build it again
    table = _build_table()
    if path is not None:
        _save_table(table, path)
    return table


def _table_cache_path() -> Path | None:
    """The table's file: this module's code, Unicode's version and OpenCC's (:func:`table_cache_file`)."""
    return table_cache_file(
        "normalize", __file__, ".npz", packages=("opencc",), tags=(f"unicode{unicodedata.unidata_version}",)
    )


def _save_table(table: _Table, path: Path) -> None:
    keys = np.array(sorted(table.expansions), dtype=np.int64)
    values = np.array("\0".join(table.expansions[k] for k in keys.tolist()))
    save_table_file(
        path,
        lambda handle: np.savez(
            handle, single=table.single, length=table.length, expansion_keys=keys, expansion_values=values
        ),
    )


def _build_table() -> _Table:
    t2s = _t2s_characters()
    single = np.arange(_MAX_CODE_POINT, dtype=np.uint32)
    length = np.ones(_MAX_CODE_POINT, dtype=np.uint8)
    expansions: dict[int, str] = {}
    for cp in range(_MAX_CODE_POINT):
        if 0xD800 <= cp <= 0xDFFF:
            length[cp] = 0
            continue
        ch = chr(cp)
        # Fast path for the common case: a kept character that maps to itself.
        if (
            cp not in t2s
            and is_kept_char(ch)
            and unicodedata.normalize("NFKC", ch) == ch
            and ch.lower() == ch
        ):
            continue
        mapped = _map_char(ch, t2s)
        length[cp] = min(len(mapped), 255)
        if len(mapped) == 1:
            single[cp] = ord(mapped)
        elif len(mapped) > 1:
            expansions[cp] = mapped
    return _Table(single=single, length=length, expansions=expansions)


def _artifact_mask(text: str) -> np.ndarray | None:
    """Boolean mask of original characters inside an injected artefact, or None when there is none."""
    mask: np.ndarray | None = None
    for name, pattern in ARTIFACT_PATTERNS.items():
        if not any(trigger in text for trigger in _TRIGGERS[name]):
            continue
        for match in pattern.finditer(text):
            if mask is None:
                mask = np.zeros(len(text), dtype=bool)
            mask[match.start() : match.end()] = True
    return mask


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def normalize(text: str) -> NormalizedText:
    """Normalise ``text`` for fingerprinting and keep the offset map (see the module docstring)."""
    if not isinstance(text, str):
        raise TypeError(f"normalize() takes str, got {type(text).__name__}")
    table = _table()
    cps = _code_points(text)
    lengths = table.length[cps]
    mask = _artifact_mask(text)
    if mask is not None:
        lengths = np.where(mask, 0, lengths)
    if not table.expansions or not np.any(lengths > 1):
        keep = np.flatnonzero(lengths)
        out = table.single[cps[keep]]
        normalized = out.tobytes().decode("utf-32-le")
        # no copy: 8 bytes a char
        return NormalizedText(normalized, keep.astype(np.int64, copy=False), len(text))
    # Rare path: some characters expand to several (e.g. "⑩" -> "10"). Stitch kept pieces in order.
    offsets = np.repeat(np.arange(len(text), dtype=np.int64), lengths)
    pieces: list[str] = []
    expanding = np.flatnonzero(lengths > 1)
    start = 0
    for pos in expanding.tolist():
        if pos > start:
            seg = slice(start, pos)
            keep = np.flatnonzero(lengths[seg]) + start
            pieces.append(table.single[cps[keep]].tobytes().decode("utf-32-le"))
        pieces.append(table.expansions[int(cps[pos])][: int(lengths[pos])])
        start = pos + 1
    keep = np.flatnonzero(lengths[start:]) + start
    pieces.append(table.single[cps[keep]].tobytes().decode("utf-32-le"))
    normalized = "".join(pieces)
    if len(normalized) != len(offsets):  # pragma: no cover - table inconsistency
        raise RuntimeError("normalisation table produced inconsistent lengths")
    return NormalizedText(normalized, offsets, len(text))
