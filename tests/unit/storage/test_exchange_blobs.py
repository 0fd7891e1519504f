"""A downloaded file's payload is kept once per SHA-256 (``blobs``, page_exchanges format 3), however many
URLs and re-fetches serve it; small pages keep format 2 inline; pruning drops a blob only once no exchange
names it (never what a match rests on); two workers storing the same blob at once both succeed. SQLite and
PostgreSQL."""

from __future__ import annotations

import gzip
import io
import os
import threading
import zipfile
from datetime import UTC, datetime
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session

from fptrack.storage import exchanges
from fptrack.storage.exchanges import (
    RawExchange,
    exchange_for,
    keep_exchanges,
    pack_stored,
    prune_exchanges,
    unpack_exchange,
)
from fptrack.storage.models import Blob, Match, Page, PageExchange
from tests.support.admin_seed import seed

WHEN = datetime(2026, 11, 29, 17, 0, tzinfo=UTC)
REQUEST = b"GET /down/book.zip HTTP/1.1\r\nHost: pirate.example\r\n\r\n"


def _book_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("第一卷/003.txt", "第三章\n正文。".encode(), zipfile.ZIP_DEFLATED)
        archive.writestr("cover.jpg", os.urandom(200 * 1024), zipfile.ZIP_STORED)
    return buffer.getvalue()


ZIP = _book_zip()


def _download(url: str, body: bytes = ZIP, when: datetime = WHEN) -> RawExchange:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/zip\r\nContent-Length: %d\r\n\r\n" % len(body)
    return RawExchange(url, REQUEST, head, body, when, ip_address="127.0.0.1")


def _page(session: Session, url: str) -> Page:
    page = Page(url=url, final_url=url, host="pirate.example", status=200, encoding="", text="正文")
    session.add(page)
    session.flush()
    return page


@settings(max_examples=60, deadline=None)
@given(
    body=st.binary(max_size=200),
    coded=st.booleans(),
    rendered=st.binary(max_size=20),
    minimum=st.integers(min_value=0, max_value=150),
)
def test_format_3_gives_back_the_exchange_it_stored(
    body: bytes, coded: bool, rendered: bytes, minimum: int
) -> None:
    head = b"HTTP/1.1 200 OK\r\n" + (b"Content-Encoding: gzip\r\n" if coded else b"") + b"\r\n"
    wire = gzip.compress(body, mtime=0) if coded else None
    exchange = RawExchange("http://x/a.zip", REQUEST, head, body, WHEN, rendered, "::1", wire)
    with mock.patch.object(exchanges, "BLOB_MIN_BYTES", minimum):
        packed = pack_stored(exchange)
    payload = exchange.payload or b""
    if len(payload) < minimum:
        assert packed.blob is None and packed.data[:1] == b"\x02"
        assert unpack_exchange(packed.data, WHEN) == exchange
        return
    assert packed.data[:1] == b"\x03" and packed.blob == payload
    assert unpack_exchange(packed.data, WHEN, packed.blob) == exchange
    assert payload not in packed.data or len(payload) < 8  # the payload is not inline


def test_one_blob_however_many_urls_and_fetches_serve_it(session: Session) -> None:
    pages = [_page(session, f"http://pirate{n}.example/down/book.zip") for n in range(3)]
    small = _page(session, "http://pirate.example/1.html")
    html = RawExchange(
        small.url, REQUEST, b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n", b"<p>ch1</p>", WHEN
    )
    offered = [(page.id, _download(page.url)) for page in pages]
    later = datetime(2026, 11, 30, tzinfo=UTC)
    offered.append((pages[0].id, _download(pages[0].url, ZIP + b"\0", later)))  # a re-fetch, a new snapshot
    keep_exchanges(session, [*offered, (small.id, html)])
    keep_exchanges(session, offered[:1])  # the same fetch offered again
    session.commit()

    assert session.scalar(select(func.count()).select_from(Blob)) == 2
    rows = session.execute(select(PageExchange.page_id, PageExchange.data, PageExchange.blob_sha256)).all()
    assert len(rows) == 5
    for page_id, data, blob in rows:
        if page_id == small.id:  # an ordinary page: format 2, inline, as before
            assert bytes(data)[:1] == b"\x02" and blob is None
        else:
            assert bytes(data)[:1] == b"\x03" and len(bytes(data)) < 1024 and blob is not None
    for page_id, exchange in offered:
        assert exchange_for(session, page_id, exchange.snapshot_sha256) == exchange
    assert exchange_for(session, small.id, html.snapshot_sha256) == html


