"""The signing key tied to the rights holder by an X.509 certificate, on SQLite and PostgreSQL: ``fptrack
evidence key --cert`` installs one an authority issued for the key (one for another key, or expired, is
refused with one line); every bundle carries it (``signing-key.crt``, signed with the rest); ``verify --ca``
accepts the bundle without ``--key`` when the certificate chains to that authority and names whom it
certifies; another authority, or a bundle signed again with another key beside the genuine certificate,
fail; without ``--ca`` the certificate proves nothing (UNVERIFIED ORIGIN)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID
from sqlalchemy.orm import Session

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.services.evidence.bundle import (
    build_bundle,
    key_fingerprint,
    load_signing_key,
    public_key_pem,
    sha256_hex,
    stored_zip,
    verify_bundle,
)
from tests.support.admin_seed import seed
from tests.support.tsa import LocalTsa, local_tsa

OWNER = "山中文化有限公司"
SIGNING = x509.KeyUsage(
    True, True, False, False, False, False, False, False, False
)  # digitalSignature, nonRepudiation


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _authority(name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name)).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return certificate, key


def _certify(
    public: ed25519.Ed25519PublicKey,
    authority: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    *,
    days: int = 365,
    start: datetime | None = None,
) -> bytes:
    ca, key = authority
    begin = start or datetime.now(UTC) - timedelta(hours=1)
    certificate = (
        x509.CertificateBuilder().subject_name(_name(OWNER)).issuer_name(ca.subject).public_key(public)
        .serial_number(x509.random_serial_number()).not_valid_before(begin)
        .not_valid_after(begin + timedelta(days=days))
        .add_extension(SIGNING, critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return certificate.public_bytes(serialization.Encoding.PEM)


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


@pytest.fixture
def tsa(tmp_path: Path) -> Iterator[LocalTsa]:
    with local_tsa(tmp_path / "tsa") as authority:
        yield authority


def _env(settings: Settings) -> dict[str, str]:
    return {"FPTRACK_DATA_DIR": str(settings.data_dir), "FPTRACK_DATABASE_URL": settings.database_url}


def test_a_certified_key_verifies_with_the_authority_alone(
    session: Session, settings: Settings, tsa: LocalTsa, tmp_path: Path
) -> None:
    seeded = seed(session)
    settings = settings.with_overrides(tsa_url=tsa.url)
    authority = _authority("Rights CA")
    public = load_signing_key(settings).public_key()
    runner = CliRunner()
    env = _env(settings)

    stranger = tmp_path / "stranger.pem"
    stranger.write_bytes(_certify(ed25519.Ed25519PrivateKey.generate().public_key(), authority))
    refused = runner.invoke(main, ["evidence", "key", "--cert", str(stranger)], env=env)
    assert refused.exit_code == 1 and "certifies another key" in refused.output, refused.output
    expired = tmp_path / "expired.pem"
    expired.write_bytes(_certify(public, authority, days=1, start=datetime.now(UTC) - timedelta(days=3)))
    refused = runner.invoke(main, ["evidence", "key", "--cert", str(expired)], env=env)
    assert refused.exit_code == 1 and "not valid now" in refused.output, refused.output

    genuine = tmp_path / "owner.pem"
    genuine.write_bytes(_certify(public, authority))
    installed = runner.invoke(main, ["evidence", "key", "--cert", str(genuine)], env=env)
    assert installed.exit_code == 0 and f"CN={OWNER}" in installed.output, installed.output
    assert "certificate: " in runner.invoke(main, ["evidence", "key"], env=env).output

    data = build_bundle(session, seeded.hostile_match_id, settings)
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert (
        "signing-key.crt" in archive.namelist() and "signing-key.crt" in archive.read("SHA256SUMS").decode()
    )
    ca, tsa_ca = authority[0], x509.load_pem_x509_certificate(tsa.ca_cert.read_bytes())
    result = verify_bundle(data, key_ca=[ca], tsa_cert=tsa_ca)
    assert result.ok, result.failure
    assert result.origin == f"certified as CN={OWNER} by CN=Rights CA"
    # the certificate alone proves nothing: anyone can issue one to themselves
    alone = verify_bundle(data, tsa_cert=tsa_ca)
    assert (
        alone.intact
        and not alone.ok
        and "not checked: pass its authority's certificate as --ca" in "\n".join(alone.lines)
    )
    other = verify_bundle(data, key_ca=[_authority("Other CA")[0]], tsa_cert=tsa_ca)
    assert not other.intact and "chains to none of the certificates given as --ca" in (other.failure or "")

    # on the command line: --ca instead of --key, exit 0
    bundle, ca_file = tmp_path / "bundle.zip", tmp_path / "ca.pem"
    bundle.write_bytes(data)
    ca_file.write_bytes(_pem(ca))
    done = runner.invoke(
        main, ["evidence", "verify", str(bundle), "--ca", str(ca_file), "--tsa-cert", str(tsa.ca_cert)]
    )
    assert done.exit_code == 0 and "key certificate: certified as" in done.output, done.output
    unknown = runner.invoke(main, ["evidence", "verify", str(bundle), "--tsa-cert", str(tsa.ca_cert)])
    assert unknown.exit_code == 3 and "--ca" in unknown.output


def test_a_rekeyed_bundle_beside_the_genuine_certificate_fails(
    session: Session, settings: Settings, tmp_path: Path
) -> None:
    seeded = seed(session)
    authority = _authority("Rights CA")
    genuine = tmp_path / "owner.pem"
    genuine.write_bytes(_certify(load_signing_key(settings).public_key(), authority))
    done = CliRunner().invoke(main, ["evidence", "key", "--cert", str(genuine)], env=_env(settings))
    assert done.exit_code == 0, done.output
    data = build_bundle(session, seeded.hostile_match_id, settings)
    assert verify_bundle(data, key_ca=[authority[0]]).ok

    # a forger keeps the genuine certificate, edits evidence.json and signs with a key of its own
    archive = zipfile.ZipFile(io.BytesIO(data))
    members = {name: archive.read(name) for name in archive.namelist()}
    forger = ed25519.Ed25519PrivateKey.generate()
    members["signing-key.pub"] = public_key_pem(forger.public_key())
    members["evidence.json"] = members["evidence.json"].replace(
        key_fingerprint(load_signing_key(settings).public_key()).encode(),
        key_fingerprint(forger.public_key()).encode(),
    )
    signed = ["README.txt", "evidence.json", "page.warc.gz", "signing-key.pub", "signing-key.crt"]
    manifest = "".join(f"{sha256_hex(members[name])}  {name}\n" for name in signed).encode()
    forged = stored_zip(
        [
            *((name, members[name]) for name in signed),
            ("SHA256SUMS", manifest),
            ("SHA256SUMS.sig", forger.sign(manifest)),
        ]
    )
    result = verify_bundle(forged, key_ca=[authority[0]])
    assert not result.intact and "certifies another key" in (result.failure or ""), result.failure
