"""The Celery app, its routing and schedule, and the per-process runtime its tasks run with.

One app, ``celery``, for every process: the tasks are registered on it by :mod:`jobs.tasks` (listed in
``include``, so a worker imports them), the CLI starts workers and the scheduler from it, and the crawl
service enqueues through it. :func:`configure` binds it to a :class:`Settings`: the broker
(``FPTRACK_BROKER_URL``; unset, tasks run eagerly in the calling process), the queues, and the database the
tasks open sessions on (:func:`task_settings`, :func:`task_sessions`: what a task body reads, never a module
global of its own).

The periodic tasks (:data:`PERIODIC_TASKS`) and the tasks sent to the crawl queue (:data:`CRAWL_QUEUE_TASKS`)
are data: ``fptrack beat`` sends them, and ``fptrack crawler`` (or a worker started without ``--no-crawls``)
consumes the crawl queue. The task names are the messages' contract with earlier releases: they never change.

This layer imports only ``core`` and ``storage``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from celery import Celery
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for, session_factory

__all__ = [
    "CRAWL_QUEUE_TASKS",
    "PERIODIC_TASKS",
    "Periodic",
    "beat_schedule",
    "celery",
    "configure",
    "release_connections",
    "task_routes",
    "task_sessions",
    "task_settings",
    "workers_answering",
    "workers_on_queue",
]

log = logging.getLogger(__name__)

celery = Celery("fptrack")


@dataclass(frozen=True)
class Periodic:
    """A task Celery beat sends every ``getattr(settings, every)`` seconds."""

    task: str
    every: str  # the Settings field giving the period, in seconds


PERIODIC_TASKS: dict[str, Periodic] = {
    "fptrack-maintain": Periodic("fptrack.maintain", "maintain_every"),
    "fptrack-sweep": Periodic("fptrack.sweep", "sweep_every"),
    # monitoring: the due site crawls, each then run in a process of its own (jobs.site_crawl)
    "fptrack-monitor": Periodic("fptrack.start_due_crawls", "schedule_every"),
    # takedown verification: the pages of flagged and confirmed matches fetched again (jobs.rechecks)
    "fptrack-recheck": Periodic("fptrack.recheck_takedowns", "recheck_every"),
    # takedown notices: close what the re-checks found gone, send the reminders and escalations due
    # (jobs.notices); hourly is fine-grained enough for a delay counted in days
    "fptrack-notices": Periodic("fptrack.follow_up_notices", "maintain_every"),
}
"""The beat schedule, by entry name (the names are keys of the schedule file beat keeps: keep them)."""

CRAWL_QUEUE_TASKS = ("fptrack.start_due_crawls", "fptrack.recheck_takedowns")
"""Tasks that go to the crawl queue (``Settings.crawl_task_queue``), not the workers': they fetch from the
web, and the crawls they start run on the machine that took them (where the bandwidth is)."""


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """Celery's ``beat_schedule`` for ``settings``: :data:`PERIODIC_TASKS` with their periods."""
    return {
        entry: {"task": periodic.task, "schedule": float(getattr(settings, periodic.every))}
        for entry, periodic in PERIODIC_TASKS.items()
    }


def task_routes(settings: Settings) -> dict[str, dict[str, str]]:
    """Celery's ``task_routes`` for ``settings``: :data:`CRAWL_QUEUE_TASKS` to the crawl queue (the rest go to
    ``task_default_queue``)."""
    return {task: {"queue": settings.crawl_task_queue} for task in CRAWL_QUEUE_TASKS}


class _Runtime:
    """What this process's tasks run with: the settings last configured, and sessions on their database."""

    settings: Settings | None = None
    engine: Engine | None = None
    sessions: sessionmaker[Session] | None = None


_runtime = _Runtime()


