"""Evidence bundles and takedown notices: what a rights holder sends or keeps, built from the store.

No Flask here. :func:`page_warc` writes the page as stored (its URL, fetch time and extracted text, plus its
fetch metadata: final URL, HTTP status, encoding, the SHA-256 of the bytes as fetched) as WARC records with
warcio; :func:`evidence_bundle` zips that WARC file with the match's evidence as JSON and a ``SHA256SUMS``
file. The crawler keeps the extracted text and the SHA-256 of the response body (``snapshot_sha256``), not
the body itself, so the WARC ``resource`` record holds the text as stored and the ``metadata`` record the
snapshot hash that identifies what was fetched.

The content bundled is the one the match's spans point into (:func:`storage.match_life.evidence_of`): when
a later fetch replaced the page's content (the copy was taken down, the page answers 404), the version kept of
the copied content, with its own fetch time, status and hashes (``kept_version_id`` in the metadata names it).
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from warcio.warcwriter import WARCWriter

from fptrack.storage.match_life import Evidence
from fptrack.storage.models import Page, as_utc

__all__ = ["evidence_bundle", "page_warc", "sha256_hex"]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _warc_date(moment: datetime | None) -> str:
    moment = moment or datetime.now(UTC)
    moment = as_utc(moment)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _content(page: Page, stored: Evidence | None) -> Evidence:
    """What is bundled of ``page``: ``stored`` (the content a match rests on) or the page as it is now."""
    if stored is not None:
        return stored
    return Evidence(
        page.text or "", page.title, page.final_url, page.status, page.content_sha256, page.snapshot_sha256,
        as_utc(page.fetched_at), None,
    )  # fmt: skip


def page_metadata(page: Page, stored: Evidence | None = None) -> dict[str, Any]:
    content = _content(page, stored)
    metadata: dict[str, Any] = {
        "url": page.url,
        "final_url": content.final_url,
        "host": page.host,
        "http_status": content.status,
        "encoding": page.encoding,
        "content_type": page.content_type,
        "title": content.title,
        "fetched_at": _warc_date(content.fetched_at),
        "snapshot_sha256": content.snapshot_sha256,
        "text_sha256": sha256_hex((content.text or "").encode("utf-8")),
    }
    if content.version_id is not None:
        metadata["kept_version_id"] = content.version_id
    return metadata


def page_warc(page: Page, stored: Evidence | None = None) -> bytes:
    """A gzipped WARC file: ``warcinfo``, the page's text as a ``resource`` record (target URI the page URL,
    date its fetch time) and a ``metadata`` record with its fetch metadata, concurrent to the resource.
    ``stored``: the content to write instead of the page's current one (the version a match rests on)."""
    content = _content(page, stored)
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=True)
    info = writer.create_warcinfo_record(
        "page.warc.gz",
        {"software": "fptrack", "format": "WARC File Format 1.1", "description": "page as stored"},
    )
    writer.write_record(info)
    body = (content.text or "").encode("utf-8")
    resource = writer.create_warc_record(
        page.url,
        "resource",
        payload=io.BytesIO(body),
        length=len(body),
        warc_content_type="text/plain; charset=utf-8",
        warc_headers_dict={"WARC-Date": _warc_date(content.fetched_at)},
    )
    writer.write_record(resource)
    metadata = json.dumps(page_metadata(page, stored), ensure_ascii=False, indent=2).encode("utf-8")
    record_id = resource.rec_headers.get_header("WARC-Record-ID")
    writer.write_record(
        writer.create_warc_record(
            page.url,
            "metadata",
            payload=io.BytesIO(metadata),
            length=len(metadata),
            warc_content_type="application/json",
            warc_headers_dict={"WARC-Date": _warc_date(content.fetched_at), "WARC-Concurrent-To": record_id},
        )
    )
    return buffer.getvalue()


def evidence_bundle(
    page: Page,
    evidence: dict[str, Any],
    history: Sequence[dict[str, Any]],
    stored: Evidence | None = None,
) -> bytes:
    """A zip of ``page.warc.gz``, ``evidence.json`` (the match, its passages, the page's metadata, the WARC
    file's SHA-256, the review history), ``README.txt`` and ``SHA256SUMS`` (``sha256sum -c`` checks it).
    ``stored``: the content the match rests on, bundled instead of the page's current one."""
    warc = page_warc(page, stored)
    document = {
        **evidence,
        "page": page_metadata(page, stored),
        "warc": {"file": "page.warc.gz", "sha256": sha256_hex(warc)},
        "history": list(history),
        "bundled_at": _warc_date(None),
    }
    files = {
        "page.warc.gz": warc,
        "evidence.json": json.dumps(document, ensure_ascii=False, indent=2).encode("utf-8"),
        "README.txt": (
            b"fptrack evidence bundle\n\n"
            b"page.warc.gz   the page as stored by fptrack (extracted text, a WARC resource record) and its\n"
            b"               fetch metadata (a WARC metadata record: final URL, HTTP status, encoding, the\n"
            b"               SHA-256 of the bytes as fetched)\n"
            b"evidence.json  the match: registered work and chapter, score, methods, the copied passages "
            b"with\n"
            b"               their character offsets, the review history\n"
            b"SHA256SUMS     check with: sha256sum -c SHA256SUMS\n"
        ),
    }
    sums = "".join(f"{sha256_hex(data)}  {name}\n" for name, data in files.items())
    output = io.BytesIO()
    with zipfile.ZipFile(output, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in {**files, "SHA256SUMS": sums.encode("ascii")}.items():
            archive.writestr(name, data)
    return output.getvalue()
