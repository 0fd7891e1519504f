"""Scheduled upkeep: the same service behind `fptrack maintain` and the Celery beat task."""

from __future__ import annotations

from sqlalchemy import func, select

from fptrack.cli.demo import DEMO_DATA
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.jobs import tasks
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.models import Fingerprint


def test_the_beat_task_refreshes_statistics_and_reports(settings: Settings) -> None:
    with session_scope(session_factory(create_engine_for(settings))) as session:
        work = register_work_file(session, DEMO_DATA / "alley.txt")
    app = tasks.configure(settings)
    tasks.index_work.delay(work.work_id).get()
    with session_scope(session_factory(create_engine_for(settings))) as session:
        rows = session.execute(select(Fingerprint.kind, func.count()).group_by(Fingerprint.kind)).all()
        kinds = {str(kind): int(count) for kind, count in rows}
    assert kinds == {
        "winnow": 3,
        "winnow_py": 3,
    }  # the kinds the contract computes: no empty row of another kind
    assert app.conf.beat_schedule["fptrack-maintain"]["task"] == "fptrack.maintain"
    assert app.conf.beat_schedule["fptrack-maintain"]["schedule"] == settings.maintain_every

    first = tasks.maintain.delay().get()
    # no Simhash on the page path (fingerprint.contract): the hot-bucket upkeep finds no Simhash row to look
    # at
    assert first["fingerprints"] == 0 and first["documents_added"] == 3 and first["orphans"] == {}
    again = tasks.maintain.delay().get()
    assert again["documents_added"] == 0 and again["documents"] == 3
