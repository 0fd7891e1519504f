"""``page_codes`` split into range partitions of ``page_id`` on PostgreSQL (opt-in: ``fptrack db partition``).

Why: ``page_codes``' GIN over ``sample`` is written at random by every page; once it outgrows the cache every
insert costs random reads. Page ids follow crawl time, so with ranges of ids a crawl writes the newest
partition only, whose GIN stays cached. ``page_id`` is the primary key and the partition key, so keys, the
foreign key to ``pages`` and every query stay as they are.

How, without copying a row (:func:`partition_page_codes`): in one transaction the plain table is renamed
``page_codes_p0`` and attached to a new partitioned ``page_codes`` as ``FROM (MINVALUE) TO (B)`` (its indexes
become the parent's index partitions; a ``CHECK (page_id < B)`` added first spares ``ATTACH`` its scan), then
``ahead`` empty ranges of ``pages_per_partition`` ids and a ``DEFAULT`` partition follow. The default is a
safety net that should stay empty: :func:`ensure_partitions_ahead` (``fptrack maintain``, beat's upkeep) keeps
``ahead`` empty ranges beyond the largest page id and moves any rows that landed in the default into ranges
of their own.

Locks: the conversion holds ``ACCESS EXCLUSIVE`` on ``page_codes`` and ``SHARE ROW EXCLUSIVE`` on ``pages``
for the ``CHECK``'s heap scan; adding a range takes milliseconds under ``SHARE UPDATE EXCLUSIVE`` on the
parent. Every statement gives up after ``LOCK_TIMEOUT``; a transaction-level advisory lock serialises
conversions and upkeep across machines. Migrations keep working on the parent; :func:`partition_names` lists
the partitions an autogenerate comparison should skip (docs/storage.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session

from fptrack.core.errors import FptrackError

__all__ = [
    "DEFAULT_AHEAD",
    "DEFAULT_PAGES_PER_PARTITION",
    "LOCK_TIMEOUT",
    "PartitionError",
    "PartitionInfo",
    "PartitionPlan",
    "ensure_partitions_ahead",
    "is_partitioned",
    "partition_names",
    "partition_page_codes",
    "partition_report",
]

DEFAULT_PAGES_PER_PARTITION = 1_000_000
"""Ids per range: a 1M-page GIN (~7.7 GB) stays in the cache of a 16 GB server while it is written."""
DEFAULT_AHEAD = 2
"""Empty ranges kept beyond the largest page id: upkeep may miss a run before ids reach the default."""
MAX_NEW_PARTITIONS = 1_000
"""More new ranges than this at once: ids jumped (a sequence set by hand) or the ranges are far too narrow."""
LOCK_TIMEOUT = "10s"
"""How long a statement waits for a lock before the whole step is given up (and tried again next time)."""

TABLE = "page_codes"
FIRST = "page_codes_p0"
DEFAULT = "page_codes_default"
_ADVISORY_LOCK_KEY = 0x66707470  # "fptp"; storage.db.migrate uses "fptr"
_LIKE = "LIKE {} INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION"
_BOUND = re.compile(r"FROM \((?P<lower>[^)]*)\) TO \((?P<upper>[^)]*)\)")


class PartitionError(FptrackError, RuntimeError):
    """``page_codes`` cannot be partitioned as asked; the message says why and what to do."""


@dataclass(frozen=True)
class PartitionInfo:
    """One partition of ``page_codes``: its page-id range ``[lower, upper)`` (None: unbounded; both None and
    ``default``: the default partition), estimated rows (None until ``ANALYZE``/``VACUUM`` has seen it) and
    size on disk in bytes (heap, TOAST and indexes)."""

    name: str
    lower: int | None
    upper: int | None
    default: bool
    rows: int | None
    bytes: int


@dataclass(frozen=True)
class PartitionPlan:
    """What :func:`partition_page_codes` or :func:`ensure_partitions_ahead` does (or did): ``converts`` is
    True when the plain table is turned into a partitioned one; ``ranges`` the new ranges ``(name, lower,
    upper)`` (``lower`` None: from the lowest id); ``moved`` the rows taken out of the default partition;
    ``statements`` the SQL, in order."""

    converts: bool
    max_page_id: int
    pages_per_partition: int
    ranges: tuple[tuple[str, int | None, int], ...] = ()
    moved: int = 0
    statements: tuple[str, ...] = field(default=(), repr=False)


def partition_page_codes(
    bind: Engine | Session,
    *,
    pages_per_partition: int = DEFAULT_PAGES_PER_PARTITION,
    ahead: int = DEFAULT_AHEAD,
    dry_run: bool = False,
) -> PartitionPlan:
    """Turn the plain ``page_codes`` into range partitions of ``page_id`` without copying its rows (the module
    docstring says how and which locks it takes); on a table already partitioned, only
    :func:`ensure_partitions_ahead`. One transaction: on any error nothing has changed. ``dry_run`` plans
    under the same advisory lock and changes nothing. Raises :class:`PartitionError` on SQLite or bad
    arguments."""
    _check_arguments(pages_per_partition, ahead)
    with _transaction(bind) as connection:
        if not is_partitioned(connection):
            if not dry_run:
                # every lock up front, before the largest id is read: no page id can appear behind our back
                connection.execute(text("LOCK TABLE pages IN SHARE ROW EXCLUSIVE MODE"))
                connection.execute(text(f"LOCK TABLE {TABLE} IN ACCESS EXCLUSIVE MODE"))
            plan = _conversion_plan(connection, pages_per_partition, ahead)
            if not dry_run:
                for statement in plan.statements:
                    connection.execute(text(statement))
            return plan
    return ensure_partitions_ahead(
        bind, pages_per_partition=pages_per_partition, ahead=ahead, dry_run=dry_run
    )


def ensure_partitions_ahead(
    bind: Engine | Session,
    *,
    pages_per_partition: int | None = None,
    ahead: int = DEFAULT_AHEAD,
    dry_run: bool = False,
) -> PartitionPlan:
    """Keep ``ahead`` empty ranges beyond the largest page id of a partitioned ``page_codes``, and give rows
    that landed in the default partition ranges of their own (moving only them). ``pages_per_partition``
    None: the width of the newest range. A plain (not partitioned) table, or SQLite: nothing to do, an empty
    plan. Cheap when there is nothing to do (catalog reads and two index look-ups); safe on a live database
    (the locks are in the module docstring)."""
    dialect = (bind.get_bind() if isinstance(bind, Session) else bind).dialect.name
    if dialect != "postgresql":
        return PartitionPlan(False, 0, pages_per_partition or 0)
    with _transaction(bind, lock=False) as connection:
        if not is_partitioned(connection):
            return PartitionPlan(False, 0, pages_per_partition or 0)
        _lock(connection)
        partitions = _partitions(connection)
        width = pages_per_partition or _newest_width(partitions)
        _check_arguments(width, ahead)
        plan = _ahead_plan(connection, partitions, width, ahead)
        if not dry_run:
            for statement in plan.statements:
                connection.execute(text(statement))
        return plan


def partition_report(bind: Engine | Session) -> list[PartitionInfo]:
    """The partitions of ``page_codes`` in page-id order (the default last); empty when it is not partitioned
    (or on SQLite)."""
    with _transaction(bind, refuse_sqlite=False, lock=False) as connection:
        if connection.dialect.name != "postgresql" or not is_partitioned(connection):
            return []
        return _partitions(connection)


def partition_names(connection: Connection) -> set[str]:
    """The tables that are partitions of ``page_codes`` (what a comparison with the models should skip)."""
    if connection.dialect.name != "postgresql" or not is_partitioned(connection):
        return set()
    return {p.name for p in _partitions(connection)}


def is_partitioned(connection: Connection) -> bool:
    """True when ``page_codes`` is a partitioned table (one catalog look-up)."""
    if connection.dialect.name != "postgresql":
        return False
    kind = connection.execute(
        text(f"SELECT relkind FROM pg_class WHERE oid = to_regclass('{TABLE}')")
    ).scalar()
    return kind == "p"


# ------------------------------------------------------------------------------------------------ planning


def _conversion_plan(connection: Connection, width: int, ahead: int) -> PartitionPlan:
    top = _max_page_id(connection)
    boundary = (top // width + 1) * width
    statements = [
        f"ALTER TABLE {TABLE} RENAME TO {FIRST}",
        f"ALTER TABLE {FIRST} RENAME CONSTRAINT pk_{TABLE} TO pk_{FIRST}",
        f"ALTER INDEX ix_{TABLE}_sample RENAME TO ix_{FIRST}_sample",
        # proves the range to ATTACH, which then skips its scan; this scan reads the heap, not the indexes
        f"ALTER TABLE {FIRST} ADD CONSTRAINT {FIRST}_bound CHECK (page_id < {boundary})",
        f"CREATE TABLE {TABLE} ({_LIKE.format(FIRST)}) PARTITION BY RANGE (page_id)",
        f"ALTER TABLE {TABLE} ADD CONSTRAINT pk_{TABLE} PRIMARY KEY (page_id)",
        (
            f"ALTER TABLE {TABLE} ADD CONSTRAINT fk_{TABLE}_page_id_pages FOREIGN KEY (page_id) "
            "REFERENCES pages (id) ON DELETE CASCADE"
        ),
        f"CREATE INDEX ix_{TABLE}_sample ON {TABLE} USING gin (sample) WITH (fastupdate = off)",
        # the old indexes and foreign key match the parent's: ATTACH adopts them instead of building new ones
        f"ALTER TABLE {TABLE} ATTACH PARTITION {FIRST} FOR VALUES FROM (MINVALUE) TO ({boundary})",
        f"ALTER TABLE {FIRST} DROP CONSTRAINT {FIRST}_bound",
    ]
    ranges: list[tuple[str, int | None, int]] = [(FIRST, None, boundary)]
    lower = boundary
    for _ in range(ahead):
        ranges.append((_range_name(lower), lower, lower + width))
        statements += _attach_range(lower, lower + width, moved_from_default=False)
        lower += width
    statements += [*_new_table(DEFAULT), f"ALTER TABLE {TABLE} ATTACH PARTITION {DEFAULT} DEFAULT"]
    return PartitionPlan(True, top, width, tuple(ranges), 0, tuple(statements))


def _ahead_plan(
    connection: Connection, partitions: list[PartitionInfo], width: int, ahead: int
) -> PartitionPlan:
    ranged = [p for p in partitions if not p.default]
    if not ranged or ranged[-1].upper is None:
        raise PartitionError(f"{TABLE}'s last range is unbounded: there is no room for ranges ahead of it")
    in_default = 0
    default_top = -1
    if any(p.default for p in partitions):
        row = connection.execute(text(f"SELECT count(*), coalesce(max(page_id), -1) FROM {DEFAULT}")).one()
        in_default, default_top = int(row[0]), int(row[1])
    top = max(_max_page_id(connection), default_top)
    lower = ranged[-1].upper
    ahead_now = sum(1 for p in ranged if p.lower is not None and p.lower > top)
    ranges: list[tuple[str, int | None, int]] = []
    statements: list[str] = []
    if in_default:
        # writes into the default wait from here to the commit: its rows are moved while nothing adds to them
        statements.append(f"LOCK TABLE {DEFAULT} IN ACCESS EXCLUSIVE MODE")
    while ahead_now < ahead or lower <= default_top:
        if len(ranges) >= MAX_NEW_PARTITIONS:
            raise PartitionError(
                f"{TABLE} would need more than {MAX_NEW_PARTITIONS} new ranges of {width:,} ids to reach "
                f"page id {top:,}: run `fptrack db partition --pages-per-partition N` with a larger N"
            )
        ranges.append((_range_name(lower), lower, lower + width))
        statements += _attach_range(lower, lower + width, moved_from_default=lower <= default_top)
        ahead_now += lower > top
        lower += width
    return PartitionPlan(False, top, width, tuple(ranges), in_default, tuple(statements))


def _attach_range(lower: int, upper: int, *, moved_from_default: bool) -> list[str]:
    """Create the range ``[lower, upper)`` as a table of its own and attach it: ``ATTACH`` takes a weaker
    lock on the parent than ``CREATE TABLE ... PARTITION OF`` (which would stop every reader and writer),
    and on an empty table (with a ``CHECK`` proving the range) it builds the indexes at no cost."""
    name = _range_name(lower)
    statements = [
        *_new_table(name),
        f"ALTER TABLE {name} ADD CONSTRAINT {name}_bound CHECK (page_id >= {lower} AND page_id < {upper})",
    ]
    if moved_from_default:
        where = f"page_id >= {lower} AND page_id < {upper}"
        statements += [
            f"INSERT INTO {name} SELECT * FROM {DEFAULT} WHERE {where}",
            f"DELETE FROM {DEFAULT} WHERE {where}",
        ]
    return statements + [
        f"ALTER TABLE {TABLE} ATTACH PARTITION {name} FOR VALUES FROM ({lower}) TO ({upper})",
        f"ALTER TABLE {name} DROP CONSTRAINT {name}_bound",
    ]


def _new_table(name: str) -> list[str]:
    """A table shaped like ``page_codes`` with its indexes named as the first range's are (ATTACH adopts them
    as partitions of the parent's instead of creating its own under generated names)."""
    return [
        f"CREATE TABLE {name} ({_LIKE.format(TABLE)})",
        f"ALTER TABLE {name} ADD CONSTRAINT pk_{name} PRIMARY KEY (page_id)",
        f"CREATE INDEX ix_{name}_sample ON {name} USING gin (sample) WITH (fastupdate = off)",
    ]


