"""pirate networks and discovered candidate sites: near-duplicate pages of different sites, the site pairs
they make, the hosts a site links to, and the candidate sites discovery proposes

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-25 19:15:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# as in storage/models.py at this revision (a migration never imports the models: they move on)
SOURCES = ("link", "search", "network")
STATES = ("new", "probed", "clean", "failed", "accepted", "rejected", "licensed")
OUTBOUND_KINDS = ("link", "mirror", "redirect")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def _when(name: str, nullable: bool = False) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _site_fk(column: str, table: str, ondelete: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], ["sites.id"], name=f"fk_{table}_{column}_sites", ondelete=ondelete
    )


def upgrade() -> None:
    op.create_table(
        "near_duplicates",
        sa.Column("page_id", BigId, nullable=False),
        sa.Column("earlier_page_id", BigId, nullable=False),
        sa.Column("distance", sa.SmallInteger(), nullable=False),
        _when("found_at"),
        sa.ForeignKeyConstraint(
            ["page_id"], ["pages.id"], name="fk_near_duplicates_page_id_pages", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["earlier_page_id"],
            ["pages.id"],
            name="fk_near_duplicates_earlier_page_id_pages",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("page_id", "earlier_page_id", name="pk_near_duplicates"),
    )
    op.create_index("ix_near_duplicates_earlier_page_id", "near_duplicates", ["earlier_page_id"])
    op.create_table(
        "site_pairs",
        sa.Column("site_a", BigId, nullable=False),
        sa.Column("site_b", BigId, nullable=False),
        sa.Column("shared_pages", sa.Integer(), nullable=False),
        sa.Column("close_pages", sa.Integer(), nullable=False),
        sa.Column("a_first", sa.Integer(), nullable=False),
        sa.Column("b_first", sa.Integer(), nullable=False),
        _when("first_seen"),
        _when("updated_at"),
        sa.CheckConstraint("site_a < site_b", name="ck_site_pairs_ordered"),
        _site_fk("site_a", "site_pairs", "CASCADE"),
        _site_fk("site_b", "site_pairs", "CASCADE"),
        sa.PrimaryKeyConstraint("site_a", "site_b", name="pk_site_pairs"),
    )
    op.create_index("ix_site_pairs_site_b", "site_pairs", ["site_b"])
    op.create_table(
        "site_outbound_hosts",
        sa.Column("site_id", BigId, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("links", sa.Integer(), nullable=False),
        sa.Column("example_url", sa.String(2048), nullable=False),
        _when("first_seen"),
        _when("last_seen"),
        sa.CheckConstraint(_one_of("kind", OUTBOUND_KINDS), name="ck_site_outbound_hosts_known_kind"),
        _site_fk("site_id", "site_outbound_hosts", "CASCADE"),
        sa.PrimaryKeyConstraint("site_id", "host", name="pk_site_outbound_hosts"),
    )
    op.create_table(
        "discovery_candidates",
        sa.Column("id", BigId, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("source", sa.String(10), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("via_site_id", BigId, nullable=True),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("copies", sa.Integer(), nullable=False),
        sa.Column("pages_probed", sa.Integer(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("works", sa.JSON(), nullable=False),
        sa.Column("mirror_of_site_id", BigId, nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("site_id", BigId, nullable=True),
        _when("created_at"),
        _when("probed_at", nullable=True),
        _when("decided_at", nullable=True),
        sa.Column("decided_by", sa.String(200), nullable=False),
        sa.CheckConstraint(_one_of("state", STATES), name="ck_discovery_candidates_known_state"),
        sa.CheckConstraint(_one_of("source", SOURCES), name="ck_discovery_candidates_known_source"),
        _site_fk("via_site_id", "discovery_candidates", "SET NULL"),
        _site_fk("mirror_of_site_id", "discovery_candidates", "SET NULL"),
        _site_fk("site_id", "discovery_candidates", "SET NULL"),
        sa.PrimaryKeyConstraint("id", name="pk_discovery_candidates"),
        sa.UniqueConstraint("host", name="uq_discovery_candidates_host"),
    )
    op.create_index("ix_discovery_candidates_state", "discovery_candidates", ["state"])


def downgrade() -> None:
    op.drop_index("ix_discovery_candidates_state", table_name="discovery_candidates")
    op.drop_table("discovery_candidates")
    op.drop_table("site_outbound_hosts")
    op.drop_index("ix_site_pairs_site_b", table_name="site_pairs")
    op.drop_table("site_pairs")
    op.drop_index("ix_near_duplicates_earlier_page_id", table_name="near_duplicates")
    op.drop_table("near_duplicates")
