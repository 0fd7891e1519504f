"""Claims: named rows of ``monitor_locks`` that one process at a time holds, across processes and machines.

A claim is taken by inserting its row (one statement: of two processes, only one gets it) with a random token
and the holder's ``host:pid``; the holder refreshes ``heartbeat_at`` while it works and deletes the row when
done, both by name and token, so a holder that lost its claim never touches the next holder's. A claim whose
heartbeat is older than the caller's staleness limit, or whose process is gone (on this machine), belonged to
a process that died: :func:`holder_died` says so, :func:`dead_locks` finds them for a reaper to drop.

What a claim stands for (a site's crawl, a one-off crawl's sign of life, the takedown re-check run) and what a
dead holder leaves to clean up are the callers' (:mod:`jobs.site_runs`, :mod:`jobs.rechecks`).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from fptrack.storage.models import MonitorLock, as_utc, utcnow

__all__ = [
    "dead_locks",
    "drop_lock",
    "holder_died",
    "lock_owner",
    "owner_is_dead",
    "refresh_lock",
    "take_lock",
]


def lock_owner() -> str:
    """This process, as a claim's ``owner``: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_is_dead(owner: str) -> bool:
    """True when ``owner`` (``host:pid``) is a process of this machine that no longer runs (another machine's
    process, or one this user may not signal, is taken to be alive: only its heartbeat can tell)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def holder_died(lock: MonitorLock, stale_before: datetime) -> bool:
    """True when the holder of ``lock`` died: no heartbeat since ``stale_before``, or its process is gone."""
    return as_utc(lock.heartbeat_at) < stale_before or owner_is_dead(lock.owner)


def take_lock(session: Session, name: str, now: datetime) -> str | None:
    """Insert the ``monitor_locks`` row ``name`` for this process unless one exists (one statement, so two
    processes never both get it); the new token, or None when the lock is held."""
    token = uuid.uuid4().hex
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    inserted = session.execute(
        insert(MonitorLock)
        .values(name=name, token=token, owner=lock_owner(), acquired_at=now, heartbeat_at=now)
        .on_conflict_do_nothing(index_elements=[MonitorLock.name])
        .returning(MonitorLock.token)
    ).scalar()
    return token if inserted == token else None


def refresh_lock(session: Session, name: str, token: str, *, job_id: int | None = None) -> bool:
    """Refresh the heartbeat of the claim ``name`` held with ``token`` (and tie it to the crawl job ``job_id``
    when given); False when the claim is no longer this holder's (taken over as dead)."""
    values: dict[str, Any] = {"heartbeat_at": utcnow()}
    if job_id is not None:
        values["job_id"] = job_id
    result = session.execute(
        update(MonitorLock).where(MonitorLock.name == name, MonitorLock.token == token).values(**values)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def drop_lock(session: Session, name: str, token: str) -> None:
    """Release the claim ``name`` if ``token`` still holds it (a claim taken over meanwhile is left alone)."""
    session.execute(delete(MonitorLock).where(MonitorLock.name == name, MonitorLock.token == token))


def dead_locks(
    session: Session, *, prefixes: Sequence[str], stale_before: datetime, names: Sequence[str] | None = None
) -> list[MonitorLock]:
    """The claims whose name starts with one of ``prefixes`` (only those named in ``names``, when given) and
    whose holder died (:func:`holder_died`). The rows are locked for this transaction and rows another reaper
    has locked are skipped, so two reapers never both clean up after one dead holder."""
    query = select(MonitorLock).where(or_(*(MonitorLock.name.like(f"{prefix}%") for prefix in prefixes)))
    if names is not None:
        query = query.where(MonitorLock.name.in_(list(names)))
    locked = session.scalars(query.with_for_update(skip_locked=True))
    return [lock for lock in locked if holder_died(lock, stale_before)]
