"""storage.db.retry_while_unreachable (and retry_in_session, a unit of work run again whole): a database that
refuses connections for a while costs a pause; any other error is raised at once. The connection errors are
real (a PostgreSQL URL on a loopback port nothing listens on), as is the constraint violation (SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from fptrack.storage.db import retry_in_session, retry_while_unreachable
from testbed.sites import free_port


def _refused() -> None:
    engine = create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing")
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()


def test_an_operation_is_run_again_until_the_database_answers() -> None:
    calls: list[int] = []

    def operation() -> str:
        calls.append(1)
        if len(calls) < 3:
            _refused()
        return "stored"

    assert retry_while_unreachable(operation, what="storing", seconds=30) == "stored"
    assert len(calls) == 3


def test_the_last_connection_error_is_raised_once_the_time_is_up() -> None:
    calls: list[int] = []

    def operation() -> None:
        calls.append(1)
        _refused()

    with pytest.raises(OperationalError, match="Connection refused"):
        retry_while_unreachable(operation, what="storing", seconds=1)
    assert len(calls) >= 2


def test_an_error_that_is_not_about_the_connection_is_raised_at_once(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY)"))
    calls: list[int] = []

    def operation() -> None:
        calls.append(1)
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO t (id) VALUES (1)"))

    retry_while_unreachable(operation, what="inserting", seconds=30)
    with pytest.raises(IntegrityError):
        retry_while_unreachable(operation, what="inserting", seconds=30)
    assert len(calls) == 2
    engine.dispose()


def test_a_unit_of_work_gets_a_session_of_its_own_each_time_and_is_committed(tmp_path: Path) -> None:
    refused = create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing")
    seen: list[Session] = []

    def work(session: Session) -> None:
        seen.append(session)
        session.execute(text("SELECT 1"))

    with pytest.raises(OperationalError, match="Connection refused"):
        retry_in_session(sessionmaker(refused), work, what="reading", seconds=1)
    refused.dispose()
    assert len(seen) >= 2 and len(set(map(id, seen))) == len(seen)

    engine = create_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY)"))
    retry_in_session(
        sessionmaker(engine),
        lambda session: session.execute(text("INSERT INTO t (id) VALUES (7)")),
        what="inserting",
    )
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT id FROM t")) == 7
    engine.dispose()
