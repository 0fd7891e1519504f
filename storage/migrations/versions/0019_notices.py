"""senders, notices and their deliveries, host contacts: takedown notices that carry every element
of 17 U.S.C. 512(c)(3)(A) and 信息网络传播权保护条例 第十四条, their life (sent, acknowledged, copy gone,
escalated) and whom to escalate to

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-25 19:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# as in storage/models.py at this revision (a migration never imports the models: they move on)
LANGUAGES = ("zh", "en")
STATES = ("draft", "sent", "acknowledged", "copy_gone", "escalated", "withdrawn")
KINDS = ("notice", "reminder", "escalation")
EVENT_KINDS = (
    "drafted",
    "sent",
    "send_failed",
    "bounced",
    "acknowledged",
    "item_gone",
    "item_back",
    "copy_gone",
    "escalated",
    "no_upstream",
    "withdrawn",
)
CONTACT_KINDS = ("site", "hosting", "cdn", "registrar", "other")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def _when(name: str, nullable: bool = False) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "senders",
        sa.Column("id", BigId, nullable=False),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("rights_owner", sa.String(300), nullable=False),
        sa.Column("address", sa.Text(), nullable=False),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("phone", sa.String(100), nullable=False),
        sa.Column("signer_name", sa.String(300), nullable=False),
        sa.Column("signer_title", sa.String(300), nullable=False),
        sa.Column("language", sa.String(5), nullable=False),
        _when("created_at"),
        _when("updated_at"),
        sa.CheckConstraint(_one_of("language", LANGUAGES), name="ck_senders_known_language"),
        sa.PrimaryKeyConstraint("id", name="pk_senders"),
        sa.UniqueConstraint("name", name="uq_senders_name"),
    )
    op.create_table(
        "sender_proofs",
        sa.Column("id", BigId, nullable=False),
        sa.Column("sender_id", BigId, nullable=False),
        sa.Column("filename", sa.String(300), nullable=False),
        sa.Column("media_type", sa.String(100), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        _when("created_at"),
        sa.ForeignKeyConstraint(
            ["sender_id"], ["senders.id"], name="fk_sender_proofs_sender_id_senders", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_sender_proofs"),
        sa.UniqueConstraint("sender_id", "sha256", name="uq_sender_proofs_sender_id_sha256"),
    )
    op.create_table(
        "host_contacts",
        sa.Column("id", BigId, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("language", sa.String(5), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        _when("created_at"),
        sa.CheckConstraint(_one_of("kind", CONTACT_KINDS), name="ck_host_contacts_known_kind"),
        sa.PrimaryKeyConstraint("id", name="pk_host_contacts"),
        sa.UniqueConstraint("host", "level", name="uq_host_contacts_host_level"),
    )
    op.create_table(
        "notices",
        sa.Column("id", BigId, nullable=False),
        sa.Column("sender_id", BigId, nullable=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("recipient_name", sa.String(300), nullable=False),
        sa.Column("recipient_address", sa.String(320), nullable=False),
        sa.Column("recipient_kind", sa.String(20), nullable=False),
        sa.Column("contact_level", sa.SmallInteger(), nullable=False),
        sa.Column("language", sa.String(5), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("escalation_level", sa.SmallInteger(), nullable=False),
        sa.Column("parent_id", BigId, nullable=True),
        _when("created_at"),
        sa.Column("created_by", sa.String(200), nullable=False),
        _when("sent_at", nullable=True),
        sa.Column("sent_by", sa.String(200), nullable=False),
        sa.Column("message_id", sa.String(255), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("text_sha256", sa.String(64), nullable=False),
        _when("state_changed_at"),
        sa.CheckConstraint(_one_of("state", STATES), name="ck_notices_known_state"),
        sa.CheckConstraint(_one_of("kind", KINDS), name="ck_notices_known_kind"),
        sa.CheckConstraint(_one_of("language", LANGUAGES), name="ck_notices_known_language"),
        sa.ForeignKeyConstraint(
            ["sender_id"], ["senders.id"], name="fk_notices_sender_id_senders", ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"], ["notices.id"], name="fk_notices_parent_id_notices", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_notices"),
    )
    op.create_index("ix_notices_host", "notices", ["host"])
    op.create_index("ix_notices_parent_id", "notices", ["parent_id"])
    op.create_index("ix_notices_state_sent_at", "notices", ["state", "sent_at"])
    op.create_table(
        "notice_items",
        sa.Column("id", BigId, nullable=False),
        sa.Column("notice_id", BigId, nullable=False),
        sa.Column("match_id", BigId, nullable=True),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("page_title", sa.Text(), nullable=False),
        sa.Column("work_title", sa.String(500), nullable=False),
        sa.Column("chapter_title", sa.String(500), nullable=False),
        _when("first_seen", nullable=True),
        _when("fetched_at", nullable=True),
        sa.Column("snapshot_sha256", sa.String(64), nullable=False),
        sa.Column("passages", sa.JSON(), nullable=False),
        sa.Column("bundle", sa.LargeBinary(), nullable=True),
        sa.Column("bundle_sha256", sa.String(64), nullable=False),
        _when("closed_at", nullable=True),
        sa.ForeignKeyConstraint(
            ["notice_id"], ["notices.id"], name="fk_notice_items_notice_id_notices", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["match_id"], ["matches.id"], name="fk_notice_items_match_id_matches", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_notice_items"),
        sa.UniqueConstraint("notice_id", "match_id", name="uq_notice_items_notice_id_match_id"),
    )
    op.create_index("ix_notice_items_match_id", "notice_items", ["match_id"])
    op.create_table(
        "notice_events",
        sa.Column("id", BigId, nullable=False),
        sa.Column("notice_id", BigId, nullable=False),
        _when("at"),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("recipient", sa.String(320), nullable=False),
        sa.Column("message_id", sa.String(255), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.CheckConstraint(_one_of("kind", EVENT_KINDS), name="ck_notice_events_known_kind"),
        sa.ForeignKeyConstraint(
            ["notice_id"], ["notices.id"], name="fk_notice_events_notice_id_notices", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_notice_events"),
    )
    op.create_index("ix_notice_events_notice_id_at", "notice_events", ["notice_id", "at"])


def downgrade() -> None:
    op.drop_index("ix_notice_events_notice_id_at", table_name="notice_events")
    op.drop_table("notice_events")
    op.drop_index("ix_notice_items_match_id", table_name="notice_items")
    op.drop_table("notice_items")
    op.drop_index("ix_notices_state_sent_at", table_name="notices")
    op.drop_index("ix_notices_parent_id", table_name="notices")
    op.drop_index("ix_notices_host", table_name="notices")
    op.drop_table("notices")
    op.drop_table("host_contacts")
    op.drop_table("sender_proofs")
    op.drop_table("senders")
