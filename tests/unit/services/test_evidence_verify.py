"""``fptrack evidence verify`` on bundles nobody should trust: a zip that inflates to 400 MiB, a signed WARC
that does, a member named outside ASCII, an evidence.json nested a hundred thousand deep, a file that is
not a zip, a bundle re-signed with a key of its own. Each gives one line and a non-zero exit, in bounded
memory (measured in the process that runs the command), never a traceback; a time-stamp token without the
ESS signing-certificate attribute is refused as ``openssl ts -verify`` refuses it."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asn1crypto import cms, tsp
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from fptrack.services.evidence.bundle import (
    BundleError,
    key_fingerprint,
    public_key_pem,
    request_timestamp,
    sha256_hex,
    stored_zip,
    verify_timestamp,
)
from tests.support.tsa import local_tsa

MIB = 1024 * 1024
MEMORY_BOUND = 200 * MIB  # the interpreter and fptrack's imports take ~100 MiB of it
# The peak is the process's own (VmHWM, its memory's high-water mark since exec), not getrusage's ru_maxrss:
# Linux carries a parent's high-water mark into a child started by vfork and exec, so under a test runner
# grown to 600 MiB every child reported 600 MiB.
RUN = """
import sys
from fptrack.cli.main import main

def peak():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))

try:
    main(["evidence", "verify", *sys.argv[1:]])
finally:
    print(f"maxrss={peak()}", file=sys.stderr)
"""


def _verify(path: Path, *options: str, timeout: float = 120) -> tuple[int, str, str, int]:
    """Run the command in a process of its own: exit status, stdout, stderr less the memory line, peak RSS."""
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(path), *options],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = done.stderr.splitlines()
    peak = int(lines[-1].removeprefix("maxrss="))
    return done.returncode, done.stdout, "\n".join(lines[:-1]), peak


def _signed(members: dict[str, bytes], evidence: dict[str, object] | None = None) -> bytes:
    """A bundle of ``members`` with its SHA256SUMS signed by a fresh key, as a forger would make it; given
    ``evidence``, its evidence.json is that object naming the key, as fptrack writes it."""
    key = ed25519.Ed25519PrivateKey.generate()
    files = {**members, "signing-key.pub": public_key_pem(key.public_key())}
    if evidence is not None:
        named = {**evidence, "signing_key": {"fingerprint": key_fingerprint(key.public_key())}}
        files["evidence.json"] = json.dumps(named).encode()
    names = ("README.txt", "evidence.json", "page.warc.gz", "signing-key.pub")
    manifest = "".join(f"{sha256_hex(files[name])}  {name}\n" for name in names).encode()
    return stored_zip(
        [
            *((name, files[name]) for name in names),
            ("SHA256SUMS", manifest),
            ("SHA256SUMS.sig", key.sign(manifest)),
        ]
    )


def _inflating_zip(path: Path, size: int) -> None:
    """A zip whose one member deflates ``size`` zero bytes into a few hundred kilobytes."""
    chunk = bytes(4 * MIB)
    archive = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1)
    with archive, archive.open("evidence.json", "w") as member:
        for _ in range(size // len(chunk)):
            member.write(chunk)


@pytest.mark.slow
def test_a_member_that_inflates_to_400_mib_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.zip"
    _inflating_zip(bomb, 400 * MIB)
    assert bomb.stat().st_size < 2 * MIB
    status, _, errors, peak = _verify(bomb)
    assert status == 1 and errors.startswith("FAILED: ") and len(errors.splitlines()) == 1, errors
    assert peak < MEMORY_BOUND, f"{peak / MIB:.0f} MiB"


@pytest.mark.slow
def test_a_signed_warc_that_inflates_to_400_mib_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    def record(number: int) -> bytes:
        head = b"WARC/1.1\r\nWARC-Type: resource\r\nWARC-Record-ID: <urn:x:%d>\r\nContent-Length: %d\r\n\r\n"
        return head % (number, 4 * MIB) + bytes(4 * MIB) + b"\r\n\r\n"

    # a gzip member per record, as WARC files are: 100 records of 4 MiB, each inflated from 4 KiB
    warc = b"".join(gzip.compress(record(number), compresslevel=1) for number in range(100))
    bomb = tmp_path / "bomb.zip"
    # an evidence.json that lets the verifier reach the WARC: the fields it reads first are in order
    evidence = {"timestamp": "not timestamped", "page": {}, "match": {}, "warc": {"sha256": sha256_hex(warc)}}
    bomb.write_bytes(_signed({"README.txt": b"x", "page.warc.gz": warc}, evidence))
    status, _, errors, peak = _verify(bomb)
    assert status == 1 and errors.startswith("FAILED: ") and len(errors.splitlines()) == 1, errors
    assert peak < MEMORY_BOUND, f"{peak / MIB:.0f} MiB"


@pytest.mark.slow
def test_a_warc_line_of_64_mib_is_refused_at_once(tmp_path: Path) -> None:
    """A WARC head line without end, which a reader of whole lines reads for minutes."""
    head = gzip.compress(b"WARC/1.1\r\nWARC-Type: resource\r\nX-Long: " + b"a" * (4 * MIB), compresslevel=1)
    warc = head + gzip.compress(b"a" * (4 * MIB), compresslevel=1) * 15
    evidence = {"timestamp": "not timestamped", "page": {}, "match": {}, "warc": {"sha256": sha256_hex(warc)}}
    bomb = tmp_path / "line.zip"
    bomb.write_bytes(_signed({"README.txt": b"x", "page.warc.gz": warc}, evidence))
    status, _, errors, peak = _verify(bomb, timeout=60)
    assert status == 1 and "head is cut short or longer" in errors, errors
    assert peak < MEMORY_BOUND, f"{peak / MIB:.0f} MiB"


def test_hostile_zips_give_one_line_and_no_traceback(tmp_path: Path) -> None:
    nested = b"[" * 200_000 + b"]" * 200_000
    cases = {
        "not-a-zip": b"PK\x03\x04 this is not a zip" * 10,
        "non-ascii-name": stored_zip([("证据.json", b"{}"), ("évidence.json", b"{}")]),
        "nested-json": _signed({"README.txt": b"x", "evidence.json": nested, "page.warc.gz": b""}),
        "json-not-an-object": _signed({"README.txt": b"x", "evidence.json": b"[1]", "page.warc.gz": b""}),
        "fields-of-the-wrong-type": _signed(
            {"README.txt": b"x", "evidence.json": b'{"signing_key": [], "page": 3}', "page.warc.gz": b""}
        ),
        "many-entries": stored_zip([(f"{n}.txt", b"") for n in range(500)]),
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.zip"
        path.write_bytes(data)
        status, _, errors, _ = _verify(path)
        assert status == 1, (name, status, errors)
        assert errors.startswith("FAILED: ") and len(errors.splitlines()) == 1, (name, errors)
        assert "Traceback" not in errors


def _resigned_token(reply: bytes, key_file: Path, change: Callable[[Any], None] | None) -> bytes:
    """``reply`` with its ESS signing-certificate attribute dropped (``change`` None) or its first certificate
    id edited by ``change``, and signed again with the authority's own key: a token a self-made authority
    could issue."""
    response = tsp.TimeStampResp.load(reply)
    signer = response["time_stamp_token"]["content"]["signer_infos"][0]
    attributes = []
    for attribute in signer["signed_attrs"]:
        name = attribute["type"].native
        if name.startswith("signing_certificate"):
            if change is None:
                continue
            value = attribute["values"][0]
            change(value["certs"][0])
            attribute = cms.CMSAttribute({"type": name, "values": [value]})
        attributes.append(attribute)
    signer["signed_attrs"] = cms.CMSAttributes(attributes)
    signed_bytes = b"\x31" + signer["signed_attrs"].dump(force=True)[1:]
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    signer["signature"] = key.sign(signed_bytes, ec.ECDSA(hashes.SHA256()))
    return bytes(response.dump(force=True))


def _issued_as(certificate: asn1_x509.Certificate, serial: int) -> Callable[[Any], None]:
    """Set a certificate id's issuer and serial (some authorities write them; openssl does not)."""

    def change(certificate_id: Any) -> None:
        issuer = asn1_x509.GeneralName(name="directory_name", value=certificate.issuer)
        certificate_id["issuer_serial"] = tsp.IssuerSerial({"issuer": [issuer], "serial_number": serial})

    return change


