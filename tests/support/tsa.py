"""A local RFC 3161 time-stamping authority for the tests: a CA and a TSA certificate made with ``openssl``,
and ``openssl ts -reply`` behind a small HTTP server on 127.0.0.1 (POST a time-stamp query, get the reply)."""

from __future__ import annotations

import subprocess
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["LocalTsa", "local_tsa", "make_tsa_files"]


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
