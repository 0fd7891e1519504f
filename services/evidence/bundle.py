"""Evidence bundles a recipient can check: the page as fetched, signed by the installation and timestamped.

No Flask here (the admin's bundle route and ``fptrack evidence`` both call :func:`build_bundle`). A bundle is
a zip of, in this order:

- ``README.txt``: what the files are and how to check them without fptrack;
- ``evidence.json``: the match (work, chapter, score, the copied passages beside the original's), the page's
  fetch metadata, the review decisions reduced to what and when ("confirmed by a reviewer"): no internal
  notes, no user names. Every time is UTC with its zone written (``2026-11-25T18:00:00Z``);
- ``page.warc.gz``: the page as fetched (:func:`page_warc`): ``warcinfo``, the ``request`` and ``response``
  records of the fetch (:mod:`storage.exchanges` keeps them for flagged pages), for a page rendered in
  Chromium a ``resource`` record of the DOM it rendered, the extracted text as a ``conversion`` record
  referring to what it was extracted from, and a ``metadata`` record;
- ``signing-key.pub``: the installation's Ed25519 public key;
- ``SHA256SUMS``: the SHA-256 of the four files above (``sha256sum -c SHA256SUMS``);
- ``SHA256SUMS.sig``: the raw Ed25519 signature of ``SHA256SUMS``;
- ``SHA256SUMS.tsr``: an RFC 3161 time-stamp response over ``SHA256(SHA256SUMS)`` from the authority named by
  ``FPTRACK_TSA_URL``; absent when none is configured (README and evidence.json then say "not timestamped").

Why the zip's entries are fixed (:func:`stored_zip`): a zip holds bytes no member hash covers (dates,
attributes, offsets). Its members are stored uncompressed with fixed dates and attributes, so the whole file
is a function of its members: :func:`verify_bundle` rebuilds it from the members it read and requires the
very same bytes, which makes a change to any byte of the file fail.

Why :func:`verify_bundle` says UNVERIFIED ORIGIN unless given the key or its fingerprint: the key in the zip
is whoever made the zip's, and anyone can edit evidence.json and sign again. Why it checks every claim of
evidence.json against the WARC: a signature binds the claims to the key, not to the capture they describe.
Why it reads the zip in bounds before parsing it: it is run on files from strangers.

Why the timestamp is requested and checked with asn1crypto and cryptography rather than by a TSP client
library: the check must run offline against the token's own certificate or one the recipient names, and the
whole of it (imprint, nonce, the signed attributes, the signature, the certificate's time-stamping usage) is
short enough to read here.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import os
import re
import secrets
import ssl
import struct
import warnings
import zipfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from sqlalchemy import select
from sqlalchemy.orm import Session, joinedload
from warcio.warcwriter import WARCWriter

from fptrack.compare.records import match_to_dict
from fptrack.core.errors import FptrackError
from fptrack.core.plain_http import HttpFailure, http_request
from fptrack.core.settings import Settings
from fptrack.services.evidence.alignment import chapter_text_of, read_alignment
from fptrack.services.evidence.passages import evidence_spans, span_diff
from fptrack.services.evidence.screenshot import MAX_HEIGHT as MAX_SCREENSHOT_HEIGHT
from fptrack.services.evidence.screenshot import Screenshot, screenshot_of
from fptrack.storage.capture_stamps import capture_statement, exchange_statement, stamp_for
from fptrack.storage.exchanges import RawExchange, content_codings, exchange_for
from fptrack.storage.match_life import Evidence, evidence_of
from fptrack.storage.models import Match, Page, ReviewDecision, Sender, as_utc

__all__ = [
    "BUNDLE_FORMAT",
    "MAX_BUNDLE_BYTES",
    "MAX_EVIDENCE_PAYLOAD",
    "UNTRUSTED_TIMESTAMP",
    "UNVERIFIED_ORIGIN",
    "BundleError",
    "CaptureSeal",
    "TimestampInfo",
    "Verification",
    "build_bundle",
    "bundle_capture_sealed",
    "bundle_key_fingerprint",
    "certificate_path",
    "evidence_bundle",
    "install_key_certificate",
    "key_certificate",
    "key_fingerprint",
    "load_signing_key",
    "page_warc",
    "public_key_pem",
    "request_timestamp",
    "sha256_hex",
    "stored_zip",
    "system_trust_anchors",
    "utc_z",
    "verify_bundle",
    "verify_timestamp",
]

BUNDLE_FORMAT = "fptrack-evidence/3"
MANIFEST = "SHA256SUMS"
SIGNATURE = "SHA256SUMS.sig"
TIMESTAMP = "SHA256SUMS.tsr"
SIGNATURE_TIMESTAMP = "SHA256SUMS.sig.tsr"
CAPTURE_TOKEN = "capture.tsr"
SCREENSHOT = "page.png"
NO_CAPTURE_STAMP = "no capture timestamp"
PUBLIC_KEY = "signing-key.pub"
CERTIFICATE = "signing-key.crt"
WARC_FILE = "page.warc.gz"
MAX_EVIDENCE_PAYLOAD = 100 * 1024 * 1024
"""The most of a response payload a bundle's WARC holds, whatever FPTRACK_EVIDENCE_MAX_PAYLOAD says: with the
extracted text (FPTRACK_DOWNLOAD_MAX_CHARS, up to 15 MB as UTF-8), the heads and the metadata record, the WARC
stays under :data:`MAX_WARC_EXPANSION` and the bundle under :data:`MAX_BUNDLE_BYTES`, what a verifier
reads."""
SIGNED_FILES = ("README.txt", "evidence.json", WARC_FILE, PUBLIC_KEY)
TSA_TIMEOUT = 30.0
NOT_TIMESTAMPED = "not timestamped"
OPERATOR_NOT_STATED = "not stated (FPTRACK_EVIDENCE_OPERATOR unset)"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip holds: fixed, see the module docstring


class BundleError(FptrackError):
    """A bundle cannot be made (no such match, the time-stamping authority failed) or does not verify."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def utc_z(moment: datetime | None) -> str:
    """``moment`` (now when None) in UTC to the second, zone written: ``2026-11-25T18:00:00Z``."""
    return as_utc(moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------------------------ signing key


def _key_path(settings: Settings) -> Path:
    return settings.signing_key_file or settings.data_dir / "signing-key.pem"


def load_signing_key(settings: Settings) -> ed25519.Ed25519PrivateKey:
    """The installation's Ed25519 key: read from ``FPTRACK_SIGNING_KEY_FILE`` (default
    ``<data dir>/signing-key.pem``), generated there on first use, readable by its owner alone (0600)."""
    path = _key_path(settings)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        key = ed25519.Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        try:
            # O_EXCL: two processes generating at once keep the first key written
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(pem)
            return key
    try:
        loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as error:
        raise BundleError(f"cannot read the signing key {path}: {error}") from None
    if not isinstance(loaded, ed25519.Ed25519PrivateKey):
        raise BundleError(f"the signing key {path} is not an Ed25519 key")
    return loaded


def public_key_pem(key: ed25519.Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_fingerprint(key: ed25519.Ed25519PublicKey) -> str:
    """``SHA256:<hex>`` of the raw 32-byte public key: what a recipient compares over the phone."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "SHA256:" + sha256_hex(raw)


def bundle_key_fingerprint(data: bytes) -> str | None:
    """The fingerprint of the key that signed a bundle fptrack made (its ``signing-key.pub``), as a notice
    prints it beside the bundles it attaches; None for bytes that are no such bundle."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            pem = archive.read(PUBLIC_KEY)
        return key_fingerprint(_public_key_of(pem, PUBLIC_KEY))
    except (zipfile.BadZipFile, KeyError, BundleError):
        return None


def certificate_path(settings: Settings) -> Path:
    """Where the signing key's X.509 certificate is installed: beside the key, ``.crt`` for its suffix."""
    return _key_path(settings).with_suffix(".crt")


def _raw(key: ed25519.Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _certificate_chain(pem: bytes, key: ed25519.Ed25519PublicKey, what: str) -> list[x509.Certificate]:
    """The certificates of ``pem`` (the key's own first, then its issuers), checked to certify ``key`` and
    to allow signing with it."""
    try:
        chain = x509.load_pem_x509_certificates(pem)
    except ValueError as error:
        raise BundleError(f"{what} is not a PEM certificate: {error}") from None
    leaf = chain[0]
    certified = leaf.public_key()
    if not isinstance(certified, ed25519.Ed25519PublicKey) or _raw(certified) != _raw(key):
        raise BundleError(
            f"{what} certifies another key than the signing key {key_fingerprint(key)}: "
            f"{leaf.subject.rfc4514_string()}"
        )
    try:
        usage = leaf.extensions.get_extension_for_class(x509.KeyUsage).value
    except x509.ExtensionNotFound:
        usage = None
    if usage is not None and not (usage.digital_signature or usage.content_commitment):
        raise BundleError(f"{what} does not allow signing (its key usage has no digitalSignature)")
    return chain


def install_key_certificate(
    settings: Settings, pem: bytes, *, now: datetime | None = None
) -> x509.Certificate:
    """Install the X.509 certificate (PEM: the key's own, then any intermediate) a certification authority
    issued for the installation's signing key, after checking that it certifies that key, allows signing and
    is valid ``now``; every bundle then carries it (``signing-key.crt``) and ``verify --ca`` ties the bundle
    to the name it certifies. Returns the key's certificate."""
    public = load_signing_key(settings).public_key()
    chain = _certificate_chain(pem, public, "the certificate")
    moment = as_utc(now or datetime.now(UTC))
    if not chain[0].not_valid_before_utc <= moment <= chain[0].not_valid_after_utc:
        raise BundleError(
            f"the certificate is not valid now (valid {utc_z(chain[0].not_valid_before_utc)} to "
            f"{utc_z(chain[0].not_valid_after_utc)})"
        )
    path = certificate_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain))
    return chain[0]


def key_certificate(settings: Settings, key: ed25519.Ed25519PublicKey) -> bytes | None:
    """The installed certificate chain of the signing key (PEM), None when none is installed; one for another
    key (the key file was replaced) fails the bundle rather than certify a stranger."""
    path = certificate_path(settings)
    if not path.exists():
        return None
    pem = path.read_bytes()
    _certificate_chain(pem, key, f"the installed certificate {path}")
    return pem


def bundle_capture_sealed(data: bytes) -> datetime | None:
    """When the capture a bundle fptrack made was sealed (evidence.json's ``capture.stamped_at``, the time its
    ``capture.tsr`` states), as a notice prints it beside the bundle; None without a seal or for bytes that
    are no such bundle."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            capture = json.loads(archive.read("evidence.json")).get("capture")
        return (
            _claimed_time(capture["stamped_at"], "capture.stamped_at") if isinstance(capture, dict) else None
        )
    except (zipfile.BadZipFile, KeyError, ValueError, AttributeError, BundleError):
        return None


def _public_key_of(pem: bytes, what: str) -> ed25519.Ed25519PublicKey:
    try:
        loaded = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as error:
        raise BundleError(f"{what} is not a PEM public key: {error}") from None
    if not isinstance(loaded, ed25519.Ed25519PublicKey):
        raise BundleError(f"{what} is not an Ed25519 public key")
    return loaded


# ------------------------------------------------------------------------------------------ timestamps


@dataclass(frozen=True)
class TimestampInfo:
    """What a verified time-stamp token says."""

    time: datetime
    authority: str  # the signer certificate's subject
    serial: int
    trusted_by: str  # "the certificate in the token" or "the certificate given"


def request_timestamp(url: str, digest: bytes, *, timeout: float = TSA_TIMEOUT) -> bytes:
    """Ask the authority at ``url`` for a time-stamp over the SHA-256 ``digest``; the DER time-stamp response,
    checked (:func:`verify_timestamp`: granted, this imprint, this nonce, signed by its certificate)."""
    from asn1crypto import tsp

    nonce = secrets.randbits(63)
    query = tsp.TimeStampReq(
        {
            "version": 1,
            "message_imprint": {"hash_algorithm": {"algorithm": "sha256"}, "hashed_message": digest},
            "nonce": nonce,
            "cert_req": True,
        }
    ).dump()
    try:
        answer = http_request(
            url,
            method="POST",
            body=query,
            headers={"Content-Type": "application/timestamp-query"},
            timeout=timeout,
        )
    except HttpFailure as error:
        raise BundleError(f"the time-stamping authority {url} did not answer: {error}") from None
    if not 200 <= answer.status < 300:
        raise BundleError(f"the time-stamping authority {url} did not answer: HTTP {answer.status}")
    reply = answer.body
    verify_timestamp(reply, digest, nonce=nonce)
    return reply


def _attribute(attributes: Any, name: str) -> Any:
    for attribute in attributes:
        if attribute["type"].native == name:
            values = attribute["values"]
            if len(values) != 1:
                raise BundleError(f"the time-stamp token's {name} attribute has {len(values)} values")
            return values[0]
    raise BundleError(f"the time-stamp token has no {name} attribute")


def _hash_of(name: str) -> hashes.HashAlgorithm:
    known: dict[str, hashes.HashAlgorithm] = {
        "sha256": hashes.SHA256(),
        "sha384": hashes.SHA384(),
        "sha512": hashes.SHA512(),
        "sha224": hashes.SHA224(),
        "sha1": hashes.SHA1(),
    }
    if name not in known:
        raise BundleError(f"the time-stamp token uses an unsupported digest {name}")
    return known[name]


def _check_signature(
    certificate: x509.Certificate, signature: bytes, data: bytes, algo: str, digest: str
) -> None:
    public = certificate.public_key()
    try:
        if isinstance(public, rsa.RSAPublicKey) and algo in ("rsassa_pkcs1v15", "rsa"):
            public.verify(signature, data, padding.PKCS1v15(), _hash_of(digest))
        elif isinstance(public, ec.EllipticCurvePublicKey) and algo == "ecdsa":
            public.verify(signature, data, ec.ECDSA(_hash_of(digest)))
        elif isinstance(public, ed25519.Ed25519PublicKey) and algo == "ed25519":
            public.verify(signature, data)
        else:
            raise BundleError(f"the time-stamp token is signed with an unsupported algorithm ({algo})")
    except InvalidSignature:
        raise BundleError("the time-stamp token's signature does not verify") from None


UNTRUSTED_TIMESTAMP = "UNTRUSTED TIMESTAMP"
_MAX_CHAIN = 6  # certificates from a TSA's up to a root: real ones have two or three


@functools.cache
def system_trust_anchors() -> tuple[x509.Certificate, ...]:
    """The certificates of the system's trust store (OpenSSL's default CA file, else its CA directory; or
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``): the authorities a timestamp is trusted from by default."""
    paths = ssl.get_default_verify_paths()
    files: list[Path] = []
    if paths.cafile and Path(paths.cafile).is_file():
        files.append(Path(paths.cafile))
    elif paths.capath and Path(paths.capath).is_dir():
        files += sorted(
            p for p in Path(paths.capath).iterdir() if p.suffix in (".pem", ".crt") and p.is_file()
        )
    found: list[x509.Certificate] = []
    for path in files:
        try:
            text = path.read_bytes()
        except OSError:
            continue
        # one certificate at a time: a store holds a few that newer releases of cryptography refuse (a
        # negative serial number), which must not cost the others
        for block in re.findall(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", text, re.DOTALL):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    found.append(x509.load_pem_x509_certificate(block))
                except ValueError:
                    continue
    return tuple(found)


def _issued_by(certificate: x509.Certificate, issuer: x509.Certificate) -> bool:
    if certificate.issuer != issuer.subject:
        return False
    try:
        certificate.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _is_ca(certificate: x509.Certificate) -> bool:
    try:
        return bool(certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _trusted_chain(
    certificate: x509.Certificate,
    carried: Sequence[x509.Certificate],
    anchors: Sequence[x509.Certificate],
    at: datetime,
) -> x509.Certificate | None:
    """The anchor ``certificate`` chains to, through CA certificates the token carries, each valid at ``at``;
    None when it reaches none. An anchor is trusted as it is: the certificate itself or any issuer of it."""
    current = certificate
    for _ in range(_MAX_CHAIN):
        if current in anchors:
            return current
        for anchor in anchors:
            if _issued_by(current, anchor):
                return anchor
        step = next(
            (
                issuer
                for issuer in carried
                if issuer != current
                and _is_ca(issuer)
                and issuer.not_valid_before_utc <= at <= issuer.not_valid_after_utc
                and _issued_by(current, issuer)
            ),
            None,
        )
        if step is None:
            return None
        current = step
    return None


def verify_timestamp(
    response: bytes,
    digest: bytes,
    *,
    tsa_cert: x509.Certificate | Sequence[x509.Certificate] | None = None,
    nonce: int | None = None,
    require_trust: bool = False,
) -> TimestampInfo:
    """Check a DER time-stamp response over the SHA-256 ``digest``, offline: granted; its TSTInfo's imprint is
    ``digest``; its signed attributes name the TSTInfo and carry its hash; the signature over them verifies
    with the signer's certificate, found in the token; that certificate is for time-stamping; and, given
    ``tsa_cert`` (one certificate or several), it chains to one of them (through CA certificates the token
    carries), or, with ``require_trust`` and no ``tsa_cert``, to one of the system's trust store
    (:func:`system_trust_anchors`): a token of a self-made authority, whatever name it gives itself, fails
    with :data:`UNTRUSTED_TIMESTAMP`. Without either it is checked against its own certificate only (what the
    installation does when it asks its configured authority). Raises :class:`BundleError` saying which
    fails."""
    from asn1crypto import tsp

    try:
        reply = tsp.TimeStampResp.load(response)
        status = reply["status"]["status"].native
        if status not in ("granted", "granted_with_mods"):
            raise BundleError(f"the time-stamping authority refused: {status}")
        token = reply["time_stamp_token"]
        if token["content_type"].native != "signed_data":
            raise BundleError("the time-stamp token is not CMS signed data")
        signed = token["content"]
        encapsulated = signed["encap_content_info"]
        if encapsulated["content_type"].native != "tst_info":
            raise BundleError("the time-stamp token does not hold a TSTInfo")
        tst_der = bytes(encapsulated["content"].contents)
        info = tsp.TSTInfo.load(tst_der)
        imprint = info["message_imprint"]
        if imprint["hash_algorithm"]["algorithm"].native != "sha256":
            raise BundleError("the time-stamp token's imprint is not a SHA-256")
        if bytes(imprint["hashed_message"].native) != digest:
            raise BundleError("the time-stamp token is over another SHA256SUMS (message imprint differs)")
        if nonce is not None and info["nonce"].native != nonce:
            raise BundleError("the time-stamping authority answered another request (nonce differs)")
        signers = list(signed["signer_infos"])
        if len(signers) != 1:
            raise BundleError(f"the time-stamp token has {len(signers)} signers, not one")
        signer = signers[0]
        certificates = [
            x509.load_der_x509_certificate(choice.chosen.dump())
            for choice in (signed["certificates"] or [])
            if choice.name == "certificate"
        ]
        certificate = _signer_certificate(signer["sid"], certificates)
        carried = certificates
        digest_name = signer["digest_algorithm"]["algorithm"].native
        attributes = signer["signed_attrs"]
        if not attributes:
            raise BundleError("the time-stamp token has no signed attributes")
        if _attribute(attributes, "content_type").native != "tst_info":
            raise BundleError("the time-stamp token's signed content type is not TSTInfo")
        hasher = hashes.Hash(_hash_of(digest_name))
        hasher.update(tst_der)
        if bytes(_attribute(attributes, "message_digest").native) != hasher.finalize():
            raise BundleError("the time-stamp token's TSTInfo was changed (message digest differs)")
        signed_bytes = b"\x31" + attributes.dump()[1:]  # signed as a SET OF, stored as [0] IMPLICIT
        algo = signer["signature_algorithm"].signature_algo
        _check_signature(certificate, bytes(signer["signature"].native), signed_bytes, algo, digest_name)
        _check_signing_certificate(attributes, certificate)
        generated: datetime = info["gen_time"].native
    except BundleError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as error:
        raise BundleError(f"the time-stamp response is malformed: {error}") from None
    try:
        usage = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usage = None
    if usage is None or ExtendedKeyUsageOID.TIME_STAMPING not in usage:
        raise BundleError("the time-stamp token's certificate is not for time-stamping")
    if not certificate.not_valid_before_utc <= as_utc(generated) <= certificate.not_valid_after_utc:
        raise BundleError("the time-stamp token was made outside its certificate's validity")
    trusted_by = "the certificate in the token (not tied to an authority you trust: see --tsa-cert)"
    if tsa_cert is not None or require_trust:
        given = [tsa_cert] if isinstance(tsa_cert, x509.Certificate) else list(tsa_cert or ())
        anchors = given or list(system_trust_anchors())
        anchor = _trusted_chain(certificate, carried, anchors, as_utc(generated))
        where = "the certificate given" if given else "the system's trust store"
        if anchor is None:
            if given:
                raise BundleError(
                    f"{UNTRUSTED_TIMESTAMP}: the time-stamp token's certificate "
                    f"({certificate.subject.rfc4514_string()}) is neither the certificate given nor issued "
                    "by it"
                )
            raise BundleError(
                f"{UNTRUSTED_TIMESTAMP}: the time-stamp token's certificate "
                f"({certificate.subject.rfc4514_string()}, issued by {certificate.issuer.rfc4514_string()}) "
                "chains to no authority of the system's trust store: pass the certificate of an authority "
                "you trust with --tsa-cert"
            )
        trusted_by = where if given else f"{where} ({anchor.subject.rfc4514_string()})"
    return TimestampInfo(
        time=as_utc(generated),
        authority=certificate.subject.rfc4514_string(),
        serial=int(info["serial_number"].native),
        trusted_by=trusted_by,
    )


def _check_signing_certificate(attributes: Any, certificate: x509.Certificate) -> None:
    """The ESS signing-certificate attribute (RFC 2634 signingCertificate, RFC 5035 signingCertificateV2),
    signed with the rest, must name ``certificate``: its first certificate id is that certificate's hash (and
    issuer and serial, when given). RFC 3161 requires it and ``openssl ts -verify`` refuses a token without
    it: without it the signer identifier alone, which is not signed, says which certificate signed, so a token
    could be passed off under another certificate with the same key."""
    names = {attribute["type"].native for attribute in attributes}
    if "signing_certificate_v2" in names:
        first = _attribute(attributes, "signing_certificate_v2")["certs"][0]
        algorithm = first["hash_algorithm"]["algorithm"].native
    elif "signing_certificate" in names:
        first = _attribute(attributes, "signing_certificate")["certs"][0]
        algorithm = "sha1"
    else:
        raise BundleError(
            "the time-stamp token has no ESS signing-certificate attribute (signingCertificate or "
            "signingCertificateV2) binding its certificate"
        )
    hasher = hashes.Hash(_hash_of(algorithm))
    hasher.update(certificate.public_bytes(serialization.Encoding.DER))
    if bytes(first["cert_hash"].native) != hasher.finalize():
        raise BundleError(
            "the time-stamp token's ESS signing-certificate attribute names another certificate"
        )
    issuer_serial = first["issuer_serial"]
    if issuer_serial.native is None:
        return
    issuers = [
        name.chosen.untag().dump() for name in issuer_serial["issuer"] if name.name == "directory_name"
    ]
    if issuer_serial["serial_number"].native != certificate.serial_number or (
        certificate.issuer.public_bytes() not in issuers
    ):
        raise BundleError(
            "the time-stamp token's ESS signing-certificate attribute names another issuer or serial"
        )


def _signer_certificate(sid: Any, certificates: Sequence[x509.Certificate]) -> x509.Certificate:
    """The certificate ``sid`` (a CMS SignerIdentifier) names, among the token's."""
    for certificate in certificates:
        if sid.name == "issuer_and_serial_number":
            wanted = sid.chosen
            if (
                certificate.serial_number == wanted["serial_number"].native
                and certificate.issuer.public_bytes() == wanted["issuer"].dump()
            ):
                return certificate
        elif sid.name == "subject_key_identifier":
            try:
                key_id = certificate.extensions.get_extension_for_class(
                    x509.SubjectKeyIdentifier
                ).value.digest
            except x509.ExtensionNotFound:
                continue
            if key_id == bytes(sid.chosen.native):
                return certificate
    raise BundleError("the time-stamp token does not include its signer's certificate")


