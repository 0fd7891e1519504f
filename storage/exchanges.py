"""The raw HTTP exchanges of flagged pages (``page_exchanges``): what the crawler sent and received for a
page, kept so that an evidence bundle can show the response itself, not only the text fptrack extracted from
it.

A table of its own, written and then mostly dropped, because whether a page carries a copy is known only once
it is compared, while the bytes as fetched exist only in the crawling process: the crawl store writes the
exchange of every page it hands on to compare (compressed), and :func:`prune_exchanges`, called when pages are
marked compared, deletes the exchanges of the pages that have no match, and of a page with matches those that
neither its current content nor a version kept of it (:func:`storage.match_life.keep_versions`) records as its
snapshot. What stays is one row per fetch a match may rest on.

Stored format of ``data``, parts each a 4-byte big-endian length and its bytes. Format ``2`` (written since
2026-11-29): the byte ``2``, then a zlib stream of six parts: the URL the response came from (UTF-8), the
request head as sent, the response head as received, the body (decoded), the rendered DOM, the peer's IP
address (ASCII); then, outside the zlib stream, one part: the payload as received. Format ``1`` (still read;
its first byte is a zlib header, never ``2``): zlib over the byte ``1`` and the first five parts. A length
of ``0xFFFFFFFF`` marks a part absent: a body never fetched plainly (a page Chromium fetched itself: only its
status and headers are known), a payload as received that is the body itself (no content coding); a length
of ``0xFFFFFFFE`` marks a body that is the payload as received, decoded by the codings its head names
(:func:`decode_content`): kept only when it decodes to the body exactly, so the coded bytes, usually a
third of the decoded ones, are kept instead of both.

Format ``3`` (written since 2026-11-29 for a payload as received of at least :data:`BLOB_MIN_BYTES`: a
downloaded file): the byte ``3``, the same zlib stream of six parts, then one part: the SHA-256 (hex, ASCII)
of the payload as received, which is kept once in ``blobs`` (:class:`storage.models.Blob`) however many URLs
and fetches serve it, and named by the row's ``blob_sha256``. In the zlib stream the body is the marker
``0xFFFFFFFD`` when it is that payload itself (no content coding), ``0xFFFFFFFE`` when it is the payload
decoded, else its bytes. Small pages keep format 2: the ordinary crawl stores and compresses as before.

What "as fetched" means. Format 2: the request head is the one Twisted wrote for Scrapy (its ``Host`` with
the port of a URL that names one); the response head is the status line with the reason phrase the server
sent and the headers as Scrapy received them, in their order (``Content-Encoding`` kept; ``Content-Length``
first, where Scrapy puts it back; Twisted consumes ``Connection``, ``Keep-Alive`` and ``Transfer-Encoding``,
which are not recorded); the payload is
the body after the transfer coding (chunked) was undone and before the content coding (gzip, deflate, br)
was, as a WARC response record holds it; the body is the one Scrapy handed the spider, which
``snapshot_sha256`` hashes. Format 1 kept the decoded body only and a head rebuilt to describe it: the
reason phrase the standard one, ``Transfer-Encoding`` and a stale ``Content-Length`` kept under
``X-Fptrack-Orig-<name>``, the request's ``Host`` without its port."""

from __future__ import annotations

import gzip
import hashlib
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, delete, exists, not_, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from fptrack.storage.chunks import CHUNK, id_chunks
from fptrack.storage.models import Blob, Match, Page, PageExchange, PageVersion, as_utc, utcnow

__all__ = [
    "BLOB_MIN_BYTES",
    "RawExchange",
    "content_codings",
    "decode_content",
    "exchange_for",
    "keep_exchanges",
    "pack_exchange",
    "pack_stored",
    "prune_exchanges",
    "read_exchange",
    "unpack_exchange",
]

_FORMAT = 2
_FORMAT_BLOB = 3
_ABSENT = 0xFFFFFFFF
_DERIVED = 0xFFFFFFFE  # the body is the payload as received, decoded
_IN_BLOB = 0xFFFFFFFD  # the body is the payload as received itself, kept as a blob
BLOB_MIN_BYTES = 64 * 1024
"""A payload as received of at least this many bytes (a downloaded file, rarely a page) is kept as a blob,
once per SHA-256 (format 3); a smaller one inline (format 2), as every ordinary page is."""
LEVEL = 1
"""zlib level of a kept exchange: against level 6, 0.43 instead of 0.73 ms of CPU for a 19.7 KB chapter page,
for 5 % more bytes (10.1 KB instead of 9.6 KB); every crawled page pays it, few are ever read back."""


