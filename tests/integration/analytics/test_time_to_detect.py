"""Time to detect on both backends: first seen less the page's own Last-Modified, over the flagged and
confirmed matches whose page sent one before the copy was first seen; median and 90th percentile as numpy
computes them, overall, per host and per work; and `fptrack takedowns stats` shows them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import numpy as np
import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session

from fptrack.analytics.takedowns import detection_times
from fptrack.core.settings import Settings
from fptrack.storage.models import Chapter, Match, Page, Work

T0 = datetime(2026, 3, 1, 8, tzinfo=UTC)
# (host, status, minutes from Last-Modified to first seen, or the raw header)
SEEDS: list[tuple[str, str, float | str]] = [
    ("a.test", "flagged", 2.0),
    ("a.test", "confirmed", 10.0),
    ("a.test", "flagged", 45.0),
    ("a.test", "flagged", -30.0),  # edited after it was first seen: says nothing about its first appearance
    ("a.test", "flagged", ""),  # no Last-Modified
    ("a.test", "flagged", "not a date"),
    ("b.test", "flagged", 90.0),
    ("b.test", "dismissed", 1.0),  # not a copy: never counted
]


def _seed(session: Session) -> int:
    work = Work(title="甲书", content_sha256="a" * 64, text="x" * 10)
    session.add(work)
    session.flush()
    chapter = Chapter(work_id=work.id, index=1, title="第一章", start=0, end=10, text="x" * 10)
    session.add(chapter)
    for n, (host, status, before) in enumerate(SEEDS):
        seen = T0 + timedelta(minutes=17 * n)
        header = (
            before
            if isinstance(before, str)
            else format_datetime(seen - timedelta(minutes=before), usegmt=True)
        )
        page = Page(
            url=f"http://{host}/{n}",
            final_url=f"http://{host}/{n}",
            host=host,
            status=200,
            text="t",
            last_modified=header,
        )
        session.add(page)
        session.flush()
        session.add(
            Match(
                page_id=page.id,
                work_id=work.id,
                chapter_id=chapter.id,
                score=0.9,
                status=status,
                first_seen=seen,
                last_seen=seen,
            )
        )
    session.flush()
    return int(work.id)


def _expected(minutes: list[float]) -> tuple[float, float]:
    median, p90 = np.percentile(np.array(minutes) * 60, [50, 90])
    return round(float(median), 1), round(float(p90), 1)


def test_time_to_detect_overall_per_host_and_per_work(session: Session) -> None:
    work_id = _seed(session)
    overall = detection_times(session, "all")["all"]
    assert overall.known == 4
    assert (overall.median_seconds, overall.p90_seconds) == _expected([2.0, 10.0, 45.0, 90.0])
    by_host = detection_times(session, "host")
    assert by_host["a.test"].known == 3
    assert (by_host["a.test"].median_seconds, by_host["a.test"].p90_seconds) == _expected([2.0, 10.0, 45.0])
    assert by_host["b.test"].as_json() == {
        "detect_known": 1,
        "detect_median_seconds": 5400.0,
        "detect_p90_seconds": 5400.0,
    }
    assert detection_times(session, "work")[f"甲书 (#{work_id})"].known == 4


def test_nothing_known(session: Session) -> None:
    overall = detection_times(session, "all")["all"]
    assert (overall.known, overall.median_seconds, overall.p90_seconds) == (0, None, None)
    assert detection_times(session, "host") == {}


@pytest.mark.parametrize("settings", ["sqlite"], indirect=True)
def test_stats_command_shows_it(settings: Settings, session: Session) -> None:
    from fptrack.cli.main import main

    _seed(session)
    session.commit()
    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    runner = CliRunner()
    shown = runner.invoke(main, ["takedowns", "stats", "--format", "json"], env=env)
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.output)
    assert record["matches"] == 7 and record["detect_known"] == 4  # the earlier keys are all still there
    assert (record["detect_median_seconds"], record["detect_p90_seconds"]) == _expected(
        [2.0, 10.0, 45.0, 90.0]
    )
    table = runner.invoke(main, ["takedowns", "stats"], env=env)
    assert "detect median" in table.output and "27m 30s" in table.output  # the median of 2, 10, 45, 90 min
    csv = runner.invoke(main, ["takedowns", "stats", "--format", "csv"], env=env)
    assert csv.output.splitlines()[0].endswith(
        "p90_seconds,detect_known,detect_median_seconds,detect_p90_seconds"
    )