# ------------------------------------------------------------------------------------------ the WARC file


def _record_id(record: Any) -> str:
    return str(record.rec_headers.get_header("WARC-Record-ID"))


def page_metadata(page: Page, content: Evidence) -> dict[str, Any]:
    """The page's fetch metadata as bundled (``content``: the content the match rests on)."""
    metadata: dict[str, Any] = {
        "url": page.url,
        "final_url": content.final_url,
        "host": page.host,
        "http_status": content.status,
        "encoding": page.encoding,
        "title": content.title,
        "fetched_at": utc_z(content.fetched_at),
        "snapshot_sha256": content.snapshot_sha256,
        "text_sha256": sha256_hex((content.text or "").encode("utf-8")),
    }
    if content.version_id is not None:
        metadata["kept_version_id"] = content.version_id
    return metadata


def warcinfo_fields(exchange: RawExchange | None, operator: str) -> dict[str, str]:
    """The ``warcinfo`` record's fields (WARC 1.1, annex of the warcinfo fields): the software and its
    versions, the operator (``FPTRACK_EVIDENCE_OPERATOR``), the user agent the request was sent with."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def version_of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:
            return "unknown"

    user_agent = ""
    for line in exchange.request_head.split(b"\r\n")[1:] if exchange is not None else ():
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"user-agent":
            user_agent = value.strip().decode("latin-1")
    return {
        "software": (
            f"fptrack/{version_of('fptrack')} (Scrapy/{version_of('scrapy')}, "
            f"Python/{platform.python_version()})"
        ),
        "operator": " ".join(operator.split()) or OPERATOR_NOT_STATED,
        "http-header-user-agent": user_agent or "not known (no request was kept)",
        "format": "WARC File Format 1.1",
        "conformsTo": "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        "description": "a page as fptrack fetched it, with the text it extracted from it",
    }


def page_warc(
    page: Page,
    content: Evidence,
    exchange: RawExchange | None,
    *,
    operator: str = "",
    max_payload: int = MAX_EVIDENCE_PAYLOAD,
) -> tuple[bytes, dict[str, Any]]:
    """The gzipped WARC file of the page and what it holds (record ids, which record's payload is the
    snapshot), for evidence.json. See the module docstring for the records. The response record holds the
    payload as received (content coding kept) when the exchange kept it: its snapshot is then that payload
    decoded.

    A payload longer than ``max_payload`` (``FPTRACK_EVIDENCE_MAX_PAYLOAD``, never above
    :data:`MAX_EVIDENCE_PAYLOAD`: a downloaded archive) is cut there: its record says so (``WARC-Truncated:
    length``, WARC 1.1) and states the full payload's length and SHA-256 and the full block's SHA-256
    (``Fptrack-Full-Payload-Length``, ``Fptrack-Full-Payload-Digest``, ``Fptrack-Full-Block-Digest``: what a
    capture time-stamp sealed), as do the warcinfo record and evidence.json's ``warc.truncated``."""
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=True, warc_version="1.1")
    cap = max(1, min(max_payload, MAX_EVIDENCE_PAYLOAD))
    payload = exchange.payload if exchange is not None else None
    truncated: dict[str, Any] | None = None
    info = warcinfo_fields(exchange, operator)
    if exchange is not None and payload is not None and len(payload) > cap:
        truncated = {
            "record": "response",
            "kept_bytes": cap,
            "full_bytes": len(payload),
            "full_payload_sha256": sha256_hex(payload),
            "full_block_sha256": sha256_hex(exchange.response_head + payload),
            "cap": "FPTRACK_EVIDENCE_MAX_PAYLOAD",
        }
        info["description"] += (
            f"; the response payload is truncated at {cap} of its {len(payload)} bytes "
            f"(FPTRACK_EVIDENCE_MAX_PAYLOAD), the full payload's SHA-256 {truncated['full_payload_sha256']}"
        )
    writer.write_record(writer.create_warcinfo_record(WARC_FILE, info))
    described: dict[str, Any] = {"file": WARC_FILE}
    text_date = utc_z(content.fetched_at)
    source_id: str | None = None  # the record the extracted text comes from
    response_id: str | None = None
    if exchange is not None:
        date = utc_z(exchange.fetched_at)
        described["fetched_as"] = "rendered in Chromium" if exchange.rendered else "plain HTTP"
        if payload is not None:
            full_payload = payload
            if truncated is not None:
                payload = payload[:cap]
            response_headers = {"WARC-Date": date, "WARC-Payload-Digest": "sha256:" + sha256_hex(payload)}
            if exchange.ip_address:
                response_headers["WARC-IP-Address"] = exchange.ip_address
            if truncated is not None:
                response_headers["WARC-Truncated"] = "length"
                response_headers["Fptrack-Full-Payload-Length"] = str(len(full_payload))
                response_headers["Fptrack-Full-Payload-Digest"] = "sha256:" + truncated["full_payload_sha256"]
                response_headers["Fptrack-Full-Block-Digest"] = "sha256:" + truncated["full_block_sha256"]
                described["truncated"] = truncated
            del full_payload
            response = writer.create_warc_record(
                exchange.url,
                "response",
                payload=io.BytesIO(exchange.response_head + payload),
                length=len(exchange.response_head) + len(payload),
                warc_content_type="application/http; msgtype=response",
                warc_headers_dict=response_headers,
            )
            response_id = source_id = _record_id(response)
            if exchange.request_head:
                request = writer.create_warc_record(
                    exchange.url,
                    "request",
                    payload=io.BytesIO(exchange.request_head),
                    length=len(exchange.request_head),
                    warc_content_type="application/http; msgtype=request",
                    warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": response_id},
                )
                writer.write_record(request)
                described["request_record"] = _record_id(request)
            writer.write_record(response)
            described["response_record"] = response_id
            described["snapshot_record"] = response_id
            codings = content_codings(exchange.response_head) if exchange.wire_body is not None else []
            if codings:
                described["snapshot_is"] = f"the response payload, {', '.join(codings)} decoded"
        if exchange.rendered:
            headers = {"WARC-Date": date}
            if response_id is not None:
                headers["WARC-Refers-To"] = response_id
            dom = writer.create_warc_record(
                exchange.url,
                "resource",
                payload=io.BytesIO(exchange.rendered),
                length=len(exchange.rendered),
                warc_content_type="text/html; charset=utf-8",
                warc_headers_dict=headers,
            )
            writer.write_record(dom)
            source_id = described["rendered_record"] = described["snapshot_record"] = _record_id(dom)
    text = (content.text or "").encode("utf-8")
    text_headers = {"WARC-Date": text_date}
    if source_id is not None:
        text_headers["WARC-Refers-To"] = source_id
    extracted = writer.create_warc_record(
        page.url,
        "conversion" if source_id is not None else "resource",
        payload=io.BytesIO(text),
        length=len(text),
        warc_content_type="text/plain; charset=utf-8",
        warc_headers_dict=text_headers,
    )
    writer.write_record(extracted)
    described["text_record"] = _record_id(extracted)
    metadata = page_metadata(page, content)
    if exchange is not None and exchange.body is None:
        # rendered at once by Chromium: what it reported of the response, its body never seen as such
        metadata["browser_response_head"] = exchange.response_head.decode("latin-1")
    payload = json.dumps({**metadata, "records": dict(described)}, ensure_ascii=False, indent=2).encode()
    meta_headers = {"WARC-Date": text_date, "WARC-Refers-To": source_id or described["text_record"]}
    writer.write_record(
        writer.create_warc_record(
            page.url,
            "metadata",
            payload=io.BytesIO(payload),
            length=len(payload),
            warc_content_type="application/json",
            warc_headers_dict=meta_headers,
        )
    )
    return buffer.getvalue(), described


