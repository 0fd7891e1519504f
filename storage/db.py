"""Engines, sessions and migrations.

``create_engine_for(settings)`` is the one place that knows how to connect: SQLite gets foreign keys, WAL and
a busy timeout (the crawler and the tasks share the file); PostgreSQL goes through psycopg 3.
``migrate(settings)`` upgrades the schema to Alembic's head; on PostgreSQL under an advisory lock so two
processes running ``fptrack init`` at once never race. ``check_schema`` tells whether the database is at that
head.

Alembic is imported by the functions that migrate (and by :func:`schema_head` the first time), never by this
module: every process opens the database through here, and importing Alembic (its DDL implementations of every
dialect) costs ~0.2 s, which a crawl started by the command line or the scheduler would pay for nothing."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.errors import FptrackError
from fptrack.core.settings import Settings

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "DatabaseUnavailable",
    "SchemaOutOfDate",
    "alembic_config",
    "check_schema",
    "create_engine_for",
    "migrate",
    "retry_in_session",
    "retry_while_unreachable",
    "schema_head",
    "session_factory",
    "session_scope",
]

log = logging.getLogger(__name__)
T = TypeVar("T")
UNREACHABLE_RETRY_SECONDS = 60.0
"""How long :func:`retry_while_unreachable` keeps trying by default: a restart or a fail-over, not an
outage."""

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_ADVISORY_LOCK_KEY = 0x66707472  # "fptr"


class DatabaseUnavailable(FptrackError, RuntimeError):
    """The database cannot be reached; the message says which URL and why."""


class SchemaOutOfDate(FptrackError, RuntimeError):
    """The database has not been initialised or migrated: run ``fptrack init``."""


def create_engine_for(settings: Settings) -> Engine:
    url = settings.database_url
    if settings.is_sqlite:
        database = url.split("///", 1)[-1]
        if database and database != ":memory:":
            _create_private_file(Path(database))
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


def _create_private_file(path: Path) -> None:
    """Create the SQLite file (and its folder) readable by its owner only, before SQLite creates it with the
    umask's mode (0644 as a rule): it holds password and token hashes and the proofs of ownership. SQLite
    gives its -wal and -shm files the database file's mode. An existing file is left as it is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    # 64 MB of page cache instead of 2 MB: index inserts of a batch of pages stay in memory
    cursor.execute("PRAGMA cache_size=-65536")
    cursor.execute("PRAGMA temp_store=MEMORY")
    cursor.close()
    # the Hamming distance the Simhash look-up verifies inside SQL (PostgreSQL: bit_count(a # b))
    dbapi_connection.create_function("fp_hamming", 2, _hamming_or_null, deterministic=True)


def _hamming_or_null(a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return None
    from fptrack.fingerprint.simhash import hamming

    return hamming(a, b)


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A unit of work: commit on success, roll back on any error, always close."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def retry_while_unreachable(
    operation: Callable[[], T], *, what: str, seconds: float = UNREACHABLE_RETRY_SECONDS
) -> T:
    """Run ``operation`` (a whole unit of work: it opens, commits and closes its own session), again and again
    with back-off (0.2 s doubling to 5 s) while the database is unreachable or cuts the connection, for
    ``seconds`` at most; then the last error is raised.

    Why: a database restarted under a running crawl (``pg_ctl restart``, a fail-over) must cost the crawl a
    pause, not the pages it holds in memory. Only for operations that are safe to run twice (upserts, reads,
    settling); an error that is not about the connection (a constraint, a bug) is raised at once."""
    deadline = time.monotonic() + seconds
    pause = 0.2
    while True:
        try:
            return operation()
        except DBAPIError as error:
            lost = isinstance(error, OperationalError) or error.connection_invalidated
            if not lost or time.monotonic() + pause > deadline:
                raise
            log.warning(
                "%s: the database is unreachable (%s); trying again in %.1f s",
                what,
                str(error.orig or error).strip().splitlines()[0],
                pause,
            )
            time.sleep(pause)
            pause = min(pause * 2, 5.0)


