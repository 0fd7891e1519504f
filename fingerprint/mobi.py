"""Read the text records of a MOBI, AZW3 (KF8) or PalmDOC e-book (pure, bytes in).

The layout is public (MobileRead wiki, "PDB", "MOBI", "PalmDOC"); every number is big-endian:

- **PDB header**, 78 bytes: the name (32), ..., the type and creator at 60 (``BOOKMOBI`` for MOBI/AZW3,
  ``TEXtREAd`` for PalmDOC), the record count at 76; then one 8-byte entry per record, its offset first.
- **Record 0** starts with the PalmDOC header, 16 bytes: compression (1 none, 2 PalmDOC, 17480
  HUFF/CDIC), 2 unused, the text's length (4), the count of text records (2), their size (2, 4096),
  encryption (2, 0 none).
  A MOBI header follows (``MOBI`` at 16, its length at 20, the text encoding at 28: 65001 UTF-8, 1252
  Windows-1252); when that length reaches 228, the *extra data flags* at 242 say which trailing entries each
  text record carries (bit 0: multibyte character overlap; each higher bit: one entry whose size is a
  backward-read variable-length integer at the record's end).
- **Records 1..count** are the text, each compressed on its own. A KF8 (AZW3) book, alone or after a MOBI 7
  part, keeps its XHTML in text records compressed the same way, skeletons before their fragments, so the
  text comes out in reading order without reassembling the parts.

PalmDOC compression is LZ77 on bytes: ``0x00`` and ``0x09-0x7f`` stand for themselves, ``0x01-0x08`` say how
many literal bytes follow, ``0xc0-0xff`` is a space then the byte ``xor 0x80``, and ``0x80-0xbf`` with the
next byte is a pair: 11 bits of distance back into the output, 3 bits of length minus 3. Output grows at
most 5 bytes per input byte (a pair gives 10 for 2). HUFF/CDIC compression and DRM-encrypted books are
reported as unsupported (:class:`MobiError`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

__all__ = ["MobiBook", "MobiError", "open_mobi", "palmdoc_decompress"]

_PDB_HEADER = 78
_NO_COMPRESSION, _PALMDOC, _HUFF_CDIC = 1, 2, 17480
_ENCODINGS = {65001: "utf-8", 1252: "cp1252"}


class MobiError(ValueError):
    """The file is not a MOBI/PalmDOC book this reader can read; the message is one line for a person."""


@dataclass(frozen=True)
class MobiBook:
    """A book's text records, not yet decompressed: ``encoding`` is the text's (``''``: not stated, a
    PalmDOC book, to be detected), ``kf8`` whether the records hold KF8 XHTML (an AZW3)."""

    data: bytes
    offsets: tuple[int, ...]  # every record's start, then the file's end
    compression: int
    text_records: int
    extra_flags: int
    encoding: str
    kf8: bool

    def records(self) -> Iterator[bytes]:
        """Each text record decompressed, in order (their trailing entries removed)."""
        for index in range(1, self.text_records + 1):
            record = _trim_trailing_entries(
                self.data[self.offsets[index] : self.offsets[index + 1]], self.extra_flags
            )
            yield palmdoc_decompress(record) if self.compression == _PALMDOC else record


def open_mobi(data: bytes) -> MobiBook:
    """The text records of a MOBI/AZW3/PalmDOC book, checked; :class:`MobiError` when it cannot be read."""
    if len(data) < _PDB_HEADER or data[60:68] not in (b"BOOKMOBI", b"TEXtREAd"):
        raise MobiError("not a MOBI or PalmDOC book (no BOOKMOBI/TEXtREAd in its PDB header)")
    (count,) = struct.unpack_from(">H", data, 76)
    if count < 2 or len(data) < _PDB_HEADER + 8 * count:
        raise MobiError(f"truncated: its header names {count} records")
    offsets = [struct.unpack_from(">I", data, _PDB_HEADER + 8 * n)[0] for n in range(count)]
    offsets.append(len(data))
    if any(b < a for a, b in pairwise(offsets)) or offsets[0] < _PDB_HEADER:
        raise MobiError("damaged: its record offsets are out of order or past its end")
    record0 = data[offsets[0] : offsets[1]]
    if len(record0) < 16:
        raise MobiError("damaged: record 0 is shorter than the PalmDOC header")
    compression, _, _, text_records, _, encryption = struct.unpack_from(">HHIHHH", record0, 0)
    if encryption:
        raise MobiError("DRM-encrypted: not read")
    if compression == _HUFF_CDIC:
        raise MobiError("HUFF/CDIC compression: not read (only PalmDOC-compressed and stored books are)")
    if compression not in (_NO_COMPRESSION, _PALMDOC):
        raise MobiError(f"unknown compression {compression}")
    if text_records >= count:
        raise MobiError(f"truncated: {text_records} text records named, {count - 1} present")
    encoding, extra_flags, kf8 = "", 0, False
    if record0[16:20] == b"MOBI" and len(record0) >= 32:
        header_length, _, code_page = struct.unpack_from(">III", record0, 20)
        encoding = _ENCODINGS.get(code_page, "")
        if header_length >= 228 and len(record0) >= 244:
            (extra_flags,) = struct.unpack_from(">H", record0, 242)
        if len(record0) >= 40:
            kf8 = struct.unpack_from(">I", record0, 36)[0] >= 8  # the format version
    return MobiBook(data, tuple(offsets), compression, text_records, extra_flags, encoding, kf8)


def palmdoc_decompress(record: bytes) -> bytes:
    """One PalmDOC (LZ77) compressed record's bytes (see the module docstring); :class:`MobiError` for a
    pair that points before the start."""
    out = bytearray()
    i, size = 0, len(record)
    while i < size:
        byte = record[i]
        i += 1
        if byte == 0 or 0x09 <= byte <= 0x7F:
            out.append(byte)
        elif byte <= 0x08:
            out += record[i : i + byte]
            i += byte
        elif byte >= 0xC0:
            out += b" "
            out.append(byte ^ 0x80)
        else:
            if i >= size:
                break  # a pair cut by the record's end
            pair = ((byte << 8) | record[i]) & 0x3FFF
            i += 1
            distance, length = pair >> 3, (pair & 0x07) + 3
            if distance == 0 or distance > len(out):
                raise MobiError("damaged: a PalmDOC back-reference points before the record's start")
            start = len(out) - distance
            if distance >= length:
                out += out[start : start + length]
            else:  # overlapping: the run repeats what it is writing
                for offset in range(length):
                    out.append(out[start + offset])
    return bytes(out)


def _trim_trailing_entries(record: bytes, flags: int) -> bytes:
    """A text record without the trailing entries its book's extra data flags announce: first one entry per
    flag bit above bit 0 (each ends with its size, a backward-read 7-bit integer), then the multibyte
    overlap of bit 0 (its length in the low two bits of the last byte, plus one)."""
    for bit in range(15, 0, -1):
        if flags & (1 << bit) and record:
            size = 0
            for value in record[-4:]:
                if value & 0x80:
                    size = 0
                size = (size << 7) | (value & 0x7F)
            record = record[: max(0, len(record) - size)]
    if flags & 1 and record:
        record = record[: max(0, len(record) - ((record[-1] & 0x03) + 1))]
    return record
