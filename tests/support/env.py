"""The environment of an ``fptrack`` child process in a test: the test's own environment without any
``FPTRACK_*`` setting (a developer's shell must not leak into a test), plus the pace tests crawl at, and no
fetch again before a notice is sent (the seeded notices name fictitious hosts, e.g. pirate.example, that only
loopback tests of that fetch serve).

Crawls are polite by default (``FPTRACK_SITE_RATE``: one request a second per site). The tests' sites are
their own servers on 127.0.0.1, so they are crawled at :data:`TEST_SITE_RATE` instead; the tests of the pace
itself set their own rate."""

from __future__ import annotations

import os

__all__ = ["TEST_SITE_RATE", "clean_environ"]

TEST_SITE_RATE = "50"


def clean_environ(**settings: str) -> dict[str, str]:
    """``os.environ`` without ``FPTRACK_*``, with the test pace, then ``settings`` (which win)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FPTRACK_")}
    environ["FPTRACK_SITE_RATE"] = TEST_SITE_RATE
    environ["FPTRACK_NOTICE_REFETCH"] = "false"  # the seeded notices name fictitious hosts
    environ["FPTRACK_EVIDENCE_SCREENSHOT"] = "false"  # a browser for every bundle: its own tests turn it on
    environ.update(settings)
    return environ
