"""notices: proof of what was sent (the raw message, its SHA-256, the relay's reply and when, an RFC 3161
time-stamp token); review decisions: the reviewer's basis (copy kind, fair use / licence considered, a note);
notice items: the copy kind; host contacts of kind designated_agent

Every column is added with a default, so every existing row is kept as it was (a decision recorded before
states no basis: copy kind empty, fair_use_considered NULL; a notice sent before has no stored message).

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-29 16:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

# the kinds as this revision knows them (storage.models.CONTACT_KINDS when it was written)
_KINDS_BEFORE = ("site", "hosting", "cdn", "registrar", "other")
_KINDS_AFTER = ("site", "hosting", "cdn", "registrar", "designated_agent", "other")
# the CHECK's name as 0019 made it (the naming convention prefixed a name that had its prefix already), and
# the name the models give it, which this revision uses
_CHECK_0019 = "ck_host_contacts_ck_host_contacts_known_kind"
_CHECK = "ck_host_contacts_known_kind"


def _one_of(kinds: tuple[str, ...]) -> str:
    return "kind IN (" + ", ".join(f"'{kind}'" for kind in kinds) + ")"


def _text(name: str, length: int | None = None) -> sa.Column[str]:
    kind = sa.String(length) if length else sa.Text()
    return sa.Column(name, kind, nullable=False, server_default=sa.text("''"))


def _contact_kinds(kinds: tuple[str, ...], old_name: str, new_name: str) -> None:
    with op.batch_alter_table("host_contacts") as batch:
        batch.drop_constraint(op.f(old_name), type_="check")
        batch.create_check_constraint(op.f(new_name), _one_of(kinds))


def upgrade() -> None:
    # plain ADD COLUMN, never a batch copy of these tables: on SQLite a copy of ``notices`` drops the old
    # table, and its items and events would go with it (ON DELETE CASCADE)
    op.add_column("review_decisions", _text("copy_kind", 20))
    op.add_column("review_decisions", sa.Column("fair_use_considered", sa.Boolean(), nullable=True))
    op.add_column("review_decisions", _text("basis"))
    op.add_column("notice_items", _text("copy_kind", 20))
    op.add_column("notices", sa.Column("sent_message", sa.LargeBinary(), nullable=True))
    op.add_column("notices", _text("sent_message_sha256", 64))
    op.add_column("notices", _text("relay_reply"))
    op.add_column("notices", sa.Column("relay_replied_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("notices", sa.Column("sent_timestamp", sa.LargeBinary(), nullable=True))
    # host_contacts: no table refers to it, so a copy on SQLite loses nothing
    _contact_kinds(_KINDS_AFTER, _CHECK_0019, _CHECK)


def downgrade() -> None:
    op.execute("UPDATE host_contacts SET kind = 'other' WHERE kind = 'designated_agent'")
    _contact_kinds(_KINDS_BEFORE, _CHECK, _CHECK_0019)
    # DROP COLUMN in place (SQLite 3.35 and later), for the same reason as above
    for column in (
        "sent_timestamp",
        "relay_replied_at",
        "relay_reply",
        "sent_message_sha256",
        "sent_message",
    ):
        op.drop_column("notices", column)
    op.drop_column("notice_items", "copy_kind")
    for column in ("basis", "fair_use_considered", "copy_kind"):
        op.drop_column("review_decisions", column)
