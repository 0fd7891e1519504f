"""Evidence sealed at its moment and trusted only from authorities the recipient trusts, on SQLite and
PostgreSQL, with a local RFC 3161 authority (``openssl ts -reply`` on 127.0.0.1):

- a flagged page's kept exchange gets a time-stamp over its capture statement (jobs/capture_stamps.py);
  without ``FPTRACK_TSA_URL`` nothing happens; an authority that does not answer leaves the capture for the
  sweep (``fptrack evidence stamp``), nothing lost;
- the bundle carries the capture's token (``capture.tsr``) and ``verify`` writes the statement again from
  the WARC's records, checks the token over it and reports the capture time; a kept exchange changed after
  it was sealed fails the bundle; a swapped token fails verify;
- the signature has a token of its own (``SHA256SUMS.sig.tsr``);
- a token of an authority neither the system's trust store nor ``--tsa-cert`` names fails by default
  (UNTRUSTED TIMESTAMP), a self-made "DigiCert" back-dated to 2020 among them."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography import x509
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.jobs import capture_stamps as stamping
from fptrack.jobs.capture_stamps import stamp_captures
from fptrack.services.evidence.bundle import (
    UNTRUSTED_TIMESTAMP,
    BundleError,
    build_bundle,
    load_signing_key,
    public_key_pem,
    sha256_hex,
    stored_zip,
    verify_bundle,
    verify_timestamp,
)
from fptrack.storage.capture_stamps import exchange_statement, unstamped_captures
from fptrack.storage.exchanges import RawExchange, keep_exchanges, pack_exchange
from fptrack.storage.models import CaptureStamp, Match, PageExchange, ReviewDecision, as_utc
from tests.support.admin_seed import Seeded, seed
from tests.support.tsa import LocalTsa, backdated_token, local_tsa

BODY = "<html><head><title>盗版</title></head><body>正文</body></html>".encode()
RESPONSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n" % len(BODY)
)
REQUEST_HEAD = b"GET /book/1.html HTTP/1.1\r\nHost: pirate.example\r\nUser-Agent: fptrack-test\r\n\r\n"
DOM = "<html><body>正文 rendered</body></html>".encode()
FETCHED = datetime(2026, 11, 25, 17, 0, tzinfo=UTC)
UNREACHABLE = "http://127.0.0.1:9/tsa"  # the discard port: nothing answers


@pytest.fixture
def tsa(tmp_path: Path) -> Iterator[LocalTsa]:
    with local_tsa(tmp_path / "tsa") as authority:
        yield authority


def _exchange(kind: str, url: str) -> RawExchange:
    """A kept exchange of each kind: plain HTTP, gzip-coded as received, plain then rendered, rendered by
    Chromium alone."""
    if kind == "plain":
        return RawExchange(url, REQUEST_HEAD, RESPONSE_HEAD, BODY, FETCHED)
    if kind == "gzip":  # the payload as received, gzip-coded, and the body it decodes to
        coded = gzip.compress(BODY)
        head = b"HTTP/1.1 200 Fine Thanks\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(
            coded
        )
        return RawExchange(url, REQUEST_HEAD, head, BODY, FETCHED, ip_address="127.0.0.1", wire_body=coded)
    if kind == "rendered":
        return RawExchange(url, REQUEST_HEAD, RESPONSE_HEAD, BODY, FETCHED, rendered=DOM)
    return RawExchange(
        url, b"", b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n", None, FETCHED, rendered=DOM
    )


def _flag(session: Session, kind: str = "plain") -> tuple[Seeded, RawExchange]:
    """The seeded rows with the hostile page's fetch kept (its snapshot the exchange's) and confirmed."""
    seeded = seed(session)
    match = session.get(Match, seeded.hostile_match_id)
    assert match is not None
    exchange = _exchange(kind, match.page.final_url or match.page.url)
    match.page.snapshot_sha256 = exchange.snapshot_sha256
    keep_exchanges(session, [(match.page_id, exchange)])
    session.commit()
    return seeded, exchange


def _ca(tsa: LocalTsa) -> x509.Certificate:
    return x509.load_pem_x509_certificate(tsa.ca_cert.read_bytes())


def _trusted(settings: Settings) -> bytes:
    return public_key_pem(load_signing_key(settings).public_key())


@pytest.fixture(autouse=True)
def _no_pause() -> Iterator[None]:
    """Each test starts with the authority not paused by an earlier test's failure."""
    stamping._paused_until = 0.0
    yield
    stamping._paused_until = 0.0


