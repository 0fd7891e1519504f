"""Proof of what a notice said when it went out: the message's bytes as the relay took them (an ``.eml``),
their SHA-256, the relay's reply to ``DATA`` and when it came (:class:`jobs.delivery.Delivered`), and, when a
time-stamping authority is configured (``FPTRACK_TSA_URL``), an RFC 3161 time-stamp token over that SHA-256:
a third party's word that these bytes existed by then. Kept on the notice (``notices.sent_message``,
``sent_message_sha256``, ``relay_reply``, ``relay_replied_at``, ``sent_timestamp``), never rewritten.

How anyone checks it: ``sha256sum notice-N.eml`` gives the recorded SHA-256; ``openssl ts -verify -digest
<that SHA-256> -in notice-N.tsr -CAfile <the authority's certificate>`` checks the token; the recipient's
server holds the same bytes under the relay's queue id (its own trace headers added above them).
"""

from __future__ import annotations

import hashlib

from fptrack.core.settings import Settings
from fptrack.jobs.delivery import Delivered
from fptrack.services.evidence.bundle import BundleError, request_timestamp, verify_timestamp
from fptrack.storage.models import Notice, iso_utc

__all__ = ["keep_what_was_sent", "timestamp_time"]

REPLY_LIMIT = 1000


def keep_what_was_sent(notice: Notice, delivered: Delivered | None, settings: Settings) -> str:
    """Keep on ``notice`` what ``delivered`` says was sent, time-stamped when ``settings.tsa_url`` is set; a
    phrase for the notice's ``sent`` event. An authority that does not answer costs the token, not the
    record (the message is gone already): the phrase says so."""
    if delivered is None:
        return "the transport kept no copy of the message"
    digest = hashlib.sha256(delivered.message).digest()
    notice.sent_message = delivered.message
    notice.sent_message_sha256 = digest.hex()
    notice.relay_reply = delivered.reply[:REPLY_LIMIT]
    notice.relay_replied_at = delivered.at
    said = f"message sha256 {digest.hex()}; the relay replied {delivered.reply[:200]!r}"
    if not settings.tsa_url:
        return said + "; not time-stamped (no FPTRACK_TSA_URL)"
    try:
        notice.sent_timestamp = request_timestamp(settings.tsa_url, digest)
    except BundleError as error:
        return f"{said}; not time-stamped: {error}"
    return f"{said}; time-stamped at {timestamp_time(notice) or '?'} by {settings.tsa_url}"


def timestamp_time(notice: Notice) -> str:
    """The time the authority put in the notice's token (ISO 8601 UTC), '' without a valid one."""
    if not notice.sent_timestamp or not notice.sent_message_sha256:
        return ""
    try:
        info = verify_timestamp(bytes(notice.sent_timestamp), bytes.fromhex(notice.sent_message_sha256))
    except BundleError:
        return ""
    return iso_utc(info.time) or ""
