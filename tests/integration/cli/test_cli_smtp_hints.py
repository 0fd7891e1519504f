"""The usual SMTP set-up mistakes, each met on a real relay (aiosmtpd on loopback) and answered in one line
that says what to change: a relay without STARTTLS, a login refused or missing, nothing listening, a
certificate not trusted, an implicit-TLS port."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from fptrack.jobs.delivery import DeliveryError, SmtpTransport
from testbed.sites import free_port


class _Inbox:
    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        return "250 OK"


def _refuse_every_login(*_args: Any) -> AuthResult:
    return AuthResult(success=False, handled=False)


@pytest.fixture
def relay(request: pytest.FixtureRequest) -> Iterator[int]:
    """An aiosmtpd relay on a free loopback port, made with the test's parameters (Controller keywords)."""
    port = free_port()
    controller = Controller(_Inbox(), hostname="127.0.0.1", port=port, **request.param)
    controller.start()
    yield port
    controller.stop()


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    """A server TLS context with a self-signed certificate for 127.0.0.1 (no authority trusts it)."""
    folder = tmp_path_factory.mktemp("relay-tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-keyout", "key.pem", "-out", "cert.pem"],
        cwd=folder, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(Path(folder, "cert.pem"), Path(folder, "key.pem"))
    return context


def _message() -> EmailMessage:
    message = EmailMessage()
    message["From"] = "notices@fptrack.example"
    message["To"] = "abuse@pirate.example"
    message["Subject"] = "Notice"
    message.set_content("text")
    return message


def _failure(transport: SmtpTransport) -> str:
    with pytest.raises(DeliveryError) as raised:
        transport.send(_message())
    line = str(raised.value)
    assert "\n" not in line and line.startswith(f"the SMTP relay 127.0.0.1:{transport.port} did not take")
    return line


@pytest.mark.parametrize("relay", [{}], indirect=True)
def test_a_relay_without_starttls_says_to_turn_it_off(relay: int) -> None:
    line = _failure(SmtpTransport("127.0.0.1", relay, starttls=True))
    assert "does not offer STARTTLS: set FPTRACK_SMTP_STARTTLS=false" in line


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")  # the relay of this test only
@pytest.mark.parametrize(
    "relay",
    [{"auth_required": True, "auth_require_tls": False, "authenticator": _refuse_every_login}],
    indirect=True,
)
def test_a_refused_or_missing_login_names_the_settings(relay: int) -> None:
    refused = _failure(SmtpTransport("127.0.0.1", relay, "rita", "wrong", starttls=False))
    assert "refused the login of 'rita' (535" in refused
    assert refused.endswith("check FPTRACK_SMTP_USER and FPTRACK_SMTP_PASSWORD")
    missing = _failure(SmtpTransport("127.0.0.1", relay, starttls=False))
    assert "asks for a login (530" in missing
    assert missing.endswith("set FPTRACK_SMTP_USER and FPTRACK_SMTP_PASSWORD")


def test_nothing_listening_names_host_and_port() -> None:
    line = _failure(SmtpTransport("127.0.0.1", free_port(), starttls=False))
    assert "connection refused (nothing listens there): check FPTRACK_SMTP_HOST and FPTRACK_SMTP_PORT" in line


@pytest.fixture
def tls_relay(request: pytest.FixtureRequest, self_signed: ssl.SSLContext) -> Iterator[int]:
    """A relay with the self-signed certificate: behind STARTTLS, or on a port that speaks TLS from the first
    byte (``implicit``, as 465 does)."""
    keywords = {"tls_context": self_signed} if request.param == "starttls" else {"ssl_context": self_signed}
    port = free_port()
    controller = Controller(_Inbox(), hostname="127.0.0.1", port=port, **keywords)
    controller.start()
    yield port
    controller.stop()


@pytest.mark.parametrize("tls_relay", ["starttls"], indirect=True)
def test_an_untrusted_certificate_says_so(tls_relay: int) -> None:
    line = _failure(SmtpTransport("127.0.0.1", tls_relay, starttls=True))
    assert "its TLS certificate is not trusted (self-signed certificate)" in line and "SSL_CERT_FILE" in line


@pytest.mark.parametrize("tls_relay", ["implicit"], indirect=True)
def test_an_implicit_tls_port_points_to_the_starttls_one(tls_relay: int) -> None:
    line = _failure(SmtpTransport("127.0.0.1", tls_relay, starttls=True, timeout=1.0))
    assert "no SMTP greeting" in line and "set FPTRACK_SMTP_PORT to the relay's submission port" in line
