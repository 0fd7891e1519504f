"""Time-stamping captures when their page is flagged: each kept exchange of a page with a match gets an RFC
3161 token over the SHA-256 of its capture statement (:mod:`storage.capture_stamps`) from the authority at
``FPTRACK_TSA_URL``, stored beside it (``capture_stamps``).

When: the fingerprint stage's task, once the batch that flagged pages has committed, hands their ids to
:func:`jobs.tasks.stamp_captures` (every run mode goes through that task: in-process it runs eagerly in the
comparing process, with Celery on a worker), so only pages with matches ever reach the authority, never the
crawl's every page. What an authority that does not answer leaves is stamped later: by the next flagged
batch, by the sweep task (Celery beat) and by ``fptrack evidence stamp``; nothing is lost and the crawl is not
held up (the first failure ends the attempt, after at most :data:`FLAG_TIMEOUT` seconds). Without
``FPTRACK_TSA_URL`` nothing happens (bundles then say "no capture timestamp").
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.services.evidence.bundle import BundleError, request_timestamp, verify_timestamp
from fptrack.storage.capture_stamps import record_stamp, unstamped_captures

__all__ = ["FLAG_TIMEOUT", "StampRun", "stamp_captures"]

log = logging.getLogger(__name__)
FLAG_TIMEOUT = 10.0
"""Seconds an authority has to answer when pages are just flagged (the sweep and the CLI wait longer)."""
PAUSE_AFTER_FAILURE = 300.0
"""Seconds a process leaves flagged pages to the sweep after the authority failed it: an authority that
hangs must not cost every flagged batch :data:`FLAG_TIMEOUT` seconds."""
_paused_until = 0.0


@dataclass(frozen=True)
class StampRun:
    """What :func:`stamp_captures` did: captures stamped, captures left unstamped, and the authority's error
    that stopped it (None when all went through or there was nothing to do)."""

    stamped: int
    left: int
    error: str | None = None


def stamp_captures(
    session: Session,
    settings: Settings,
    page_ids: Sequence[int] | None = None,
    *,
    timeout: float = FLAG_TIMEOUT,
    limit: int = 1000,
) -> StampRun:
    """Stamp the unstamped captures of flagged pages (of ``page_ids``, or all), oldest first, committing
    each token as it comes; the first failure of the authority stops the run (it is tried again later).
    Nothing happens without ``FPTRACK_TSA_URL``, nor, for flagged pages (``page_ids`` given), within
    :data:`PAUSE_AFTER_FAILURE` of a failure in this process (the sweep, ``page_ids`` None, always tries)."""
    global _paused_until
    if not settings.tsa_url or (page_ids is not None and time.monotonic() < _paused_until):
        return StampRun(0, 0)
    captures = unstamped_captures(session, page_ids, limit=limit)
    stamped = 0
    for number, capture in enumerate(captures):
        digest = hashlib.sha256(capture.statement).digest()
        try:
            token = request_timestamp(settings.tsa_url, digest, timeout=timeout)
            stamp = verify_timestamp(token, digest)
        except BundleError as error:
            session.rollback()
            _paused_until = time.monotonic() + PAUSE_AFTER_FAILURE
            left = len(captures) - number
            log.warning("capture time-stamps: %d left for later: %s", left, error)
            return StampRun(stamped, left, str(error))
        record_stamp(session, capture, authority=settings.tsa_url, token=token, stamped_at=stamp.time)
        session.commit()
        stamped += 1
    _paused_until = 0.0
    return StampRun(stamped, 0)