def _range_name(lower: int) -> str:
    return f"{TABLE}_p{lower}"


def _max_page_id(connection: Connection) -> int:
    """The largest page id stored or fingerprinted (primary-key look-ups): pages get their id before their
    ``page_codes`` row, so ``pages`` is what the next rows will follow."""
    row = connection.execute(
        text(
            "SELECT coalesce((SELECT max(id) FROM pages), 0), "
            f"coalesce((SELECT max(page_id) FROM {TABLE}), 0)"
        )
    ).one()
    return max(int(row[0]), int(row[1]))


def _partitions(connection: Connection) -> list[PartitionInfo]:
    rows = connection.execute(
        text(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid), c.reltuples, "
            "pg_total_relation_size(c.oid) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            f"WHERE i.inhparent = '{TABLE}'::regclass"
        )
    ).all()
    found = []
    for name, bound, reltuples, size in rows:
        match = _BOUND.search(bound or "")
        lower, upper = (_bound_value(match["lower"]), _bound_value(match["upper"])) if match else (None, None)
        rows_estimate = int(reltuples) if reltuples is not None and reltuples >= 0 else None
        found.append(PartitionInfo(name, lower, upper, match is None, rows_estimate, int(size)))
    return sorted(found, key=lambda p: (p.default, -1 if p.lower is None else p.lower))


