"""A local RFC 3161 time-stamping authority for the tests: a CA and a TSA certificate made with ``openssl``,
and ``openssl ts -reply`` behind a small HTTP server on 127.0.0.1 (POST a time-stamp query, get the reply);
and a forger's back-dated token from a self-made authority (:func:`backdated_token`)."""

from __future__ import annotations

import hashlib
import subprocess
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization

__all__ = ["LocalTsa", "backdated_token", "local_tsa", "make_tsa_files"]


@dataclass(frozen=True)
class LocalTsa:
    url: str
    ca_cert: Path  # the authority's root: what a recipient trusts (--tsa-cert)
    tsa_cert: Path
    folder: Path
    queries: list[bytes]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_tsa_files(folder: Path, *, time_stamping: bool = True) -> None:
    """A CA (``ca.crt``) and a TSA key and certificate it issued (``tsa.key``, ``tsa.crt``, extended key usage
    timeStamping, critical, unless ``time_stamping`` is False), and ``ts.cnf`` for ``openssl ts -reply``."""
    folder.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "30",
             "-subj", "/CN=Test Root CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)  # fmt: skip
    _openssl("req", *ec, "-keyout", "tsa.key", "-out", "tsa.csr", "-subj", "/CN=Test TSA", cwd=folder)
    usage = "extendedKeyUsage=critical,timeStamping" if time_stamping else "extendedKeyUsage=serverAuth"
    (folder / "tsa.ext").write_text(
        f"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n{usage}\n"
    )
    _openssl("x509", "-req", "-in", "tsa.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "tsa.crt", "-days", "30", "-extfile", "tsa.ext", cwd=folder)  # fmt: skip
    (folder / "tsaserial").write_text("01\n")
    (folder / "ts.cnf").write_text(
        "[ tsa ]\ndefault_tsa = local\n[ local ]\n"
        f"dir = {folder}\nserial = $dir/tsaserial\ncrypto_device = builtin\nsigner_cert = $dir/tsa.crt\n"
        "certs = $dir/ca.crt\nsigner_key = $dir/tsa.key\nsigner_digest = sha256\ndefault_policy = 1.2.3.4.1\n"
        "digests = sha256, sha384, sha512\naccuracy = secs:1\nordering = yes\ntsa_name = no\n"
        "ess_cert_id_chain = no\ness_cert_id_alg = sha256\n"
    )


@contextmanager
def local_tsa(folder: Path, *, time_stamping: bool = True) -> Iterator[LocalTsa]:
    """Serve ``openssl ts -reply`` on 127.0.0.1 for the life of the block."""
    make_tsa_files(folder, time_stamping=time_stamping)
    queries: list[bytes] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            query = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            name = uuid.uuid4().hex
            with lock:
                queries.append(query)
                (folder / f"{name}.tsq").write_bytes(query)
                done = subprocess.run(
                    ["openssl", "ts", "-reply", "-config", "ts.cnf", "-queryfile", f"{name}.tsq",
                     "-out", f"{name}.tsr"],
                    cwd=folder, capture_output=True, timeout=60, check=False,
                )  # fmt: skip
            if done.returncode != 0:
                self.send_error(500, done.stderr.decode(errors="replace")[:200])
                return
            reply = (folder / f"{name}.tsr").read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield LocalTsa(
            url=f"http://127.0.0.1:{server.server_address[1]}/tsa",
            ca_cert=folder / "ca.crt",
            tsa_cert=folder / "tsa.crt",
            folder=folder,
            queries=queries,
        )
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _write_key(path: Path, key: Any) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def backdated_token(
    folder: Path, digest: bytes, when: datetime, *, name: str = "DigiCert"
) -> tuple[bytes, Path]:
    """What a forger makes: an authority of its own named ``name`` (a root "<name> Trusted Root G4" and a TSA
    "<name> Timestamp 2020", valid from a year before ``when`` to ten years after it, made with
    ``cryptography``), a token over the SHA-256 ``digest`` from ``openssl ts -reply`` with that TSA, and its
    TSTInfo's time changed to ``when`` and signed again with the TSA's key (attributes, ESS
    signing-certificate included, as a real token has them). Returns the DER reply and the root's PEM file."""
    from asn1crypto import cms, core, tsp
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.mkdir(parents=True, exist_ok=True)
    start, end = when - timedelta(days=365), when + timedelta(days=3650)

    def subject(common: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, f"{name}, Inc."),
                x509.NameAttribute(NameOID.COMMON_NAME, common),
            ]
        )

    root_key, tsa_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    root_name, tsa_name = subject(f"{name} Trusted Root G4"), subject(f"{name} Timestamp 2020")
    root = (
        x509.CertificateBuilder().subject_name(root_name).issuer_name(root_name).public_key(root_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(root_key, hashes.SHA256())
    )  # fmt: skip
    tsa = (
        x509.CertificateBuilder().subject_name(tsa_name).issuer_name(root_name).public_key(tsa_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
        .sign(root_key, hashes.SHA256())
    )  # fmt: skip
    (folder / "ca.crt").write_bytes(root.public_bytes(serialization.Encoding.PEM))
    (folder / "tsa.crt").write_bytes(tsa.public_bytes(serialization.Encoding.PEM))
    _write_key(folder / "tsa.key", tsa_key)
    (folder / "tsaserial").write_text("01\n")
    (folder / "ts.cnf").write_text(
        "[ tsa ]\ndefault_tsa = forged\n[ forged ]\n"
        f"dir = {folder}\nserial = $dir/tsaserial\ncrypto_device = builtin\nsigner_cert = $dir/tsa.crt\n"
        "certs = $dir/ca.crt\nsigner_key = $dir/tsa.key\nsigner_digest = sha256\ndefault_policy = 1.2.3.4.1\n"
        "digests = sha256\naccuracy = secs:1\nordering = yes\ntsa_name = no\n"
        "ess_cert_id_chain = no\ness_cert_id_alg = sha256\n"
    )
    query = tsp.TimeStampReq(
        {
            "version": 1,
            "message_imprint": {"hash_algorithm": {"algorithm": "sha256"}, "hashed_message": digest},
            "cert_req": True,
        }
    )
    (folder / "q.tsq").write_bytes(query.dump())
    _openssl("ts", "-reply", "-config", "ts.cnf", "-queryfile", "q.tsq", "-out", "r.tsr", cwd=folder)
    reply = tsp.TimeStampResp.load((folder / "r.tsr").read_bytes())
    signed = reply["time_stamp_token"]["content"]
    info = tsp.TSTInfo.load(bytes(signed["encap_content_info"]["content"].contents))
    info["gen_time"] = core.GeneralizedTime(when)
    tst_der = info.dump(force=True)
    signed["encap_content_info"]["content"] = core.ParsableOctetString(tst_der)
    signer = signed["signer_infos"][0]
    attributes = []
    for attribute in signer["signed_attrs"]:
        if attribute["type"].native == "message_digest":
            attribute = cms.CMSAttribute(
                {"type": "message_digest", "values": [hashlib.sha256(tst_der).digest()]}
            )
        elif attribute["type"].native == "signing_time":
            attribute = cms.CMSAttribute({"type": "signing_time", "values": [core.UTCTime(when)]})
        attributes.append(attribute)
    signer["signed_attrs"] = cms.CMSAttributes(attributes)
    signer["signature"] = tsa_key.sign(
        b"\x31" + signer["signed_attrs"].dump(force=True)[1:], ec.ECDSA(hashes.SHA256())
    )
    return bytes(reply.dump(force=True)), folder / "ca.crt"