# ------------------------------------------------------------------------------------------ the zip


def stored_zip(members: Sequence[tuple[str, bytes]]) -> bytes:
    """A zip of ``members`` in this order, stored (no compression), with fixed dates and attributes: the
    same members always give the same bytes (see the module docstring)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = 3  # Unix, whatever system writes it: the attributes below are Unix's
            info.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
            archive.writestr(info, data)
    return buffer.getvalue()


@dataclass(frozen=True)
class CaptureSeal:
    """The time-stamp of the capture a bundle carries (:mod:`storage.capture_stamps`): the capture statement,
    the authority's token over its SHA-256 and what the token says."""

    statement: bytes
    token: bytes
    authority: str
    stamped_at: datetime


def _readme(
    timestamped_by: str | None, capture: CaptureSeal | None, fingerprint: str, shown: str = ""
) -> bytes:
    stamp = (
        f"SHA256SUMS.tsr  an RFC 3161 time-stamp of SHA256SUMS by {timestamped_by}:\n"
        "                openssl ts -verify -in SHA256SUMS.tsr -data SHA256SUMS -CAfile <its CA>\n"
        "SHA256SUMS.sig.tsr  an RFC 3161 time-stamp of the signature itself:\n"
        "                openssl ts -verify -in SHA256SUMS.sig.tsr -data SHA256SUMS.sig -CAfile <its CA>\n"
        if timestamped_by
        else f"Timestamp       {NOT_TIMESTAMPED} (no time-stamping authority was configured)\n"
    )
    if capture is not None:
        sealed = (
            f"capture.tsr     an RFC 3161 time-stamp by {capture.authority} made when the page was flagged\n"
            f"                ({utc_z(capture.stamped_at)}), over the SHA-256 of evidence.json's\n"
            "                capture.statement, which names the WARC's request and response records by\n"
            "                the SHA-256 of their blocks:\n"
            "                openssl ts -verify -in capture.tsr -digest <capture.sha256> -CAfile <its CA>\n"
        )
    else:
        sealed = f"Capture         {NO_CAPTURE_STAMP} (none was taken when the page was flagged)\n"
    stamp = sealed + stamp
    return (
        "fptrack evidence bundle\n\n"
        "page.warc.gz    the page as fetched: the HTTP request and response (WARC request, response),\n"
        "                for a page rendered in a browser the DOM it rendered (a resource record), the text\n"
        "                fptrack extracted from it (a conversion record) and the fetch metadata\n"
        f"{shown}"
        "evidence.json   the match: the registered work and chapter, the copied passages beside the\n"
        "                original's, the page's snapshot SHA-256, the review decisions; times in UTC\n"
        "signing-key.pub the public Ed25519 key of the fptrack installation that made this bundle; anyone\n"
        "                can make a key: compare its fingerprint with the one the rights holder gave you\n"
        "                (openssl pkey -pubin -in signing-key.pub -outform DER | tail -c 32 | sha256sum)\n"
        f"                This bundle's key: {fingerprint} (printed in the rights holder's notices)\n"
        "SHA256SUMS      the SHA-256 of the files above:   sha256sum -c SHA256SUMS\n"
        "SHA256SUMS.sig  its Ed25519 signature:  openssl pkeyutl -verify -pubin -inkey signing-key.pub "
        "-rawin -in SHA256SUMS -sigfile SHA256SUMS.sig\n"
        f"{stamp}\n"
        "fptrack evidence verify <this zip> --key <the rights holder's key> checks all of it offline,\n"
        "evidence.json against the WARC included (docs/evidence.md).\n"
    ).encode()


