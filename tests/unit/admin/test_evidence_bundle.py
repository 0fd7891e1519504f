"""Evidence bundles a recipient can check, on SQLite and PostgreSQL: the raw HTTP exchange in the WARC, no
notes or user names, times in UTC with the zone, SHA256SUMS signed and timestamped by a local RFC 3161
authority (``openssl ts -reply`` on 127.0.0.1), and ``fptrack evidence verify`` failing on any changed
byte."""

from __future__ import annotations

import hashlib
import io
import json
import re
import stat
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ed25519
from flask.testing import FlaskClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from warcio.archiveiterator import ArchiveIterator

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.services.evidence.bundle import (
    NOT_TIMESTAMPED,
    BundleError,
    build_bundle,
    key_fingerprint,
    load_signing_key,
    public_key_pem,
    request_timestamp,
    stored_zip,
    verify_bundle,
    verify_timestamp,
)
from fptrack.storage.exchanges import RawExchange, exchange_for, keep_exchanges, prune_exchanges
from fptrack.storage.models import Match, MatchNote, Page, PageExchange, PageVersion, ReviewDecision
from tests.support.accounts import add_account, log_in
from tests.support.admin_seed import Seeded, seed
from tests.support.tsa import LocalTsa, local_tsa

BODY = "<html><head><title>盗版</title></head><body>正文</body></html>".encode()
RESPONSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n" % len(BODY)
)
REQUEST_HEAD = b"GET /book/1.html HTTP/1.1\r\nHost: pirate.example\r\nUser-Agent: fptrack-test\r\n\r\n"
SECRET_NOTE = "internal: the owner's lawyer is slow"
REVIEWER = "reviewer-alice-7"
NOTE_AUTHOR = "note-author-bob-9"
UTC_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture
def tsa(tmp_path: Path) -> Iterator[LocalTsa]:
    with local_tsa(tmp_path / "tsa") as authority:
        yield authority


@pytest.fixture
def flagged(session: Session) -> Seeded:
    """The seeded rows, the hostile page with the exchange it was fetched in, a decision and a note."""
    seeded = seed(session)
    match = session.get(Match, seeded.hostile_match_id)
    assert match is not None
    match.page.snapshot_sha256 = hashlib.sha256(BODY).hexdigest()
    exchange = RawExchange(
        url=match.page.final_url,
        request_head=REQUEST_HEAD,
        response_head=RESPONSE_HEAD,
        body=BODY,
        fetched_at=datetime(2026, 11, 25, 17, 0, tzinfo=UTC),
    )
    keep_exchanges(session, [(match.page_id, exchange)])
    session.add(
        ReviewDecision(
            match_id=match.id, decision="confirmed", reviewer=REVIEWER, note=SECRET_NOTE + " (decision)"
        )
    )
    session.add(MatchNote(match_id=match.id, author=NOTE_AUTHOR, text=SECRET_NOTE))
    session.commit()
    return seeded


def _bundle(session: Session, settings: Settings, match_id: int) -> bytes:
    return build_bundle(session, match_id, settings)


def _trusted(settings: Settings) -> bytes:
    """The installation's public key, as its owner hands it to a recipient."""
    return public_key_pem(load_signing_key(settings).public_key())


def _times(value: object) -> list[str]:
    """Every string in ``value`` that looks like a date and time."""
    if isinstance(value, dict):
        return [t for item in value.values() for t in _times(item)]
    if isinstance(value, list):
        return [t for item in value for t in _times(item)]
    return [value] if isinstance(value, str) and re.match(r"^\d{4}-\d\d-\d\dT", value) else []


