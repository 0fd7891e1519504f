"""a page-side index sized for its one job: a crawled page keeps one ``page_codes`` row (its winnowing hashes
for site templates, and a sample of its codes for newly registered works to look up) instead of ~1,000
``code_index`` rows and its (code, position) payloads

Upgrade: ``page_codes`` is created (on PostgreSQL with the GIN index on ``sample``), filled from the stored
page payloads in batches of pages by id, then the page-side ``code_index`` rows and the page payload rows are
deleted. Each row is computed here by a frozen copy of the writer as it stood when this revision was last
changed (``storage.fingerprints.page_code_row``: 32-bit template keys after a marker byte, the sample at a
window of 64 k-grams, four times that for the pinyin initials) and records its window (``sample_window``); the
product reads every row by the window it records, so a deployment configured for another window takes its
own on the pages it stores from then on. Only derived data goes: pages, their versions, matches, reviews,
takedowns and chapter fingerprints are not touched, and a page's Simhash row (written by older releases)
stays. PostgreSQL gives the space back to the system on a ``VACUUM FULL code_index, fingerprints`` (an
exclusive lock: run it when the crawl can pause); a plain VACUUM makes it reusable.

Downgrade: the payloads and index rows need positions, which ``page_codes`` does not keep, and fingerprints
made with the product's fingerprint contract of the day would not be the earlier release's. So nothing is
fingerprinted here: ``page_codes`` is dropped and the pages it held are marked not fingerprinted and not
compared, and every work not indexed, so that the earlier release fingerprints, indexes and compares them
again with its own contract (its sweep picks up such pages and works, as after revision 0013).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25 19:00:00
"""

import numpy as np
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
BATCH = 500  # pages per batch
PAGE_OWNER = 1  # storage.models.CODE_OWNER_PAGE
SAMPLE_TYPE = postgresql.ARRAY(sa.BigInteger()).with_variant(sa.LargeBinary(), "sqlite")


# The page side's row as the writer made it when this revision was last changed (storage.fingerprints)
SAMPLE_WINDOW = 64  # k-grams per window of a page's sample
TEMPLATE_KIND = "winnow"  # the kind whose codes a page keeps for its site's template
TEMPLATE_KEY_SHIFT = 32  # a template key: the high 32 bits of a winnowing hash
KEYS32 = 0x20  # the first byte of a ``winnow`` value holding 32-bit template keys
INITIALS_KIND = "winnow_py"
INITIALS_WINDOW_FACTOR = 4  # the initials' codes are sampled at this many times the window


def page_sample(array: np.ndarray, window: int) -> np.ndarray:
    """The minimum code of every window of ``window`` consecutive k-gram positions, sorted and distinct, from
    the winnowing-selected ``(code, position)`` pairs ``array`` ((n, 2) int64, codes signed). Windows run
    from position 0 to the last selected position; a window holding no selected pair contributes nothing."""
    pairs = np.asarray(array, dtype=np.int64).reshape(-1, 2)
    if not len(pairs):
        return np.empty(0, dtype=np.int64)
    positions = pairs[:, 1]
    order = np.lexsort((pairs[:, 0], positions))
    positions, codes = positions[order], pairs[order, 0]
    last = int(positions[-1])
    # the pairs a window holds change only where a position enters or leaves it: the windows starting there
    # (and at 0) are every distinct window
    bounds = np.concatenate(([0], positions - (window - 1), positions + 1))
    bounds = bounds[(bounds >= 0) & (bounds <= last)]
    first = np.searchsorted(positions, bounds, side="left")
    end = np.searchsorted(positions, bounds + window, side="left")
    filled = end > first
    # range minima by a sparse table over the sorted codes, each window as two overlapping spans
    levels = [codes]
    span = 1
    while span * 2 <= len(codes):
        previous = levels[-1]
        levels.append(np.minimum(previous[: len(previous) - span], previous[span:]))
        span *= 2
    starts, stops = first[filled], end[filled]
    level = np.floor(np.log2(stops - starts)).astype(np.int64)
    minima = np.empty(len(starts), dtype=np.int64)
    for number in np.unique(level).tolist():
        at = level == number
        table = levels[number]
        minima[at] = np.minimum(table[starts[at]], table[stops[at] - (1 << number)])
    return np.unique(minima)


def page_code_row(page_id: int, arrays: dict[str, np.ndarray], *, postgres: bool) -> dict[str, object]:
    """The ``page_codes`` row of a page whose vectors (kind -> (n, 2) signed (code, position) arrays) are
    ``arrays``: the distinct template keys of its :data:`TEMPLATE_KIND` codes (:data:`KEYS32`, then
    little-endian int32) and the union of every kind's :func:`page_sample` (``bigint[]`` on PostgreSQL,
    little-endian bytes elsewhere)."""
    template = arrays.get(TEMPLATE_KIND)
    keys = (
        np.unique(np.asarray(template[:, 0], dtype=np.int64) >> TEMPLATE_KEY_SHIFT)
        if template is not None
        else np.empty(0, dtype=np.int64)
    )
    samples = [
        page_sample(array, SAMPLE_WINDOW * (INITIALS_WINDOW_FACTOR if kind == INITIALS_KIND else 1))
        for kind, array in arrays.items()
    ]
    sample = np.unique(np.concatenate(samples)) if samples else np.empty(0, dtype=np.int64)
    return {
        "page_id": page_id,
        "sample_window": SAMPLE_WINDOW,
        "winnow": bytes((KEYS32,)) + keys.astype("<i4").tobytes(),
        "sample": sample.tolist() if postgres else sample.astype("<i8").tobytes(),
    }


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
            [page_code_row(page_id, arrays[page_id], postgres=postgres) for page_id in ids],
        )
        last = ids[-1]
    # the page side of the code index, then the payload rows (whose delete trigger finds no code rows left)
    connection.execute(sa.text(f"DELETE FROM code_index WHERE owner = {PAGE_OWNER}"))
    connection.execute(sa.text("DELETE FROM fingerprints WHERE page_id IS NOT NULL AND payload IS NOT NULL"))


def downgrade() -> None:
    connection = op.get_bind()
    # handed to the earlier release's sweep: it fingerprints, indexes and compares these with its own code
    connection.execute(
        sa.text(
            "UPDATE pages SET fingerprinted_at = NULL, compared_at = NULL "
            "WHERE id IN (SELECT page_id FROM page_codes)"
        )
    )
    connection.execute(sa.text("UPDATE works SET indexed_at = NULL"))
    if connection.dialect.name == "postgresql":
        op.drop_index("ix_page_codes_sample", table_name="page_codes")
    op.drop_table("page_codes")
