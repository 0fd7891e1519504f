"""the entity index at scale (issue 36, ``compare.entities``): ``entity_terms`` holds every term's chapter
count (the idf's document frequency) and ``entity_stamp`` one row with a serial and the indexed chapters'
count, so a page's candidates read only the rows of its own terms and one stamp row, never a GROUP BY over
every posting (~96 million rows at 100,000 chapters) nor a count over ``entity_chapters``.

``compare.entities.index_chapters`` adds what it inserts; a delete (a chapter indexed again, a work removed:
``ON DELETE CASCADE``) takes its rows off by triggers: ``entity_postings`` -> ``entity_terms.chapters``,
``entity_chapters`` -> the stamp (serial one more, chapters fewer). Both tables are filled from the rows
already there; the downgrade drops the triggers and the two tables alone.

Revision ID: 0036
Revises: 0035
Create Date: 2026-11-30 00:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None

POSTGRESQL_UP = [
    """
CREATE OR REPLACE FUNCTION fptrack_entity_postings_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE entity_terms t SET chapters = t.chapters - d.n
    FROM (SELECT term, count(*) AS n FROM gone GROUP BY term) d
    WHERE t.term = d.term;
    RETURN NULL;
END $$
""",
    """
CREATE TRIGGER entity_postings_delete AFTER DELETE ON entity_postings
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION fptrack_entity_postings_delete()
""",
    """
CREATE OR REPLACE FUNCTION fptrack_entity_chapters_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n FROM gone;
    IF n > 0 THEN
        UPDATE entity_stamp SET serial = serial + 1, chapters = chapters - n WHERE id = 1;
    END IF;
    RETURN NULL;
END $$
""",
    """
CREATE TRIGGER entity_chapters_delete AFTER DELETE ON entity_chapters
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION fptrack_entity_chapters_delete()
""",
]
POSTGRESQL_DOWN = [
    "DROP TRIGGER IF EXISTS entity_chapters_delete ON entity_chapters",
    "DROP TRIGGER IF EXISTS entity_postings_delete ON entity_postings",
    "DROP FUNCTION IF EXISTS fptrack_entity_chapters_delete()",
    "DROP FUNCTION IF EXISTS fptrack_entity_postings_delete()",
]
SQLITE_UP = [
    """
CREATE TRIGGER entity_postings_delete AFTER DELETE ON entity_postings FOR EACH ROW BEGIN
    UPDATE entity_terms SET chapters = chapters - 1 WHERE term = OLD.term;
END
""",
    """
CREATE TRIGGER entity_chapters_delete AFTER DELETE ON entity_chapters FOR EACH ROW BEGIN
    UPDATE entity_stamp SET serial = serial + 1, chapters = chapters - 1 WHERE id = 1;
END
""",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS entity_chapters_delete",
    "DROP TRIGGER IF EXISTS entity_postings_delete",
]


def upgrade() -> None:
    op.create_table(
        "entity_terms",
        sa.Column("term", sa.String(64), nullable=False),
        sa.Column("chapters", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("term", name="pk_entity_terms"),
    )
    op.create_table(
        "entity_stamp",
        sa.Column("id", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("serial", sa.BigInteger(), nullable=False),
        sa.Column("chapters", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_entity_stamp"),
    )
    op.execute(
        "INSERT INTO entity_terms (term, chapters) SELECT term, count(*) FROM entity_postings GROUP BY term"
    )
    op.execute("INSERT INTO entity_stamp (id, serial, chapters) SELECT 1, 0, count(*) FROM entity_chapters")
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in POSTGRESQL_UP if postgres else SQLITE_UP:
        op.execute(statement)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in POSTGRESQL_DOWN if postgres else SQLITE_DOWN:
        op.execute(statement)
    op.drop_table("entity_stamp")
    op.drop_table("entity_terms")
