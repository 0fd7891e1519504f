"""The takedowns page (``/takedowns``), the match list's takedown state and filter, and the dashboard's
takedown cards, which must say what ``fptrack takedowns stats`` says at once, also after a copy came back
(Flask test client, SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from click.testing import CliRunner
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from fptrack.analytics.takedowns import takedown_stats
from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.storage.match_life import Observation, observe
from fptrack.storage.models import Match, Notice, NoticeItem, utcnow
from tests.support.accounts import add_account, log_in
from tests.support.admin_seed import Seeded


@pytest.fixture
def client(app: Flask, settings: Settings) -> FlaskClient:
    add_account(settings, "vera", "viewer")
    client = app.test_client()
    log_in(client, "vera")
    return client


def _text(response) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == 200, response.status_code
    return str(response.get_data(as_text=True))


def _observe(session: Session, settings: Settings, outcome: str, hours_ago: float, *ids: int) -> None:
    observe(
        session, [Observation(i, outcome) for i in ids], settings, now=utcnow() - timedelta(hours=hours_ago)
    )
    session.commit()


def _take_down(session: Session, settings: Settings, *ids: int) -> None:
    """Two checks that find the copies gone, far enough apart to confirm the removal."""
    apart = settings.recheck_confirm_after / 3600 + 0.01
    _observe(session, settings, "gone", 3 + apart, *ids)
    _observe(session, settings, "gone", 3, *ids)


def _cards(html: str) -> tuple[str, str, str]:
    found = [re.search(rf'id="takedown-{name}">([^<]*)<', html) for name in ("checked", "down", "rate")]
    assert all(found), html
    return tuple(m.group(1).strip() for m in found if m)  # type: ignore[return-value]


def _stats_command(settings: Settings) -> dict[str, object]:
    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    result = CliRunner().invoke(main, ["takedowns", "stats", "--format", "json"], env=env)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output.splitlines()[0]))


def _followed(seeded: Seeded) -> tuple[int, int]:
    """The seed's flagged match and its confirmed one (the two a takedown follows)."""
    return seeded.hostile_match_id, seeded.match_ids_newest_first[0]


def test_dashboard_cards_are_current_and_agree_with_takedowns_stats(
    client: FlaskClient, seeded: Seeded, session: Session, settings: Settings
) -> None:
    flagged, confirmed = _followed(seeded)
    assert _cards(_text(client.get("/?days=0"))) == ("0", "0", "–")
    _take_down(session, settings, flagged, confirmed)
    assert _cards(_text(client.get("/?days=0"))) == ("2", "2", "100.0 %")
    # one copy comes back: it leaves the taken-down count on the next page load, as in the command's figures
    _observe(session, settings, "present", 1, confirmed)
    assert _cards(_text(client.get("/?days=0"))) == ("2", "1", "50.0 %")
    stats = _stats_command(settings)
    assert (stats["checked"], stats["taken_down"], stats["rate"]) == (2, 1, 0.5)
    assert takedown_stats(session)[0].taken_down == 1
    # a review decision moves the figures too (a dismissed match is no longer followed)
    match = session.get(Match, flagged)
    assert match is not None
    match.status = "dismissed"
    session.commit()
    assert _cards(_text(client.get("/?days=0"))) == ("1", "0", "0.0 %")


def test_dashboard_shows_one_all_time_column_for_all_time(client: FlaskClient, seeded: Seeded) -> None:
    def header(html: str) -> list[str]:
        block = html[html.index(">Matches by status<") :]
        head = block[block.index("<thead>") : block.index("</thead>")]
        return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<th[^>]*>(.*?)</th>", head)]

    assert header(_text(client.get("/?days=0"))) == ["status", "all time"]
    assert header(_text(client.get("/?days=30"))) == ["status", "all time", "last 30 days"]


