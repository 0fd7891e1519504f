"""The admin and the API under load: gunicorn on PostgreSQL, ``wrk`` on loopback at fixed concurrency for a
few seconds per endpoint (bounded in time and in requests). Every response must be a real page: status 200
with the signed-in user's name (HTML) or the expected JSON key, never a login redirect, an error page or a
socket error. Requests/s and p99 are printed (``-s``), never asserted: speed is for
``benchmarks/admin/load.py``."""

from __future__ import annotations

import shutil

import pytest

from benchmarks.admin._server import run_wrk, serve_admin
from benchmarks.admin.load import HTML_MARKER, endpoints, load_endpoints, populate, print_results
from fptrack.core.settings import Settings
from tests.conftest import _require

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CONCURRENCY = 8
SECONDS = 5.0
MAX_REQUESTS = 5000


def test_admin_and_api_answer_every_request_under_load(postgres_settings: Settings) -> None:
    _require(
        shutil.which("wrk") is not None, "wrk (Debian package wrk; deploy/ensure-services.sh installs it)"
    )
    postgres_settings.data_dir.mkdir(parents=True, exist_ok=True)
    token, match_id = populate(postgres_settings, matches=4000, hosts=200, works=20)

    with serve_admin(postgres_settings.database_url, postgres_settings.data_dir, workers=2) as server:
        base = server.base
        results = load_endpoints(
            server, token, match_id, concurrency=[CONCURRENCY], seconds=SECONDS, max_requests=MAX_REQUESTS
        )
        # the checker itself: without the session cookie every answer is the login redirect (303), and each
        # one counts
        anonymous = run_wrk(
            "dashboard, signed out",
            base + "/",
            marker=HTML_MARKER,
            headers={},
            connections=2,
            seconds=1,
            max_requests=50,
        )
        revoked = run_wrk(
            "api, wrong token",
            base + "/api/stats",
            marker='"matches_by_status"',
            headers={"Authorization": "Bearer not-a-token"},
            connections=2,
            seconds=1,
            max_requests=50,
        )

    print()
    print_results(results)
    assert [r.label for r in results] == [e.label for e in endpoints(match_id)]
    for result in results:
        assert result.requests > 0, result
        assert result.errors == 0, (
            f"{result.label}: {result.bad} bad, {result.socket_errors} socket errors; {result.first_bad}"
        )
        assert result.ok == result.requests, result
    assert (
        anonymous.requests > 0
        and anonymous.bad == anonymous.requests
        and anonymous.first_bad.startswith("303")
    )
    assert revoked.requests > 0 and revoked.bad == revoked.requests and revoked.first_bad.startswith("401")