def test_a_token_must_bind_its_certificate_by_the_ess_attribute(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"SHA256SUMS").digest()
    with local_tsa(tmp_path / "tsa") as authority:
        reply = request_timestamp(authority.url, digest)
    key_file = authority.folder / "tsa.key"
    ca = x509.load_pem_x509_certificate(authority.ca_cert.read_bytes())
    tsa_certificate = x509.load_pem_x509_certificate(authority.tsa_cert.read_bytes())
    signer = asn1_x509.Certificate.load(tsa_certificate.public_bytes(serialization.Encoding.DER))
    # re-signed with the attribute kept, or naming the issuer and serial, the token still verifies: the
    # forgeries below differ only in the attribute
    assert verify_timestamp(
        _resigned_token(reply, key_file, lambda certificate_id: None), digest, tsa_cert=ca
    )
    named = _resigned_token(reply, key_file, _issued_as(signer, signer.serial_number))
    assert verify_timestamp(named, digest, tsa_cert=ca)
    without = _resigned_token(reply, key_file, None)
    with pytest.raises(BundleError, match="no ESS signing-certificate attribute"):
        verify_timestamp(without, digest, tsa_cert=ca)

    def another_hash(certificate_id: Any) -> None:
        certificate_id["cert_hash"] = hashlib.sha256(ca.public_bytes(serialization.Encoding.DER)).digest()

    with pytest.raises(BundleError, match="names another certificate"):
        verify_timestamp(_resigned_token(reply, key_file, another_hash), digest, tsa_cert=ca)
    another_serial = _resigned_token(reply, key_file, _issued_as(signer, signer.serial_number + 1))
    with pytest.raises(BundleError, match="names another issuer or serial"):
        verify_timestamp(another_serial, digest, tsa_cert=ca)
    # openssl refuses the token without the attribute too
    (tmp_path / "data").write_bytes(b"SHA256SUMS")
    (tmp_path / "without.tsr").write_bytes(without)
    checked = subprocess.run(
        [
            "openssl",
            "ts",
            "-verify",
            "-in",
            "without.tsr",
            "-data",
            "data",
            "-CAfile",
            str(authority.ca_cert),
            "-untrusted",
            str(authority.tsa_cert),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode != 0
