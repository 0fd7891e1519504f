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

Why the timestamp is requested and checked with asn1crypto and cryptography rather than by a TSP client
library: the check must run offline against the token's own certificate or one the recipient names, and the
whole of it (imprint, nonce, the signed attributes, the signature, the certificate's time-stamping usage) is
short enough to read here.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from sqlalchemy import select
from sqlalchemy.orm import Session, joinedload
from warcio.archiveiterator import ArchiveIterator
from warcio.warcwriter import WARCWriter

from fptrack.compare.records import match_to_dict
from fptrack.core.errors import FptrackError
from fptrack.core.plain_http import HttpFailure, http_request
from fptrack.core.settings import Settings
from fptrack.services.evidence.passages import evidence_spans, span_diff
from fptrack.storage.exchanges import RawExchange, exchange_for
from fptrack.storage.match_life import Evidence, evidence_of
from fptrack.storage.models import Match, Page, ReviewDecision, as_utc

__all__ = [
    "BUNDLE_FORMAT",
    "BundleError",
    "TimestampInfo",
    "Verification",
    "build_bundle",
    "evidence_bundle",
    "key_fingerprint",
    "load_signing_key",
    "page_warc",
    "public_key_pem",
    "request_timestamp",
    "sha256_hex",
    "stored_zip",
    "utc_z",
    "verify_bundle",
    "verify_timestamp",
]

BUNDLE_FORMAT = "fptrack-evidence/2"
MANIFEST = "SHA256SUMS"
SIGNATURE = "SHA256SUMS.sig"
TIMESTAMP = "SHA256SUMS.tsr"
PUBLIC_KEY = "signing-key.pub"
WARC_FILE = "page.warc.gz"
SIGNED_FILES = ("README.txt", "evidence.json", WARC_FILE, PUBLIC_KEY)
TSA_TIMEOUT = 30.0
NOT_TIMESTAMPED = "not timestamped"
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


def verify_timestamp(
    response: bytes, digest: bytes, *, tsa_cert: x509.Certificate | None = None, nonce: int | None = None
) -> TimestampInfo:
    """Check a DER time-stamp response over the SHA-256 ``digest``, offline: granted; its TSTInfo's imprint is
    ``digest``; its signed attributes name the TSTInfo and carry its hash; the signature over them verifies
    with the signer's certificate, found in the token; that certificate is for time-stamping; and, given
    ``tsa_cert``, it is that certificate or one ``tsa_cert`` issued. Raises :class:`BundleError` saying which
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
        generated: datetime = info["gen_time"].native
    except BundleError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as error:
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
    if tsa_cert is not None:
        if certificate != tsa_cert:
            try:
                certificate.verify_directly_issued_by(tsa_cert)
            except (ValueError, TypeError, InvalidSignature):
                raise BundleError(
                    "the time-stamp token's certificate is neither the certificate given nor issued by it"
                ) from None
        trusted_by = "the certificate given"
    return TimestampInfo(
        time=as_utc(generated),
        authority=certificate.subject.rfc4514_string(),
        serial=int(info["serial_number"].native),
        trusted_by=trusted_by,
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


def page_warc(page: Page, content: Evidence, exchange: RawExchange | None) -> tuple[bytes, dict[str, Any]]:
    """The gzipped WARC file of the page and what it holds (record ids, which record's payload is the
    snapshot), for evidence.json. See the module docstring for the records."""
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=True, warc_version="1.1")
    writer.write_record(
        writer.create_warcinfo_record(
            WARC_FILE,
            {
                "software": "fptrack",
                "format": "WARC File Format 1.1",
                "description": "a page as fptrack fetched it, with the text it extracted from it",
            },
        )
    )
    described: dict[str, Any] = {"file": WARC_FILE}
    text_date = utc_z(content.fetched_at)
    source_id: str | None = None  # the record the extracted text comes from
    response_id: str | None = None
    if exchange is not None:
        date = utc_z(exchange.fetched_at)
        described["fetched_as"] = "rendered in Chromium" if exchange.rendered else "plain HTTP"
        if exchange.body is not None:
            response = writer.create_warc_record(
                exchange.url,
                "response",
                payload=io.BytesIO(exchange.response_head + exchange.body),
                length=len(exchange.response_head) + len(exchange.body),
                warc_content_type="application/http; msgtype=response",
                warc_headers_dict={
                    "WARC-Date": date,
                    "WARC-Payload-Digest": "sha256:" + sha256_hex(exchange.body),
                },
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


def _readme(timestamped_by: str | None) -> bytes:
    stamp = (
        f"SHA256SUMS.tsr  an RFC 3161 time-stamp of SHA256SUMS by {timestamped_by}:\n"
        "                openssl ts -verify -in SHA256SUMS.tsr -data SHA256SUMS -CAfile <its CA>\n"
        if timestamped_by
        else f"Timestamp       {NOT_TIMESTAMPED} (no time-stamping authority was configured)\n"
    )
    return (
        "fptrack evidence bundle\n\n"
        "page.warc.gz    the page as fetched: the HTTP request and response (WARC request, response),\n"
        "                for a page rendered in a browser the DOM it rendered (a resource record), the text\n"
        "                fptrack extracted from it (a conversion record) and the fetch metadata\n"
        "evidence.json   the match: the registered work and chapter, the copied passages beside the\n"
        "                original's, the page's snapshot SHA-256, the review decisions; times in UTC\n"
        "signing-key.pub the public Ed25519 key of the fptrack installation that made this bundle\n"
        "SHA256SUMS      the SHA-256 of the files above:   sha256sum -c SHA256SUMS\n"
        "SHA256SUMS.sig  its Ed25519 signature:  openssl pkeyutl -verify -pubin -inkey signing-key.pub "
        "-rawin -in SHA256SUMS -sigfile SHA256SUMS.sig\n"
        f"{stamp}\n"
        "fptrack evidence verify <this zip> checks all of it offline (docs/evidence.md).\n"
    ).encode()


def evidence_bundle(
    page: Page,
    document: Mapping[str, Any],
    content: Evidence,
    exchange: RawExchange | None,
    settings: Settings,
    *,
    now: datetime | None = None,
) -> bytes:
    """The bundle of ``page`` (see the module docstring): ``document`` is the match's part of evidence.json,
    ``content`` the content the match rests on and ``exchange`` the fetch it was read from (None when none
    was kept: the bundle then holds the text as stored and says so). Signed with the installation's key and,
    with ``FPTRACK_TSA_URL`` set, timestamped (a failing authority fails the bundle)."""
    key = load_signing_key(settings)
    public = key.public_key()
    warc, records = page_warc(page, content, exchange)
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
        "signing_key": {"file": PUBLIC_KEY, "fingerprint": key_fingerprint(public)},
        "timestamp": {"authority": settings.tsa_url} if settings.tsa_url else NOT_TIMESTAMPED,
    }
    files = {
        "README.txt": _readme(settings.tsa_url),
        "evidence.json": json.dumps(evidence, ensure_ascii=False, indent=2).encode("utf-8"),
        WARC_FILE: warc,
        PUBLIC_KEY: public_key_pem(public),
    }
    manifest = "".join(f"{sha256_hex(files[name])}  {name}\n" for name in SIGNED_FILES).encode("ascii")
    members = [*files.items(), (MANIFEST, manifest), (SIGNATURE, key.sign(manifest))]
    if settings.tsa_url:
        members.append((TIMESTAMP, request_timestamp(settings.tsa_url, hashlib.sha256(manifest).digest())))
    return stored_zip(members)


def _passages(match: Match, content: Evidence) -> list[dict[str, Any]]:
    page_text = content.text or ""
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
    return evidence_bundle(match.page, document, content, exchange, settings, now=now)


# ------------------------------------------------------------------------------------------ verification


@dataclass
class Verification:
    """What :func:`verify_bundle` found: ``lines`` to print; ``failure`` the first reason it fails, if any."""

    lines: list[str] = field(default_factory=list)
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def _read_members(data: bytes) -> list[tuple[str, bytes]]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return [(info.filename, archive.read(info)) for info in archive.infolist()]
    except Exception as error:  # noqa: BLE001 (a damaged zip raises many kinds; any of them fails the check)
        raise BundleError(f"not a readable zip: {error}") from None


def verify_bundle(
    data: bytes,
    *,
    trusted_key: bytes | None = None,
    tsa_cert: x509.Certificate | None = None,
) -> Verification:
    """Check a bundle offline (see the module docstring): its layout, every file against SHA256SUMS, the
    signature (against the included key and, given ``trusted_key`` (PEM), that this is the key), the
    timestamp (against the certificate in the token, or ``tsa_cert``), and that the WARC's response (or
    rendered DOM) payload hashes to the recorded ``snapshot_sha256``."""
    result = Verification()
    try:
        _verify(data, trusted_key, tsa_cert, result)
    except BundleError as error:
        result.failure = str(error)
    return result


def _verify(
    data: bytes, trusted_key: bytes | None, tsa_cert: x509.Certificate | None, out: Verification
) -> None:
    members = _read_members(data)
    if stored_zip(members) != data:
        raise BundleError("the zip was changed: its bytes are not the layout fptrack writes for these files")
    files = dict(members)
    if len(files) != len(members):
        raise BundleError("the zip holds a file name twice")
    expected = {*SIGNED_FILES, MANIFEST, SIGNATURE}
    extra = set(files) - expected - {TIMESTAMP}
    if extra or not expected <= set(files):
        raise BundleError(f"unexpected files: {sorted(extra)} / missing: {sorted(expected - set(files))}")
    manifest = files[MANIFEST]
    listed: dict[str, str] = {}
    for line in manifest.decode("ascii", errors="replace").splitlines():
        hexdigest, _, name = line.partition("  ")
        listed[name] = hexdigest
    if set(listed) != set(SIGNED_FILES):
        raise BundleError(f"SHA256SUMS lists {sorted(listed)}, not {sorted(SIGNED_FILES)}")
    for name in SIGNED_FILES:
        if sha256_hex(files[name]) != listed[name]:
            raise BundleError(f"{name} does not match its SHA-256 in SHA256SUMS")
    out.lines.append(f"files: {len(SIGNED_FILES)} match SHA256SUMS")

    public = _public_key_of(files[PUBLIC_KEY], PUBLIC_KEY)
    try:
        public.verify(files[SIGNATURE], manifest)
    except InvalidSignature:
        raise BundleError("the signature of SHA256SUMS does not verify with the included key") from None
    whose = "the key included in the bundle"
    if trusted_key is not None:
        trusted = _public_key_of(trusted_key, "the key given")
        if public_key_pem(trusted) != public_key_pem(public):
            raise BundleError(f"signed by key {key_fingerprint(public)}, not the key given")
        whose = "the key given"
    out.lines.append(f"signature: good, Ed25519 key {key_fingerprint(public)} ({whose})")

    try:
        evidence = json.loads(files["evidence.json"])
    except ValueError as error:
        raise BundleError(f"evidence.json is not JSON: {error}") from None
    if not isinstance(evidence, dict):
        raise BundleError("evidence.json is not a JSON object")
    digest = hashlib.sha256(manifest).digest()
    if TIMESTAMP in files:
        stamp = verify_timestamp(files[TIMESTAMP], digest, tsa_cert=tsa_cert)
        out.lines.append(
            f"timestamp: {utc_z(stamp.time)} by {stamp.authority} (serial {stamp.serial}), "
            f"verified against {stamp.trusted_by}"
        )
    else:
        if evidence.get("timestamp") != NOT_TIMESTAMPED:
            raise BundleError("the bundle names a time-stamping authority but holds no timestamp")
        if tsa_cert is not None:
            raise BundleError("not timestamped, while a time-stamping authority's certificate was given")
        out.lines.append(f"timestamp: {NOT_TIMESTAMPED} (no authority was configured when it was made)")
    out.lines.append(_check_warc(files[WARC_FILE], evidence))


def _payloads(warc: bytes) -> dict[str, tuple[str, bytes]]:
    """Record id -> (record type, payload: the HTTP body of a response, the block of the others)."""
    found: dict[str, tuple[str, bytes]] = {}
    try:
        for record in ArchiveIterator(io.BytesIO(warc)):
            found[_record_id(record)] = (str(record.rec_type), bytes(record.raw_stream.read()))
    except Exception as error:  # noqa: BLE001 (warcio raises its own kinds and plain ones on a damaged file)
        raise BundleError(f"page.warc.gz cannot be read: {error}") from None
    return found


def _check_warc(warc: bytes, evidence: Mapping[str, Any]) -> str:
    page = evidence.get("page") or {}
    records = evidence.get("warc") or {}
    payloads = _payloads(warc)
    text_record = payloads.get(str(records.get("text_record")))
    if text_record is None or sha256_hex(text_record[1]) != page.get("text_sha256"):
        raise BundleError("the extracted text in page.warc.gz does not hash to the recorded text_sha256")
    snapshot = records.get("snapshot_record")
    if snapshot is None:
        return "page: the text as stored only (no raw HTTP exchange was kept): snapshot_sha256 not checkable"
    kind, payload = payloads.get(str(snapshot), ("", b""))
    if sha256_hex(payload) != page.get("snapshot_sha256"):
        raise BundleError(
            f"the WARC {kind or 'snapshot'} payload does not hash to the recorded snapshot_sha256"
        )
    what = "response payload" if kind == "response" else "rendered DOM (resource record)"
    return (
        f"page: WARC {what} hashes to snapshot_sha256 {page.get('snapshot_sha256')} "
        f"(HTTP {page.get('http_status')}, fetched {page.get('fetched_at')})"
    )
