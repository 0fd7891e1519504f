"""``fptrack serve --production``: gunicorn in a real subprocess on a spare loopback port; a person logs in
over HTTP and reads the dashboard, as the README's production section says."""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from fptrack.core.settings import Settings
from fptrack.storage.db import migrate
from tests.support.accounts import PASSWORD, add_account
from tests.support.env import clean_environ

pytestmark = pytest.mark.slow


def _spare_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_up(base_url: str, process: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"the server exited with {process.returncode}: "
                f"{process.stdout.read() if process.stdout else ''}"
            )
        try:
            with urllib.request.urlopen(base_url + "/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.3)
    raise AssertionError("the server did not answer /healthz in time")


def test_production_server_serves_the_admin_to_a_logged_in_user(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    migrate(settings)
    add_account(settings, "ada", "admin")
    port = _spare_port()
    base_url = f"http://127.0.0.1:{port}"
    environ = clean_environ()
    environ["FPTRACK_DATA_DIR"] = str(settings.data_dir)
    process = subprocess.Popen(
        [sys.executable, "-m", "fptrack.cli", "serve", "--production", "--port", str(port), "--workers", "2"],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_until_up(base_url, process)
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

        with opener.open(base_url + "/") as response:  # redirected to the login page
            assert response.url == base_url + "/login?next=/"
            page = response.read().decode()
        token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page) or re.search(
            r'value="([^"]+)"[^>]*name="csrf_token"', page
        )
        assert token, page
        form = urllib.parse.urlencode(
            {"username": "ada", "password": PASSWORD, "csrf_token": token.group(1), "next": "/"}
        ).encode()
        request = urllib.request.Request(base_url + "/login", data=form, headers={"Origin": base_url})
        with opener.open(request) as response:
            assert response.url == base_url + "/"
        # several requests: whichever gunicorn worker answers, it agrees on the session key
        for _ in range(6):
            with opener.open(base_url + "/") as response:
                dashboard = response.read().decode()
            assert 'id="current-user">ada<' in dashboard and 'id="count-matches">0<' in dashboard
            with opener.open(base_url + "/api/stats") as response:
                assert response.status == 200
        # a replayed login form (its token belonged to the anonymous session) is refused
        replay = urllib.request.Request(base_url + "/login", data=form, headers={"Origin": base_url})
        with pytest.raises(urllib.error.HTTPError) as refused:
            opener.open(replay)
        assert refused.value.code == 400
        assert "Set-Cookie" not in dict(urllib.request.urlopen(base_url + "/healthz").headers)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
    assert "with gunicorn, 2 worker(s)" in output
    assert "Booting worker" in output and "GET /api/stats" in output  # gunicorn's own log and access log