@dataclass(frozen=True)
class RawExchange:
    """One fetch of a page. ``body`` None: never fetched plainly (Chromium fetched the page itself, so only
    its status and headers are known, in ``response_head``). ``rendered``: the DOM Chromium rendered, as UTF-8
    (what the page's text was extracted from, and what its ``snapshot_sha256`` hashes); ``b''`` for a page
    read without a browser. ``wire_body``: the payload as received, content coding kept, when it is not
    ``body`` itself (None: no content coding, or a format 1 row, which kept the decoded body only).
    ``ip_address``: the peer's (``''`` when not known)."""

    url: str
    request_head: bytes
    response_head: bytes
    body: bytes | None
    fetched_at: datetime
    rendered: bytes = b""
    ip_address: str = ""
    wire_body: bytes | None = None

    @property
    def payload(self) -> bytes | None:
        """The HTTP payload ``response_head`` describes: as received (coding kept) if known, else the body."""
        return self.wire_body if self.wire_body is not None else self.body

    @property
    def snapshot(self) -> bytes:
        """The bytes the page's ``snapshot_sha256`` hashes: the rendered DOM, else the body."""
        return self.rendered if self.rendered else (self.body or b"")

    @property
    def snapshot_sha256(self) -> str:
        return hashlib.sha256(self.snapshot).hexdigest()


def content_codings(response_head: bytes) -> list[str]:
    """The content codings ``response_head``'s ``Content-Encoding`` headers name, in the order applied."""
    codings: list[str] = []
    for line in response_head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() == b"content-encoding":
            codings += [c.strip().lower() for c in value.decode("latin-1").split(",") if c.strip()]
    return [c for c in codings if c != "identity"]


def decode_content(payload: bytes, codings: Sequence[str]) -> bytes:
    """``payload`` with its content ``codings`` (in the order applied) undone: gzip, deflate (zlib-wrapped or
    raw, as servers send either), br. Raises ValueError for another coding or a payload that is not so coded.
    Called on payloads a crawl already decoded within its size cap, never on a stranger's bytes."""
    body = payload
    for coding in reversed(codings):
        body = _decode_one(body, coding)
    return body


def _decode_one(data: bytes, coding: str) -> bytes:
    if coding in ("gzip", "x-gzip"):
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise ValueError(f"not gzip-coded: {error}") from None
    if coding == "deflate":
        for wbits in (zlib.MAX_WBITS, -zlib.MAX_WBITS):
            try:
                return zlib.decompress(data, wbits)
            except zlib.error as error:
                failure = error
        raise ValueError(f"not deflate-coded: {failure}")
    if coding == "br":
        try:
            import brotli  # Scrapy asks for br only when brotli is installed
        except ImportError:
            raise ValueError("br-coded, and the brotli package is not installed") from None
        try:
            return bytes(brotli.decompress(data))
        except brotli.error as error:
            raise ValueError(f"not br-coded: {error}") from None
    raise ValueError(f"content coding {coding!r} is not one fptrack decodes")


def _body_derivable(exchange: RawExchange) -> bool:
    """Whether the body need not be stored: the payload as received decodes to it exactly."""
    if exchange.wire_body is None or exchange.body is None:
        return False
    try:
        return decode_content(exchange.wire_body, content_codings(exchange.response_head)) == exchange.body
    except ValueError:
        return False


def _parts(parts: Sequence[bytes | int]) -> bytes:
    """Each part as its 4-byte big-endian length and its bytes, a marker (an int) as itself."""
    out = bytearray()
    for part in parts:
        if isinstance(part, int):
            out += struct.pack(">I", part)
        else:
            out += struct.pack(">I", len(part)) + part
    return bytes(out)


def _read_parts(raw: bytes, at: int, count: int) -> tuple[list[bytes | int], int]:
    parts: list[bytes | int] = []
    for _ in range(count):
        (length,) = struct.unpack_from(">I", raw, at)
        at += 4
        if length in (_ABSENT, _DERIVED, _IN_BLOB):
            parts.append(length)
            continue
        if at + length > len(raw):
            raise ValueError("a page exchange cut short")
        parts.append(raw[at : at + length])
        at += length
    return parts, at


def pack_exchange(exchange: RawExchange) -> bytes:
    """The stored form of ``exchange`` (without its fetch time, which has a column): format 2. The payload
    as received goes after the zlib stream as it is: it is compressed already, and compressing it again
    would cost every crawled page CPU for no bytes."""
    body: bytes | int = _ABSENT if exchange.body is None else exchange.body
    if _body_derivable(exchange):
        body = _DERIVED
    head = _parts(
        [
            exchange.url.encode("utf-8"),
            exchange.request_head,
            exchange.response_head,
            body,
            exchange.rendered,
            exchange.ip_address.encode("ascii"),
        ]
    )
    wire = _parts([_ABSENT if exchange.wire_body is None else exchange.wire_body])
    return bytes((_FORMAT,)) + zlib.compress(head, LEVEL) + wire