def _sent_notice(session: Session, match_id: int, hours_ago: float) -> None:
    notice = Notice(host="pirate.example", state="sent", sent_at=utcnow() - timedelta(hours=hours_ago))
    notice.items.append(NoticeItem(match_id=match_id, url="http://pirate.example/other.html"))
    session.add(notice)
    session.commit()


def _states(html: str) -> dict[str, str]:
    return dict(re.findall(r'id="state-([a-z_]+)">(\d+)<', html))


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr id="copy-(\d+)">', html)


def test_takedowns_page_states_filters_and_time_to_takedown(
    client: FlaskClient, seeded: Seeded, session: Session, settings: Settings
) -> None:
    flagged, confirmed = _followed(seeded)
    html = _text(client.get("/takedowns"))
    assert 'href="/takedowns"' in html  # the navigation links it
    assert _states(html) == {
        "flagged": "1",
        "confirmed": "1",
        "notice_sent": "0",
        "taken_down": "0",
        "back_up": "0",
    }
    assert sorted(_rows(html)) == sorted(
        [str(flagged), str(confirmed)]
    )  # dismissed and licensed: not followed
    _sent_notice(session, confirmed, hours_ago=5)
    assert _states(_text(client.get("/takedowns")))["notice_sent"] == "1"
    _take_down(session, settings, confirmed)
    html = _text(client.get("/takedowns?state=taken_down"))
    assert _rows(html) == [str(confirmed)]
    assert _states(html)["taken_down"] == "1" and _states(html)["notice_sent"] == "0"
    # notice sent 5 h ago, first seen down 3 h and the confirmation interval ago: just under 2 h
    assert re.search(r'class="num time-to-takedown">1 h 5\d min<', html)
    _observe(session, settings, "present", 1, confirmed)
    assert _rows(_text(client.get("/takedowns?state=back_up"))) == [str(confirmed)]
    assert _rows(_text(client.get("/takedowns?state=taken_down"))) == []
    # filters by work and by site
    assert _rows(_text(client.get(f"/takedowns?work={seeded.work_id}"))) == [str(flagged)]
    assert _rows(_text(client.get("/takedowns?site=copy.example"))) == []
    assert len(_rows(_text(client.get("/takedowns?site=PIRATE.example")))) == 2
    # bad input: one line
    response = client.get("/takedowns?state=vanished")
    assert response.status_code == 400
    assert "Unknown state &#39;vanished&#39;; expected one of flagged," in response.get_data(as_text=True)


def test_takedowns_page_in_chinese(client: FlaskClient, seeded: Seeded) -> None:
    html = _text(client.get("/takedowns", headers={"Accept-Language": "zh-CN"}))
    assert "下架" in html
    assert "notice sent" not in html and "back up" not in html


def test_match_list_shows_and_filters_the_takedown_state(
    client: FlaskClient, seeded: Seeded, session: Session, settings: Settings
) -> None:
    flagged, _ = _followed(seeded)
    _take_down(session, settings, flagged)
    html = _text(client.get("/matches"))
    row = html[html.index(f'id="match-{flagged}"') :]
    row = row[: row.index("</tr>")]
    assert "status-taken_down" in row
    listed = _text(client.get("/matches?takedown=taken_down"))
    assert re.findall(r'<tr id="match-(\d+)">', listed) == [str(flagged)]
    assert 'id="match-total">1<' in listed
    assert client.get("/matches?takedown=lost").status_code == 400


def test_match_api_filters_by_takedown_state(
    app: Flask, seeded: Seeded, session: Session, settings: Settings
) -> None:
    from fptrack.services.accounts.tokens import create_token

    flagged, _ = _followed(seeded)
    _take_down(session, settings, flagged)
    add_account(settings, "api", "viewer")
    token = create_token(session, "api", "test").token
    session.commit()
    headers = {"Authorization": f"Bearer {token}"}
    body = app.test_client().get("/api/matches?takedown=taken_down", headers=headers).get_json()
    assert [item["id"] for item in body["items"]] == [flagged]
    assert body["total"] == 1