def evidence_bundle(
    page: Page,
    document: Mapping[str, Any],
    content: Evidence,
    exchange: RawExchange | None,
    settings: Settings,
    *,
    now: datetime | None = None,
    capture: CaptureSeal | None = None,
    operator: str | None = None,
    screenshot: Screenshot | None = None,
) -> bytes:
    """The bundle of ``page`` (see the module docstring): ``document`` is the match's part of evidence.json,
    ``content`` the content the match rests on and ``exchange`` the fetch it was read from (None when none
    was kept: the bundle then holds the text as stored and says so), ``capture`` the time-stamp its capture
    got when the page was flagged (carried as ``capture.tsr``), ``screenshot`` the capture shown in Chromium
    (``page.png``; None: not asked for). Signed with the installation's key and, with
    ``FPTRACK_TSA_URL`` set, timestamped: SHA256SUMS and the signature itself (a failing authority fails the
    bundle)."""
    key = load_signing_key(settings)
    public = key.public_key()
    certificate = key_certificate(settings, public)
    warc, records = page_warc(
        page,
        content,
        exchange,
        operator=settings.evidence_operator or operator or "",
        max_payload=settings.evidence_max_payload,
    )
    page_part = page_metadata(page, content)
    if exchange is None:
        page_part["raw_exchange"] = (
            "not kept (fetched before fptrack kept them, or flagged after it dropped it)"
        )
    evidence = {
        "format": BUNDLE_FORMAT,
        "created_at": utc_z(now),
        **document,
        "page": page_part,
        "warc": {**records, "sha256": sha256_hex(warc)},
        "signing_key": {
            "file": PUBLIC_KEY,
            "fingerprint": key_fingerprint(public),
            **({} if certificate is None else {"certificate": _certificate_claim(certificate)}),
        },
        "capture": NO_CAPTURE_STAMP
        if capture is None
        else {
            "statement": capture.statement.decode("utf-8"),
            "sha256": sha256_hex(capture.statement),
            "token": CAPTURE_TOKEN,
            "authority": capture.authority,
            "stamped_at": utc_z(capture.stamped_at),
        },
        "timestamp": {"authority": settings.tsa_url} if settings.tsa_url else NOT_TIMESTAMPED,
        "screenshot": _screenshot_claim(screenshot),
    }
    files = {
        "README.txt": _readme(
            settings.tsa_url, capture, key_fingerprint(public), _screenshot_line(screenshot)
        ),
        "evidence.json": json.dumps(evidence, ensure_ascii=False, indent=2).encode("utf-8"),
        WARC_FILE: warc,
        PUBLIC_KEY: public_key_pem(public),
    }
    if capture is not None:
        files[CAPTURE_TOKEN] = capture.token
    if certificate is not None:
        files[CERTIFICATE] = certificate
    if screenshot is not None and screenshot.png is not None:
        files[SCREENSHOT] = screenshot.png
    manifest = "".join(f"{sha256_hex(data)}  {name}\n" for name, data in files.items()).encode("ascii")
    signature = key.sign(manifest)
    members = [*files.items(), (MANIFEST, manifest), (SIGNATURE, signature)]
    if settings.tsa_url:
        members.append((TIMESTAMP, request_timestamp(settings.tsa_url, hashlib.sha256(manifest).digest())))
        stamped = request_timestamp(settings.tsa_url, hashlib.sha256(signature).digest())
        members.append((SIGNATURE_TIMESTAMP, stamped))
    return stored_zip(members)


NO_SCREENSHOT = "not made"
_SCREENSHOT_SHOWS = (
    "{source} as fptrack captured it, shown in Chromium with the network blocked and scripts off: "
    "the page as captured, not as it is now; stylesheets and images were not captured and do not show"
)


def _screenshot_claim(screenshot: Screenshot | None) -> str | dict[str, Any]:
    """What evidence.json says of ``page.png``."""
    if screenshot is None:
        return (
            f"{NO_SCREENSHOT}: no raw exchange was kept, or screenshots are off (FPTRACK_EVIDENCE_SCREENSHOT)"
        )
    if screenshot.png is None:
        return f"{NO_SCREENSHOT}: {screenshot.note}"
    claim: dict[str, Any] = {
        "file": SCREENSHOT,
        "sha256": sha256_hex(screenshot.png),
        "shows": _SCREENSHOT_SHOWS.format(source=screenshot.source),
    }
    if screenshot.cut:
        claim["cut"] = f"the page is longer than {MAX_SCREENSHOT_HEIGHT} CSS pixels: only its top is shown"
    return claim


def _screenshot_line(screenshot: Screenshot | None) -> str:
    if screenshot is None or screenshot.png is None:
        why = "screenshots are off" if screenshot is None else screenshot.note
        return f"page.png        {NO_SCREENSHOT} ({why})\n"
    return (
        "page.png        a picture of the page for those who cannot read a WARC: the captured HTML shown\n"
        "                in Chromium off the network (the capture, not the page as it is now; without\n"
        "                its stylesheets and images, which were not captured)\n"
    )


def _certificate_claim(pem: bytes) -> dict[str, Any]:
    """What evidence.json says of ``signing-key.crt``: the name it certifies, by whom, until when."""
    leaf = x509.load_pem_x509_certificates(pem)[0]
    return {
        "file": CERTIFICATE,
        "subject": leaf.subject.rfc4514_string(),
        "issuer": leaf.issuer.rfc4514_string(),
        "serial": format(leaf.serial_number, "x"),
        "not_after": utc_z(leaf.not_valid_after_utc),
    }


def _capture_seal(session: Session, page_id: int, exchange: RawExchange) -> CaptureSeal | None:
    """The time-stamp of ``exchange``'s capture, when one was taken; a stored exchange that no longer hashes
    to the statement that was stamped fails the bundle (it changed after it was sealed)."""
    stamp = stamp_for(session, page_id, exchange.snapshot_sha256)
    if stamp is None:
        return None
    statement = exchange_statement(exchange)
    if sha256_hex(statement) != stamp.capture_sha256:
        raise BundleError(
            f"the kept exchange of page {page_id} no longer hashes to the capture statement stamped "
            f"{utc_z(stamp.stamped_at)}: it changed after it was sealed"
        )
    return CaptureSeal(statement, bytes(stamp.token), stamp.authority, as_utc(stamp.stamped_at))


