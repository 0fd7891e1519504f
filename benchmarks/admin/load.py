"""Admin and API under load: requests per second and p99 of the pages reviewers open and of the API, at fixed
concurrency, under gunicorn on PostgreSQL, with every response checked.

    python -m benchmarks.admin.load --quick         # 5,000 matches, concurrency 8, 1 s per endpoint
    nice python -m benchmarks.admin.load            # 100,000 matches, concurrency 8 and 32, 20 s each
    python -m benchmarks.admin.load --matches 20000 --concurrency 8 --seconds 5
    python -m benchmarks.admin.load --matches 1000000 --workers 4 --concurrency 8,32,64

What it does, in a database of its own (created, then dropped at the end unless ``--keep``):

1. the data of ``benchmarks.admin.latency`` (its ``generate``: works, chapters, pages on ``--hosts`` hosts,
   two matches per page over a year, 70 % flagged; roll-ups kept by the triggers), a viewer account and an API
   token of that account;
2. the admin under gunicorn (``fptrack serve --production --workers N``) on a free port of 127.0.0.1, logged
   in through the real form (the session cookie);
3. ``wrk`` (Debian package) against each endpoint in turn, at each ``--concurrency`` (connections held open),
   for ``--seconds`` and at most ``--max-requests`` responses: the dashboard, the review list (flagged), a
   match page (session cookie) and ``/api/matches``, ``/api/matches/ID``, ``/api/stats`` (``Authorization:
   Bearer``). Each response counts as an error unless it is a 200 carrying the page's marker (the signed-in
   user's name on HTML pages, a key of the JSON): a login page, an error page or a socket error are all
   errors;
4. the CPU each request cost: gunicorn's process tree and the PostgreSQL backends of the database
   (``benchmarks/harness.py``, from ``/proc``), divided by the requests of the run;
5. prints a table (requests/s, p50, p90, p99, errors, CPU per request, per endpoint and concurrency) and the
   load average, and ends with a JSON line. Exit status 1 when any request failed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import requests
from sqlalchemy import create_engine, text

from benchmarks.admin._server import (
    AdminServer,
    LoadResult,
    cookie_header,
    log_in,
    run_wrk,
    serve_admin,
    wrk_path,
)
from benchmarks.admin.latency import PASSWORD, generate
from benchmarks.harness import BackendCpu, arguments, emit, progress, require_service, skip, tree_cpu_seconds
from fptrack.core.settings import Settings
from fptrack.services.accounts.tokens import create_token
from fptrack.services.accounts.users import create_user
from fptrack.storage.db import create_engine_for, migrate, session_factory, session_scope

USERNAME = "loadtest"
HTML_MARKER = f'id="current-user">{USERNAME}<'


@dataclass(frozen=True)
class Endpoint:
    label: str
    path: str
    marker: str
    api: bool  # authenticated by the API token, else by the session cookie


def endpoints(match_id: int) -> list[Endpoint]:
    """What reviewers and API clients ask for most, on the data of :func:`populate`."""
    return [
        Endpoint("dashboard", "/", HTML_MARKER, api=False),
        Endpoint("matches flagged", "/matches?status=flagged", HTML_MARKER, api=False),
        Endpoint("match page", f"/matches/{match_id}", HTML_MARKER, api=False),
        Endpoint("api matches", "/api/matches?status=flagged", '"total"', api=True),
        Endpoint("api match", f"/api/matches/{match_id}", '"spans"', api=True),
        Endpoint("api stats", "/api/stats", '"matches_by_status"', api=True),
    ]


def populate(settings: Settings, matches: int, hosts: int, works: int) -> tuple[str, int]:
    """Migrate, fill with ``matches`` matches (``admin_latency.generate``), add the viewer account; returns
    (a new API token of that account, the id of a flagged match)."""
    engine = create_engine_for(settings)
    migrate(settings, engine)
    with session_scope(session_factory(engine)) as session:
        create_user(session, USERNAME, PASSWORD, "viewer")
        token = create_token(session, USERNAME, "load test").token
    generate(settings.database_url, matches, hosts, works)
    with engine.connect() as connection:
        match_id = connection.execute(
            text("SELECT min(id) FROM matches WHERE status = 'flagged'")
        ).scalar_one()
    engine.dispose()
    return token, int(match_id)


def load_endpoints(
    server: AdminServer,
    token: str,
    match_id: int,
    *,
    concurrency: list[int],
    seconds: float,
    max_requests: int,
    database: str | None = None,
) -> list[LoadResult]:
    """Log in, then ``wrk`` against every endpoint at every concurrency, in turn. ``database``: the name of
    the PostgreSQL database, to measure its backends' CPU per request as well as gunicorn's."""
    base = server.base
    cookie = cookie_header(log_in(base, USERNAME, PASSWORD))
    for endpoint in endpoints(match_id):  # warm every gunicorn worker's caches; fail early on a wrong marker
        headers = {"Authorization": f"Bearer {token}"} if endpoint.api else {"Cookie": cookie}
        for _ in range(4):
            answer = requests.get(base + endpoint.path, headers=headers, allow_redirects=False, timeout=120)
            if answer.status_code != 200 or endpoint.marker not in answer.text:
                raise RuntimeError(f"{endpoint.path}: HTTP {answer.status_code} without {endpoint.marker!r}")
    results = []
    for connections in concurrency:
        for endpoint in endpoints(match_id):
            headers = {"Authorization": f"Bearer {token}"} if endpoint.api else {"Cookie": cookie}
            with contextlib.ExitStack() as stack:
                backends = stack.enter_context(BackendCpu(database)) if database else None
                before = tree_cpu_seconds(server.pid)
                result = run_wrk(
                    endpoint.label,
                    base + endpoint.path,
                    marker=endpoint.marker,
                    headers=headers,
                    connections=connections,
                    seconds=seconds,
                    max_requests=max_requests,
                )
                server_cpu = tree_cpu_seconds(server.pid) - before
            count = max(1, result.requests)
            results.append(
                dataclasses.replace(
                    result,
                    server_cpu_ms=round(server_cpu * 1000 / count, 2),
                    postgres_cpu_ms=round(backends.seconds * 1000 / count, 2) if backends else None,
                )
            )
    return results


def print_results(results: list[LoadResult]) -> None:
    width = max(len(r.label) for r in results)
    print(
        f"{'endpoint':<{width}}  {'conc':>4}  {'requests':>8}  {'req/s':>7}  {'p50 ms':>7}  {'p90 ms':>7}  "
        f"{'p99 ms':>7}  {'errors':>6}  {'gunicorn CPU ms/req':>19}  {'PostgreSQL CPU ms/req':>21}"
    )
    for r in results:
        print(
            f"{r.label:<{width}}  {r.connections:>4}  {r.requests:>8}  {r.requests_per_second:>7.1f}  "
            f"{r.p50_ms:>7.1f}  {r.p90_ms:>7.1f}  {r.p99_ms:>7.1f}  {r.errors:>6}  "
            f"{_figure(r.server_cpu_ms):>19}  {_figure(r.postgres_cpu_ms):>21}"
        )
    for r in results:
        if r.errors:
            print(
                f"errors on {r.label} at {r.connections}: {r.bad} bad answers, {r.socket_errors} socket "
                f"errors; first: {r.first_bad!r}"
            )


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    parser = arguments(__doc__, "5,000 matches on 100 hosts, concurrency 8, 1 s per endpoint")
    parser.add_argument("--matches", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--works", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--concurrency", default="8,32", help="comma-separated connection counts")
    parser.add_argument("--seconds", type=float, default=20.0, help="duration per endpoint and concurrency")
    parser.add_argument("--max-requests", type=int, default=100_000, help="responses per run at most")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("FPTRACK_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--keep", action="store_true", help="keep the database (its name is printed)")
    args = parser.parse_args()
    if args.quick:
        args.matches, args.hosts, args.works, args.concurrency, args.seconds = 5_000, 100, 20, "8", 1.0
    require_service("admin_load", "PostgreSQL", args.pg_url, 5432)
    try:
        concurrency = [int(c) for c in args.concurrency.split(",") if c.strip()]
    except ValueError:
        parser.error(f"--concurrency must be comma-separated integers, got {args.concurrency!r}")
    if not concurrency or min(concurrency) < 1 or args.seconds <= 0 or args.max_requests < 1:
        parser.error("need --concurrency >= 1, --seconds > 0 and --max-requests >= 1")
    if urlsplit(args.pg_url).hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("--pg-url must be a PostgreSQL server on this machine (127.0.0.1)")
    try:
        wrk_path()
    except FileNotFoundError as error:
        skip("admin_load", str(error))

    started = time.monotonic()
    load_start = os.getloadavg()
    name = f"fptrack_bench_load_{os.getpid()}"
    admin_engine = create_engine(
        Settings(database_url=args.pg_url).database_url, isolation_level="AUTOCOMMIT"
    )
    with admin_engine.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    data_dir = Path(tempfile.mkdtemp(prefix="fptrack-bench-load-"))
    database_url = urlsplit(args.pg_url)._replace(path="/" + name).geturl()
    try:
        progress(f"generating {args.matches:,} matches on {args.hosts:,} hosts ...")
        token, match_id = populate(
            Settings(data_dir=data_dir, database_url=database_url), args.matches, args.hosts, args.works
        )
        with serve_admin(database_url, data_dir, args.workers) as server:
            results = load_endpoints(
                server,
                token,
                match_id,
                concurrency=concurrency,
                seconds=args.seconds,
                max_requests=args.max_requests,
                database=name,
            )
    finally:
        if not args.keep:
            with admin_engine.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            shutil.rmtree(data_dir, ignore_errors=True)
        admin_engine.dispose()
    load_end = os.getloadavg()

    print(
        f"admin load: {args.matches:,} matches, gunicorn x{args.workers}, wrk on 127.0.0.1, "
        f"{args.seconds:g} s "
        f"per endpoint and concurrency; load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end"
    )
    print_results(results)
    if args.keep:
        print(f"database kept: {name}")
    failed = sum(r.errors for r in results)
    emit(
        {
            "benchmark": "admin_load",
            "matches": args.matches,
            "workers": args.workers,
            "concurrency": concurrency,
            "seconds_per_run": args.seconds,
            "load_average": {"start": load_start[0], "end": load_end[0]},
            "cores": os.cpu_count(),
            "results": [r.as_json() for r in results],
            "errors": failed,
            "seconds": round(time.monotonic() - started, 1),
        }
    )
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
