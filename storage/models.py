"""The schema: SQLAlchemy 2 typed models with named constraints and indexes.

Offsets (``Chapter.start``/``end``, match spans) are character offsets into the original texts stored in
``Work.text`` and ``Page.text``: evidence shown to a person always points at what was registered or fetched.

64-bit fingerprints are stored in signed BIGINT columns (see :func:`storage.index.to_signed64`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

__all__ = [
    "Base",
    "Chapter",
    "CodeIndexRow",
    "Fingerprint",
    "Match",
    "Page",
    "SimhashIndexRow",
    "Work",
    "utcnow",
]

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only knows INTEGER PRIMARY KEY as an auto-incrementing rowid.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Work(Base):
    """A registered text (a novel, an article) that rights holders want tracked."""

    __tablename__ = "works"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    title: Mapped[str] = mapped_column(String(500))
    source_name: Mapped[str] = mapped_column(String(1000), default="")
    encoding: Mapped[str] = mapped_column(String(40), default="utf-8")
    content_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    chapters: Mapped[list[Chapter]] = relationship(
        back_populates="work", cascade="all, delete-orphan", passive_deletes=True, order_by="Chapter.index"
    )


class Chapter(Base):
    """A chapter of a work: ``Work.text[start:end]``."""

    __tablename__ = "chapters"
    __table_args__ = (UniqueConstraint("work_id", "index"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    work_id: Mapped[int] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(String(500))
    start: Mapped[int] = mapped_column(Integer)
    end: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)

    work: Mapped[Work] = relationship(back_populates="chapters")


class Page(Base):
    """A fetched web page and the main text extracted from it."""

    __tablename__ = "pages"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    url: Mapped[str] = mapped_column(String(2048), unique=True)
    final_url: Mapped[str] = mapped_column(String(2048))
    host: Mapped[str] = mapped_column(String(255), index=True, default="")
    status: Mapped[int] = mapped_column(SmallInteger)
    encoding: Mapped[str] = mapped_column(String(40), default="")
    title: Mapped[str] = mapped_column(Text, default="")
    text: Mapped[str] = mapped_column(Text, default="")
    content_sha256: Mapped[str] = mapped_column(String(64), index=True, default="")
    snapshot_sha256: Mapped[str] = mapped_column(String(64), default="")
    fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Fingerprint(Base):
    """One fingerprint of one chapter or page.

    ``kind`` names the algorithm and its parameters (``simhash64``, ``dna``...). Scalar fingerprints use
    ``value``; vector fingerprints (DNA codes, winnowing hashes) use ``payload`` (little-endian uint64s).
    """

    __tablename__ = "fingerprints"
    __table_args__ = (
        CheckConstraint("(chapter_id IS NULL) <> (page_id IS NULL)", name="one_owner"),
        UniqueConstraint("chapter_id", "kind"),
        UniqueConstraint("page_id", "kind"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    chapter_id: Mapped[int | None] = mapped_column(ForeignKey("chapters.id", ondelete="CASCADE"))
    page_id: Mapped[int | None] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(40))
    value: Mapped[int | None] = mapped_column(BigInteger)
    payload: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SimhashIndexRow(Base):
    """A row of the permuted-prefix index (Manku et al. 2007): one per (fingerprint, table)."""

    __tablename__ = "simhash_index"
    __table_args__ = (Index("ix_simhash_index_table_prefix", "table_no", "prefix"),)

    fingerprint_id: Mapped[int] = mapped_column(
        ForeignKey("fingerprints.id", ondelete="CASCADE"), primary_key=True
    )
    table_no: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    prefix: Mapped[int] = mapped_column(BigInteger)
    fingerprint: Mapped[int] = mapped_column(BigInteger)


class CodeIndexRow(Base):
    """Exact-match index of vector fingerprints: code -> (fingerprint, position)."""

    __tablename__ = "code_index"
    __table_args__ = (Index("ix_code_index_kind_code", "kind", "code"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    fingerprint_id: Mapped[int] = mapped_column(
        ForeignKey("fingerprints.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(String(40))
    code: Mapped[int] = mapped_column(BigInteger)
    position: Mapped[int] = mapped_column(Integer)


class Match(Base):
    """A page found to copy (part of) a chapter of a registered work."""

    __tablename__ = "matches"
    __table_args__ = (UniqueConstraint("page_id", "chapter_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    page_id: Mapped[int] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"), index=True)
    work_id: Mapped[int] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"), index=True)
    chapter_id: Mapped[int] = mapped_column(ForeignKey("chapters.id", ondelete="CASCADE"))
    score: Mapped[float] = mapped_column(Float)
    methods: Mapped[list[Any]] = mapped_column(JSON, default=list)
    spans: Mapped[list[Any]] = mapped_column(JSON, default=list)
    status: Mapped[str] = mapped_column(String(20), default="flagged")
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    page: Mapped[Page] = relationship()
    work: Mapped[Work] = relationship()
    chapter: Mapped[Chapter] = relationship()
