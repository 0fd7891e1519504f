"""Revision 0027 (rights per work) on both backends: every proof filed for a sender before proofs had kinds
comes through byte for byte under its id (kind ``other``, still the sender's), a sender that named another
rights owner becomes an agent, notice items learn their work, and the downgrade gives the proofs back."""

from __future__ import annotations

from sqlalchemy import inspect, text
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from fptrack.storage.models import RightsProof, Sender
from tests.integration.storage.test_migrations import NOW, _skeleton_data, empty_settings

__all__ = ["empty_settings"]

EVERY_BYTE = bytes(range(256)) * 3 + b"\x00%PDF\r\n\x00"


def _old_rows(settings: Settings) -> None:
    engine = create_engine_for(settings)
    try:
        assert migrate(settings, engine, revision="0001") == "0001"
        _skeleton_data(engine)  # work 1, match 7
        assert migrate(settings, engine, revision="0026") == "0026"
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO senders (id, name, rights_owner, address, email, phone, signer_name, "
                    "signer_title, language, created_at, updated_at) VALUES "
                    f"(1, '山中出版社', '', '北京市', 'a@x.example', '1', '王五', '法务', 'zh', "
                    f"'{NOW}', '{NOW}'), "
                    f"(2, '维权代理公司', '山中文化', '上海市', 'b@x.example', '2', '赵六', '代理', 'zh', "
                    f"'{NOW}', '{NOW}')"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO sender_proofs (id, sender_id, filename, media_type, sha256, content, "
                    "created_at) VALUES (5, 1, 'cert.pdf', 'application/pdf', 'h1', :a, :now), "
                    "(9, 2, '委托书.pdf', 'application/pdf', 'h2', :b, :now)"
                ),
                {"a": EVERY_BYTE, "b": EVERY_BYTE[::-1], "now": NOW},
            )
            connection.execute(
                text(
                    "INSERT INTO notices (id, sender_id, host, recipient_name, recipient_address, "
                    "recipient_kind, contact_level, language, state, kind, escalation_level, created_at, "
                    "created_by, sent_by, message_id, text, text_sha256, state_changed_at) VALUES "
                    f"(3, 1, 'pirate.test', '', '', 'site', 0, 'zh', 'draft', 'notice', 0, '{NOW}', 'x', "
                    f"'', '', '', '', '{NOW}')"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO notice_items (id, notice_id, match_id, url, page_title, work_title, "
                    "chapter_title, snapshot_sha256, passages, bundle_sha256) VALUES "
                    "(4, 3, 7, 'http://pirate.test/1', '', '灯塔', '1.', '', '[]', '')"
                )
            )
    finally:
        engine.dispose()


def test_proofs_senders_and_items_come_through_and_back(empty_settings: Settings) -> None:
    from alembic import command

    _old_rows(empty_settings)
    engine = create_engine_for(empty_settings)
    try:
        migrate(empty_settings, engine)
        with Session(engine) as session:
            proofs = {proof.id: proof for proof in session.query(RightsProof)}
            assert set(proofs) == {5, 9}
            assert proofs[5].content == EVERY_BYTE and proofs[9].content == EVERY_BYTE[::-1]
            assert {(p.kind, p.sender_id, p.work_id, p.sha256) for p in proofs.values()} == {
                ("other", 1, None, "h1"),
                ("other", 2, None, "h2"),
            }
            roles = {sender.id: sender.role for sender in session.query(Sender)}
            assert roles == {1: "owner", 2: "agent"}
            assert session.scalar(text("SELECT work_id FROM notice_items WHERE id = 4")) == 1
            # a proof added after the migration gets a fresh id on both backends
            added = RightsProof(
                kind="identity", sender_id=1, filename="licence.png", sha256="h3", content=b"x"
            )
            session.add(added)
            session.commit()
            assert added.id > 9
            session.delete(added)
            session.commit()
        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0026")
        assert not inspect(engine).has_table("rights_proofs")
        with engine.connect() as connection:
            query = "SELECT id, sender_id, content FROM sender_proofs ORDER BY id"
            rows = connection.execute(text(query)).all()
        assert [(r[0], r[1], bytes(r[2])) for r in rows] == [(5, 1, EVERY_BYTE), (9, 2, EVERY_BYTE[::-1])]
    finally:
        engine.dispose()
