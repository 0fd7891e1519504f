"""The fingerprint stage as Celery tasks: ids in, a service call, commit.

With no broker configured (``FPTRACK_BROKER_URL`` unset) the same tasks run eagerly in the calling process;
with one, on workers started by ``fptrack worker``. Callers enqueue only after the commit that made the task's
input visible.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from compare import service
from storage.db import create_engine_for, session_factory, session_scope
from storage.settings import Settings

__all__ = ["celery", "configure", "fingerprint_page", "index_work", "maintain"]

celery = Celery("fptrack")
# A database that is briefly unreachable (a restart, a fail-over) must not lose a page: retry with back-off.
_RETRY_ON_DATABASE_ERRORS: dict[str, Any] = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "max_retries": 5,
}
_runtime: dict[str, Any] = {}


def configure(settings: Settings) -> Celery:
    """Bind the Celery app and the task runtime (database sessions) to ``settings``; idempotent."""
    backend = settings.result_backend
    if backend is None and settings.broker_url and settings.broker_url.startswith(("redis://", "rediss://")):
        backend = settings.broker_url
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
        beat_schedule={
            "fptrack-maintain": {"task": "fptrack.maintain", "schedule": float(settings.maintain_every)},
        },
    )
    if _runtime.get("settings") != settings:
        old = _runtime.get("engine")
        if old is not None:
            old.dispose()
        engine = create_engine_for(settings)
        _runtime.update(settings=settings, engine=engine, sessions=session_factory(engine))
    return celery


def _settings() -> Settings:
    if "settings" not in _runtime:
        raise RuntimeError("compare.tasks.configure(settings) was not called in this process")
    settings: Settings = _runtime["settings"]
    return settings


def _sessions() -> sessionmaker[Session]:
    _settings()
    sessions: sessionmaker[Session] = _runtime["sessions"]
    return sessions


@celery.task(name="fptrack.fingerprint_page", **_RETRY_ON_DATABASE_ERRORS)  # type: ignore[untyped-decorator]
def fingerprint_page(page_id: int) -> int:
    """Fingerprint, index and compare one crawled page; returns the number of flagged matches."""
    with session_scope(_sessions()) as session:
        return len(service.fingerprint_page(session, page_id, _settings()))


@celery.task(name="fptrack.index_work", **_RETRY_ON_DATABASE_ERRORS)  # type: ignore[untyped-decorator]
def index_work(work_id: int) -> int:
    """Fingerprint a newly registered work and re-compare the pages crawled before it; returns the number of
    pages now flagged against it."""
    with session_scope(_sessions()) as session:
        settings = _settings()
        flagged = 0
        for page_id in service.index_work(session, work_id, settings):
            flagged += sum(m.work_id == work_id for m in service.recompare_page(session, page_id, settings))
        return flagged


@celery.task(name="fptrack.maintain", **{**_RETRY_ON_DATABASE_ERRORS, "max_retries": 3})  # type: ignore[untyped-decorator]
def maintain() -> dict[str, object]:
    """Periodic upkeep (Celery beat): re-split overloaded buckets, refresh the corpus statistics."""
    from compare.maintenance import run_maintenance

    with session_scope(_sessions()) as session:
        return run_maintenance(session, _settings()).as_json()