@dataclass(frozen=True)
class PackedExchange:
    """The stored form of an exchange: ``data`` for its row, and in format 3 the payload as received kept
    as a blob (``blob``, ``blob_sha256``; None in formats 1 and 2)."""

    data: bytes
    blob: bytes | None = None
    blob_sha256: str | None = None


def pack_stored(exchange: RawExchange) -> PackedExchange:
    """``exchange`` as :func:`keep_exchanges` stores it: format 3 with its payload as a blob when the payload
    as received is at least :data:`BLOB_MIN_BYTES`, else format 2 (:func:`pack_exchange`)."""
    payload = exchange.payload
    if payload is None or len(payload) < BLOB_MIN_BYTES:
        return PackedExchange(pack_exchange(exchange))
    digest = hashlib.sha256(payload).hexdigest()
    body: bytes | int
    if exchange.wire_body is None:
        body = _IN_BLOB
    elif _body_derivable(exchange):
        body = _DERIVED
    else:
        body = _ABSENT if exchange.body is None else exchange.body
    head = _parts(
        [
            exchange.url.encode("utf-8"),
            exchange.request_head,
            exchange.response_head,
            body,
            exchange.rendered,
            exchange.ip_address.encode("ascii"),
        ]
    )
    data = bytes((_FORMAT_BLOB,)) + zlib.compress(head, LEVEL) + _parts([digest.encode("ascii")])
    return PackedExchange(data, payload, digest)


def unpack_exchange(data: bytes, fetched_at: datetime, blob: bytes | None = None) -> RawExchange:
    """An exchange as :func:`pack_exchange` or :func:`pack_stored` stored it, in format 1, 2 or 3 (``blob``:
    the payload a format 3 row names, which must hash to its SHA-256)."""
    if data[:1] == bytes((_FORMAT_BLOB,)):
        inflating = zlib.decompressobj()
        raw = inflating.decompress(data[1:])
        parts, _ = _read_parts(raw, 0, 6)
        (reference,) = _read_parts(inflating.unused_data, 0, 1)[0]
        digest = reference.decode("ascii") if isinstance(reference, bytes) else ""
        if blob is None:
            raise ValueError(f"the blob {digest} of a page exchange is missing")
        if hashlib.sha256(blob).hexdigest() != digest:
            raise ValueError(f"the blob {digest} of a page exchange does not hash to its name")
        if parts[3] == _IN_BLOB:
            parts[3] = blob
            parts.append(_ABSENT)
        else:
            parts.append(blob)
    elif data[:1] == bytes((_FORMAT,)):
        inflating = zlib.decompressobj()
        raw = inflating.decompress(data[1:])
        parts, _ = _read_parts(raw, 0, 6)
        parts += _read_parts(inflating.unused_data, 0, 1)[0]
    else:  # format 1: zlib over its version byte and five parts
        raw = zlib.decompress(data)
        if raw[:1] != b"\x01":
            raise ValueError(f"unknown page exchange format {raw[:1]!r}")
        parts, _ = _read_parts(raw, 1, 5)
        parts += [_ABSENT, _ABSENT]

    def part(index: int) -> bytes | None:
        value = parts[index]
        return value if isinstance(value, bytes) else None

    response_head = part(2) or b""
    wire_body = part(6)
    body = part(3)
    if parts[3] == _DERIVED and wire_body is not None:
        body = decode_content(wire_body, content_codings(response_head))
    return RawExchange(
        url=(part(0) or b"").decode("utf-8"),
        request_head=part(1) or b"",
        response_head=response_head,
        body=body,
        fetched_at=as_utc(fetched_at),
        rendered=part(4) or b"",
        ip_address=(part(5) or b"").decode("ascii"),
        wire_body=wire_body,
    )


