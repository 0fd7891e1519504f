"""What is sealed when a page is flagged: the capture statement of a kept exchange (``page_exchanges``) and
the RFC 3161 time-stamp token over its SHA-256 (``capture_stamps``).

The capture statement (format ``fptrack-capture/1``) is a few lines of ASCII that name the exchange by the
WARC records an evidence bundle makes of it (services/evidence/bundle.py ``page_warc``), each by the SHA-256
of its block, so that a recipient holding the WARC can write the statement again and check the token::

    fptrack-capture/1
    target <the response's URL: the records' WARC-Target-URI>
    date <the fetch time, UTC to the second: the records' WARC-Date>
    request <SHA-256 of the request record's block: the request head>
    response <SHA-256 of the response record's block: the response head and payload as received>
    rendered <SHA-256 of the rendered DOM's resource record block>

A line is left out when the record is (no request head kept; a page Chromium fetched itself has no response
record: its line is ``browser-response-head <SHA-256 of the head the browser reported>``, the head the
WARC's metadata record carries). The statement's SHA-256 is what the token's message imprint holds.

Why a statement over record blocks rather than the WARC file's hash: the WARC is written when a bundle is
made (its record ids and warcinfo are new each time), while the capture is sealed when the page is flagged;
the blocks are the exchange's bytes, the same then and later. :func:`exchange_statement` is the one place
that says which bytes each block holds: the verifier reads them back from the WARC
(``services.evidence.bundle``) and a test checks both agree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import exists, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from fptrack.storage.exchanges import RawExchange, read_exchange
from fptrack.storage.models import CaptureStamp, Match, PageExchange, as_utc, utcnow

__all__ = [
    "CAPTURE_FORMAT",
    "Unstamped",
    "capture_statement",
    "exchange_statement",
    "record_stamp",
    "stamp_for",
    "unstamped_captures",
]

CAPTURE_FORMAT = "fptrack-capture/1"


def _utc_z(moment: datetime) -> str:
    return as_utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def capture_statement(target: str, date: str, blocks: Sequence[tuple[str, str]]) -> bytes:
    """The statement of a capture of ``target`` at ``date`` (``2026-11-25T18:00:00Z``) whose WARC blocks
    hash to ``blocks`` (``(name, SHA-256 hex)`` in the order above). Raises ValueError for a target or name
    holding a line break, which would let one statement read as another."""
    lines = [CAPTURE_FORMAT, f"target {target}", f"date {date}"]
    lines += [f"{name} {digest}" for name, digest in blocks]
    if any("\n" in line or "\r" in line for line in lines):
        raise ValueError("a capture statement's fields hold no line breaks")
    return ("\n".join(lines) + "\n").encode("utf-8")


def exchange_statement(exchange: RawExchange) -> bytes:
    """The capture statement of ``exchange`` (see the module docstring)."""
    blocks: list[tuple[str, str]] = []
    if exchange.body is not None:
        if exchange.request_head:
            blocks.append(("request", hashlib.sha256(exchange.request_head).hexdigest()))
        payload = exchange.payload or b""  # as received: the response record's payload
        blocks.append(("response", hashlib.sha256(exchange.response_head + payload).hexdigest()))
    else:
        blocks.append(("browser-response-head", hashlib.sha256(exchange.response_head).hexdigest()))
    if exchange.rendered:
        blocks.append(("rendered", hashlib.sha256(exchange.rendered).hexdigest()))
    return capture_statement(exchange.url, _utc_z(exchange.fetched_at), blocks)


@dataclass(frozen=True)
class Unstamped:
    """A kept exchange of a page with a match that has no time-stamp yet."""

    page_id: int
    snapshot_sha256: str
    statement: bytes

    @property
    def capture_sha256(self) -> str:
        return hashlib.sha256(self.statement).hexdigest()


def unstamped_captures(
    session: Session, page_ids: Sequence[int] | None = None, *, limit: int = 1000
) -> list[Unstamped]:
    """The kept exchanges of pages with a match (of ``page_ids``, or of every page) that no token covers yet,
    oldest fetch first, at most ``limit``."""
    has_match = exists().where(Match.page_id == PageExchange.page_id)
    stamped = exists().where(
        CaptureStamp.page_id == PageExchange.page_id,
        CaptureStamp.snapshot_sha256 == PageExchange.snapshot_sha256,
    )
    query = (
        select(
            PageExchange.page_id,
            PageExchange.snapshot_sha256,
            PageExchange.data,
            PageExchange.fetched_at,
            PageExchange.blob_sha256,
        )
        .where(has_match, ~stamped)
        .order_by(PageExchange.fetched_at, PageExchange.id)
        .limit(limit)
    )
    if page_ids is not None:
        query = query.where(PageExchange.page_id.in_(sorted(set(page_ids))))
    found = session.execute(query).all()  # read whole before each blob is read
    return [
        Unstamped(page_id, snapshot, exchange_statement(read_exchange(session, bytes(data), when, blob)))
        for page_id, snapshot, data, when, blob in found
    ]


def record_stamp(
    session: Session, capture: Unstamped, *, authority: str, token: bytes, stamped_at: datetime
) -> None:
    """Store the token ``authority`` gave over ``capture``'s statement (the caller commits); a token stored
    meanwhile for the same capture (another worker's) is kept and this one dropped."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    statement = insert(CaptureStamp).on_conflict_do_nothing(index_elements=["page_id", "snapshot_sha256"])
    session.execute(
        statement,
        {
            "page_id": capture.page_id,
            "snapshot_sha256": capture.snapshot_sha256,
            "capture_sha256": capture.capture_sha256,
            "authority": authority,
            "token": token,
            "stamped_at": stamped_at,
            "created_at": utcnow(),
        },
    )


def stamp_for(session: Session, page_id: int, snapshot_sha256: str) -> CaptureStamp | None:
    """The time-stamp of the capture ``(page_id, snapshot_sha256)``, or None."""
    return session.scalars(
        select(CaptureStamp).where(
            CaptureStamp.page_id == page_id, CaptureStamp.snapshot_sha256 == snapshot_sha256
        )
    ).first()