def test_pruning_drops_a_blob_only_when_no_exchange_names_it(session: Session) -> None:
    ids = seed(session)
    match = session.get(Match, ids.hostile_match_id)
    assert match is not None
    flagged = match.page
    clean = _page(session, "http://mirror.example/down/book.zip")
    copy = _download(flagged.url)
    flagged.snapshot_sha256 = copy.snapshot_sha256
    keep_exchanges(session, [(flagged.id, copy), (clean.id, _download(clean.url))])
    session.commit()

    prune_exchanges(session, [clean.id, flagged.id])  # the clean page's goes; the match rests on the other
    session.commit()
    assert session.scalar(select(func.count()).select_from(PageExchange)) == 1
    assert session.scalar(select(func.count()).select_from(Blob)) == 1
    assert exchange_for(session, flagged.id, copy.snapshot_sha256) == copy

    session.execute(delete(Match).where(Match.page_id == flagged.id))  # no match rests on it any more
    prune_exchanges(session, [flagged.id])
    session.commit()
    assert session.scalar(select(func.count()).select_from(PageExchange)) == 0
    assert session.scalar(select(func.count()).select_from(Blob)) == 0


def test_two_workers_storing_the_same_blob_at_once_both_succeed(session: Session, engine: Engine) -> None:
    pages = [_page(session, f"http://pirate{n}.example/down/book.zip") for n in range(8)]
    session.commit()
    start = threading.Barrier(len(pages))
    failures: list[BaseException] = []

    def store(page: Page) -> None:
        try:
            with Session(engine) as own:
                start.wait()
                keep_exchanges(own, [(page.id, _download(page.url))])
                own.commit()
        except Exception as error:  # noqa: BLE001 - reported below
            failures.append(error)

    workers = [threading.Thread(target=store, args=(page,)) for page in pages]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []
    assert session.scalar(select(func.count()).select_from(Blob)) == 1
    assert session.scalar(select(func.count()).select_from(PageExchange)) == len(pages)


def test_a_prune_waits_for_a_worker_naming_the_blob_and_keeps_it(session: Session, engine: Engine) -> None:
    """Worker A stores a new exchange naming a blob and has not committed; worker B prunes the only other
    exchange naming it: B waits for A's transaction, then sees A's exchange and keeps the blob."""
    old, new = _page(session, "http://old.example/book.zip"), _page(session, "http://new.example/book.zip")
    keep_exchanges(session, [(old.id, _download(old.url))])
    session.commit()
    fetched = _download(new.url)
    pruned = threading.Event()
    with Session(engine) as worker_a:
        keep_exchanges(worker_a, [(new.id, fetched)])  # holds the blob's row until it commits
        worker_a.flush()

        def prune() -> None:
            with Session(engine) as worker_b:
                prune_exchanges(worker_b, [old.id])  # no match: its exchange goes, the blob is a candidate
                worker_b.commit()
            pruned.set()

        thread = threading.Thread(target=prune)
        thread.start()
        assert not pruned.wait(1.0)  # waiting on worker A
        worker_a.commit()
    thread.join(timeout=60)
    assert pruned.is_set()
    session.expire_all()
    assert session.scalar(select(func.count()).select_from(Blob)) == 1
    assert exchange_for(session, new.id, fetched.snapshot_sha256) == fetched
    assert exchange_for(session, old.id, _download(old.url).snapshot_sha256) is None
