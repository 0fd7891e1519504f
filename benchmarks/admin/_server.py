"""The admin under gunicorn on a free loopback port, and ``wrk`` against it: shared by
``benchmarks/admin/latency.py``, ``benchmarks/admin/load.py`` and ``tests/reliability/test_admin_load.py``.

``wrk`` (Debian package ``wrk``; ``deploy/ensure-services.sh`` installs it) holds a fixed number of
connections open for a bounded time; the Lua script below also bounds the number of requests and checks every
response: status 200 *and* a marker string in the body (a login page answered 200 after a redirect, or an
error page, has no marker), which ``wrk``'s own counters cannot see (it counts a 3xx as a success)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import requests

from benchmarks.harness import ROOT

# Per thread: ``ok`` and ``bad`` responses, stopping at ``limit`` responses; ``done`` sums the threads' counts
# (the ``setup`` list is how wrk's Lua API reaches every thread's state) and prints one JSON line.
WRK_SCRIPT = r"""
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  marker = args[1]
  limit = tonumber(args[2])
  ok, bad, first_bad = 0, 0, ""
end
function response(status, headers, body)
  if status == 200 and string.find(body, marker, 1, true) then
    ok = ok + 1
  else
    bad = bad + 1
    if first_bad == "" then
      first_bad = tostring(status) .. " " .. string.gsub(string.sub(body or "", 1, 120), "[^%w%s%.:/<>=-]", "?")
      first_bad = string.gsub(first_bad, "%s+", " ")
    end
  end
  if ok + bad >= limit then wrk.thread:stop() end
end
function done(summary, latency, requests)
  local o, b, example = 0, 0, ""
  for _, t in ipairs(threads) do
    o = o + t:get("ok")
    b = b + t:get("bad")
    if example == "" then example = t:get("first_bad") end
  end
  local e = summary.errors
  io.write(string.format(
    'FPTRACK_WRK {"ok": %d, "bad": %d, "requests": %d, "duration_us": %d, "socket_errors": %d, '
    .. '"status_errors": %d, "timeouts": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d, '
    .. '"first_bad": "%s"}\n',
    o, b, summary.requests, summary.duration, e.connect + e.read + e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, example))