def _bound_value(value: str) -> int | None:
    value = value.strip().strip("'")
    return None if value in ("MINVALUE", "MAXVALUE") else int(value)


def _newest_width(partitions: list[PartitionInfo]) -> int:
    widths = [p.upper - p.lower for p in partitions if p.lower is not None and p.upper is not None]
    if not widths:
        raise PartitionError(f"{TABLE} has no bounded range to take the width from: pass pages_per_partition")
    return widths[-1]


def _check_arguments(pages_per_partition: int, ahead: int) -> None:
    if pages_per_partition < 1:
        raise PartitionError(f"pages per partition must be at least 1, not {pages_per_partition}")
    if ahead < 0:
        raise PartitionError(f"ranges ahead must be 0 or more, not {ahead}")


@contextmanager
def _transaction(
    bind: Engine | Session, *, refuse_sqlite: bool = True, lock: bool = True
) -> Iterator[Connection]:
    """A connection in a transaction of its own (an Engine) or the session's (a Session: the caller commits),
    under the advisory lock (``lock``) and ``LOCK_TIMEOUT``; refuses SQLite with one line."""
    if isinstance(bind, Session):
        connection = bind.connection()
        _prepare(connection, refuse_sqlite, lock)
        yield connection
        return
    with bind.begin() as connection:
        _prepare(connection, refuse_sqlite, lock)
        yield connection


def _prepare(connection: Connection, refuse_sqlite: bool, lock: bool) -> None:
    if connection.dialect.name != "postgresql":
        if refuse_sqlite:
            raise PartitionError(
                f"partitioning {TABLE} needs PostgreSQL; the embedded SQLite store keeps it as one table"
            )
        return
    if lock:
        _lock(connection)


def _lock(connection: Connection) -> None:
    """One process at a time (until the transaction ends), and no statement queued for long behind a lock."""
    connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_KEY})
    connection.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