def test_bundle_carries_the_exchange_and_verifies_with_the_timestamp(
    session: Session, settings: Settings, flagged: Seeded, tsa: LocalTsa
) -> None:
    settings = settings.with_overrides(tsa_url=tsa.url)
    data = _bundle(session, settings, flagged.hostile_match_id)
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert archive.namelist() == [
        "README.txt",
        "evidence.json",
        "page.warc.gz",
        "signing-key.pub",
        "SHA256SUMS",
        "SHA256SUMS.sig",
        "SHA256SUMS.tsr",
        "SHA256SUMS.sig.tsr",  # the signature's own timestamp
    ]
    assert len(tsa.queries) == 2
    evidence = json.loads(archive.read("evidence.json"))
    records = [
        (r, r.raw_stream.read()) for r in ArchiveIterator(io.BytesIO(archive.read("page.warc.gz")))
    ]  # each record's payload is read before the iterator moves on
    assert [r.rec_type for r, _ in records] == ["warcinfo", "request", "response", "conversion", "metadata"]
    (request, _), (response, body), (conversion, _) = records[1], records[2], records[3]
    assert request.http_headers.protocol == "GET"
    assert request.http_headers.get_header("User-Agent") == "fptrack-test"
    assert response.http_headers.get_statuscode() == "200"
    assert body == BODY and hashlib.sha256(body).hexdigest() == evidence["page"]["snapshot_sha256"]
    assert conversion.rec_headers.get_header("WARC-Refers-To") == response.rec_headers.get_header(
        "WARC-Record-ID"
    )
    assert request.rec_headers.get_header("WARC-Date") == "2026-11-25T17:00:00Z"

    cert = x509.load_pem_x509_certificate(tsa.ca_cert.read_bytes())
    result = verify_bundle(data, trusted_key=_trusted(settings), tsa_cert=cert)
    assert result.ok, result.failure
    summary = "\n".join(result.lines)
    assert "timestamp: " in summary and "CN=Test TSA" in summary and "the certificate given" in summary
    assert "response payload hashes to snapshot_sha256" in summary
    # the recipient's own tools agree: openssl checks the token against the CA
    folder = tsa.folder / "check"
    folder.mkdir()
    archive.extractall(folder)
    import subprocess

    checked = subprocess.run(
        [
            "openssl",
            "ts",
            "-verify",
            "-in",
            "SHA256SUMS.tsr",
            "-data",
            "SHA256SUMS",
            "-CAfile",
            str(tsa.ca_cert),
            "-untrusted",
            str(tsa.tsa_cert),
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0 and "Verification: OK" in checked.stdout, checked.stderr
    signature = subprocess.run(
        ["openssl", "ts", "-verify", "-in", "SHA256SUMS.sig.tsr", "-data", "SHA256SUMS.sig",
         "-CAfile", str(tsa.ca_cert), "-untrusted", str(tsa.tsa_cert)],
        cwd=folder, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert signature.returncode == 0 and "Verification: OK" in signature.stdout, signature.stderr
    assert "signature timestamp: " in summary
    sums = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=folder, capture_output=True, check=False)
    assert sums.returncode == 0


def test_external_bundle_has_no_notes_or_names_and_utc_times(
    session: Session, settings: Settings, flagged: Seeded
) -> None:
    data = _bundle(session, settings, flagged.hostile_match_id)
    archive = zipfile.ZipFile(io.BytesIO(data))
    everything = b"".join(archive.read(name) for name in archive.namelist())
    warc_text = b"".join(
        r.content_stream().read() for r in ArchiveIterator(io.BytesIO(archive.read("page.warc.gz")))
    )
    for secret in (SECRET_NOTE, REVIEWER, NOTE_AUTHOR):
        assert secret.encode() not in everything and secret.encode() not in warc_text
    evidence = json.loads(archive.read("evidence.json"))
    assert evidence["review"] == [
        {"decision": "confirmed", "by": "a reviewer", "at": evidence["review"][0]["at"]}
    ]
    times = _times(evidence)
    assert len(times) >= 5 and all(UTC_Z.match(t) for t in times), times
    assert evidence["match"]["first_seen"] == "2026-03-01T12:00:00Z"
    assert evidence["timestamp"] == NOT_TIMESTAMPED
    assert b"not timestamped" in archive.read("README.txt")
    assert "SHA256SUMS.tsr" not in archive.namelist()
    result = verify_bundle(data, trusted_key=_trusted(settings))
    assert result.ok, result.failure
    assert any(NOT_TIMESTAMPED in line for line in result.lines)


def test_any_changed_byte_fails_verification(
    session: Session, settings: Settings, flagged: Seeded, tsa: LocalTsa
) -> None:
    data = _bundle(session, settings.with_overrides(tsa_url=tsa.url), flagged.hostile_match_id)
    ca = x509.load_pem_x509_certificate(tsa.ca_cert.read_bytes())  # the local authority, trusted by name
    assert verify_bundle(data, trusted_key=_trusted(settings), tsa_cert=ca).ok
    # every member's header, data start, middle and end, and every byte of the central directory and its end
    archive = zipfile.ZipFile(io.BytesIO(data))
    positions: set[int] = set()
    for info in archive.infolist():
        start = info.header_offset
        data_start = start + 30 + len(info.filename)
        positions |= set(range(start, data_start + 8))
        positions |= {data_start + info.file_size // 2, data_start + info.file_size - 1}
    directory = data.rfind(b"PK\x01\x02", 0, data.rfind(b"PK\x05\x06"))
    positions |= set(range(data.index(b"PK\x01\x02"), len(data)))
    assert directory > 0
    positions |= set(range(0, len(data), 97))  # and a sample across everything
    for position in sorted(positions):
        changed = bytearray(data)
        changed[position] ^= 0x01
        assert not verify_bundle(bytes(changed)).intact, (
            f"byte {position} changed and the bundle still verified"
        )
    assert not verify_bundle(data + b"\x00").intact
    assert not verify_bundle(data[:-1]).intact


def test_a_rehashed_and_resigned_bundle_fails_against_the_trusted_key(
    session: Session, settings: Settings, flagged: Seeded, tmp_path: Path
) -> None:
    data = _bundle(session, settings, flagged.hostile_match_id)
    trusted = _trusted(settings)
    assert verify_bundle(data, trusted_key=trusted).ok
    # an installation with another key makes a valid-looking bundle: without a key it is of no known origin,
    # and the recipient's --key refuses it
    other = settings.with_overrides(signing_key_file=tmp_path / "other.pem")
    forged = _bundle(session, other, flagged.hostile_match_id)
    unchecked = verify_bundle(forged)
    assert unchecked.intact and not unchecked.ok and unchecked.verdict.startswith("UNVERIFIED ORIGIN: ")
    result = verify_bundle(forged, trusted_key=trusted)
    assert not result.ok and "not the key given" in str(result.failure)


def test_signing_key_is_made_once_readable_by_its_owner_only(settings: Settings) -> None:
    first = load_signing_key(settings)
    path = settings.data_dir / "signing-key.pem"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert public_key_pem(load_signing_key(settings).public_key()) == public_key_pem(first.public_key())


def test_timestamp_checks(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"manifest").digest()
    with local_tsa(tmp_path / "tsa") as authority:
        reply = request_timestamp(authority.url, digest)
        ca = x509.load_pem_x509_certificate(authority.ca_cert.read_bytes())
        info = verify_timestamp(reply, digest, tsa_cert=ca)
        assert info.authority == "CN=Test TSA"
        with pytest.raises(BundleError, match="message imprint"):
            verify_timestamp(reply, hashlib.sha256(b"other").digest())
        # a certificate the recipient trusts that did not issue the TSA's
        with local_tsa(tmp_path / "elsewhere") as other:
            stranger = x509.load_pem_x509_certificate(other.ca_cert.read_bytes())
        with pytest.raises(BundleError, match="neither the certificate given"):
            verify_timestamp(reply, digest, tsa_cert=stranger)
    with local_tsa(tmp_path / "no-usage", time_stamping=False) as wrong, pytest.raises(BundleError):
        request_timestamp(wrong.url, digest)
    with pytest.raises(BundleError, match="did not answer"):
        request_timestamp("http://127.0.0.1:9/tsa", digest, timeout=2)


def test_cli_bundle_verify_and_key(
    session: Session, settings: Settings, flagged: Seeded, tsa: LocalTsa, tmp_path: Path
) -> None:
    session.close()
    env = {
        "FPTRACK_DATA_DIR": str(settings.data_dir),
        "FPTRACK_DATABASE_URL": settings.database_url,
        "FPTRACK_TSA_URL": tsa.url,
    }
    runner = CliRunner()
    output = tmp_path / "bundle.zip"
    made = runner.invoke(
        main, ["evidence", "bundle", "--match", str(flagged.hostile_match_id), "-o", str(output)], env=env
    )
    assert made.exit_code == 0, made.output
    key = runner.invoke(main, ["evidence", "key"], env=env)
    assert key.exit_code == 0 and "BEGIN PUBLIC KEY" in key.output and "fingerprint: SHA256:" in key.output
    trusted = tmp_path / "trusted.pub"
    trusted.write_text(key.output.split("fingerprint:")[0])
    ok = runner.invoke(
        main,
        ["evidence", "verify", str(output), "--key", str(trusted), "--tsa-cert", str(tsa.ca_cert)],
        env=env,
    )
    assert ok.exit_code == 0, ok.output
    assert "OK:" in ok.output and "signature: good" in ok.output and "(the key given)" in ok.output
    fingerprint = key.output.split("fingerprint:")[1].strip()
    by_fingerprint = runner.invoke(
        main,
        ["evidence", "verify", str(output), "--fingerprint", fingerprint, "--tsa-ca", str(tsa.ca_cert)],
        env=env,
    )
    assert by_fingerprint.exit_code == 0 and "(the fingerprint given)" in by_fingerprint.output
    unknown = runner.invoke(
        main, ["evidence", "verify", str(output), "--tsa-cert", str(tsa.ca_cert)], env=env
    )
    assert unknown.exit_code == 3 and "UNVERIFIED ORIGIN: " in unknown.output and "OK" not in unknown.output
    changed = bytearray(output.read_bytes())
    changed[len(changed) // 2] ^= 0xFF
    output.write_bytes(bytes(changed))
    failed = runner.invoke(main, ["evidence", "verify", str(output)], env=env)
    assert failed.exit_code == 1 and "FAILED:" in failed.output
    missing = runner.invoke(main, ["evidence", "bundle", "--match", "999999", "-o", str(output)], env=env)
    assert missing.exit_code == 1 and "no match with id 999999" in missing.output


def test_admin_bundle_route(app: object, settings: Settings, flagged: Seeded) -> None:
    from flask import Flask

    assert isinstance(app, Flask)
    add_account(settings, "rev", "reviewer")
    client: FlaskClient = app.test_client()
    log_in(client, "rev")
    response = client.get(f"/matches/{flagged.hostile_match_id}/bundle.zip")
    assert response.status_code == 200 and response.mimetype == "application/zip"
    assert verify_bundle(response.get_data(), trusted_key=_trusted(settings)).ok
    assert client.get("/matches/999999/bundle.zip").status_code == 404


def test_exchanges_are_dropped_unless_a_match_rests_on_them(session: Session, flagged: Seeded) -> None:
    match = session.get(Match, flagged.hostile_match_id)
    assert match is not None
    page = match.page
    lone = Page(
        url="http://pirate.example/nothing.html",
        final_url="http://pirate.example/nothing.html",
        host="pirate.example",
        status=200,
        text="无关",
        snapshot_sha256=hashlib.sha256(b"x").hexdigest(),
    )
    session.add(lone)
    session.flush()

    def fetch(body: bytes) -> RawExchange:
        return RawExchange("http://pirate.example/", REQUEST_HEAD, RESPONSE_HEAD, body, datetime.now(UTC))

    old_snapshot = page.snapshot_sha256
    keep_exchanges(session, [(lone.id, fetch(b"x")), (page.id, fetch(b"a later fetch"))])
    # the page's current snapshot, and an older one kept as a version
    session.add(
        PageVersion(
            page_id=page.id,
            status=200,
            content_sha256="c" * 64,
            snapshot_sha256=hashlib.sha256(b"an older fetch").hexdigest(),
            fetched_at=datetime.now(UTC),
            replaced_at=datetime.now(UTC),
        )
    )
    keep_exchanges(session, [(page.id, fetch(b"an older fetch"))])
    prune_exchanges(session, [lone.id, page.id])
    left = {(p, s) for p, s in session.execute(select(PageExchange.page_id, PageExchange.snapshot_sha256))}
    assert left == {(page.id, old_snapshot), (page.id, hashlib.sha256(b"an older fetch").hexdigest())}
    kept = exchange_for(session, page.id, old_snapshot)
    assert kept is not None and kept.body == BODY and kept.request_head == REQUEST_HEAD
    assert (
        session.scalar(select(func.count()).select_from(PageExchange).where(PageExchange.page_id == lone.id))
        == 0
    )


def test_the_zip_is_a_function_of_its_members() -> None:
    """The bytes of a bundle's zip for fixed members, as the hand-packed writer produced them before the
    standard zipfile wrote it: a change of date, attribute, version or layout changes the digest."""
    members = [
        ("README.txt", b"fptrack evidence bundle\n"),
        ("evidence.json", '{"t": "盗版"}'.encode()),
        ("empty", b""),
        ("page.warc.gz", bytes(range(256)) * 40),
    ]
    data = stored_zip(members)
    assert len(data) == 10685
    assert (
        hashlib.sha256(data).hexdigest() == "eadf03dcd6846d72f9110db7fc18f6662af11f37522a7eddcc009dffb8a7ee46"
    )
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert [(i.filename, i.date_time, i.external_attr >> 16) for i in archive.infolist()] == [
            (name, (1980, 1, 1, 0, 0, 0), 0o100644) for name, _ in members
        ]
        assert [archive.read(name) for name, _ in members] == [body for _, body in members]


def _forged(data: bytes, edit: Callable[[dict[str, Any]], None], key: ed25519.Ed25519PrivateKey) -> bytes:
    """``data`` with evidence.json edited by ``edit`` and everything signed again with ``key``, the timestamp
    dropped: what anyone holding a bundle can make, consistent in every hash and signature."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    evidence = json.loads(files["evidence.json"])
    edit(evidence)
    evidence["signing_key"]["fingerprint"] = key_fingerprint(key.public_key())
    evidence["timestamp"] = NOT_TIMESTAMPED
    files["evidence.json"] = json.dumps(evidence, ensure_ascii=False, indent=2).encode()
    files["signing-key.pub"] = public_key_pem(key.public_key())
    names = ("README.txt", "evidence.json", "page.warc.gz", "signing-key.pub")
    manifest = "".join(f"{hashlib.sha256(files[name]).hexdigest()}  {name}\n" for name in names).encode()
    signed = [*((name, files[name]) for name in names), ("SHA256SUMS", manifest)]
    return stored_zip([*signed, ("SHA256SUMS.sig", key.sign(manifest))])


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    def edit(evidence: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = evidence
        for part in parents:
            target = target[part]
        target[last] = value

    return edit


def _both(*edits: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def edit(evidence: dict[str, Any]) -> None:
        for one in edits:
            one(evidence)

    return edit


def test_evidence_json_claims_are_checked_against_the_warc(
    session: Session, settings: Settings, flagged: Seeded
) -> None:
    data = _bundle(session, settings, flagged.hostile_match_id)
    forger = ed25519.Ed25519PrivateKey.generate()
    trusted = public_key_pem(forger.public_key())
    # unedited, the re-signed bundle verifies against the forger's key: only the edits below fail it
    assert verify_bundle(_forged(data, lambda evidence: None, forger), trusted_key=trusted).ok
    elsewhere = "http://licensed.example/book/1.html"
    edits = {
        "another URL": _both(_set("page.url", elsewhere), _set("match.page_url", elsewhere)),
        "another final URL": _set("page.final_url", elsewhere),
        "another capture time": _set("page.fetched_at", "2026-12-01T00:00:00Z"),
        "another status": _set("page.http_status", 410),
        "a match about another page": _set("match.page_url", elsewhere),
        "another title": _set("page.title", "正版"),
        "made before the capture": _set("created_at", "2020-01-01T00:00:00Z"),
        "reviewed after it was made": _set(
            "review", [{"decision": "confirmed", "by": "a reviewer", "at": "2099-01-01T00:00:00Z"}]
        ),
    }
    for what, edit in edits.items():
        result = verify_bundle(_forged(data, edit, forger), trusted_key=trusted)
        assert result.failure is not None, f"{what}: verified"
        assert any(word in str(result.failure) for word in ("WARC", "another URL", "capture", "after")), (
            what,
            result.failure,
        )


def test_a_timestamp_earlier_than_the_capture_fails(
    session: Session, settings: Settings, flagged: Seeded, tsa: LocalTsa
) -> None:
    match = session.get(Match, flagged.hostile_match_id)
    assert match is not None
    match.page.fetched_at = datetime.now(UTC) + timedelta(days=1)
    session.commit()
    data = _bundle(session, settings.with_overrides(tsa_url=tsa.url), flagged.hostile_match_id)
    result = verify_bundle(data, trusted_key=_trusted(settings))
    assert "precedes the page's capture" in str(result.failure)