def _passages(match: Match, content: Evidence) -> list[dict[str, Any]]:
    page_text = content.text or ""
    if match.kind:  # a copy that keeps the meaning: its aligned sentences, not copied passages
        return _aligned_passages(match, page_text)
    work_text = match.work.text or ""
    passages = []
    for span in evidence_spans(match.spans):
        diff = span_diff(page_text, work_text, span) if work_text else None
        passages.append(
            {
                "number": span.number,
                "page": [span.page_start, span.page_end],
                "work": [span.work_start, span.work_end],
                "page_text": page_text[span.page_start : span.page_end],
                "work_text": work_text[span.work_start : span.work_end],
                "differences": None
                if diff is None
                else {"changed": diff.changed, "inserted": diff.inserted, "deleted": diff.deleted},
            }
        )
    return passages


def _aligned_passages(match: Match, page_text: str) -> list[dict[str, Any]]:
    """A meaning match's aligned sentence pairs (``services.evidence.alignment``) as the bundle's passages:
    ``work`` in characters of the work's text as for an exact copy (its ``spans`` are chapter offsets),
    ``chapter`` in the chapter's, with the pair's ``similarity``; no character differences (other words)."""
    chapter_text = chapter_text_of(match)
    alignment = read_alignment(match.kind, match.alignment, page_text, chapter_text)
    shift = match.chapter.start
    return [
        {
            "number": pair.number,
            "page": [pair.page_start, pair.page_end],
            "work": [shift + pair.chapter_start, shift + pair.chapter_end],
            "chapter": [pair.chapter_start, pair.chapter_end],
            "page_text": page_text[pair.page_start : pair.page_end],
            "work_text": chapter_text[pair.chapter_start : pair.chapter_end],
            "similarity": round(pair.similarity, 4),
            "differences": None,
        }
        for pair in (alignment.pairs if alignment is not None else ())
    ]


def build_bundle(
    session: Session, match_id: int, settings: Settings, *, now: datetime | None = None
) -> bytes:
    """The external evidence bundle of match ``match_id``: no reviewer notes and no user names (decisions
    are reduced to which and when), every time in UTC with its zone. Raises :class:`BundleError` for an
    unknown match."""
    match = session.get(
        Match, match_id, options=[joinedload(Match.page), joinedload(Match.work), joinedload(Match.chapter)]
    )
    if match is None:
        raise BundleError(f"there is no match with id {match_id}")
    content = evidence_of(session, match)
    exchange = (
        exchange_for(session, match.page_id, content.snapshot_sha256) if content.snapshot_sha256 else None
    )
    decisions = session.scalars(
        select(ReviewDecision).where(ReviewDecision.match_id == match_id).order_by(ReviewDecision.decided_at)
    )
    document = {
        "match": {
            "id": match.id,
            "status": match.status,
            **match_to_dict(match),  # the match JSON of the CLI and the API, times with their zone
            "first_seen": utc_z(match.first_seen),
            "last_seen": utc_z(match.last_seen),
        },
        "passages": _passages(match, content),
        "review": [
            {"decision": decision.decision, "by": "a reviewer", "at": utc_z(decision.decided_at)}
            for decision in decisions
        ],
    }
    capture = _capture_seal(session, match.page_id, exchange) if exchange is not None else None
    senders = session.scalars(select(Sender.name).limit(2)).all()
    operator = senders[0] if len(senders) == 1 else None  # FPTRACK_EVIDENCE_OPERATOR comes first
    screenshot = (
        screenshot_of(exchange, settings) if exchange is not None and settings.evidence_screenshot else None
    )
    return evidence_bundle(
        match.page,
        document,
        content,
        exchange,
        settings,
        now=now,
        capture=capture,
        operator=operator,
        screenshot=screenshot,
    )


# ------------------------------------------------------------------------------------------ verification

MAX_BUNDLE_BYTES = 128 * 1024 * 1024  # ten times a page at the crawler's default body cap, and its DOM
MAX_WARC_EXPANSION = 128 * 1024 * 1024  # what page.warc.gz may inflate to, read through a hash only
MAX_KEPT_RECORD = 4 * 1024 * 1024  # the one WARC record held in memory: the metadata record's JSON
MAX_HEAD = 64 * 1024  # a WARC record's head, or an HTTP exchange's
CLOCK_SKEW = timedelta(minutes=5)  # how far the authority's clock may run behind the installation's
UNVERIFIED_ORIGIN = "UNVERIFIED ORIGIN"
_MEMBERS = (
    *SIGNED_FILES,
    CAPTURE_TOKEN,
    SCREENSHOT,
    CERTIFICATE,
    MANIFEST,
    SIGNATURE,
    TIMESTAMP,
    SIGNATURE_TIMESTAMP,
)
_END_OF_DIRECTORY = struct.Struct("<4s4H2LH")  # the zip's last 22 bytes: fptrack writes no comment
_MAX_DIRECTORY = 4096  # the central directory of seven members with short names


@dataclass
class Verification:
    """What :func:`verify_bundle` found: ``lines`` to print; ``failure`` the first reason it fails, if any;
    ``origin`` what ties the signing key to its owner (the key or fingerprint given), None when nothing does:
    anyone can make a key, sign a bundle with it and put it in the zip."""

    lines: list[str] = field(default_factory=list)
    failure: str | None = None
    origin: str | None = None

    @property
    def intact(self) -> bool:
        """Every check holds, the origin aside."""
        return self.failure is None

    @property
    def ok(self) -> bool:
        return self.failure is None and self.origin is not None

    @property
    def verdict(self) -> str:
        """One line: ``FAILED: <reason>``, ``UNVERIFIED ORIGIN: <why>`` or ``OK``."""
        if self.failure is not None:
            return f"FAILED: {self.failure}"
        if self.origin is None:
            return (
                f"{UNVERIFIED_ORIGIN}: intact and signed, but by a key nothing ties to its owner: pass the "
                "key (--key) or its published fingerprint (--fingerprint) you got from the rights holder, or "
                "the authority that certified it (--ca)"
            )
        return "OK"


def verify_bundle(
    data: bytes,
    *,
    trusted_key: bytes | None = None,
    trusted_fingerprint: str | None = None,
    tsa_cert: x509.Certificate | Sequence[x509.Certificate] | None = None,
    key_ca: Sequence[x509.Certificate] | None = None,
) -> Verification:
    """Check a bundle offline (see the module docstring), reading at most :data:`MAX_BUNDLE_BYTES` and
    inflating nothing but the WARC, through a hash: its layout, every file against SHA256SUMS, the signature
    (and, given ``trusted_key`` (PEM) or ``trusted_fingerprint``, that this is the key: without either the
    verdict is :data:`UNVERIFIED_ORIGIN`), the timestamps (the capture's, SHA256SUMS's, the signature's:
    each from an authority ``tsa_cert`` names, or by default the system's trust store; none earlier than the
    capture), and every claim of evidence.json against the WARC it describes. Given ``key_ca``, the bundle's
    ``signing-key.crt`` must certify its key and chain to one of those certificates, valid when the signature
    was timestamped (else now): the origin is then the name certified. Any damage is a
    :attr:`Verification.failure` of one line, never an exception."""
    result = Verification()
    try:
        _verify(data, trusted_key, trusted_fingerprint, tsa_cert, result, key_ca)
    except BundleError as error:
        result.failure = str(error)
    return result


def _check_zip_frame(data: bytes) -> None:
    """Refuse, before any parsing, a file too large or whose central directory is not the small one a
    bundle has: the standard zipfile would otherwise build an entry for every record a hostile directory
    holds, and inflate whatever a member claims."""
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError(f"larger than a bundle can be ({len(data):,} bytes > {MAX_BUNDLE_BYTES:,})")
    if len(data) < _END_OF_DIRECTORY.size:
        raise BundleError("not a zip (too short)")
    signature, _, _, _, entries, directory, _, comment = _END_OF_DIRECTORY.unpack(data[-22:])
    if signature != b"PK\x05\x06" or data[-42:-38] == b"PK\x06\x07":
        raise BundleError("not a zip fptrack writes (no plain end of central directory at its end)")
    if entries > len(_MEMBERS) or directory > _MAX_DIRECTORY or comment:
        raise BundleError(f"not a bundle: its zip lists {entries} files in {directory:,} bytes")


def _read_members(data: bytes) -> list[tuple[str, bytes]]:
    """The members, each named as a bundle's are and stored (so read as it sits in ``data``)."""
    _check_zip_frame(data)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            strangers = [info.filename for info in infos if info.filename not in _MEMBERS]
            if strangers:
                raise BundleError(f"unexpected files: {', '.join(ascii(name) for name in strangers)}")
            for info in infos:
                if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
                    raise BundleError(f"{info.filename} is compressed: a bundle stores its files")
            return [(info.filename, archive.read(info)) for info in infos]
    except BundleError:
        raise
    except Exception as error:  # noqa: BLE001 (a damaged zip raises many kinds; any of them fails the check)
        raise BundleError(f"not a readable zip: {error}") from None


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise BundleError(f"{what} is not JSON fptrack writes: {reason}") from None
    return _object(value, what)


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BundleError(f"{what} is not a JSON object")
    return value


def _origin(
    public: ed25519.Ed25519PublicKey, trusted_key: bytes | None, trusted_fingerprint: str | None
) -> str | None:
    """What ties ``public`` to its owner: the key given or its fingerprint (raises when it is another key);
    None when neither is given."""
    fingerprint = key_fingerprint(public)
    origin = None
    if trusted_key is not None:
        if public_key_pem(_public_key_of(trusted_key, "the key given")) != public_key_pem(public):
            raise BundleError(f"signed by key {fingerprint}, not the key given")
        origin = "the key given"
    if trusted_fingerprint is not None:
        if trusted_fingerprint.strip().lower() != fingerprint.lower():
            raise BundleError(f"signed by key {fingerprint}, not the fingerprint given")
        origin = "the fingerprint given" if origin is None else "the key and fingerprint given"
    return origin


