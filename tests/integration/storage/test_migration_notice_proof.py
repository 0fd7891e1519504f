"""Revision 0026 (proof of what was sent, the reviewer's basis, designated-agent contacts) on both backends:
every review decision, notice, item and contact written before comes through as it was (the new columns at
their defaults: no basis stated, no stored message), a contact of kind designated_agent is accepted after it
and refused before, and the downgrade gives the old schema back with the rows."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from tests.integration.storage.test_migrations import NOW, _skeleton_data, empty_settings

__all__ = ["empty_settings"]

CONTACT = (
    "INSERT INTO host_contacts (id, host, level, kind, name, email, language, note, created_at) VALUES "
    "({id}, 'pirate.test', {level}, '{kind}', 'Agent', 'dmca@host.example', '', '', '" + NOW + "')"
)


def _old_rows(settings: Settings) -> None:
    engine = create_engine_for(settings)
    try:
        assert migrate(settings, engine, revision="0001") == "0001"
        _skeleton_data(engine)  # work 1, match 7
        assert migrate(settings, engine, revision="0025") == "0025"
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO review_decisions (id, match_id, decision, reviewer, note, decided_at) "
                    f"VALUES (2, 7, 'confirmed', 'rita', 'a verbatim copy', '{NOW}')"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO notices (id, sender_id, host, recipient_name, recipient_address, "
                    "recipient_kind, contact_level, language, state, kind, escalation_level, created_at, "
                    "created_by, sent_by, message_id, text, text_sha256, state_changed_at, sent_at) VALUES "
                    "(3, NULL, 'pirate.test', '', 'abuse@pirate.test', 'site', 0, 'zh', 'sent', 'notice', "
                    f"0, '{NOW}', 'x', 'y', '<m@x>', '通知书', 'abc', '{NOW}', '{NOW}')"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO notice_items (id, notice_id, match_id, url, page_title, work_title, "
                    "chapter_title, snapshot_sha256, passages, bundle_sha256) VALUES "
                    "(4, 3, 7, 'http://pirate.test/1', '', '灯塔', '1.', '', '[]', '')"
                )
            )
            connection.execute(text(CONTACT.format(id=5, level=0, kind="hosting")))
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(text(CONTACT.format(id=6, level=1, kind="designated_agent")))
    finally:
        engine.dispose()


def test_rows_come_through_the_new_columns_and_back(empty_settings: Settings) -> None:
    from alembic import command

    _old_rows(empty_settings)
    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0026") == "0026"
        with engine.begin() as connection:
            decision = connection.execute(
                text(
                    "SELECT match_id, decision, note, copy_kind, fair_use_considered, basis "
                    "FROM review_decisions"
                )
            ).one()
            assert tuple(decision) == (7, "confirmed", "a verbatim copy", "", None, "")
            notice = connection.execute(
                text(
                    "SELECT state, text, message_id, sent_message, sent_message_sha256, relay_reply, "
                    "relay_replied_at, sent_timestamp FROM notices"
                )
            ).one()
            assert tuple(notice) == ("sent", "通知书", "<m@x>", None, "", "", None, None)
            assert connection.execute(text("SELECT url, copy_kind FROM notice_items")).one() == (
                "http://pirate.test/1",
                "",
            )
            assert connection.execute(text("SELECT kind FROM host_contacts")).scalar_one() == "hosting"
            connection.execute(text(CONTACT.format(id=6, level=1, kind="designated_agent")))
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(text(CONTACT.format(id=7, level=2, kind="lawyer")))

        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0025")
        columns = {c["name"] for c in inspect(engine).get_columns("notices")}
        assert "sent_message" not in columns and "text_sha256" in columns
        with engine.begin() as connection:
            assert (
                connection.execute(text("SELECT note FROM review_decisions")).scalar_one()
                == "a verbatim copy"
            )
            assert connection.execute(text("SELECT count(*) FROM notice_items")).scalar_one() == 1
            # the agent's contact is kept, as kind other (the old schema has no designated_agent)
            kinds = connection.execute(text("SELECT id, kind FROM host_contacts ORDER BY id")).all()
            assert [tuple(k) for k in kinds] == [(5, "hosting"), (6, "other")]
        migrate(empty_settings, engine)
    finally:
        engine.dispose()