def configure(settings: Settings) -> Celery:
    """Bind the Celery app and the task runtime (database sessions) to ``settings``; idempotent (the engine is
    made again only when the settings change, and the old one disposed of)."""
    backend = settings.result_backend
    if backend is None and settings.broker_url and settings.broker_url.startswith(("redis://", "rediss://")):
        backend = settings.broker_url
    sending_to = (celery.conf.broker_url, celery.conf.task_default_queue)
    celery.conf.update(
        broker_url=settings.broker_url or "memory://localhost/",
        result_backend=backend,
        task_always_eager=settings.tasks_in_process,
        task_default_queue=settings.task_queue,
        task_eager_propagates=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        result_expires=3600,
        broker_connection_retry_on_startup=True,
        beat_schedule=beat_schedule(settings),
        task_routes=task_routes(settings),
        include=["fptrack.jobs.tasks"],
    )
    if celery._backend is not None and celery._backend.url != backend:
        celery._backend = celery._get_backend()  # Celery kept the one made under earlier settings
    if (celery.conf.broker_url, celery.conf.task_default_queue) != sending_to:
        _forget_broker_connections()
    if _runtime.settings != settings:
        if _runtime.engine is not None:
            _runtime.engine.dispose()
        _runtime.engine = create_engine_for(settings)
        _runtime.sessions = session_factory(_runtime.engine)
        _runtime.settings = settings
    return celery


def _forget_broker_connections() -> None:
    """Drop the broker connections, queues and router Celery made under an earlier configuration: it makes
    them once and keeps them, so that a process configured again would send its tasks to the first broker and
    queue, where no worker of the new settings listens. They are made again on the next send (kombu keeps a
    pool per broker for the process: configured back, it takes up the first one's connections)."""
    celery._pool = None
    del celery.amqp  # a cached property: its queues, router and producer pool


def task_settings() -> Settings:
    """The settings this process's tasks run with; RuntimeError when :func:`configure` was not called."""
    if _runtime.settings is None:
        raise RuntimeError("taskqueue.configure(settings) was not called in this process")
    return _runtime.settings


def task_sessions() -> sessionmaker[Session]:
    """Sessions on the database of :func:`task_settings`."""
    task_settings()
    assert _runtime.sessions is not None  # set together with the settings
    return _runtime.sessions


def release_connections() -> None:
    """Close the database connections this process's task sessions keep pooled (new ones are opened when
    needed): before a worker forks its pool, so that no connection is shared by two processes."""
    if _runtime.engine is not None:
        _runtime.engine.dispose()


class _Answered(Exception):
    """Raised from a broadcast's reply callback to stop waiting: a worker that counts has answered."""


def workers_answering(
    timeout: float, queue: str | None = None, host: str | None = None, *, first: bool = False
) -> dict[str, list[str]]:
    """The workers that answer over the broker within ``timeout`` seconds, by node name, with the queues each
    consumes; only those consuming ``queue`` and running on ``host`` (the part after ``@``) when given.

    ``first``: stop at the first worker that counts instead of waiting out ``timeout`` for the rest (a
    broadcast cannot know how many workers there are; a health check needs only one).

    Broker errors propagate: a caller that must tell "no broker" from "no worker" can."""
    answering: dict[str, list[str]] = {}

    def counts(name: str, queues: list[str]) -> bool:
        return (queue is None or queue in queues) and (host is None or name.partition("@")[2] == host)

    def on_reply(reply: Mapping[str, Any]) -> None:
        for name, queues in reply.items():
            names = sorted(q.get("name", "") for q in queues or ())
            if counts(name, names):
                answering[name] = names
                if first:
                    raise _Answered

    # a connection of its own to the broker configured now (the app's pooled one may predate a reconfigure)
    with celery.connection_for_write() as connection:
        try:
            celery.control.inspect(timeout=timeout, connection=connection, callback=on_reply).active_queues()
        except _Answered:
            pass
    return answering


def workers_on_queue(queue: str, *, timeout: float = 2.0, first: bool = False) -> list[str] | None:
    """Names of the workers consuming ``queue`` ([] when none answers within ``timeout`` seconds), or None
    when the broker cannot be asked: a broker down (restarting) says nothing about the workers. ``first``:
    the first one that answers is enough (:func:`workers_answering`)."""
    try:
        return sorted(workers_answering(timeout, queue=queue, first=first))
    except Exception as error:  # noqa: BLE001 - any broker trouble means: no answer
        log.warning("cannot ask the workers which queues they consume: %s", error)
        return None