def _verify(
    data: bytes,
    trusted_key: bytes | None,
    trusted_fingerprint: str | None,
    tsa_cert: x509.Certificate | Sequence[x509.Certificate] | None,
    out: Verification,
    key_ca: Sequence[x509.Certificate] | None = None,
) -> None:
    members = _read_members(data)
    if stored_zip(members) != data:
        raise BundleError("the zip was changed: its bytes are not the layout fptrack writes for these files")
    files = dict(members)
    if len(files) != len(members):
        raise BundleError("the zip holds a file name twice")
    signed = [*SIGNED_FILES, *(name for name in (CAPTURE_TOKEN, SCREENSHOT, CERTIFICATE) if name in files)]
    expected = {*signed, MANIFEST, SIGNATURE}
    if not expected <= set(files):
        raise BundleError(f"missing: {sorted(expected - set(files))}")
    manifest = files[MANIFEST]
    listed: dict[str, str] = {}
    for line in manifest.decode("ascii", errors="replace").splitlines():
        hexdigest, _, name = line.partition("  ")
        listed[name] = hexdigest
    if set(listed) != set(signed):
        raise BundleError(f"SHA256SUMS lists {sorted(listed)}, not {sorted(signed)}")
    for name in signed:
        if sha256_hex(files[name]) != listed[name]:
            raise BundleError(f"{name} does not match its SHA-256 in SHA256SUMS")
    out.lines.append(f"files: {len(signed)} match SHA256SUMS")

    public = _public_key_of(files[PUBLIC_KEY], PUBLIC_KEY)
    try:
        public.verify(files[SIGNATURE], manifest)
    except InvalidSignature:
        raise BundleError("the signature of SHA256SUMS does not verify with the included key") from None
    origin = _origin(public, trusted_key, trusted_fingerprint)
    whose = origin or "the key included in the bundle, which anyone can make"
    out.lines.append(f"signature: good, Ed25519 key {key_fingerprint(public)} ({whose})")

    evidence = _json_object(files["evidence.json"], "evidence.json")
    signing_key = _object(evidence.get("signing_key"), "evidence.json's signing_key")
    if signing_key.get("fingerprint") != key_fingerprint(public):
        raise BundleError("evidence.json names another signing key than the one that signed it")
    chain = _check_key_certificate(files, signing_key, public, key_ca, out)
    capture = _check_warc(files[WARC_FILE], evidence)
    _check_times(evidence, capture.fetched_at)
    _check_screenshot(files, evidence, out)
    out.lines.append(capture.line)
    sealed = _check_capture_stamp(files, evidence, capture, tsa_cert, out)
    digest = hashlib.sha256(manifest).digest()
    signed_when: datetime | None = None
    if TIMESTAMP in files:
        stamp = verify_timestamp(files[TIMESTAMP], digest, tsa_cert=tsa_cert, require_trust=True)
        _check_stamp_after(stamp.time, capture.fetched_at, "the page's capture")
        _check_stamp_after(stamp.time, _claimed_time(evidence.get("created_at"), "created_at"), "created_at")
        if sealed is not None:
            _check_stamp_after(stamp.time, sealed, "the capture's timestamp")
        out.lines.append(
            f"timestamp: {utc_z(stamp.time)} by {stamp.authority} (serial {stamp.serial}), "
            f"verified against {stamp.trusted_by}"
        )
        if SIGNATURE_TIMESTAMP in files:
            signature_digest = hashlib.sha256(files[SIGNATURE]).digest()
            signed_at = verify_timestamp(
                files[SIGNATURE_TIMESTAMP], signature_digest, tsa_cert=tsa_cert, require_trust=True
            )
            _check_stamp_after(signed_at.time, capture.fetched_at, "the page's capture")
            out.lines.append(
                f"signature timestamp: {utc_z(signed_at.time)} by {signed_at.authority}: the signature "
                f"existed then, verified against {signed_at.trusted_by}"
            )
            signed_when = signed_at.time
        elif evidence.get("format") != "fptrack-evidence/2":
            raise BundleError("the bundle is timestamped but its signature is not (no SHA256SUMS.sig.tsr)")
    else:
        if SIGNATURE_TIMESTAMP in files:
            raise BundleError("the signature is timestamped but SHA256SUMS is not")
        if evidence.get("timestamp") != NOT_TIMESTAMPED:
            raise BundleError("the bundle names a time-stamping authority but holds no timestamp")
        if tsa_cert is not None and sealed is None:
            raise BundleError("not timestamped, while a time-stamping authority's certificate was given")
        out.lines.append(f"timestamp: {NOT_TIMESTAMPED} (no authority was configured when it was made)")
    if chain is not None and key_ca is not None:
        certified = _certified_origin(chain, key_ca, signed_when)
        out.lines.append(f"key certificate: {certified}")
        origin = certified if origin is None else f"{origin}; {certified}"
    out.origin = origin


def _check_key_certificate(
    files: Mapping[str, bytes],
    signing_key: Mapping[str, Any],
    public: ed25519.Ed25519PublicKey,
    key_ca: Sequence[x509.Certificate] | None,
    out: Verification,
) -> list[x509.Certificate] | None:
    """``signing-key.crt``, when the bundle carries one: it certifies the signing key and is the one
    evidence.json describes. Without ``key_ca`` it proves nothing (anyone can issue a certificate to
    themselves) and the line says so."""
    claim = signing_key.get("certificate")
    if CERTIFICATE not in files:
        if claim is not None:
            raise BundleError(f"evidence.json names a key certificate but the bundle holds no {CERTIFICATE}")
        if key_ca is not None:
            raise BundleError(f"--ca was given but the bundle holds no key certificate ({CERTIFICATE})")
        return None
    chain = _certificate_chain(files[CERTIFICATE], public, CERTIFICATE)
    if claim != _certificate_claim(files[CERTIFICATE]):
        raise BundleError(f"evidence.json describes another certificate than {CERTIFICATE}")
    if key_ca is None:
        out.lines.append(
            f"key certificate: {chain[0].subject.rfc4514_string()}, issued by "
            f"{chain[0].issuer.rfc4514_string()} (not checked: pass its authority's certificate as --ca)"
        )
    return chain


def _certified_origin(
    chain: Sequence[x509.Certificate], key_ca: Sequence[x509.Certificate], when: datetime | None
) -> str:
    """Who the key's certificate names, once it chains to ``key_ca`` and was valid ``when`` (the time the
    signature was timestamped; now without one)."""
    leaf = chain[0]
    moment = when or datetime.now(UTC)
    if not leaf.not_valid_before_utc <= moment <= leaf.not_valid_after_utc:
        raise BundleError(
            f"{CERTIFICATE} was not valid at {utc_z(moment)} (valid {utc_z(leaf.not_valid_before_utc)} to "
            f"{utc_z(leaf.not_valid_after_utc)})"
        )
    anchor = _trusted_chain(leaf, chain[1:], key_ca, moment)
    if anchor is None:
        raise BundleError(
            f"{CERTIFICATE} ({leaf.subject.rfc4514_string()}, issued by {leaf.issuer.rfc4514_string()}) "
            "chains to none of the certificates given as --ca"
        )
    return f"certified as {leaf.subject.rfc4514_string()} by {anchor.subject.rfc4514_string()}"


def _check_capture_stamp(
    files: Mapping[str, bytes],
    evidence: Mapping[str, Any],
    capture: _Capture,
    tsa_cert: x509.Certificate | Sequence[x509.Certificate] | None,
    out: Verification,
) -> datetime | None:
    """The capture's time-stamp, when evidence.json claims one: the capture statement written again from the
    WARC's records (their target, date and the SHA-256 of each block) is evidence.json's, its SHA-256 is the
    token's imprint, the token verifies and is trusted, and it is no earlier than the fetch it seals.
    Returns the time it states (None without one)."""
    claim = evidence.get("capture", NO_CAPTURE_STAMP)
    if not isinstance(claim, dict):
        if CAPTURE_TOKEN in files:
            raise BundleError(
                f"the bundle holds {CAPTURE_TOKEN} but evidence.json claims no capture timestamp"
            )
        if claim != NO_CAPTURE_STAMP:
            raise BundleError("evidence.json's capture is neither a capture timestamp nor its absence")
        out.lines.append(f"capture: {NO_CAPTURE_STAMP} (none was taken when the page was flagged)")
        return None
    if CAPTURE_TOKEN not in files:
        raise BundleError(f"evidence.json claims a capture timestamp but the bundle holds no {CAPTURE_TOKEN}")
    if capture.statement is None:
        raise BundleError("evidence.json claims a capture timestamp but the WARC holds no HTTP exchange")
    if claim.get("statement") != capture.statement.decode("utf-8"):
        raise BundleError("evidence.json's capture statement does not describe the WARC's records")
    statement_sha256 = sha256_hex(capture.statement)
    if claim.get("sha256") != statement_sha256:
        raise BundleError("evidence.json's capture sha256 is not its statement's")
    sealed = verify_timestamp(
        files[CAPTURE_TOKEN], bytes.fromhex(statement_sha256), tsa_cert=tsa_cert, require_trust=True
    )
    if claim.get("stamped_at") != utc_z(sealed.time):
        raise BundleError("evidence.json's capture stamped_at is not the time its token states")
    _check_stamp_after(sealed.time, capture.fetched_at, "the page's capture")
    after = max(sealed.time - capture.fetched_at, timedelta(0))
    review = _before_review(evidence, sealed.time)
    out.lines.append(
        f"capture: sealed {utc_z(sealed.time)} ({_duration(after)} after the fetch{review}) "
        f"by {sealed.authority} (serial {sealed.serial}), verified against {sealed.trusted_by}: the token "
        f"covers the WARC's request and response records as they are (capture statement SHA-256 "
        f"{statement_sha256})"
    )
    return sealed.time


def _before_review(evidence: Mapping[str, Any], sealed: datetime) -> str:
    """Where the seal stands beside the first review decision evidence.json records (times checked by
    :func:`_check_times`): sealed when flagged, it comes before any reviewer acted on the match."""
    decisions = [
        _claimed_time(decision.get("at"), "review time")
        for decision in evidence.get("review") or []
        if isinstance(decision, dict)
    ]
    if not decisions:
        return ""
    first = min(decisions)
    if sealed <= first + CLOCK_SKEW:
        return f", before the first review decision ({utc_z(first)})"
    return f", after the first review decision ({utc_z(first)}): not sealed when flagged"


