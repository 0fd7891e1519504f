"""The admin reading from a PostgreSQL streaming replica (``FPTRACK_READ_DATABASE_URL``,
``admin.views.read_sessions``), on a primary and a hot standby of the test's own.

The primary is made with ``initdb`` (``wal_level=replica``, replication from 127.0.0.1 trusted), the standby
with ``pg_basebackup -R``, each on a spare loopback port in a temporary folder, started and stopped with
``pg_ctl`` (as the ``postgres`` user when we run as root: PostgreSQL refuses root). The shared server on 5432
is never touched. Without the PostgreSQL 15 server binaries (or ``runuser`` as root) the test is skipped,
or fails under ``CI=true``.

What is shown: the read pages' connections are on the standby (``pg_stat_activity``); with the standby's
replay paused, a list page does not see a row written on the primary while the pages after a reviewer's own
decision do (read-your-writes); the decision itself goes to the primary (the standby is read-only: a write
there would fail); with the standby stopped, the pages answer 200 from the primary and the log says why; and
the standby is used again once it answers."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine, create_engine, select, text, update
from sqlalchemy.exc import InternalError
from sqlalchemy.orm import Session

from fptrack.admin.views import read_sessions
from fptrack.admin.web import create_app
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Match, Page
from testbed.sites import free_port
from tests.conftest import _require
from tests.support.accounts import add_account, csrf_token_in, log_in
from tests.support.admin_seed import T0, Seeded, seed
from tests.support.cli import assert_clean_error, fptrack
from tests.support.env import clean_environ

POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
REPO = Path(__file__).resolve().parents[3]
DATABASE = "fptrack"
LATE_URL = "https://late.example/book/9.html"  # written on the primary while the standby's replay is paused


# --------------------------------------------------------------------------------------------- the servers


def _as_postgres(*argv: str) -> list[str]:
    """``argv`` run as the ``postgres`` user when we are root (PostgreSQL refuses to run as root)."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else list(argv)


def _run(root: Path, *argv: str) -> None:
    result = subprocess.run(
        _as_postgres(*argv), cwd=root, capture_output=True, text=True, timeout=120, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}{result.stderr}")


