"""``fptrack senders remove`` and ``fptrack contacts edit|remove`` (on SQLite and PostgreSQL): what a sent
notice rests on is never removed, and the refusal says why in one line."""

from __future__ import annotations

from click.testing import CliRunner, Result
from sqlalchemy import update
from sqlalchemy.orm import Session

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.jobs.notices import draft_notice, find_sender
from fptrack.storage.models import Notice
from tests.support.admin_seed import seed


def _run(settings: Settings, *args: str) -> Result:
    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_senders_and_contacts_are_edited_and_removed_unless_a_sent_notice_rests_on_them(
    session: Session, settings: Settings
) -> None:
    seed(session)
    assert (
        _run(settings, "senders", "add", "Shan", "--address", "x", "--email", "r@shan.example").exit_code == 0
    )
    assert _run(settings, "contacts", "add", "pirate.example", "abuse@pirate.example").exit_code == 0
    edited = _run(settings, "contacts", "edit", "pirate.example", "0", "--email", "dmca@pirate.example")
    assert edited.exit_code == 0 and "saved dmca@pirate.example as level 0" in edited.output
    missing = _run(settings, "contacts", "edit", "pirate.example", "3", "--email", "a@b.example")
    assert missing.exit_code != 0 and "pirate.example has no contact at level 3" in missing.output
    draft_notice(session, actor="test", host="pirate.example", sender=find_sender(session, "Shan"))
    session.commit()
    session.execute(update(Notice).values(state="sent"))
    session.commit()

    refused = _run(settings, "senders", "remove", "Shan")
    assert refused.exit_code != 0 and "a sent notice keeps its sender" in refused.output
    refused = _run(settings, "contacts", "remove", "pirate.example", "0")
    assert refused.exit_code != 0 and "still pursued" in refused.output

    session.execute(update(Notice).values(state="draft"))
    session.commit()
    removed = _run(settings, "senders", "remove", "Shan")
    assert removed.exit_code == 0 and "now name no sender" in removed.output
    assert _run(settings, "contacts", "remove", "pirate.example", "0").exit_code == 0
    assert "no host contact yet" in _run(settings, "contacts", "list").output
