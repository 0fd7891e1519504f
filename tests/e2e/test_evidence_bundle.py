"""End to end: crawl a site on 127.0.0.1 that carries copies, a local time-stamping authority configured ->
the matches, each flagged page's capture time-stamped as its batch was compared (before any reviewer
confirmed it, before any bundle) -> ``fptrack evidence bundle`` holds the HTTP request and response of the
copy as fetched, whose payload hashes to the page's snapshot SHA-256, and the capture's token;
``fptrack evidence verify`` accepts it given the installation's key and the authority's certificate
(UNVERIFIED ORIGIN without the key, UNTRUSTED TIMESTAMP without the certificate) and refuses it once a byte
changed. Pages without a match keep no exchange and no stamp."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from warcio.archiveiterator import ArchiveIterator

from fptrack.cli.demo import DEMO_DATA
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CaptureStamp, Match, Page, PageExchange, ReviewDecision, as_utc
from testbed.sites import serve_site
from tests.support.pirate_site import pirate_site
from tests.support.tsa import local_tsa

pytestmark = pytest.mark.slow


def test_a_crawled_copy_is_bundled_as_fetched(fptrack, tmp_path: Path) -> None:
    pages, _expected = pirate_site()
    fptrack.run("init")
    fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
    output = tmp_path / "bundle.zip"
    with local_tsa(tmp_path / "tsa") as tsa, serve_site(pages) as base:
        fptrack.extra_env["FPTRACK_TSA_URL"] = tsa.url
        fptrack.run("crawl", base + "/", "--allow-private-host", base.key, "--depth", "3", "--quiet")
        matches = fptrack.matches()
        assert matches
        copy = next(m for m in matches if m["page_url"].endswith("/light/1.html"))
        fptrack.run(
            "review", str(copy["id"]), "confirm", "--copy-kind", "whole_chapter", "--fair-use-considered"
        )

        engine = create_engine_for(fptrack.settings)
        try:
            with Session(engine) as session:
                flagged = set(session.scalars(select(Match.page_id)))
                kept = set(session.scalars(select(PageExchange.page_id)))
                pages_with_text = session.scalar(
                    select(func.count()).select_from(Page).where(Page.status == 200)
                )
                stamps = {stamp.page_id: stamp for stamp in session.scalars(select(CaptureStamp))}
                first_seen = {m.page_id: as_utc(m.first_seen) for m in session.scalars(select(Match))}
                copy_page = session.scalars(select(Match.page_id).where(Match.id == copy["id"])).one()
                confirmed = as_utc(
                    session.scalars(
                        select(ReviewDecision.decided_at).where(ReviewDecision.match_id == copy["id"])
                    ).one()
                )
        finally:
            engine.dispose()
        # every flagged page keeps the exchange it was read from; the others (most of the site) keep none
        assert kept == flagged and (pages_with_text or 0) > len(flagged)
        # each flagged capture was stamped as its batch was compared: within seconds of the match being
        # recorded, before the reviewer confirmed it; pages without a match were never sent to the authority
        assert set(stamps) == flagged
        assert len(tsa.queries) == len(flagged)
        for page_id, stamp in stamps.items():
            sealed = as_utc(stamp.stamped_at)
            assert (
                first_seen[page_id] - timedelta(seconds=5)
                <= sealed
                <= first_seen[page_id] + timedelta(seconds=60)
            )
        copy_sealed = as_utc(stamps[copy_page].stamped_at)
        assert copy_sealed <= confirmed

        fptrack.run("evidence", "bundle", "--match", str(copy["id"]), "-o", str(output))
        unverified = fptrack.run(
            "evidence", "verify", str(output), "--tsa-cert", str(tsa.ca_cert), check=False
        )
        key = tmp_path / "owner.pub"
        key.write_text(fptrack.run("evidence", "key").stdout.split("fingerprint:")[0])
        verified = fptrack.run(
            "evidence", "verify", str(output), "--key", str(key), "--tsa-cert", str(tsa.ca_cert)
        )
        untrusted = fptrack.run("evidence", "verify", str(output), "--key", str(key), check=False)
    # the local authority is no authority of the system's trust store: named by the recipient, or refused
    assert untrusted.returncode == 1 and "FAILED: UNTRUSTED TIMESTAMP" in untrusted.stderr
    assert f"capture: sealed {copy_sealed:%Y-%m-%dT%H:%M:%SZ}" in verified.stdout
    assert "before the first review decision" in verified.stdout
    # intact, but nothing ties the key in the zip to its owner until the recipient names the key
    assert unverified.returncode == 3 and "UNVERIFIED ORIGIN" in unverified.stderr
    assert "OK:" in verified.stdout and "response payload hashes to snapshot_sha256" in verified.stdout
    assert "agree with the WARC" in verified.stdout

    archive = zipfile.ZipFile(io.BytesIO(output.read_bytes()))
    evidence = json.loads(archive.read("evidence.json"))
    created = datetime.strptime(evidence["created_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert copy_sealed.replace(microsecond=0) <= created  # sealed before the bundle was packed
    assert evidence["capture"]["stamped_at"] == f"{copy_sealed:%Y-%m-%dT%H:%M:%SZ}"
    found = {}
    for record in ArchiveIterator(io.BytesIO(archive.read("page.warc.gz"))):
        found[record.rec_type] = (record, record.raw_stream.read())
    assert {"warcinfo", "request", "response", "conversion", "metadata"} <= set(found)
    request, _ = found["request"]
    response, body = found["response"]
    assert request.http_headers.protocol == "GET"
    assert request.rec_headers.get_header("WARC-Target-URI").endswith("/light/1.html")
    assert response.http_headers.get_statuscode() == "200"
    assert hashlib.sha256(body).hexdigest() == evidence["page"]["snapshot_sha256"]
    assert "<html" in body.decode("utf-8", errors="replace").lower()

    changed = bytearray(output.read_bytes())
    changed[len(changed) // 3] ^= 0x20
    output.write_bytes(bytes(changed))
    failed = fptrack.run("evidence", "verify", str(output), check=False)
    assert failed.returncode == 1 and "FAILED:" in failed.stderr