@dataclass
class Server:
    """One PostgreSQL server over ``data_dir`` on ``127.0.0.1:port``, run by ``pg_ctl``."""

    root: Path
    data_dir: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def configure(self, **settings: str) -> None:
        """Append ``settings`` to postgresql.conf (later lines win, so a standby overrides what it copied)."""
        lines = "".join(f"{name} = '{value}'\n" for name, value in settings.items())
        with open(self.data_dir / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write(lines)

    def start(self) -> None:
        log = self.root / f"{self.data_dir.name}.log"
        pg_ctl = str(POSTGRES_BIN / "pg_ctl")
        _run(self.root, pg_ctl, "-D", str(self.data_dir), "-l", str(log), "-w", "-t", "60", "start")

    def stop(self) -> None:
        pg_ctl = str(POSTGRES_BIN / "pg_ctl")
        with suppress(AssertionError):  # not running
            _run(self.root, pg_ctl, "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def engine(self, database: str = DATABASE) -> Engine:
        url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"
        return create_engine(url, isolation_level="AUTOCOMMIT")


@dataclass
class Pair:
    primary: Server
    standby: Server


def _tools_missing() -> list[str]:
    wanted = [str(POSTGRES_BIN / name) for name in ("initdb", "pg_ctl", "pg_basebackup")]
    if os.geteuid() == 0:
        wanted.append("runuser")
    return [tool for tool in wanted if shutil.which(tool) is None]


@pytest.fixture
def pair() -> Iterator[Pair]:
    """A primary with its database ``fptrack`` initialised by ``fptrack init``, and a hot standby of it made
    with ``pg_basebackup -R``; both stopped and removed at the end, pass or fail."""
    missing = _tools_missing()
    _require(not missing, f"PostgreSQL's server binaries for a primary and a standby ({', '.join(missing)})")
    root = Path(tempfile.mkdtemp(prefix="fptrack-replica-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    primary = Server(root, root / "primary", free_port())
    standby = Server(root, root / "standby", free_port())
    try:
        _run(root, str(POSTGRES_BIN / "initdb"), "-D", str(primary.data_dir), "-U", "postgres", "-A", "trust",
             "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")  # fmt: skip
        with open(primary.data_dir / "pg_hba.conf", "a", encoding="utf-8") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        primary.configure(
            listen_addresses="127.0.0.1", port=str(primary.port), unix_socket_directories=str(root),
            wal_level="replica", max_wal_senders="4", hot_standby="on", fsync="off", synchronous_commit="off",
            full_page_writes="off", shared_buffers="16MB", max_connections="40", autovacuum="off",
        )  # fmt: skip
        primary.start()
        server = primary.engine("postgres")
        with server.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{DATABASE}"'))
        server.dispose()
        environ = clean_environ(FPTRACK_DATABASE_URL=primary.url, FPTRACK_DATA_DIR=str(root / "init-data"))
        init = subprocess.run([sys.executable, "-m", "fptrack.cli", "init"], env=environ, cwd=REPO,
                              capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        assert init.returncode == 0, init.stderr
        # -R: standby.signal and primary_conninfo; a fast checkpoint (the default spreads it over minutes)
        _run(root, str(POSTGRES_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.port), "-U",
             "postgres", "-D", str(standby.data_dir), "-R", "-X", "stream", "--checkpoint=fast",
             "--no-sync")  # fmt: skip
        standby.configure(port=str(standby.port))
        standby.start()
        yield Pair(primary, standby)
    finally:
        standby.stop()
        primary.stop()
        shutil.rmtree(root, ignore_errors=True)


def _wait_for_replay(pair: Pair, timeout: float = 60) -> None:
    """Wait until the standby has replayed everything the primary has written so far.

    The target is the primary's insert position, not its write position: the primary commits without waiting
    for the flush (``synchronous_commit=off``), so a commit just made may still sit in its WAL buffers, past
    ``pg_current_wal_lsn()``, and a wait for that position could end before the commit reaches the standby."""
    primary, standby = pair.primary.engine(), pair.standby.engine()
    try:
        with primary.connect() as connection:
            target = connection.scalar(text("SELECT pg_current_wal_insert_lsn()"))
        deadline = time.monotonic() + timeout
        with standby.connect() as connection:
            while True:
                behind = connection.scalar(
                    text("SELECT pg_wal_lsn_diff(CAST(:target AS pg_lsn), pg_last_wal_replay_lsn())"),
                    {"target": str(target)},
                )
                if behind is not None and behind <= 0:
                    return
                assert time.monotonic() < deadline, f"the standby is still {behind} bytes behind"
                time.sleep(0.05)
    finally:
        primary.dispose()
        standby.dispose()


def _admin_reads_on(server: Server) -> int:
    """Connections of the admin's read engine open on ``server`` now (``pg_stat_activity``)."""
    engine = server.engine()
    try:
        with engine.connect() as connection:
            return int(
                connection.scalar(
                    text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"),
                    {"name": read_sessions.APPLICATION_NAME},
                )
                or 0
            )
    finally:
        engine.dispose()


def _page(client: FlaskClient, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code, response.get_data(as_text=True)[:500])
    return response.get_data(as_text=True)


def _status_heading(match_id: int, status: str) -> str:
    return f'<h1>Match {match_id} <span class="status status-{status}">'


def _execute(server: Server, sql: str) -> None:
    engine = server.engine()
    try:
        with engine.connect() as connection:
            connection.execute(text(sql))
    finally:
        engine.dispose()


def _status_on(server: Server, match_id: int) -> str:
    engine = server.engine()
    try:
        with engine.connect() as connection:
            return str(connection.scalar(select(Match.status).where(Match.id == match_id)))
    finally:
        engine.dispose()


def _add_late_match(settings: Settings, seeded: Seeded) -> int:
    """A new flagged match on the primary (a pirate page crawled while the standby's replay is paused)."""
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            hostile = session.get(Match, seeded.hostile_match_id)
            assert hostile is not None
            page = Page(url=LATE_URL, final_url=LATE_URL, host="late.example", status=200, title="late",
                        text="庙里住着一位老和尚")  # fmt: skip
            match = Match(page=page, work_id=hostile.work_id, chapter_id=hostile.chapter_id, score=0.9,
                          methods=["winnowing"], spans=[[0, 9, 0, 9]], status="flagged", first_seen=T0,
                          last_seen=T0)  # fmt: skip
            session.add(match)
            session.commit()
            return match.id
    finally:
        engine.dispose()


# ------------------------------------------------------------------------------------------------- tests


@pytest.mark.slow
def test_admin_reads_from_the_standby_and_writes_to_the_primary(
    pair: Pair, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    primary_settings = Settings(data_dir=tmp_path / "data", database_url=pair.primary.url)
    engine = create_engine_for(primary_settings)
    with Session(engine, expire_on_commit=False) as session:
        seeded = seed(session)
    engine.dispose()
    add_account(primary_settings, "vic", "viewer")
    add_account(primary_settings, "rita", "reviewer")
    _wait_for_replay(pair)

    settings = primary_settings.with_overrides(read_database_url=pair.standby.url)
    app = create_app(settings)
    replica = read_sessions.read_replica(app)
    assert replica is not None
    try:
        viewer, reviewer = app.test_client(), app.test_client()
        log_in(viewer, "vic")
        log_in(reviewer, "rita")

        # the data written on the primary shows through the standby, and the reads are the standby's
        assert _admin_reads_on(pair.standby) == 0
        listing = _page(viewer, "/matches")
        assert "pirate.example" in listing and "copy.example" in listing
        assert _admin_reads_on(pair.standby) >= 1, "the list page did not read from the standby"
        assert _admin_reads_on(pair.primary) == 0, "the read engine is connected to the primary"
        assert viewer.get("/api/matches").get_json()["total"] == 4
        _page(viewer, "/")
        _page(viewer, "/works")

        # replay paused: what the primary gets now, the standby does not show yet
        _execute(pair.standby, "SELECT pg_wal_replay_pause()")
        late_id = _add_late_match(primary_settings, seeded)
        assert LATE_URL not in _page(viewer, "/matches")
        assert viewer.get("/api/matches").get_json()["total"] == 4
        assert viewer.get(f"/matches/{late_id}").status_code == 404  # not on the standby yet

        # a reviewer's decision: written to the primary (the standby would refuse it), shown on the page the
        # POST redirects to, and on the pages after it, although the standby still lags
        hostile = seeded.hostile_match_id
        token = csrf_token_in(_page(reviewer, f"/matches/{hostile}"))
        decided = reviewer.post(
            f"/matches/{hostile}/status", data={"status": "confirmed", "csrf_token": token}
        )
        assert decided.status_code == 303 and decided.headers["Location"] == f"/matches/{hostile}"
        after = _page(reviewer, decided.headers["Location"])
        assert _status_heading(hostile, "confirmed") in after
        assert f"Match {hostile} is now confirmed." in after
        assert LATE_URL in _page(reviewer, "/matches")  # read on the primary: the reviewer just wrote
        assert reviewer.get(f"/api/matches/{hostile}").get_json()["status"] == "confirmed"
        assert _status_on(pair.primary, hostile) == "confirmed"
        assert _status_on(pair.standby, hostile) == "flagged"
        # ...while the viewer, who wrote nothing, still reads the paused standby
        assert _status_heading(hostile, "flagged") in _page(viewer, f"/matches/{hostile}")
        assert viewer.get(f"/api/matches/{hostile}").get_json()["status"] == "flagged"

        # what the decision would have met on the standby
        standby = pair.standby.engine()
        try:
            with pytest.raises(InternalError, match="read-only transaction"), standby.connect() as connection:
                connection.execute(update(Match).where(Match.id == hostile).values(status="confirmed"))
        finally:
            standby.dispose()

        # replay resumed: the standby catches up, and the viewer sees both
        _execute(pair.standby, "SELECT pg_wal_replay_resume()")
        _wait_for_replay(pair)
        assert LATE_URL in _page(viewer, "/matches")
        assert _status_heading(hostile, "confirmed") in _page(viewer, f"/matches/{hostile}")

        # the standby stopped: the read pages answer from the primary, with a warning in the log
        pair.standby.stop()
        with caplog.at_level(logging.WARNING, logger=read_sessions.__name__):
            listing = _page(viewer, "/matches")
            assert LATE_URL in listing
            assert viewer.get("/api/matches").get_json()["total"] == 5
            exported = viewer.get("/matches/export.csv")
            assert exported.status_code == 200 and LATE_URL in exported.get_data(as_text=True)
            _page(viewer, "/")
        warnings = [r.getMessage() for r in caplog.records if r.name == read_sessions.__name__]
        assert len(warnings) == 1 and "is unreachable" in warnings[0], warnings
        assert f"127.0.0.1:{pair.standby.port}" in warnings[0]

        # the standby back: the admin reads from it again once its rest is over (shortened to nothing here:
        # the rest is taken again with the new length)
        monkeypatch.setattr(read_sessions, "REPLICA_RETRY_SECONDS", 0.0)
        replica.mark_unreachable(RuntimeError("rest over at once"))
        pair.standby.start()
        assert _admin_reads_on(pair.standby) == 0
        _page(viewer, "/matches")
        assert _admin_reads_on(pair.standby) >= 1
    finally:
        app.extensions["fptrack"].engine.dispose()
        replica.engine.dispose()


def test_a_read_replica_with_sqlite_is_refused_at_start(tmp_path: Path) -> None:
    result = fptrack(
        tmp_path, "serve", FPTRACK_READ_DATABASE_URL="postgresql://postgres@127.0.0.1:5433/fptrack"
    )
    assert_clean_error(result, "FPTRACK_READ_DATABASE_URL needs PostgreSQL")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