def retry_in_session(
    sessions: sessionmaker[Session],
    work: Callable[[Session], T],
    *,
    what: str,
    seconds: float = UNREACHABLE_RETRY_SECONDS,
) -> T:
    """``work(session)`` in a unit of work of its own (:func:`session_scope`), run again whole by
    :func:`retry_while_unreachable` while the database is unreachable."""

    def unit() -> T:
        with session_scope(sessions) as session:
            return work(session)

    return retry_while_unreachable(unit, what=what, seconds=seconds)


def alembic_config(settings: Settings) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", settings.database_url.replace("%", "%%"))
    return config


def migrate(settings: Settings, engine: Engine | None = None, revision: str = "head") -> str:
    """Upgrade the database to ``revision``; returns the revision now current.

    At head, the expression indexes of the configured Simhash layout (``FPTRACK_SIMHASH_K``/``_BLOCKS``) are
    created too when it is not the default the migrations build.
    """
    from alembic import command

    engine = engine or create_engine_for(settings)
    config = alembic_config(settings)
    try:
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_KEY})
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
            current = _current_revision(connection)
            if revision == "head":
                from fptrack.storage.index import IndexLayout
                from fptrack.storage.simhash_index import ensure_simhash_indexes

                ensure_simhash_indexes(
                    connection, IndexLayout(64, settings.simhash_k, settings.simhash_blocks)
                )
            return current
    except OperationalError as error:
        raise DatabaseUnavailable(_describe_operational_error(settings, error)) from None


def check_schema(engine: Engine, settings: Settings) -> None:
    """Raise :class:`SchemaOutOfDate` unless the database is at Alembic's head (:func:`schema_head`)."""
    head = schema_head(settings)
    try:
        with engine.connect() as connection:
            current = _current_revision(connection)
    except OperationalError as error:
        raise DatabaseUnavailable(_describe_operational_error(settings, error)) from None
    if current != head:
        state = "not initialised" if not current else f"at revision {current}, head is {head}"
        raise SchemaOutOfDate(f"the database is {state}: run `fptrack init` first")


def schema_head(settings: Settings) -> str:
    """Alembic's head revision of the migrations shipped with this code.

    Kept in the cache folder (``FPTRACK_CACHE_DIR``) in a file named after the migration scripts' digest, so
    that a new or edited script is a new file: asking Alembic imports it and runs every one of the scripts
    (~0.3 s together), and every command, scheduled crawl and admin process checks the schema when it starts.
    With no cache folder, or one that cannot be written, Alembic is asked every time."""
    path = None if settings.cache_dir is None else settings.cache_dir / f"schema-head-{_migrations_digest()}"
    if path is not None:
        try:
            head = path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            head = ""
        if head:
            return head
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config(settings)).get_current_head() or ""
    if path is not None and head:
        _write_quietly(path, head)
    return head


def _migrations_digest() -> str:
    """SHA-256 (16 hex digits) of the migration scripts' names and contents: what the head depends on."""
    digest = hashlib.sha256()
    for script in sorted((MIGRATIONS_DIR / "versions").glob("*.py")):
        digest.update(script.name.encode() + b"\0" + script.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _write_quietly(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file renamed: processes starting together
    may write it at once); a folder that cannot be written only costs the next process the slow path."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(text, encoding="ascii")
        os.replace(temporary, path)
    except OSError as error:
        log.debug("cannot keep the schema head in %s: %s", path, error)
        with suppress(OSError):
            temporary.unlink(missing_ok=True)


def _current_revision(connection) -> str:  # type: ignore[no-untyped-def]
    if not inspect(connection).has_table("alembic_version"):
        return ""
    row = connection.execute(text("SELECT version_num FROM alembic_version")).first()
    return row[0] if row else ""


def _describe_operational_error(settings: Settings, error: OperationalError) -> str:
    from sqlalchemy.engine import make_url

    shown = make_url(settings.database_url).render_as_string(hide_password=True)
    reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
    return f"cannot open the database {shown}: {reason}"