def _duration(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


def _claimed_time(value: Any, what: str) -> datetime:
    try:
        return datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise BundleError(
            f"evidence.json's {what} is not a UTC time fptrack writes: {str(value)[:40]!r}"
        ) from None


def _check_screenshot(files: Mapping[str, bytes], evidence: Mapping[str, Any], out: Verification) -> None:
    """page.png is there exactly when evidence.json claims it, with the SHA-256 it claims."""
    claim = evidence.get("screenshot")
    if SCREENSHOT not in files:
        if isinstance(claim, dict):
            raise BundleError(f"evidence.json claims a screenshot but the bundle holds no {SCREENSHOT}")
        return
    if not isinstance(claim, dict) or claim.get("sha256") != sha256_hex(files[SCREENSHOT]):
        raise BundleError(f"{SCREENSHOT} is not the screenshot evidence.json describes")
    if not files[SCREENSHOT].startswith(b"\x89PNG\r\n\x1a\n"):
        raise BundleError(f"{SCREENSHOT} is not a PNG")
    out.lines.append(
        f"screenshot: {SCREENSHOT}, as evidence.json describes it (the capture shown off the network)"
    )


def _check_times(evidence: Mapping[str, Any], fetched_at: datetime) -> None:
    """The times evidence.json claims in their order: the page captured, then reviewed, then bundled."""
    created_at = _claimed_time(evidence.get("created_at"), "created_at")
    if created_at < fetched_at - CLOCK_SKEW:
        raise BundleError("evidence.json's created_at precedes the page's capture")
    review = evidence.get("review")
    if not isinstance(review, list):
        raise BundleError("evidence.json's review is not a list")
    for decision in review:
        at = _claimed_time(_object(decision, "a review decision").get("at"), "review time")
        if at > created_at + CLOCK_SKEW:
            raise BundleError("evidence.json claims a review decision after the bundle was made")


def _check_stamp_after(stamped: datetime, claimed: datetime, what: str) -> None:
    """A timestamp is made when the bundle is: a claim later than it (beyond the clocks' skew) is false."""
    if stamped < claimed - CLOCK_SKEW:
        raise BundleError(
            f"the timestamp ({utc_z(stamped)}) precedes {what} ({utc_z(claimed)}) it must follow"
        )


@dataclass(frozen=True)
class _Record:
    """A WARC record as read for the checks: its type, headers, HTTP status (responses), payload's SHA-256
    (the HTTP body of a response or request, the block of the others) and, for metadata, the block itself."""

    kind: str
    headers: Mapping[str, str]
    status: str | None
    sha256: str
    block: bytes | None
    decoded_sha256: str | None = None  # a response's payload with its content coding undone, when it has one
    block_sha256: str = ""  # the whole block's: the HTTP head and the payload of a response or request
    payload_length: int = 0  # the bytes of the payload (of the block, for a record without an HTTP head)
    coded: bool = False  # a response whose head names a content coding

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


_PIECE = 1 << 20  # the most one step of decoding a payload yields


class _Undo:
    """One content coding (gzip, deflate, br) undone a piece at a time: no call yields more than
    :data:`_PIECE` bytes, whatever the input expands to."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._zlib: Any = None
        self._brotli: Any = None
        if coding == "br":
            import brotli

            self._brotli = brotli.Decompressor()
        elif coding not in ("gzip", "x-gzip", "deflate"):
            raise BundleError(
                f"page.warc.gz: a response payload has a content coding fptrack never keeps: {coding}"
            )

    def _inflater(self, first: bytes) -> Any:
        if self.coding != "deflate":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        zlib_wrapped = len(first) >= 2 and first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0
        return zlib.decompressobj(zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._brotli is not None:
            yield self._brotli.process(data, output_buffer_limit=_PIECE)
            while not self._brotli.can_accept_more_data():
                yield self._brotli.process(b"", output_buffer_limit=_PIECE)
            return
        while data:
            if self._zlib is None:
                self._zlib = self._inflater(data)
            yield self._zlib.decompress(data, _PIECE)
            data = self._zlib.unconsumed_tail
            if self._zlib.eof and not data:
                data = self._zlib.unused_data
                if data and self.coding == "deflate":
                    raise BundleError("page.warc.gz: a deflate payload has bytes after its end")
                self._zlib = None

    @property
    def finished(self) -> bool:
        if self._brotli is not None:
            return bool(self._brotli.is_finished())
        return self._zlib is None


def _brotli_errors() -> tuple[type[Exception], ...]:
    try:
        import brotli
    except ImportError:
        return ()
    return (brotli.error,)


class _DecodedHash:
    """The SHA-256 of a payload with its content ``codings`` (in the order applied) undone, fed a read at a
    time, its output bounded by :data:`MAX_WARC_EXPANSION` (a payload of a few kilobytes can claim to be
    gigabytes)."""

    def __init__(self, codings: Sequence[str]) -> None:
        self._stages = [_Undo(coding) for coding in reversed(codings)]
        self._hash = hashlib.sha256()
        self._left = MAX_WARC_EXPANSION

    def update(self, data: bytes) -> None:
        self._push(data, 0)

    def _push(self, data: bytes, stage: int) -> None:
        if stage == len(self._stages):
            self._left -= len(data)
            if self._left < 0:
                raise BundleError(
                    f"page.warc.gz: a response payload decodes beyond {MAX_WARC_EXPANSION:,} bytes"
                )
            self._hash.update(data)
            return
        errors: tuple[type[Exception], ...] = (zlib.error, ValueError, *_brotli_errors())
        pieces = self._stages[stage].feed(data)
        while True:  # a piece at a time: the pieces of one read may add up to gigabytes
            try:
                piece = next(pieces, None)
            except errors as error:
                raise BundleError(
                    f"page.warc.gz: a response payload is not {self._stages[stage].coding}: {error}"
                ) from None
            if piece is None:
                return
            self._push(piece, stage + 1)

    def hexdigest(self) -> str:
        if not all(stage.finished for stage in self._stages):
            raise BundleError("page.warc.gz: a response payload ends before its content coding does")
        return self._hash.hexdigest()


class _CappedGunzip(io.RawIOBase):
    """page.warc.gz inflated a read at a time, failing once it passes :data:`MAX_WARC_EXPANSION`: a few
    kilobytes can inflate to gigabytes, and the WARC is read through a hash, never held whole."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._inflating = gzip.GzipFile(fileobj=io.BytesIO(data))
        self._left = MAX_WARC_EXPANSION

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        chunk = self._inflating.read(min(len(buffer), 1 << 20))
        if len(chunk) > self._left:
            raise BundleError(f"page.warc.gz inflates beyond {MAX_WARC_EXPANSION:,} bytes")
        self._left -= len(chunk)
        buffer[: len(chunk)] = chunk
        return len(chunk)


def _head_lines(stream: io.BufferedReader[_CappedGunzip], left: int, what: str) -> list[bytes]:
    """The lines of a head (WARC or HTTP) up to its blank line, at most :data:`MAX_HEAD` bytes and ``left``:
    a reader that reads a line whatever its length is slow and unbounded on a line of a hundred megabytes."""
    lines: list[bytes] = []
    size = 0
    while True:
        line = stream.readline(max(min(MAX_HEAD, left) - size, 0) + 1)
        size += len(line)
        if size > min(MAX_HEAD, left) or not line.endswith(b"\n"):
            raise BundleError(f"page.warc.gz: a {what} head is cut short or longer than fptrack writes")
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line.rstrip(b"\r\n"))


def _read_record(stream: io.BufferedReader[_CappedGunzip]) -> tuple[str, _Record] | None:
    """The next WARC record of ``stream`` (None at its end): its head parsed, its block hashed a read at a
    time, only a metadata block kept."""
    if not stream.peek(1):
        return None
    lines = _head_lines(stream, MAX_HEAD, "WARC record")
    if not lines or not lines[0].startswith(b"WARC/"):
        raise BundleError("page.warc.gz: a record does not start with its WARC version")
    headers = dict(_header(line) for line in lines[1:])
    kind = headers.get("WARC-Type", "")
    try:
        left = int(headers.get("Content-Length", ""))
    except ValueError:
        left = -1
    if left < 0:
        raise BundleError(f"page.warc.gz: a {kind} record has no valid Content-Length")
    status = None
    coded = False
    decoded: _DecodedHash | None = None
    block = hashlib.sha256()
    if kind in ("response", "request"):  # the payload is what follows the HTTP head
        http_head = _head_lines(stream, left, "HTTP")
        left -= sum(len(line) + 2 for line in http_head) + 2
        block.update(b"".join(line + b"\r\n" for line in http_head) + b"\r\n")
        if kind == "response" and http_head:
            status = (http_head[0].split(b" ") + [b""])[1].decode("latin-1")
            codings = content_codings(b"\r\n".join(http_head))
            coded = bool(codings)
            # a payload cut short (WARC-Truncated) is not decoded: its coding's stream does not end
            decoded = _DecodedHash(codings) if codings and "WARC-Truncated" not in headers else None
    hasher = hashlib.sha256()
    payload_length = left
    kept = bytearray() if kind == "metadata" else None
    if kept is not None and left > MAX_KEPT_RECORD:
        raise BundleError("page.warc.gz's metadata record is larger than fptrack writes")
    while left > 0:
        chunk = stream.read(min(left, 1 << 20))
        if not chunk:
            raise BundleError(f"page.warc.gz: a {kind} record is cut short")
        hasher.update(chunk)
        block.update(chunk)
        if kept is not None:
            kept += chunk
        if decoded is not None:
            decoded.update(chunk)
        left -= len(chunk)
    if stream.read(4) != b"\r\n\r\n":
        raise BundleError(f"page.warc.gz: a {kind} record does not end where its Content-Length says")
    record = _Record(
        kind,
        headers,
        status,
        hasher.hexdigest(),
        None if kept is None else bytes(kept),
        None if decoded is None else decoded.hexdigest(),
        block.hexdigest(),
        payload_length,
        coded,
    )
    return headers.get("WARC-Record-ID", ""), record


def _header(line: bytes) -> tuple[str, str]:
    name, colon, value = line.decode("utf-8", errors="replace").partition(":")
    if not colon:
        raise BundleError(f"page.warc.gz: a header line is not 'name: value': {line[:40]!r}")
    return name.strip(), value.strip()


def _read_warc(warc: bytes) -> dict[str, _Record]:
    """Record id -> the record as read (:class:`_Record`). A reader of fptrack's own records (each head a
    few lines, written by warcio's writer) rather than warcio's, whose line reading has no bound."""
    found: dict[str, _Record] = {}
    stream = io.BufferedReader(_CappedGunzip(warc), buffer_size=1 << 16)
    try:
        while (read := _read_record(stream)) is not None:
            record_id, record = read
            found[record_id] = record
    except (OSError, EOFError, zlib.error) as error:  # not gzip, or a member cut short
        raise BundleError(f"page.warc.gz cannot be read: {error}") from None
    return found


@dataclass(frozen=True)
class _Capture:
    line: str
    fetched_at: datetime
    statement: bytes | None = (
        None  # the capture statement written from the WARC's records (None: no exchange)
    )