end
"""  # noqa: E501 (a raw string: the Lua line that cleans first_bad cannot be split without changing it)


@dataclass(frozen=True)
class LoadResult:
    """One ``wrk`` run against one URL."""

    label: str
    connections: int
    requests: int
    ok: int
    bad: int  # answered, but not 200 with the page's marker
    socket_errors: int  # connect, read, write errors and timeouts
    seconds: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    first_bad: str
    server_cpu_ms: float | None = None  # gunicorn's CPU per request (its process tree), when measured
    postgres_cpu_ms: float | None = None  # the database's backends' CPU per request, when measured

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def errors(self) -> int:
        return self.bad + self.socket_errors

    def as_json(self) -> dict[str, object]:
        return {
            "label": self.label,
            "connections": self.connections,
            "requests": self.requests,
            "ok": self.ok,
            "bad": self.bad,
            "socket_errors": self.socket_errors,
            "seconds": round(self.seconds, 2),
            "requests_per_second": round(self.requests_per_second, 1),
            "p50_ms": self.p50_ms,
            "p90_ms": self.p90_ms,
            "p99_ms": self.p99_ms,
            "max_ms": self.max_ms,
            "server_cpu_ms_per_request": self.server_cpu_ms,
            "postgres_cpu_ms_per_request": self.postgres_cpu_ms,
        }


def wrk_path() -> str:
    """The ``wrk`` executable; a clear error when it is missing."""
    found = shutil.which("wrk")
    if found is None:
        raise FileNotFoundError(
            "wrk is not installed: apt-get install wrk (deploy/ensure-services.sh does it)"
        )
    return found


def run_wrk(
    label: str,
    url: str,
    *,
    marker: str,
    headers: Mapping[str, str],
    connections: int,
    seconds: float,
    max_requests: int,
    threads: int = 2,
) -> LoadResult:
    """``connections`` connections for at most ``seconds`` and about ``max_requests`` responses against
    ``url``, each checked for status 200 and ``marker`` in its body."""
    if urlsplit(url).hostname not in ("127.0.0.1", "::1", "localhost"):
        raise ValueError(f"the load test sends traffic to loopback only, not to {url}")
    threads = max(1, min(threads, connections))
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT)
    try:
        command = [wrk_path(), "-t", str(threads), "-c", str(connections), "-d", f"{max(1, round(seconds))}s",
                   "--timeout", "30s", "--latency", "-s", script.name]  # fmt: skip
        for name, value in headers.items():
            command += ["-H", f"{name}: {value}"]
        command += [url, "--", marker, str(max(1, max_requests // threads))]
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=seconds + 120, check=False
        )
    finally:
        os.unlink(script.name)
    line = next((ln for ln in completed.stdout.splitlines() if ln.startswith("FPTRACK_WRK ")), None)
    if completed.returncode != 0 or line is None:
        raise RuntimeError(
            f"wrk failed ({completed.returncode}): {completed.stderr.strip() or completed.stdout[-500:]}"
        )
    figures = json.loads(line.removeprefix("FPTRACK_WRK "))
    return LoadResult(
        label=label,
        connections=connections,
        requests=int(figures["requests"]),
        ok=int(figures["ok"]),
        bad=int(figures["bad"]),
        socket_errors=int(figures["socket_errors"]) + int(figures["timeouts"]),
        seconds=figures["duration_us"] / 1e6,
        p50_ms=round(figures["p50_us"] / 1000, 1),
        p90_ms=round(figures["p90_us"] / 1000, 1),
        p99_ms=round(figures["p99_us"] / 1000, 1),
        max_ms=round(figures["max_us"] / 1000, 1),
        first_bad=str(figures["first_bad"]),
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(url: str, server: subprocess.Popen[bytes]) -> None:
    """Until ``url`` answers 200; a clear error when the server exits or stays silent for 60 s."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the admin server exited with {server.returncode}")
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.3)
    raise SystemExit("the admin server did not answer within 60 s")


@dataclass(frozen=True)
class AdminServer:
    base: str  # http://127.0.0.1:PORT
    pid: int  # gunicorn's arbiter; its workers are its children


@contextmanager
def serve_admin(database_url: str, data_dir: Path, workers: int) -> Iterator[AdminServer]:
    """``fptrack serve --production`` (gunicorn, ``workers`` workers) on a free port of 127.0.0.1 for the
    block. Its log is ``data_dir / "server.log"``."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FPTRACK_")}
    env.update(FPTRACK_DATABASE_URL=database_url, FPTRACK_DATA_DIR=str(data_dir))
    with (data_dir / "server.log").open("wb") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fptrack.cli",
                "serve",
                "--production",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                str(workers),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            cwd=ROOT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for(base + "/healthz", server)
            yield AdminServer(base, server.pid)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=10)


def log_in(base: str, username: str, password: str) -> requests.Session:
    """A session logged in through the real form (its CSRF token, the session cookie), like a browser."""
    client = requests.Session()
    form = client.get(base + "/login", timeout=30).text
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', form)
    if token is None:
        raise RuntimeError("no CSRF token on the login form")
    answer = client.post(
        base + "/login",
        data={"username": username, "password": password, "csrf_token": token.group(1)},
        allow_redirects=False,
        timeout=30,
    )
    if answer.status_code != 303:
        raise RuntimeError(f"login failed: HTTP {answer.status_code}")
    return client


def cookie_header(client: requests.Session) -> str:
    """The ``Cookie`` header a browser would send with ``client``'s cookies."""
    return "; ".join(f"{cookie.name}={cookie.value}" for cookie in client.cookies)
