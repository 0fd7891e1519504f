"""The reviewer's basis on confirmation (services/review.py), through the service, the admin's review form,
the JSON API and ``fptrack review``, on SQLite and PostgreSQL: an excerpt, or a match whose score (the share
of its chapter copied) is below FPTRACK_REVIEW_BASIS_BELOW, is confirmed only with its copy kind, fair use and
licences considered, and a note; a bulk confirmation of one is refused in one line and changes nothing; the
basis is kept in the history and shown there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from flask import Flask
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.services.accounts.tokens import create_token
from fptrack.services.review import (
    Basis,
    BasisRequired,
    match_history,
    record_bulk_decision,
    record_decision,
)
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Match, ReviewDecision
from tests.support.accounts import add_account, csrf_token_in, log_in
from tests.support.admin_seed import Seeded, seed

EXCERPT = Basis("excerpt", True, "a news article quoting two paragraphs: beyond quotation, no licence")


@pytest.fixture
def seeded(session: Session) -> Seeded:
    found = seed(session)
    # the hostile copy scores 0.93 (flagged); the javascript one 0.70 (dismissed): put it back to flagged
    low = session.get(Match, found.javascript_match_id)
    assert low is not None and low.score < 0.8
    low.status = "flagged"
    session.commit()
    return found


def _statuses(session: Session, *ids: int) -> list[str]:
    session.expire_all()
    return [session.get(Match, i).status for i in ids]  # type: ignore[union-attr]


def test_a_low_score_is_confirmed_only_with_the_basis(session: Session, seeded: Seeded) -> None:
    low = seeded.javascript_match_id
    with pytest.raises(BasisRequired, match=rf"match {low} is confirmed only with the reviewer's basis"):
        record_decision(session, low, "confirmed", "rita")
    for partial in (
        Basis("excerpt"),
        Basis("excerpt", True),
        Basis("", True, "note"),
        Basis("excerpt", False, "x"),
    ):
        with pytest.raises(BasisRequired, match="confirmed only with the reviewer.s basis, since"):
            record_decision(session, low, "confirmed", "rita", basis=partial)
    assert _statuses(session, low) == ["flagged"]
    decision = record_decision(session, low, "confirmed", "rita", "quoted at length", basis=EXCERPT)
    session.commit()
    assert decision.recorded and _statuses(session, low) == ["confirmed"]
    kept = session.scalars(select(ReviewDecision).where(ReviewDecision.match_id == low)).one()
    assert (kept.copy_kind, kept.fair_use_considered, kept.basis) == ("excerpt", True, EXCERPT.note)
    entry = match_history(session, low)[-1]
    assert entry.status == "confirmed" and entry.text == "quoted at length"
    assert entry.basis == f"an excerpt; fair use and licences considered: yes; {EXCERPT.note}"


def test_an_excerpt_needs_the_basis_whatever_its_score(session: Session, seeded: Seeded) -> None:
    high = seeded.hostile_match_id  # 0.93
    with pytest.raises(BasisRequired, match="since it is an excerpt"):
        record_decision(session, high, "confirmed", "rita", basis=Basis("excerpt"))
    # a whole chapter above the threshold: no basis asked, one may be given
    assert record_decision(session, high, "confirmed", "rita").recorded
    assert match_history(session, high)[-1].basis == ""
    with pytest.raises(ValueError, match="copy kind must be one of"):
        record_decision(session, high, "confirmed", "rita", basis=Basis("chapter", True, "x"))
    with pytest.raises(ValueError, match="goes with a confirmation only"):
        record_decision(session, high, "dismissed", "rita", basis=EXCERPT)


def test_the_threshold_is_the_setting(session: Session, seeded: Seeded) -> None:
    low = seeded.javascript_match_id
    assert record_decision(session, low, "confirmed", "rita", basis_below=0.5).recorded
    with pytest.raises(BasisRequired, match="score 0.93"):
        record_decision(session, seeded.hostile_match_id, "confirmed", "rita", basis_below=0.95)


def test_a_bulk_confirmation_of_a_match_needing_the_basis_is_refused_whole(
    session: Session, seeded: Seeded
) -> None:
    ids = [seeded.hostile_match_id, seeded.javascript_match_id]
    with pytest.raises(BasisRequired) as refused:
        record_bulk_decision(session, ids, "confirmed", "rita")
    message = str(refused.value)
    assert "\n" not in message and f": {seeded.javascript_match_id}; nothing was changed" in message
    assert _statuses(session, *ids) == ["flagged", "flagged"]
    # other bulk decisions are not asked for a basis
    assert len(record_bulk_decision(session, ids, "dismissed", "rita")) == 2


# ------------------------------------------------------------------------------------ admin, API, CLI


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    from fptrack.admin.web import create_app

    app = create_app(settings)
    yield app
    app.extensions["fptrack"].engine.dispose()


def test_the_review_form_asks_for_the_basis_and_the_history_shows_it(
    app: Flask, settings: Settings, seeded: Seeded, session: Session
) -> None:
    add_account(settings, "rita", "reviewer")
    client = app.test_client()
    log_in(client, "rita")
    low = seeded.javascript_match_id
    page = client.get(f"/matches/{low}").get_data(as_text=True)
    assert "Basis of a confirmation (required: its score 0.70" in page and 'name="copy_kind"' in page
    token = csrf_token_in(page)
    url = f"/matches/{low}/status"
    refused = client.post(url, data={"status": "confirmed", "csrf_token": token})
    assert refused.status_code == 400 and "confirmed only with the reviewer&#39;s basis" in refused.get_data(
        as_text=True
    )
    assert _statuses(session, low) == ["flagged"]
    done = client.post(
        url,
        data={
            "status": "confirmed",
            "csrf_token": token,
            "copy_kind": "excerpt",
            "fair_use_considered": "yes",
            "basis": "two paragraphs quoted",
        },
    )
    assert done.status_code == 303 and _statuses(session, low) == ["confirmed"]
    shown = client.get(f"/matches/{low}").get_data(as_text=True)
    assert "basis: an excerpt; fair use and licences considered: yes; two paragraphs quoted" in shown

    bulk = client.post(
        "/matches/bulk",
        data={
            "csrf_token": token,
            "scope": "selected",
            "ids": [str(seeded.hostile_match_id)],
            "decision": "flagged",
        },
    )
    assert bulk.status_code == 303


def test_the_api_and_the_cli_ask_for_the_basis(
    app: Flask, settings: Settings, seeded: Seeded, session: Session
) -> None:
    add_account(settings, "rita", "reviewer")
    engine = create_engine_for(settings)
    with Session(engine) as s:
        token = create_token(s, "rita", "test").token
        s.commit()
    engine.dispose()
    client = app.test_client()
    headers = {"Authorization": f"Bearer {token}"}
    low = seeded.javascript_match_id
    url = f"/api/matches/{low}/review"
    refused = client.post(url, json={"status": "confirmed"}, headers=headers)
    assert refused.status_code == 400 and "basis" in refused.get_json()["error"]
    bulk = client.post("/api/matches/review", json={"ids": [low], "status": "confirmed"}, headers=headers)
    assert bulk.status_code == 400 and "one by one" in bulk.get_json()["error"]
    assert (
        client.post(
            url, json={"status": "confirmed", "fair_use_considered": "yes"}, headers=headers
        ).status_code
        == 400
    )
    done = client.post(
        url,
        json={
            "status": "confirmed",
            "copy_kind": "substantial_part",
            "fair_use_considered": True,
            "basis": "b",
        },
        headers=headers,
    )
    assert done.status_code == 200 and done.get_json()["status"] == "confirmed"

    # the command line: the same rule, one line
    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    runner = CliRunner()
    assert runner.invoke(main, ["review", str(low), "reopen"], env=env).exit_code == 0
    no = runner.invoke(main, ["review", str(low), "confirm"], env=env)
    assert no.exit_code == 1 and no.output.count("\n") == 1 and "error: match" in no.output
    yes = runner.invoke(
        main,
        [
            "review",
            str(low),
            "confirm",
            "--copy-kind",
            "excerpt",
            "--fair-use-considered",
            "--basis",
            "quoted",
        ],
        env=env,
    )
    assert yes.exit_code == 0, yes.output
    assert _statuses(session, low) == ["confirmed"]
    assert (
        match_history(session, low)[-1].basis == "an excerpt; fair use and licences considered: yes; quoted"
    )
