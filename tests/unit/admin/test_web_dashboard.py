"""The dashboard and its charts (Flask test client, SQLite and PostgreSQL): figures from the kept roll-ups,
the period filter, SVG charts without scripts whose labels are escaped, tables beside them, crawl health."""

from __future__ import annotations

import re
from datetime import date, timedelta
from xml.etree import ElementTree

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from fptrack.admin.charts import CHART_CONTENT_SECURITY_POLICY
from fptrack.admin.views.dashboard import page_count
from fptrack.admin.web import CONTENT_SECURITY_POLICY
from fptrack.core.settings import Settings
from fptrack.services.queries import MatchFilter, count_matches
from fptrack.storage.models import CrawlJob, Match, Site, utcnow
from tests.support.accounts import add_account, log_in
from tests.support.admin_seed import ESCAPED_SCRIPT, SCRIPT, Seeded


@pytest.fixture
def client(app: Flask, settings: Settings) -> FlaskClient:
    """A browser logged in as ``vera``, a viewer: the dashboard is read-only."""
    add_account(settings, "vera", "viewer")
    client = app.test_client()
    log_in(client, "vera")
    return client


def _text(response) -> str:  # type: ignore[no-untyped-def]
    return response.get_data(as_text=True)


CHARTS = ("/charts/matches-over-time.svg", "/charts/works.svg", "/charts/hosts.svg")


def _table(html: str, table_id: str) -> list[list[str]]:
    block = re.search(rf'<table class="compact" id="{table_id}">(.*?)</table>', html, re.DOTALL)
    assert block, table_id
    rows = re.findall(r"<tr>(.*?)</tr>", block.group(1), re.DOTALL)
    return [
        [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.DOTALL)
        ]
        for row in rows
    ]


def test_dashboard_panels_over_all_time(client: FlaskClient, seeded: Seeded) -> None:
    html = _text(client.get("/?days=0&per=day"))
    assert 'id="count-pending">1<' in html
    works = _table(html, "table-works")
    assert works[0] == ["work", "flagged", "confirmed", "dismissed", "licensed", "total"]
    assert works[1] == ["山中故事", "1", "0", "1", "1", "3"]
    assert works[2] == [f"Other {ESCAPED_SCRIPT}", "0", "1", "0", "0", "1"]
    over_time = _table(html, "table-over-time")
    assert over_time[1][0] == utcnow().date().isoformat()  # newest first, up to today
    assert ["2026-03-01", "1", "1", "1", "1", "4"] in over_time
    assert sum(int(row[-1]) for row in over_time[1:]) == 4
    # every chart is an image of our own, with the period in its URL, and described for screen readers
    for path in CHARTS:
        assert f'src="{path}?days=0' in html
    assert all(alt for alt in re.findall(r'<img class="chart"[^>]*alt="([^"]*)"', html, re.DOTALL))
    assert SCRIPT not in html and "<script" not in html
    # latency: the seeded pages were fetched (now) after their matches were first seen: unknown, not made up
    assert "detection latency" in html


def test_default_period_is_the_last_90_days(client: FlaskClient, seeded: Seeded) -> None:
    html = _text(client.get("/"))
    assert 'id="count-matches">4<' in html  # the cards count all time
    assert "No matches in this period." in html  # the seeded matches are from March 2026
    assert len(_table(html, "table-over-time")) == 1 + 90
    weekly = _table(_text(client.get("/?days=365")), "table-over-time")
    assert 52 <= len(weekly) - 1 <= 54 and weekly[0][0] == "week from"


@pytest.mark.parametrize("query", ["days=5", "days=x", "per=month", "days=-1"])
def test_bad_period_is_a_400(client: FlaskClient, seeded: Seeded, query: str) -> None:
    assert client.get(f"/?{query}").status_code == 400
    assert client.get(f"/charts/works.svg?{query}").status_code == 400


@pytest.mark.parametrize("path", CHARTS)
def test_charts_are_svg_without_scripts_and_escape_labels(
    client: FlaskClient, seeded: Seeded, path: str
) -> None:
    response = client.get(f"{path}?days=0")
    assert response.status_code == 200
    assert response.mimetype == "image/svg+xml"
    assert response.headers["Content-Security-Policy"] == CHART_CONTENT_SECURITY_POLICY
    assert (
        "script-src" not in CHART_CONTENT_SECURITY_POLICY
        and "default-src 'none'" in CHART_CONTENT_SECURITY_POLICY
    )
    body = response.get_data()
    root = ElementTree.fromstring(body)  # well-formed XML
    assert root.tag.endswith("svg")
    assert b"<script" not in body and b"javascript:" not in body
    if path != "/charts/matches-over-time.svg":
        # every seeded work or host is a bar, its label the text as stored (the hostile ones escaped in the
        # SVG)
        labels = "".join(root.itertext())
        expected = {
            "/charts/works.svg": ["山中故事", f"Other {SCRIPT}"],
            "/charts/hosts.svg": ["pirate.example", "copy.example", SCRIPT],
        }[path]
        assert [label for label in expected if label not in labels] == []
        assert b"<script>alert" not in body and ESCAPED_SCRIPT.encode() in body


def test_pages_keep_the_strict_policy(client: FlaskClient, seeded: Seeded) -> None:
    assert client.get("/").headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY


def test_crawl_health(client: FlaskClient, seeded: Seeded, session: Session) -> None:
    now = utcnow()
    site = Site(
        host="late.example",
        name="late-site",
        managed=True,
        enabled=True,
        schedule="3600",
        start_urls=["http://late.example/"],
        next_crawl_at=now - timedelta(hours=3),
    )
    idle = Site(
        host="idle.example",
        name="idle-site",
        managed=True,
        enabled=False,
        schedule="3600",
        start_urls=["http://idle.example/"],
        next_crawl_at=now - timedelta(hours=3),
    )
    session.add_all([site, idle])
    session.flush()
    session.add_all(
        [
            CrawlJob(
                site_id=site.id,
                start_urls=["http://late.example/"],
                status="failed",
                max_pages=10,
                started_at=now - timedelta(hours=1),
                error=f"gave up {SCRIPT}",
            ),
            CrawlJob(
                site_id=site.id,
                start_urls=["http://late.example/"],
                status="finished",
                max_pages=10,
                pages_seen=7,
                started_at=now - timedelta(hours=2),
                finished_at=now,
            ),
            CrawlJob(site_id=site.id, status="failed", started_at=now - timedelta(days=3)),
        ]
    )
    session.commit()
    html = _text(client.get("/"))
    assert 'id="crawl-failures">1 crawl failed' in html
    assert "late-site" in html and "idle-site" not in html  # disabled sites are not overdue
    crawls = _table(html, "table-crawls")
    assert [row[2][:6] for row in crawls[1:]] == ["failed", "finish", "failed"]
    assert f"gave up {ESCAPED_SCRIPT}" in html and crawls[2][3] == "7 / 10"


@pytest.mark.parametrize(
    "match_filter",
    [
        MatchFilter(),
        MatchFilter(status="flagged"),
        MatchFilter(site="pirate.example"),
        MatchFilter(status="confirmed", site="pirate.example"),
        MatchFilter(since=date(2026, 3, 1), until=date(2026, 3, 1)),
        MatchFilter(since=date(2026, 3, 2)),
        MatchFilter(min_score=0.85),  # counted from the matches themselves
        MatchFilter(url="copy"),
    ],
)
def test_counts_from_the_rollups_equal_counting_the_matches(
    seeded: Seeded, session: Session, match_filter: MatchFilter
) -> None:
    counted = session.scalar(match_filter.apply(select(func.count()).select_from(Match)))
    assert count_matches(session, match_filter) == counted
    work = MatchFilter(work_id=seeded.work_id, status="dismissed")
    assert (
        count_matches(session, work)
        == session.scalar(work.apply(select(func.count()).select_from(Match)))
        == 1
    )


def test_page_count_is_exact_or_a_marked_estimate(
    client: FlaskClient, seeded: Seeded, session: Session, settings: Settings
) -> None:
    assert page_count(session) == (4, False)
    if settings.database_url.startswith("postgresql"):
        session.execute(text("ANALYZE pages"))
        assert page_count(session, exact_below=1) == (4, True)  # the planner's figure, after ANALYZE
    else:
        assert page_count(session, exact_below=1) == (4, False)  # SQLite has no estimate: always exact


def test_takedown_panel_shows_rate_and_time_to_takedown(
    client: FlaskClient, seeded: Seeded, session: Session
) -> None:
    html = _text(client.get("/?days=0"))
    assert 'id="takedown-rate">–' in html  # nothing re-checked yet: no rate rather than 0 %
    matches = session.scalars(select(Match).where(Match.id.in_(seeded.match_ids_newest_first))).all()
    flagged = [m for m in matches if m.status in ("flagged", "confirmed")]
    assert len(flagged) >= 2
    down, up = flagged[0], flagged[1]
    down.recheck_state, down.rechecked_at = "gone", utcnow()
    down.taken_down_at = down.first_seen + timedelta(hours=5)
    up.recheck_state, up.rechecked_at = "present", utcnow()
    session.commit()
    html = _text(client.get("/?days=0"))  # current at once (tests/unit/admin/test_web_takedowns.py)
    assert re.search(r'id="takedown-checked">2<', html)
    assert re.search(r'id="takedown-down">1<', html)
    assert 'id="takedown-rate">50.0 %<' in html
    assert re.search(r'id="takedown-median">[^<]*5', html)


def test_match_page_shows_its_takedown_checks_escaped(
    client: FlaskClient, seeded: Seeded, session: Session
) -> None:
    from fptrack.storage.models import TakedownCheck

    match = session.get(Match, seeded.plain_match_id)
    assert match is not None
    assert "Not re-checked yet" in _text(client.get(f"/matches/{match.id}"))
    now = utcnow()
    session.add(
        TakedownCheck(
            match_id=match.id,
            checked_at=now - timedelta(hours=2),
            outcome="present",
            http_status=200,
            detail="still copies 97 %",
        )
    )
    session.add(
        TakedownCheck(match_id=match.id, checked_at=now, outcome="gone", http_status=404, detail=SCRIPT)
    )
    match.recheck_state, match.rechecked_at, match.taken_down_at = "gone", now, now
    session.commit()
    html = _text(client.get(f"/matches/{match.id}"))
    section = html[html.index('id="takedown"') : html.index('id="history"')]
    assert 'class="recheck-gone">gone<' in section and "Taken down" in section
    assert section.index(">gone<", section.index("<tbody>")) < section.index(">present<")  # newest first
    assert SCRIPT not in html and ESCAPED_SCRIPT in section  # a page's answer is crawled text: inert


def test_a_long_host_leaves_the_bars_room() -> None:
    # one 90-character host once took the whole chart's width for its label, the bars squeezed to nothing
    from fptrack.admin.charts import BAR_LABEL_CHARS, bars_svg
    from fptrack.analytics.rollups import KeyCount

    host = "www." + "mirror-of-a-" * 7 + "pirate.example"
    svg = bars_svg("hosts", [KeyCount(host, host, {"flagged": 3}), KeyCount("a.example", "a.example", {})])
    assert host.encode() not in svg
    assert (host[: BAR_LABEL_CHARS - 1] + "…").encode() in svg
    assert b"a.example" in svg