def keep_exchanges(session: Session, exchanges: Iterable[tuple[int, RawExchange]]) -> int:
    """Store the exchange of each ``(page id, exchange)`` (one already stored for the same page and snapshot
    is kept as it is: it is the same response), a payload of at least :data:`BLOB_MIN_BYTES` as a blob, once
    per SHA-256. Returns how many rows were offered.

    Two workers storing the same blob at once both succeed: ``INSERT ... ON CONFLICT (sha256) DO UPDATE``,
    which, unlike DO NOTHING, also locks an existing blob's row until this transaction ends, so that a
    concurrent :func:`prune_exchanges` (which locks the blobs it may drop) cannot drop a blob this
    transaction is about to name."""
    rows: list[dict[str, object]] = []
    blobs: dict[str, dict[str, object]] = {}
    for page_id, exchange in exchanges:
        packed = pack_stored(exchange)
        rows.append(
            {
                "page_id": page_id,
                "snapshot_sha256": exchange.snapshot_sha256,
                "fetched_at": exchange.fetched_at,
                "rendered": bool(exchange.rendered),
                "data": packed.data,
                "blob_sha256": packed.blob_sha256,
            }
        )
        if packed.blob is not None and packed.blob_sha256 is not None:
            blobs[packed.blob_sha256] = {
                "sha256": packed.blob_sha256,
                "size": len(packed.blob),
                "data": packed.blob,
                "first_stored": utcnow(),
            }
    if not rows:
        return 0
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    for sha256 in sorted(blobs):  # in one order: two workers never wait on each other's blobs crosswise
        blob = insert(Blob).values(**blobs[sha256])
        session.execute(
            blob.on_conflict_do_update(index_elements=["sha256"], set_={"size": blob.excluded.size})
        )
    # one statement, the rows as its parameters: compiled once and cached, where a VALUES clause of the rows
    # was compiled anew for each batch
    statement = insert(PageExchange).on_conflict_do_nothing(index_elements=["page_id", "snapshot_sha256"])
    session.execute(statement, rows)
    if blobs:  # a fetch stored before under the same snapshot kept its own row: its new blob names nothing
        _drop_unnamed_blobs(session, list(blobs))
    return len(rows)


def prune_exchanges(session: Session, page_ids: Sequence[int]) -> None:
    """Drop the exchanges no match can rest on, for ``page_ids`` (just compared, or just fetched again): all
    of a page without matches; of a page with matches, those whose snapshot is neither the page's current one
    nor one of its kept versions'."""
    has_match = exists().where(Match.page_id == PageExchange.page_id)
    current = exists().where(
        Page.id == PageExchange.page_id, Page.snapshot_sha256 == PageExchange.snapshot_sha256
    )
    kept = exists().where(
        PageVersion.page_id == PageExchange.page_id,
        PageVersion.snapshot_sha256 == PageExchange.snapshot_sha256,
    )
    for chunk in id_chunks(sorted(set(page_ids))):
        doomed = and_(PageExchange.page_id.in_(chunk), or_(not_(has_match), and_(not_(current), not_(kept))))
        blobs = session.scalars(
            select(PageExchange.blob_sha256).where(doomed, PageExchange.blob_sha256.is_not(None)).distinct()
        ).all()
        session.execute(delete(PageExchange).where(doomed).execution_options(synchronize_session=False))
        _drop_unnamed_blobs(session, [sha256 for sha256 in blobs if sha256])


def _drop_unnamed_blobs(session: Session, candidates: Sequence[str]) -> None:
    """Drop those of the blobs ``candidates`` that no exchange names any more. The rows are locked first
    (PostgreSQL: FOR UPDATE; SQLite has one writer at a time), then dropped by a statement of its own, which
    sees every exchange committed meanwhile: a worker that is storing an exchange naming one of them holds
    its row (:func:`keep_exchanges`) until it commits, and its exchange then keeps the blob."""
    unique = sorted(set(candidates))
    for start in range(0, len(unique), CHUNK):
        chunk = unique[start : start + CHUNK]
        locked = session.scalars(
            select(Blob.sha256).where(Blob.sha256.in_(chunk)).order_by(Blob.sha256).with_for_update()
        ).all()
        if not locked:
            continue
        named = exists().where(PageExchange.blob_sha256 == Blob.sha256)
        session.execute(
            delete(Blob)
            .where(Blob.sha256.in_(locked), not_(named))
            .execution_options(synchronize_session=False)
        )


def exchange_for(session: Session, page_id: int, snapshot_sha256: str) -> RawExchange | None:
    """The exchange kept of ``page_id`` whose snapshot is ``snapshot_sha256`` (the one a match rests on), or
    None when none was kept (a page fetched before exchanges were kept, or flagged later by a newly
    registered work after its exchange was dropped)."""
    row = session.execute(
        select(PageExchange.data, PageExchange.fetched_at, PageExchange.blob_sha256).where(
            PageExchange.page_id == page_id, PageExchange.snapshot_sha256 == snapshot_sha256
        )
    ).first()
    return None if row is None else read_exchange(session, bytes(row[0]), row[1], row[2])


def read_exchange(
    session: Session, data: bytes, fetched_at: datetime, blob_sha256: str | None
) -> RawExchange:
    """A ``page_exchanges`` row's exchange, its blob read when it names one (format 3)."""
    blob = None
    if blob_sha256:
        found = session.scalar(select(Blob.data).where(Blob.sha256 == blob_sha256))
        blob = None if found is None else bytes(found)
    return unpack_exchange(data, fetched_at, blob)
