"""rights data per work: a work's author, rights owner (name, address, email, telephone), registration
number and authorised original URL; a sender's kind (person or company), role (the owner or its agent),
unified social credit code and legal representative; typed proofs (``rights_proofs``) attached to a work or a
sender, which take over ``sender_proofs`` row for row (same ids, same bytes, kind ``other``: a proof filed for
a sender names no work, so it is not taken as any work's certificate until a person says which); notice items
remember their work

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-29 16:05:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# as in storage/models.py at this revision (a migration never imports the models: they move on)
PROOF_KINDS = ("ownership_certificate", "authorisation", "identity", "other")

_COLUMNS = {
    "works": (
        ("author", sa.String(300)),
        ("owner_name", sa.String(300)),
        ("owner_address", sa.Text()),
        ("owner_email", sa.String(320)),
        ("owner_phone", sa.String(100)),
        ("registration_number", sa.String(100)),
        ("original_url", sa.String(2048)),
    ),
    "senders": (
        ("credit_code", sa.String(50)),
        ("legal_representative", sa.String(300)),
    ),
}


def _postgres() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def upgrade() -> None:
    # plain ADD COLUMN everywhere (a batch copy on SQLite would drop and recreate ``senders``, and with
    # foreign keys on, dropping it would cascade to its proofs); the senders' kind and role are checked by
    # jobs.notices.save_sender, as a CHECK cannot be added to an existing SQLite table without that copy
    for table, columns in _COLUMNS.items():
        for name, type_ in columns:
            op.add_column(table, sa.Column(name, type_, nullable=False, server_default=""))
    op.add_column("senders", sa.Column("kind", sa.String(10), nullable=False, server_default="company"))
    op.add_column("senders", sa.Column("role", sa.String(10), nullable=False, server_default="owner"))
    # a sender that named another rights owner acted for it
    op.execute("UPDATE senders SET role = 'agent' WHERE rights_owner <> '' AND rights_owner <> name")
    # which work an item names (a plain column, as matches.evidence_version_id: SQLite cannot add a foreign
    # key to an existing table); items drafted before take their match's work
    op.add_column("notice_items", sa.Column("work_id", sa.BigInteger(), nullable=True))
    op.execute(
        "UPDATE notice_items SET work_id = (SELECT matches.work_id FROM matches "
        "WHERE matches.id = notice_items.match_id) WHERE match_id IS NOT NULL"
    )
    op.create_table(
        "rights_proofs",
        sa.Column("id", BigId, nullable=False),
        sa.Column("kind", sa.String(30), nullable=False),
        sa.Column("work_id", BigId, nullable=True),
        sa.Column("sender_id", BigId, nullable=True),
        sa.Column("filename", sa.String(300), nullable=False),
        sa.Column("media_type", sa.String(100), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "kind IN (" + ", ".join(f"'{k}'" for k in PROOF_KINDS) + ")", name="ck_rights_proofs_known_kind"
        ),
        sa.CheckConstraint(
            "work_id IS NOT NULL OR sender_id IS NOT NULL", name="ck_rights_proofs_work_or_sender"
        ),
        sa.ForeignKeyConstraint(
            ["work_id"], ["works.id"], name="fk_rights_proofs_work_id_works", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["sender_id"], ["senders.id"], name="fk_rights_proofs_sender_id_senders", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_rights_proofs"),
    )
    op.create_index("ix_rights_proofs_work_id", "rights_proofs", ["work_id"])
    op.create_index("ix_rights_proofs_sender_id", "rights_proofs", ["sender_id"])
    op.execute(
        "INSERT INTO rights_proofs (id, kind, work_id, sender_id, filename, media_type, sha256, content, "
        "created_at) SELECT id, 'other', NULL, sender_id, filename, media_type, sha256, content, created_at "
        "FROM sender_proofs"
    )
    if _postgres():
        op.execute(
            "SELECT setval(pg_get_serial_sequence('rights_proofs', 'id'), "
            "coalesce((SELECT max(id) FROM rights_proofs), 0) + 1, false)"
        )
    op.drop_table("sender_proofs")


def downgrade() -> None:
    bind = op.get_bind()
    kept = bind.execute(sa.text("SELECT count(*) FROM rights_proofs WHERE sender_id IS NULL")).scalar()
    if kept:
        raise RuntimeError(
            f"{kept} proof(s) belong to a work only: revision 0026 has nowhere to keep them (nothing removed)"
        )
    op.create_table(
        "sender_proofs",
        sa.Column("id", BigId, nullable=False),
        sa.Column("sender_id", BigId, nullable=False),
        sa.Column("filename", sa.String(300), nullable=False),
        sa.Column("media_type", sa.String(100), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["sender_id"], ["senders.id"], name="fk_sender_proofs_sender_id_senders", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_sender_proofs"),
        sa.UniqueConstraint("sender_id", "sha256", name="uq_sender_proofs_sender_id_sha256"),
    )
    # one row per (sender, file): the same file filed as two kinds comes back once
    op.execute(
        "INSERT INTO sender_proofs (id, sender_id, filename, media_type, sha256, content, created_at) "
        "SELECT id, sender_id, filename, media_type, sha256, content, created_at FROM rights_proofs p "
        "WHERE id = (SELECT min(q.id) FROM rights_proofs q WHERE q.sender_id = p.sender_id "
        "AND q.sha256 = p.sha256)"
    )
    if _postgres():
        op.execute(
            "SELECT setval(pg_get_serial_sequence('sender_proofs', 'id'), "
            "coalesce((SELECT max(id) FROM sender_proofs), 0) + 1, false)"
        )
    op.drop_table("rights_proofs")
    op.drop_column("notice_items", "work_id")
    for name in ("role", "kind"):
        op.drop_column("senders", name)
    for table, columns in reversed(list(_COLUMNS.items())):
        for name, _type in reversed(columns):
            op.drop_column(table, name)
