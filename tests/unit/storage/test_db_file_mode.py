"""The embedded database holds password and token hashes and the proofs of ownership: SQLite creates its
files with the umask's mode (0644 as a rule), so fptrack creates the database file 0600 first,
and SQLite gives the -wal and -shm files the same mode."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sqlalchemy import text

from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_database_file_and_its_wal_and_shm_are_created_0600(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        database = tmp_path / "data" / "fptrack.db"
        engine = create_engine_for(Settings(data_dir=tmp_path / "data"))
        try:
            with engine.begin() as connection:
                connection.execute(text("CREATE TABLE t (x INTEGER)"))
                connection.execute(text("INSERT INTO t VALUES (1)"))
                wal, shm = Path(f"{database}-wal"), Path(f"{database}-shm")
                assert wal.exists() and shm.exists()
                assert {_mode(database), _mode(wal), _mode(shm)} == {0o600}
        finally:
            engine.dispose()
    finally:
        os.umask(previous)


def test_an_existing_database_file_keeps_its_mode(tmp_path: Path) -> None:
    database = tmp_path / "fptrack.db"
    database.touch(mode=0o640)
    os.chmod(database, 0o640)
    engine = create_engine_for(Settings(data_dir=tmp_path))
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    finally:
        engine.dispose()
    assert _mode(database) == 0o640
