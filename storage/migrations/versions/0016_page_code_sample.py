"""a page-side index sized for its one job (issue 20): a crawled page keeps one ``page_codes`` row (its
distinct winnowing hashes for site templates, and a sample of its codes for newly registered works to look up)
instead of ~1,000 ``code_index`` rows and its (code, position) payloads

Upgrade: ``page_codes`` is created (on PostgreSQL with the GIN index on ``sample``), filled from the stored
page payloads in batches of pages by id (``storage.fingerprints.page_code_row``, the writer's own function,
with ``FPTRACK_PAGE_SAMPLE_WINDOW`` or its default), then the page-side ``code_index`` rows and the page
payload rows are deleted. Only derived data goes: pages, their versions, matches, reviews, takedowns and
chapter fingerprints are not touched, and a page's Simhash row (written by releases before issue 13) stays.
PostgreSQL gives the space back to the system on a ``VACUUM FULL code_index, fingerprints`` (an exclusive
lock: run it when the crawl can pause); a plain VACUUM makes it reusable.

Downgrade: the payloads and index rows need positions, which ``page_codes`` does not keep: every page that has
a ``page_codes`` row is fingerprinted again from its stored text (``fingerprint.pipeline.fingerprint_text``,
the same contract) and its payload and code index rows written as the earlier release wrote them; then
``page_codes`` is dropped.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25 19:00:00
"""

import os

import numpy as np
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from fptrack.storage.fingerprints import DEFAULT_SAMPLE_WINDOW, page_code_row

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
BATCH = 500  # pages per batch
PAGE_OWNER = 1  # storage.models.CODE_OWNER_PAGE
SAMPLE_TYPE = postgresql.ARRAY(sa.BigInteger()).with_variant(sa.LargeBinary(), "sqlite")


def _window() -> int:
    return int(os.environ.get("FPTRACK_PAGE_SAMPLE_WINDOW") or DEFAULT_SAMPLE_WINDOW)


def upgrade() -> None:
    connection = op.get_bind()
    postgres = connection.dialect.name == "postgresql"
    op.create_table(
        "page_codes",
        sa.Column("page_id", BigId, nullable=False),
        sa.Column("sample_window", sa.SmallInteger(), nullable=False),
        sa.Column("winnow", sa.LargeBinary(), nullable=False),
        sa.Column("sample", SAMPLE_TYPE, nullable=False),
        sa.ForeignKeyConstraint(
            ["page_id"], ["pages.id"], name="fk_page_codes_page_id_pages", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("page_id", name="pk_page_codes"),
    )
    if postgres:
        op.create_index(
            "ix_page_codes_sample",
            "page_codes",
            ["sample"],
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        )
    window = _window()
    pages = sa.text(
        "SELECT DISTINCT page_id FROM fingerprints WHERE page_id IS NOT NULL AND payload IS NOT NULL "
        f"AND page_id > :last ORDER BY page_id LIMIT {BATCH}"
    )
    payloads = sa.text(
        "SELECT page_id, kind, payload FROM fingerprints WHERE payload IS NOT NULL AND page_id IN :ids"
    ).bindparams(sa.bindparam("ids", expanding=True))
    table = sa.table(
        "page_codes",
        sa.column("page_id"),
        sa.column("sample_window"),
        sa.column("winnow"),
        sa.column("sample", postgresql.ARRAY(sa.BigInteger()) if postgres else sa.LargeBinary()),
    )
    last = -(2**63)
    while True:
        ids = [int(row[0]) for row in connection.execute(pages, {"last": last})]
        if not ids:
            break
        arrays: dict[int, dict[str, np.ndarray]] = {page_id: {} for page_id in ids}
        for page_id, kind, payload in connection.execute(payloads, {"ids": ids}):
            arrays[int(page_id)][str(kind)] = np.frombuffer(bytes(payload), dtype="<i8").reshape(-1, 2)
        connection.execute(
            sa.insert(table),
            [page_code_row(page_id, arrays[page_id], window, postgres=postgres) for page_id in ids],
        )
        last = ids[-1]
    # the page side of the code index, then the payload rows (whose delete trigger finds no code rows left)
    connection.execute(sa.text(f"DELETE FROM code_index WHERE owner = {PAGE_OWNER}"))
    connection.execute(sa.text("DELETE FROM fingerprints WHERE page_id IS NOT NULL AND payload IS NOT NULL"))


def downgrade() -> None:
    from fptrack.fingerprint.contract import CONTRACT
    from fptrack.fingerprint.pipeline import fingerprint_text
    from fptrack.storage.compressed import decompress_text

    connection = op.get_bind()
    pages = sa.text(
        "SELECT p.id, p.text_z FROM pages p JOIN page_codes c ON c.page_id = p.id WHERE p.id > :last "
        f"ORDER BY p.id LIMIT {BATCH}"
    )
    fingerprint = sa.text(
        "INSERT INTO fingerprints (page_id, kind, value, payload, created_at) "
        "VALUES (:page_id, :kind, NULL, :payload, CURRENT_TIMESTAMP) RETURNING id"
    )
    code_row = sa.text(
        "INSERT INTO code_index (fingerprint_id, position, kind, code, owner, owner_id) "
        f"VALUES (:fingerprint_id, :position, :kind, :code, {PAGE_OWNER}, :owner_id)"
    )
    last = -(2**63)
    while True:
        rows = connection.execute(pages, {"last": last}).all()
        if not rows:
            break
        index_rows = []
        for page_id, text_z in rows:
            document = fingerprint_text(decompress_text(text_z), CONTRACT)
            if not document.text:
                continue
            for kind, pairs in document.index_codes().items():
                array = np.array(pairs, dtype=np.int64).reshape(-1, 2)
                fingerprint_id = connection.execute(
                    fingerprint, {"page_id": page_id, "kind": kind, "payload": array.astype("<i8").tobytes()}
                ).scalar_one()
                index_rows += [
                    {"fingerprint_id": fingerprint_id, "position": position, "kind": kind, "code": code,
                     "owner_id": page_id}
                    for code, position in array.tolist()
                ]  # fmt: skip
        if index_rows:
            connection.execute(code_row, index_rows)
        last = rows[-1][0]
    if connection.dialect.name == "postgresql":
        op.drop_index("ix_page_codes_sample", table_name="page_codes")
    op.drop_table("page_codes")