def _record_of(records: Mapping[str, _Record], record_id: Any, kinds: tuple[str, ...], what: str) -> _Record:
    record = records.get(str(record_id))
    if record is None or record.kind not in kinds:
        raise BundleError(f"page.warc.gz holds no {' or '.join(kinds)} record {record_id} ({what})")
    return record


def _check_warc(warc: bytes, evidence: Mapping[str, Any]) -> _Capture:
    """Every claim of evidence.json about the page (URL, status, hashes, times, which record is which)
    against page.warc.gz: the metadata record the WARC carries states them too, and each record's target,
    date, status and payload hash must bear them out."""
    page = _object(evidence.get("page"), "evidence.json's page")
    claimed = _object(evidence.get("warc"), "evidence.json's warc")
    match = _object(evidence.get("match"), "evidence.json's match")
    if claimed.get("sha256") != sha256_hex(warc):
        raise BundleError("page.warc.gz is not the WARC evidence.json describes (its SHA-256 differs)")
    records = _read_warc(warc)
    url, fetched_at = page.get("url"), page.get("fetched_at")
    if match.get("page_url") != url:
        raise BundleError("evidence.json's match is about another URL than its page")
    text = _record_of(records, claimed.get("text_record"), ("conversion", "resource"), "the extracted text")
    if text.sha256 != page.get("text_sha256"):
        raise BundleError("the extracted text in page.warc.gz does not hash to the recorded text_sha256")
    if text.header("WARC-Target-URI") != url or text.header("WARC-Date") != fetched_at:
        raise BundleError("the WARC's text record is of another URL or time than evidence.json's page")
    _check_metadata(records, page, claimed)
    _check_exchange(records, page, claimed)
    line = _snapshot_line(records, page, claimed)
    return _Capture(line, _claimed_time(fetched_at, "page.fetched_at"), _warc_statement(records, claimed))


def _warc_statement(records: Mapping[str, _Record], claimed: Mapping[str, Any]) -> bytes | None:
    """The capture statement (:func:`storage.capture_stamps.capture_statement`) of the exchange the WARC
    holds, written from its records: the response's (or rendered DOM's) target and date, the SHA-256 of the
    request, response and rendered DOM records' blocks, or of the head the browser reported (the metadata
    record's). None when the WARC holds no exchange."""
    blocks: list[tuple[str, str]] = []
    anchor: _Record | None = None
    if "response_record" in claimed:
        anchor = _record_of(records, claimed["response_record"], ("response",), "the HTTP response")
        if "request_record" in claimed:
            request = _record_of(records, claimed["request_record"], ("request",), "the HTTP request")
            blocks.append(("request", request.block_sha256))
        blocks.append(("response", _full_block_sha256(anchor)))
    elif "rendered_record" in claimed:
        metadata = next(record.block for record in records.values() if record.kind == "metadata")
        head = _json_object(metadata or b"", "the WARC's metadata record").get("browser_response_head")
        if not isinstance(head, str):
            return None
        blocks.append(("browser-response-head", sha256_hex(head.encode("latin-1", errors="replace"))))
    if "rendered_record" in claimed:
        rendered = _record_of(records, claimed["rendered_record"], ("resource",), "the rendered DOM")
        blocks.append(("rendered", rendered.block_sha256))
        anchor = anchor or rendered
    if anchor is None:
        return None
    try:
        return capture_statement(
            anchor.header("WARC-Target-URI") or "", anchor.header("WARC-Date") or "", blocks
        )
    except ValueError as error:
        raise BundleError(f"page.warc.gz: {error}") from None


def _check_metadata(
    records: Mapping[str, _Record], page: Mapping[str, Any], claimed: Mapping[str, Any]
) -> None:
    """The WARC's metadata record states the page's fetch metadata and the record list: evidence.json's must
    be the same, key for key."""
    blocks = [record.block for record in records.values() if record.kind == "metadata"]
    if len(blocks) != 1 or blocks[0] is None:
        raise BundleError(f"page.warc.gz holds {len(blocks)} metadata records, not one")
    stated = _json_object(blocks[0], "the WARC's metadata record")
    stated_page = {k: v for k, v in stated.items() if k not in ("records", "browser_response_head")}
    claimed_page = {k: v for k, v in page.items() if k != "raw_exchange"}
    differing = sorted(k for k in {*stated_page, *claimed_page} if stated_page.get(k) != claimed_page.get(k))
    if differing:
        raise BundleError(
            f"evidence.json's page differs from the WARC's metadata record in {', '.join(differing)}"
        )
    if stated.get("records") != {k: v for k, v in claimed.items() if k != "sha256"}:
        raise BundleError("evidence.json's warc record list differs from the WARC's metadata record")


def _check_exchange(
    records: Mapping[str, _Record], page: Mapping[str, Any], claimed: Mapping[str, Any]
) -> None:
    """The response record, when there is one: of the page's URL, with its HTTP status and a payload digest
    that is its payload's; the request record sent for it."""
    if "response_record" not in claimed:
        return
    response_id = claimed["response_record"]
    response = _record_of(records, response_id, ("response",), "the HTTP response")
    target = response.header("WARC-Target-URI")
    if target not in (page.get("final_url"), page.get("url")):
        raise BundleError(f"the WARC's response is for {target}, not the page's URL")
    if response.status != str(page.get("http_status")):
        raise BundleError(
            f"the WARC's response has status {response.status}, evidence.json {page.get('http_status')}"
        )
    if response.header("WARC-Payload-Digest") != "sha256:" + response.sha256:
        raise BundleError("the WARC's response payload does not match its WARC-Payload-Digest")
    _check_truncation(response, claimed)
    if "request_record" in claimed:
        request = _record_of(records, claimed["request_record"], ("request",), "the HTTP request")
        if request.header("WARC-Target-URI") != target or request.header("WARC-Concurrent-To") != response_id:
            raise BundleError("the WARC's request record is not the one sent for its response")


def _snapshot_line(
    records: Mapping[str, _Record], page: Mapping[str, Any], claimed: Mapping[str, Any]
) -> str:
    if claimed.get("snapshot_record") is None:
        return "page: the text as stored only (no raw HTTP exchange was kept): snapshot_sha256 not checkable"
    snapshot = _record_of(records, claimed["snapshot_record"], ("response", "resource"), "the snapshot")
    if snapshot.kind == "response" and snapshot.header("WARC-Truncated") is not None:
        return _truncated_line(snapshot, page)
    decoded = snapshot.kind == "response" and snapshot.decoded_sha256 is not None
    if (snapshot.decoded_sha256 if decoded else snapshot.sha256) != page.get("snapshot_sha256"):
        raise BundleError(f"the WARC {snapshot.kind} payload does not hash to the recorded snapshot_sha256")
    what = "response payload" if snapshot.kind == "response" else "rendered DOM (resource record)"
    if decoded:
        what += " (as received, its content coding undone)"
    return (
        f"page: WARC {what} hashes to snapshot_sha256 {page.get('snapshot_sha256')} "
        f"(HTTP {page.get('http_status')}, fetched {page.get('fetched_at')}); evidence.json's URL, status, "
        "hashes and times agree with the WARC"
    )


def _full_block_sha256(response: _Record) -> str:
    """The SHA-256 of a response record's whole block: as read, or, for a payload cut at the cap, as its
    record states it (``Fptrack-Full-Block-Digest``: what a capture time-stamp sealed)."""
    if response.header("WARC-Truncated") is None:
        return response.block_sha256
    stated = response.header("Fptrack-Full-Block-Digest") or ""
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", stated):
        raise BundleError("page.warc.gz: a truncated response states no full block SHA-256")
    return stated.removeprefix("sha256:")


def _check_truncation(response: _Record, claimed: Mapping[str, Any]) -> None:
    """A response cut at FPTRACK_EVIDENCE_MAX_PAYLOAD says so in its record (``WARC-Truncated: length``, the
    full length and SHA-256) and in evidence.json's ``warc.truncated``, and the two agree; an uncut one
    claims no cut."""
    note = claimed.get("truncated")
    if response.header("WARC-Truncated") is None:
        if note is not None:
            raise BundleError("evidence.json says the response was truncated, and its WARC record does not")
        return
    if response.header("WARC-Truncated") != "length":
        raise BundleError(f"the WARC's response is truncated for {response.header('WARC-Truncated')!r}")
    note = _object(note, "evidence.json's warc.truncated")
    full = response.header("Fptrack-Full-Payload-Length") or ""
    full_bytes = int(full) if full.isdigit() else -1
    stated: dict[str, object] = {
        "kept_bytes": response.payload_length,
        "full_bytes": full_bytes,
        "full_payload_sha256": (response.header("Fptrack-Full-Payload-Digest") or "").removeprefix("sha256:"),
        "full_block_sha256": _full_block_sha256(response),
    }
    if any(note.get(key) != value for key, value in stated.items()):
        raise BundleError("the WARC's truncated response and evidence.json's warc.truncated disagree")
    if not 0 < response.payload_length < full_bytes:
        raise BundleError("the WARC's truncated response keeps no fewer bytes than its full length")


def _truncated_line(snapshot: _Record, page: Mapping[str, Any]) -> str:
    """The snapshot line of a response payload cut at the cap: its kept bytes hash to the record's digest
    (checked with the exchange); the full payload is not in the bundle, so the page's snapshot_sha256 is
    checked against the full SHA-256 the record states, when the payload is the body itself (no content
    coding), and is otherwise the record's word."""
    full = snapshot.header("Fptrack-Full-Payload-Digest") or ""
    kept, whole = snapshot.payload_length, snapshot.header("Fptrack-Full-Payload-Length")
    cut = (
        f"page: WARC response payload TRUNCATED at {kept:,} of its {int(whole or 0):,} bytes "
        "(FPTRACK_EVIDENCE_MAX_PAYLOAD): the bytes kept match its WARC-Payload-Digest; the full payload is "
        f"not in the bundle, its SHA-256 {full.removeprefix('sha256:')} as the record states"
    )
    if not snapshot.coded:
        if full != f"sha256:{page.get('snapshot_sha256')}":
            raise BundleError("the truncated response's full SHA-256 is not the recorded snapshot_sha256")
        return (
            cut
            + f", which is the recorded snapshot_sha256 (HTTP {page.get('http_status')}, fetched "
            + (f"{page.get('fetched_at')}); whoever holds the file can check it against that hash")
        )
    return cut + (
        f"; the recorded snapshot_sha256 {page.get('snapshot_sha256')} is of the payload with its content "
        "coding undone, which the cut payload cannot show"
    )