@pytest.mark.parametrize("kind", ["plain", "gzip", "rendered", "browser-only"])
def test_a_flagged_capture_is_stamped_and_its_bundle_proves_it(
    session: Session, settings: Settings, tsa: LocalTsa, kind: str
) -> None:
    seeded, exchange = _flag(session, kind)
    with_tsa = settings.with_overrides(tsa_url=tsa.url)
    before = datetime.now(UTC).replace(microsecond=0)
    done = stamp_captures(session, with_tsa)
    assert (done.stamped, done.left, done.error) == (1, 0, None)
    stamp = session.scalars(select(CaptureStamp)).one()
    assert stamp.capture_sha256 == sha256_hex(exchange_statement(exchange))
    # the token is over the statement's SHA-256 and states when it was made
    info = verify_timestamp(
        stamp.token, hashlib.sha256(exchange_statement(exchange)).digest(), tsa_cert=_ca(tsa)
    )
    assert before - timedelta(seconds=1) <= info.time <= datetime.now(UTC) + timedelta(seconds=1)
    assert stamp_captures(session, with_tsa).stamped == 0  # stamped once
    assert unstamped_captures(session) == []

    data = build_bundle(session, seeded.hostile_match_id, with_tsa)
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert "capture.tsr" in archive.namelist() and "SHA256SUMS.sig.tsr" in archive.namelist()
    evidence = json.loads(archive.read("evidence.json"))
    assert evidence["capture"]["statement"] == exchange_statement(exchange).decode()
    assert "capture.tsr" in archive.read("SHA256SUMS").decode()  # signed with the rest
    result = verify_bundle(data, trusted_key=_trusted(with_tsa), tsa_cert=_ca(tsa))
    assert result.ok, result.failure
    lines = "\n".join(result.lines)
    assert f"capture: sealed {evidence['capture']['stamped_at']}" in lines
    assert "signature timestamp: " in lines
    if kind == "plain":  # a recipient with openssl alone, as docs/evidence.md says
        folder = tsa.folder / "by-hand"
        folder.mkdir()
        archive.extractall(folder)
        (folder / "statement").write_text(evidence["capture"]["statement"], newline="")
        for token, data in (("capture.tsr", "statement"), ("SHA256SUMS.sig.tsr", "SHA256SUMS.sig")):
            checked = subprocess.run(
                ["openssl", "ts", "-verify", "-in", token, "-data", data, "-CAfile", str(tsa.ca_cert)],
                cwd=folder, capture_output=True, text=True, check=False,
            )  # fmt: skip
            assert checked.returncode == 0 and "Verification: OK" in checked.stdout, checked.stderr
    # the capture's token is no later than the bundle's, and no later than the bundle was made
    created = datetime.strptime(evidence["created_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert info.time.replace(microsecond=0) <= created


def test_without_an_authority_nothing_is_stamped_and_the_bundle_says_so(
    session: Session, settings: Settings
) -> None:
    seeded, _ = _flag(session)
    assert stamp_captures(session, settings).stamped == 0
    assert session.scalars(select(CaptureStamp)).all() == []
    data = build_bundle(session, seeded.hostile_match_id, settings)
    evidence = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("evidence.json"))
    assert evidence["capture"] == "no capture timestamp"
    result = verify_bundle(data, trusted_key=_trusted(settings))
    assert result.ok, result.failure
    assert any(line.startswith("capture: no capture timestamp") for line in result.lines)


def test_an_unreachable_authority_leaves_the_capture_for_the_sweep(
    session: Session, settings: Settings, tsa: LocalTsa
) -> None:
    _flag(session)
    down = stamp_captures(session, settings.with_overrides(tsa_url=UNREACHABLE), timeout=2)
    assert (down.stamped, down.left) == (0, 1) and down.error
    assert session.scalars(select(CaptureStamp)).all() == []
    page_ids = [capture.page_id for capture in unstamped_captures(session)]
    # flagged pages wait for the pause after a failure (no batch waits on a dead authority again)...
    assert stamp_captures(session, settings.with_overrides(tsa_url=tsa.url), page_ids).stamped == 0
    # ... the sweep does not, and nothing was lost
    assert stamp_captures(session, settings.with_overrides(tsa_url=tsa.url)).stamped == 1


def test_fptrack_evidence_stamp_is_the_sweep(
    session: Session, settings: Settings, tsa: LocalTsa, monkeypatch: pytest.MonkeyPatch
) -> None:
    _flag(session)
    runner = CliRunner()
    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    missing = runner.invoke(main, ["evidence", "stamp"], env={**env, "FPTRACK_TSA_URL": ""})
    assert missing.exit_code == 1 and "FPTRACK_TSA_URL is not set" in missing.output
    down = runner.invoke(main, ["evidence", "stamp"], env={**env, "FPTRACK_TSA_URL": UNREACHABLE})
    assert down.exit_code == 1 and "stamped 0 capture(s); 1 left" in down.output
    assert "the time-stamping authority failed" in down.output and "Traceback" not in down.output
    done = runner.invoke(main, ["evidence", "stamp"], env={**env, "FPTRACK_TSA_URL": tsa.url})
    assert done.exit_code == 0 and "stamped 1 capture(s); 0 left" in done.output, done.output


def test_an_exchange_changed_after_it_was_sealed_fails_the_bundle(
    session: Session, settings: Settings, tsa: LocalTsa
) -> None:
    seeded, exchange = _flag(session)
    with_tsa = settings.with_overrides(tsa_url=tsa.url)
    stamp_captures(session, with_tsa)
    edited = RawExchange(
        exchange.url, REQUEST_HEAD.replace(b"fptrack-test", b"someone-else"), RESPONSE_HEAD, BODY, FETCHED
    )
    session.execute(update(PageExchange).values(data=pack_exchange(edited)))
    session.commit()
    with pytest.raises(BundleError, match="changed after it was sealed"):
        build_bundle(session, seeded.hostile_match_id, with_tsa)


def _resigned(data: bytes, settings: Settings, replace: dict[str, bytes]) -> bytes:
    """``data`` with members replaced, listed and signed again with the installation's own key: what an
    insider with the key could make, so that only the tokens can tell."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    members = {name: archive.read(name) for name in archive.namelist()}
    members.update(replace)
    signed = [
        name
        for name in ("README.txt", "evidence.json", "page.warc.gz", "signing-key.pub", "capture.tsr")
        if name in members
    ]
    manifest = "".join(f"{sha256_hex(members[name])}  {name}\n" for name in signed).encode()
    key = load_signing_key(settings)
    out: list[tuple[str, bytes]] = [(name, members[name]) for name in signed]
    out += [("SHA256SUMS", manifest), ("SHA256SUMS.sig", key.sign(manifest))]
    out += [(name, members[name]) for name in ("SHA256SUMS.tsr", "SHA256SUMS.sig.tsr") if name in members]
    return stored_zip(out)


def test_a_capture_token_of_another_capture_or_a_signature_token_of_another_signature_fails(
    session: Session, settings: Settings, tsa: LocalTsa
) -> None:
    seeded, _ = _flag(session)
    with_tsa = settings.with_overrides(tsa_url=tsa.url)
    stamp_captures(session, with_tsa)
    data = build_bundle(session, seeded.hostile_match_id, with_tsa)
    archive = zipfile.ZipFile(io.BytesIO(data))
    ca = _ca(tsa)
    # the bundle token in place of the capture's: a token over other bytes
    swapped = _resigned(data, with_tsa, {"capture.tsr": archive.read("SHA256SUMS.tsr")})
    result = verify_bundle(swapped, trusted_key=_trusted(with_tsa), tsa_cert=ca)
    assert not result.intact and "imprint differs" in (result.failure or "")
    # a signature token over something else than the signature
    other = _resigned(data, with_tsa, {"SHA256SUMS.sig.tsr": archive.read("SHA256SUMS.tsr")})
    result = verify_bundle(other, trusted_key=_trusted(with_tsa), tsa_cert=ca)
    assert not result.intact and "imprint differs" in (result.failure or "")
    # evidence.json edited and signed again with the key: the tokens made before no longer cover it
    edited = json.loads(archive.read("evidence.json"))
    edited["passages"] = edited["passages"][:1]
    forged = _resigned(data, with_tsa, {"evidence.json": json.dumps(edited).encode()})
    result = verify_bundle(forged, trusted_key=_trusted(with_tsa), tsa_cert=ca)
    assert not result.intact and "imprint differs" in (result.failure or "")


def test_a_self_made_authority_is_untrusted_by_default(
    session: Session, settings: Settings, tsa: LocalTsa
) -> None:
    seeded, _ = _flag(session)
    with_tsa = settings.with_overrides(tsa_url=tsa.url)
    stamp_captures(session, with_tsa)
    data = build_bundle(session, seeded.hostile_match_id, with_tsa)
    result = verify_bundle(data, trusted_key=_trusted(with_tsa))
    assert not result.intact
    assert (result.failure or "").startswith(UNTRUSTED_TIMESTAMP), result.failure
    assert "CN=Test TSA" in (result.failure or "") and "--tsa-cert" in (result.failure or "")
    assert verify_bundle(data, trusted_key=_trusted(with_tsa), tsa_cert=[_ca(tsa)]).ok


def test_a_backdated_digicert_token_fails_by_default(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"SHA256SUMS of a forged bundle").digest()
    dated = datetime(2020, 3, 1, 9, 0, tzinfo=UTC)
    token, root = backdated_token(tmp_path / "forger", digest, dated)
    # the token is sound in itself: signed, ESS attribute, time-stamping usage, valid in 2020
    assert verify_timestamp(token, digest).time == dated
    with pytest.raises(BundleError, match=UNTRUSTED_TIMESTAMP) as refused:
        verify_timestamp(token, digest, require_trust=True)
    assert "DigiCert Timestamp 2020" in str(refused.value)
    with local_tsa(tmp_path / "honest") as honest, pytest.raises(BundleError, match=UNTRUSTED_TIMESTAMP):
        verify_timestamp(token, digest, tsa_cert=_ca(honest))
    # only a recipient who names the forger's own root trusts it
    trusted = x509.load_pem_x509_certificate(root.read_bytes())
    assert verify_timestamp(token, digest, tsa_cert=trusted).time == dated


def test_verify_on_the_command_line_names_the_untrusted_timestamp(
    session: Session, settings: Settings, tsa: LocalTsa, tmp_path: Path
) -> None:
    seeded, _ = _flag(session)
    with_tsa = settings.with_overrides(tsa_url=tsa.url)
    stamp_captures(session, with_tsa)
    bundle = tmp_path / "bundle.zip"
    bundle.write_bytes(build_bundle(session, seeded.hostile_match_id, with_tsa))
    key = tmp_path / "owner.pub"
    key.write_bytes(_trusted(with_tsa))
    runner = CliRunner()
    refused = runner.invoke(main, ["evidence", "verify", str(bundle), "--key", str(key)])
    assert refused.exit_code == 1 and f"FAILED: {UNTRUSTED_TIMESTAMP}:" in refused.output, refused.output
    both = tmp_path / "roots.pem"  # a file of several roots, the local one among them
    both.write_bytes(_ca_pem_of_another(tmp_path) + tsa.ca_cert.read_bytes())
    accepted = runner.invoke(
        main, ["evidence", "verify", str(bundle), "--key", str(key), "--tsa-ca", str(both)]
    )
    assert accepted.exit_code == 0 and "capture: sealed" in accepted.output, accepted.output


def _ca_pem_of_another(tmp_path: Path) -> bytes:
    with local_tsa(tmp_path / "another") as another:
        return another.ca_cert.read_bytes()


def test_a_review_after_the_capture_was_sealed(session: Session, settings: Settings, tsa: LocalTsa) -> None:
    """The capture is sealed when the page is flagged: a reviewer's confirmation comes after it."""
    seeded, _ = _flag(session)
    with_tsa = settings.with_overrides(tsa_url=tsa.url)
    stamp_captures(session, with_tsa)
    session.add(ReviewDecision(match_id=seeded.hostile_match_id, decision="confirmed", reviewer="r"))
    session.commit()
    stamp = session.scalars(select(CaptureStamp)).one()
    decision = session.scalars(select(ReviewDecision)).one()
    assert as_utc(stamp.stamped_at).replace(microsecond=0) <= as_utc(decision.decided_at)
    result = verify_bundle(
        build_bundle(session, seeded.hostile_match_id, with_tsa),
        trusted_key=_trusted(with_tsa),
        tsa_cert=_ca(tsa),
    )
    assert result.ok and "before the first review decision" in "\n".join(result.lines), result


def test_the_stamp_task_and_a_broker_that_fails(
    session: Session, settings: Settings, tsa: LocalTsa, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task the compare task and the sweep hand flagged pages to; handing on never fails the caller."""
    from fptrack.jobs import tasks

    seeded, _ = _flag(session)
    page_id = session.scalars(select(Match.page_id).where(Match.id == seeded.hostile_match_id)).one()
    tasks.configure(settings.with_overrides(tsa_url=tsa.url))

    def broken(*args: object) -> None:
        raise ConnectionError("the broker is down")

    try:
        monkeypatch.setattr(tasks.stamp_captures, "delay", broken)
        tasks._enqueue_stamps([page_id])  # logged, not raised: the sweep stamps it later
        monkeypatch.undo()
        assert tasks.stamp_captures.run([page_id]) == {"stamped": 1, "left": 0, "error": None}
        assert tasks.stamp_captures.run(None) == {"stamped": 0, "left": 0, "error": None}
    finally:
        tasks.configure(settings)  # no authority for the tests that come after


def test_an_authority_of_the_system_trust_store_needs_no_tsa_cert(
    session: Session, settings: Settings, tsa: LocalTsa, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a recipient of a bundle stamped by a public authority runs: no --tsa-cert, the system's store
    (here a store of the local root among a certificate that does not parse) vouches for the authority."""
    from fptrack.services.evidence.bundle import system_trust_anchors

    seeded, _ = _flag(session)
    with_tsa = settings.with_overrides(tsa_url=tsa.url)
    stamp_captures(session, with_tsa)
    data = build_bundle(session, seeded.hostile_match_id, with_tsa)
    store = tmp_path / "store.pem"
    broken = b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
    store.write_bytes(broken + tsa.ca_cert.read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(store))
    system_trust_anchors.cache_clear()
    try:
        assert len(system_trust_anchors()) == 1
        result = verify_bundle(data, trusted_key=_trusted(with_tsa))
        assert result.ok, result.failure
        assert "the system's trust store (CN=Test Root CA)" in "\n".join(result.lines)
    finally:
        system_trust_anchors.cache_clear()
