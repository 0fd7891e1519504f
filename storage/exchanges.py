"""The raw HTTP exchanges of flagged pages (``page_exchanges``): what the crawler sent and received for a
page, kept so that an evidence bundle can show the response itself, not only the text fptrack extracted from
it.

A table of its own, written and then mostly dropped, because whether a page carries a copy is known only once
it is compared, while the bytes as fetched exist only in the crawling process: the crawl store writes the
exchange of every page it hands on to compare (compressed), and :func:`prune_exchanges`, called when pages are
marked compared, deletes the exchanges of the pages that have no match, and of a page with matches those that
neither its current content nor a version kept of it (:func:`storage.match_life.keep_versions`) records as its
snapshot. What stays is one row per fetch a match may rest on.

Stored format of ``data``: zlib over a version byte (``1``) then five parts, each a 4-byte big-endian length
and its bytes: the URL the response came from (UTF-8), the request head, the response head, the response
body, the rendered DOM. A length of ``0xFFFFFFFF`` marks a body never fetched plainly (a page Chromium
fetched itself: only its status and headers are known); an empty DOM part means the page was not rendered.

What "as fetched" means here: the request head is the one Scrapy sent (its headers after the downloader
middlewares; the ``Host`` line rebuilt from the URL, as HTTP clients do); the body is the one Scrapy handed
the spider, after its transfer coding and content coding (gzip, deflate, br) were undone, which is the body
``snapshot_sha256`` hashes. The response head keeps every header received, except that headers describing
codings no longer applied (``Transfer-Encoding``, and a ``Content-Length`` that no longer matches) are kept
under ``X-Fptrack-Orig-<name>`` and ``Content-Length`` states the body's length, so that a WARC reader
reads the payload the header describes."""

from __future__ import annotations

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

from fptrack.storage.chunks import id_chunks
from fptrack.storage.models import Match, Page, PageExchange, PageVersion, as_utc

__all__ = [
    "RawExchange",
    "exchange_for",
    "keep_exchanges",
    "pack_exchange",
    "prune_exchanges",
    "unpack_exchange",
]

_FORMAT = 1
_ABSENT = 0xFFFFFFFF
LEVEL = 1
"""zlib level of a kept exchange: against level 6, 0.43 instead of 0.73 ms of CPU for a 19.7 KB chapter page,
for 5 % more bytes (10.1 KB instead of 9.6 KB); every crawled page pays it, few are ever read back."""


@dataclass(frozen=True)
class RawExchange:
    """One fetch of a page. ``body`` None: never fetched plainly (Chromium fetched the page itself, so only
    its status and headers are known, in ``response_head``). ``rendered``: the DOM Chromium rendered, as UTF-8
    (what the page's text was extracted from, and what its ``snapshot_sha256`` hashes); ``b''`` for a page
    read without a browser."""

    url: str
    request_head: bytes
    response_head: bytes
    body: bytes | None
    fetched_at: datetime
    rendered: bytes = b""

    @property
    def snapshot(self) -> bytes:
        """The bytes the page's ``snapshot_sha256`` hashes: the rendered DOM, else the body."""
        return self.rendered if self.rendered else (self.body or b"")

    @property
    def snapshot_sha256(self) -> str:
        return hashlib.sha256(self.snapshot).hexdigest()


def pack_exchange(exchange: RawExchange) -> bytes:
    """The stored form of ``exchange`` (without its fetch time, which has a column)."""
    parts: list[bytes | None] = [
        exchange.url.encode("utf-8"),
        exchange.request_head,
        exchange.response_head,
        exchange.body,
        exchange.rendered,
    ]
    out = bytearray((_FORMAT,))
    for part in parts:
        if part is None:
            out += struct.pack(">I", _ABSENT)
        else:
            out += struct.pack(">I", len(part)) + part
    return zlib.compress(out, LEVEL)


def unpack_exchange(data: bytes, fetched_at: datetime) -> RawExchange:
    raw = zlib.decompress(data)
    if not raw or raw[0] != _FORMAT:
        raise ValueError(f"unknown page exchange format {raw[:1]!r}")
    parts: list[bytes | None] = []
    at = 1
    for _ in range(5):
        (length,) = struct.unpack_from(">I", raw, at)
        at += 4
        if length == _ABSENT:
            parts.append(None)
            continue
        parts.append(raw[at : at + length])
        at += length
    url, request_head, response_head, body, rendered = parts
    return RawExchange(
        url=(url or b"").decode("utf-8"),
        request_head=request_head or b"",
        response_head=response_head or b"",
        body=body,
        fetched_at=as_utc(fetched_at),
        rendered=rendered or b"",
    )


def keep_exchanges(session: Session, exchanges: Iterable[tuple[int, RawExchange]]) -> int:
    """Store the exchange of each ``(page id, exchange)`` (one already stored for the same page and snapshot
    is kept as it is: it is the same response). Returns how many rows were offered."""
    rows = [
        {
            "page_id": page_id,
            "snapshot_sha256": exchange.snapshot_sha256,
            "fetched_at": exchange.fetched_at,
            "rendered": bool(exchange.rendered),
            "data": pack_exchange(exchange),
        }
        for page_id, exchange in exchanges
    ]
    if not rows:
        return 0
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    # one statement, the rows as its parameters: compiled once and cached, where a VALUES clause of the rows
    # was compiled anew for each batch
    statement = insert(PageExchange).on_conflict_do_nothing(index_elements=["page_id", "snapshot_sha256"])
    session.execute(statement, rows)
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
        session.execute(
            delete(PageExchange)
            .where(PageExchange.page_id.in_(chunk))
            .where(or_(not_(has_match), and_(not_(current), not_(kept))))
            .execution_options(synchronize_session=False)
        )


def exchange_for(session: Session, page_id: int, snapshot_sha256: str) -> RawExchange | None:
    """The exchange kept of ``page_id`` whose snapshot is ``snapshot_sha256`` (the one a match rests on), or
    None when none was kept (a page fetched before exchanges were kept, or flagged later by a newly
    registered work after its exchange was dropped)."""
    row = session.execute(
        select(PageExchange.data, PageExchange.fetched_at).where(
            PageExchange.page_id == page_id, PageExchange.snapshot_sha256 == snapshot_sha256
        )
    ).first()
    return None if row is None else unpack_exchange(bytes(row[0]), row[1])
