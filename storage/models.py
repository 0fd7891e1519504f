"""The schema: SQLAlchemy 2 typed models with named constraints and indexes.

Offsets (``Chapter.start``/``end``, match spans) are character offsets into the original texts stored in
``Work.text`` and ``Page.text``: evidence shown to a person always points at what was registered or fetched.

64-bit fingerprints are stored in signed BIGINT columns (see :func:`storage.index.to_signed64`).

The permuted-prefix index of Simhashes is not a table of copies: it is one expression b-tree per permuted
table on ``fingerprints.value`` itself (partial: ``kind = 'simhash64'``), keyed by the same bit gathering that
:class:`storage.index.IndexLayout` computes in Python. Deleting or replacing a fingerprint row therefore
cannot leave an index entry behind. Re-split overloaded buckets live in ``simhash_hot_index`` (rows, cascading
deletes). Every constraint and index has a name (``NAMING_CONVENTION`` or explicit), so migrations can address
it."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from enum import StrEnum
from importlib.resources import files
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
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
    event,
)
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import ARRAY as PG_ARRAY
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from fptrack.storage.compressed import CompressedText
from fptrack.storage.index import DEFAULT_LAYOUT, IndexLayout

__all__ = [
    "CANDIDATE_STATES",
    "CHECK_SOURCES",
    "CODE_OWNER_CHAPTER",
    "CODE_OWNER_PAGE",
    "CONTACT_KINDS",
    "COPY_KINDS",
    "CRAWL_JOB_STATUSES",
    "DISCOVERY_SOURCES",
    "MEANING_CHECK_STATES",
    "MEANING_GATE_REASONS",
    "NOTICE_EVENT_KINDS",
    "NOTICE_KINDS",
    "NOTICE_LANGUAGES",
    "NOTICE_STATES",
    "OUTBOUND_KINDS",
    "PAGE_SAMPLE_INDEX",
    "PROOF_KINDS",
    "REGISTRY_LOCK_KEY",
    "RELEASE_SOURCES",
    "RENDER_JS_MODES",
    "REVIEW_DECISIONS",
    "SENDER_KINDS",
    "SENDER_ROLES",
    "TAKEDOWN_DOWN_CHECK",
    "TAKEDOWN_OUTCOMES",
    "USER_ROLES",
    "ApiToken",
    "Base",
    "Blob",
    "CaptureStamp",
    "Chapter",
    "ChapterVectors",
    "CodeIndexRow",
    "CorpusStatistics",
    "CrawlJob",
    "CrawlJobStatus",
    "DiscoveryCandidate",
    "Fingerprint",
    "HostContact",
    "HostPacing",
    "LicensedSite",
    "LoginFailure",
    "Match",
    "MatchNote",
    "MatchRollup",
    "MatchStatus",
    "MeaningCheck",
    "MonitorLock",
    "NearDuplicate",
    "Notice",
    "NoticeEvent",
    "NoticeItem",
    "Page",
    "PageCodes",
    "PageExchange",
    "PageVersion",
    "RegistryVersion",
    "Release",
    "ReleaseFeed",
    "ReviewDecision",
    "RightsProof",
    "Sender",
    "SimhashHotBucket",
    "SimhashHotRow",
    "SimhashIndexRow",
    "Site",
    "SiteOutboundHost",
    "SitePair",
    "TakedownCheck",
    "User",
    "Work",
    "as_utc",
    "code_index_cascade_ddl",
    "iso_utc",
    "match_rollup_ddl",
    "registry_version_ddl",
    "simhash_index_ddl",
    "simhash_index_names",
    "utcnow",
]


class MatchStatus(StrEnum):
    """Where a match stands. ``flagged`` and ``licensed`` are the machine's verdicts (re-comparing a page may
    change or drop them); ``confirmed`` and ``dismissed`` are a reviewer's decisions, which always stand."""

    FLAGGED = "flagged"
    CONFIRMED = "confirmed"
    DISMISSED = "dismissed"
    LICENSED = "licensed"

    @classmethod
    def machine_made(cls) -> tuple[MatchStatus, ...]:
        """The statuses a comparison may overwrite or drop."""
        return (cls.FLAGGED, cls.LICENSED)


class CrawlJobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


CRAWL_JOB_STATUSES = tuple(s.value for s in CrawlJobStatus)
RENDER_JS_MODES = ("auto", "yes", "no")
# a re-check of a page with a flagged or confirmed match: the copy is still there, the page changed and no
# longer copies the chapter, the page is gone (404/410, no such host), or the check could not tell (refused,
# timeout, 5xx)
TAKEDOWN_OUTCOMES = ("present", "gone", "removed", "error")
# the checks that found a copy down (gone or removed), as SQL: the partial index's predicate, written the same
# in the queries that use it (a database uses a partial index only for a WHERE it can match)
TAKEDOWN_DOWN_CHECK = "outcome IN ('gone', 'removed')"
# what fetched the page of a takedown check: a crawl of its site, or the re-check of the copy
CHECK_SOURCES = ("crawl", "recheck")
REVIEW_DECISIONS = tuple(s.value for s in MatchStatus)

# code_index.owner: which side of the comparison a code belongs to
CODE_OWNER_CHAPTER = 0
CODE_OWNER_PAGE = 1
# Ordered from least to most privileged: each role can do what the ones before it can.
USER_ROLES = ("viewer", "reviewer", "admin")

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


def as_utc(moment: datetime) -> datetime:
    """A stored time as an aware UTC datetime: SQLite hands back naive datetimes, and every time fptrack
    stores is UTC, so say so on both backends."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def iso_utc(moment: datetime | None) -> str | None:
    """A stored time as JSON gives it: ISO 8601 in UTC to the second, or None."""
    return as_utc(moment).isoformat(timespec="seconds") if moment is not None else None


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


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
    # set when every chapter is fingerprinted and the pages crawled before were checked; a work registered and
    # never indexed (a lost task) is picked up again by the sweep
    indexed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # the rights in it, as a notice names them: its author, its owner (empty: the sender of a notice, when the
    # sender is the owner) with the address and contacts 第十四条（一） asks of 权利人, the number of its
    # registration certificate (作品登记证书号) and where the authorised original is published
    author: Mapped[str] = mapped_column(String(300), default="")
    owner_name: Mapped[str] = mapped_column(String(300), default="")
    owner_address: Mapped[str] = mapped_column(Text, default="")
    owner_email: Mapped[str] = mapped_column(String(320), default="")
    owner_phone: Mapped[str] = mapped_column(String(100), default="")
    registration_number: Mapped[str] = mapped_column(String(100), default="")
    original_url: Mapped[str] = mapped_column(String(2048), default="")

    chapters: Mapped[list[Chapter]] = relationship(
        back_populates="work", cascade="all, delete-orphan", passive_deletes=True, order_by="Chapter.index"
    )
    proofs: Mapped[list[RightsProof]] = relationship(
        back_populates="work", passive_deletes=True, order_by="RightsProof.id"
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
    # stored compressed, in column text_z (storage.compressed)
    text: Mapped[str] = mapped_column("text_z", CompressedText, key="text")

    work: Mapped[Work] = relationship(back_populates="chapters")


class Site(Base):
    """A site that pages are crawled from (pirate sites, aggregators...).

    ``host`` is the site key of :func:`storage.sites.site_of`: the lower-case host, plus the port when it is
    not the scheme's default (``127.0.0.1:8001`` and ``127.0.0.1:8002`` are two sites). ``settled_at``: when
    the site's templates were last decided from all its pages (:mod:`compare.templates`)."""

    __tablename__ = "sites"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    host: Mapped[str] = mapped_column(String(255), unique=True)
    name: Mapped[str] = mapped_column(String(500), default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_crawled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    settled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Monitoring settings (``fptrack sites``, jobs/sites.py); a row made by a plain crawl is not ``managed``.
    managed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sql_text("false"))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=sql_text("true"))
    start_urls: Mapped[list[Any]] = mapped_column(JSON, default=list, server_default=sql_text("'[]'"))
    allowed_hosts: Mapped[list[Any]] = mapped_column(JSON, default=list, server_default=sql_text("'[]'"))
    depth: Mapped[int] = mapped_column(Integer, default=2, server_default="2")
    max_pages: Mapped[int] = mapped_column(Integer, default=200, server_default="200")
    include_patterns: Mapped[list[Any]] = mapped_column(JSON, default=list, server_default=sql_text("'[]'"))
    exclude_patterns: Mapped[list[Any]] = mapped_column(JSON, default=list, server_default=sql_text("'[]'"))
    schedule: Mapped[str] = mapped_column(String(100), default="", server_default="")
    delay: Mapped[float | None] = mapped_column(Float)
    concurrency: Mapped[int | None] = mapped_column(Integer)
    obey_robots: Mapped[bool] = mapped_column(Boolean, default=True, server_default=sql_text("true"))
    render_js: Mapped[str] = mapped_column(String(8), default="auto", server_default="auto")
    allow_private: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sql_text("false"))
    # its crawls share one frontier in Redis, so several processes and machines can crawl it
    # (crawler/distributed.py)
    distributed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sql_text("false"))
    next_crawl_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # requests per second at most to the site, from everything that fetches from it (crawls, re-checks,
    # rendering); NULL: FPTRACK_SITE_RATE (storage/pacing.py)
    rate: Mapped[float | None] = mapped_column(Float)
    # scheduled crawls in a row that found nothing new or changed: a quiet site is visited less often, up to
    # FPTRACK_SCHEDULE_BACKOFF_MAX times its schedule (jobs/sites.py)
    quiet_crawls: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # learned by its crawls: its chapter pages are built by scripts, so a crawl (a new process each time)
    # requests them through the browser at once instead of plainly first; unlearned when pages read that way
    # turn out to carry their text without it (crawler/render.py)
    render_direct: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sql_text("false"))
    # the template its last settling decided (winnowing hashes, little-endian int64, sorted; NULL: not
    # decided since revision 0022): compare.templates reads it instead of every page's hashes when the site
    # has not changed since
    template_codes: Mapped[bytes | None] = mapped_column(LargeBinary)


class CrawlJob(Base):
    """One run of the crawler: where it started, its limits, and how it went."""

    __tablename__ = "crawl_jobs"
    __table_args__ = (
        CheckConstraint(
            "status IN (" + ", ".join(f"'{s}'" for s in CRAWL_JOB_STATUSES) + ")", name="known_status"
        ),
        Index("ix_crawl_jobs_started_at", "started_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    site_id: Mapped[int | None] = mapped_column(ForeignKey("sites.id", ondelete="SET NULL"), index=True)
    start_urls: Mapped[list[Any]] = mapped_column(JSON, default=list)
    depth: Mapped[int] = mapped_column(Integer, default=0)
    max_pages: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(20), default="queued")
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pages_seen: Mapped[int] = mapped_column(Integer, default=0)
    pages_failed: Mapped[int] = mapped_column(Integer, default=0)
    pages_stored: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    pages_unchanged: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    copies_found: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    error: Mapped[str] = mapped_column(Text, default="")
    # what started it (cli, site, schedule) and what it counted: pages by status, failures with their reasons
    # (private-address refusals, robots.txt...), the crawler's counters
    trigger: Mapped[str] = mapped_column(String(20), default="cli", server_default="cli")
    stats: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Page(Base):
    """A fetched web page and the main text extracted from it."""

    __tablename__ = "pages"
    __table_args__ = (
        Index("ix_pages_fetched_at", "fetched_at"),
        # the few pages answering "gone", for retention (storage.housekeeping.retire_page_fingerprints)
        Index(
            "ix_pages_gone_since",
            "gone_since",
            postgresql_where=sql_text("gone_since IS NOT NULL"),
            sqlite_where=sql_text("gone_since IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    url: Mapped[str] = mapped_column(String(2048), unique=True)
    final_url: Mapped[str] = mapped_column(String(2048))
    host: Mapped[str] = mapped_column(String(255), index=True, default="")
    status: Mapped[int] = mapped_column(SmallInteger)
    encoding: Mapped[str] = mapped_column(String(40), default="")
    title: Mapped[str] = mapped_column(Text, default="")
    # stored compressed, in column text_z (storage.compressed): SQL can only tell whether it is empty
    text: Mapped[str] = mapped_column("text_z", CompressedText, key="text", default="")
    content_sha256: Mapped[str] = mapped_column(String(64), index=True, default="")
    snapshot_sha256: Mapped[str] = mapped_column(String(64), default="")
    fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    site_id: Mapped[int | None] = mapped_column(ForeignKey("sites.id", ondelete="SET NULL"), index=True)
    crawl_job_id: Mapped[int | None] = mapped_column(
        ForeignKey("crawl_jobs.id", ondelete="SET NULL"), index=True
    )
    content_type: Mapped[str] = mapped_column(String(200), default="", server_default="")
    error: Mapped[str] = mapped_column(Text, default="", server_default="")
    # what the crawler cut or repaired (text over FPTRACK_MAX_PAGE_CHARS, links over the cap, nesting
    # flattened)
    note: Mapped[str] = mapped_column(Text, default="", server_default="")
    # validators of the last 200 response, sent back on the next crawl (If-None-Match / If-Modified-Since)
    etag: Mapped[str] = mapped_column(String(300), default="", server_default="")
    last_modified: Mapped[str] = mapped_column(String(100), default="", server_default="")
    fingerprinted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # since when every fetch has answered gone (404, 410, 451); NULL while it answers anything else. Not
    # ``fetched_at``, which each re-fetch of the 404 moves: retention counts from here (revision 0024)
    gone_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # How far the page got: stored (compared_at NULL) -> fingerprinted -> compared. A page left uncompared
    # longer than FPTRACK_SWEEP_AFTER is handed on again by the sweep (jobs.sweep.sweep_left_behind, run by
    # fptrack maintain, Celery beat and a crawl waiting on its pages).
    compared_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # the page's verdicts were decided with its site's template masked (compare.templates)
    template_masked: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sql_text("false"))
    # the registry's serial (RegistryVersion.serial) the page's verdicts were compared at
    registry_serial: Mapped[int | None] = mapped_column(BigInteger)
    # a chapter split over pages: the URL of this page's next part ("下一页"), '' when none
    # (compare.multipage)
    next_part_url: Mapped[str] = mapped_column(String(2048), default="", server_default="")
    # a page that lists other pages (an entry page, a table of contents, a feed) rather than holding a text of
    # its own: re-crawls fetch it again to find new links, while known pages that are not listings are fetched
    # again only by the re-check cadence (crawler/spiders.py)
    listing: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sql_text("false"))

    site: Mapped[Site | None] = relationship()


class PageVersion(Base):
    """An earlier content of a page that a match rests on, kept when a later fetch brought other content (a
    removal notice, a 404, an edited text): the evidence of the copy is never overwritten. A match whose
    ``evidence_version_id`` names a version reads its spans against the version's text; NULL means the page's
    current text (storage/match_life.py)."""

    __tablename__ = "page_versions"
    __table_args__ = (UniqueConstraint("page_id", "content_sha256"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    page_id: Mapped[int] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"), index=True)
    status: Mapped[int] = mapped_column(SmallInteger)
    final_url: Mapped[str] = mapped_column(String(2048), default="")
    title: Mapped[str] = mapped_column(Text, default="")
    # compressed, as Page.text
    text: Mapped[str] = mapped_column("text_z", CompressedText, key="text", default="")
    content_sha256: Mapped[str] = mapped_column(String(64), default="")
    snapshot_sha256: Mapped[str] = mapped_column(String(64), default="")
    encoding: Mapped[str] = mapped_column(String(40), default="")
    fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # when the next fetch replaced it on the page
    replaced_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class HostPacing(Base):
    """The shared pace of requests to one site (``host`` is the site key of :func:`storage.sites.site_of`):
    every process that fetches from it (crawls, re-checks, rendering) takes its turn here, so together they
    keep the site's rate, and a ``Retry-After`` it sent holds them all back (storage/pacing.py). Times are
    Unix seconds (floats): one arithmetic for PostgreSQL and SQLite."""

    __tablename__ = "host_pacing"

    host: Mapped[str] = mapped_column(String(255), primary_key=True)
    # the earliest start of the next request
    next_at: Mapped[float] = mapped_column(Float, default=0.0)
    # seconds between two requests now: 1 / rate, raised while the site asks to slow down
    interval: Mapped[float] = mapped_column(Float, default=1.0)
    # nothing is sent before this (a 429 or 503 with Retry-After); 0 when not blocked
    blocked_until: Mapped[float] = mapped_column(Float, default=0.0)
    requests: Mapped[int] = mapped_column(BigInteger, default=0)
    updated_at: Mapped[float] = mapped_column(Float, default=0.0)


def simhash_index_names(layout: IndexLayout) -> list[str]:
    """Names of the expression indexes that serve ``layout``'s permuted tables."""
    return [f"ix_fingerprints_{layout.name}_t{t}" for t in range(layout.table_count)]


def _simhash_indexes(layout: IndexLayout) -> list[Index]:
    predicate = sql_text(f"kind = '{layout.kind}'")
    return [
        Index(
            name,
            sql_text(layout.key_sql(t, "value")),
            "value",
            postgresql_include=["id"],
            postgresql_where=predicate,
            sqlite_where=predicate,
        )
        for t, name in enumerate(simhash_index_names(layout))
    ]


def simhash_index_ddl(layout: IndexLayout, dialect: str) -> list[tuple[str, str]]:
    """(index name, CREATE INDEX statement) for every permuted table of ``layout`` on ``dialect``.

    On PostgreSQL each index is ``(key, value) INCLUDE (id)`` so a lookup is an index-only scan that verifies
    the Hamming distance on the index tuples; on SQLite ``id`` is the rowid, always present in an index.
    """
    statements = []
    for t, name in enumerate(simhash_index_names(layout)):
        include = " INCLUDE (id)" if dialect == "postgresql" else ""
        statements.append(
            (
                name,
                (
                    f"CREATE INDEX IF NOT EXISTS {name} ON fingerprints ({layout.key_sql(t, 'value')}, value)"
                    f"{include} WHERE kind = '{layout.kind}'"
                ),
            )
        )
    return statements


class Fingerprint(Base):
    """One fingerprint of one chapter or page.

    ``kind`` names the algorithm and its parameters (``simhash64``, ``dna``...). Scalar fingerprints use
    ``value``; a chapter's vector fingerprints (DNA codes, winnowing hashes) use ``payload`` (little-endian
    int64 pairs ``(code, position)``) and have one :class:`CodeIndexRow` per pair. A page's vectors are not
    rows here: :class:`PageCodes` keeps what the page side needs of them (revision 0016).
    """

    __tablename__ = "fingerprints"
    __table_args__ = (
        CheckConstraint("(chapter_id IS NULL) <> (page_id IS NULL)", name="one_owner"),
        UniqueConstraint("chapter_id", "kind"),
        UniqueConstraint("page_id", "kind"),
        *_simhash_indexes(DEFAULT_LAYOUT),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    chapter_id: Mapped[int | None] = mapped_column(ForeignKey("chapters.id", ondelete="CASCADE"))
    page_id: Mapped[int | None] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(40))
    value: Mapped[int | None] = mapped_column(BigInteger)
    payload: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SimhashHotBucket(Base):
    """A bucket ``(table_no, key)`` of a layout that was re-split because it was overloaded."""

    __tablename__ = "simhash_hot_buckets"

    layout: Mapped[str] = mapped_column(String(16), primary_key=True)
    table_no: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    key: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    split_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SimhashHotRow(Base):
    """A fingerprint of a re-split bucket, filed under one of the k + 1 sub-keys of its table."""

    __tablename__ = "simhash_hot_index"
    __table_args__ = (
        Index(
            "ix_simhash_hot_index_lookup",
            "layout",
            "table_no",
            "sub_no",
            "key",
            "value",
            postgresql_include=["fingerprint_id"],
        ),
    )

    fingerprint_id: Mapped[int] = mapped_column(
        ForeignKey("fingerprints.id", ondelete="CASCADE"), primary_key=True
    )
    layout: Mapped[str] = mapped_column(String(16), primary_key=True)
    table_no: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    sub_no: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    key: Mapped[int] = mapped_column(BigInteger)
    value: Mapped[int] = mapped_column(BigInteger)


SimhashIndexRow = SimhashHotRow
"""Deprecated alias (revision 0001's table of index rows is gone: the permuted tables are expression indexes
on ``fingerprints.value``); the only Simhash index *rows* left are those of re-split buckets."""


class CodeIndexRow(Base):
    """Exact-match index of vector fingerprints: code -> (owner, fingerprint, position).

    No surrogate key: a vector has one code per position. ``owner`` (:data:`CODE_OWNER_CHAPTER` or
    :data:`CODE_OWNER_PAGE`) and ``owner_id`` repeat the fingerprint's owner so that a look-up asks one side
    only and is an index-only scan on PostgreSQL (``code, owner, kind`` INCLUDE ``owner_id``: the integer
    leads, so comparisons rarely reach the collated text): a page's codes are compared with chapters without
    reading the rows of the millions of pages that share its site template."""

    __tablename__ = "code_index"
    __table_args__ = (
        Index("ix_code_index_code_owner_kind", "code", "owner", "kind", postgresql_include=["owner_id"]),
    )

    # no FOREIGN KEY: its check on every inserted row halved the rate of bulk loads; deleting a fingerprint
    # deletes its rows through a trigger instead (code_index_cascade_ddl), so nothing dangles (count_orphans
    # checks it)
    fingerprint_id: Mapped[int] = mapped_column(BigId, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(40))
    code: Mapped[int] = mapped_column(BigInteger)
    owner: Mapped[int] = mapped_column(SmallInteger)
    owner_id: Mapped[int] = mapped_column(BigInteger)


PAGE_SAMPLE_INDEX = "ix_page_codes_sample"


class PageCodes(Base):
    """What a crawled page keeps of its vector fingerprints: one row per page, no positions.

    ``winnow``: the template keys of its distinct winnowing hashes over characters (their high 32 bits,
    sorted: a marker byte, then little-endian int32; rows written before revision 0022 hold the whole
    hashes as int64, read as their keys: :func:`storage.fingerprints.stored_template_keys`), all a site
    template needs (:mod:`compare.templates` reads the exact hashes back off a few pages' texts).
    ``sample``: the minimum hash of every window of
    ``sample_window`` k-grams, of every code kind (sorted, distinct), which is all a newly registered work
    looks up (:func:`storage.code_index.pages_holding`): any run of ``sample_window + k - 1`` characters a
    page shares with a chapter shares one of them (:func:`storage.fingerprints.page_sample`). PostgreSQL keeps
    ``sample`` as ``bigint[]`` under a GIN index (``fastupdate`` off: a third smaller than with the pending
    list); SQLite as bytes like ``winnow``, scanned (an embedded store holds few pages)."""

    __tablename__ = "page_codes"
    __table_args__ = (
        Index(
            PAGE_SAMPLE_INDEX, "sample", postgresql_using="gin", postgresql_with={"fastupdate": "off"}
        ).ddl_if(dialect="postgresql"),
    )

    page_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("pages.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    sample_window: Mapped[int] = mapped_column(SmallInteger)
    winnow: Mapped[bytes] = mapped_column(LargeBinary)
    sample: Mapped[Any] = mapped_column(PG_ARRAY(BigInteger).with_variant(LargeBinary(), "sqlite"))


class RegistryVersion(Base):
    """One row (``id`` 1): the version of the registry's fingerprints, kept by triggers on ``fingerprints``
    (:func:`registry_version_ddl`): the count, the id sum and the largest id of the chapters' rows, and the
    latest time one was written. :func:`compare.chapter_index.observe` reads it before each batch of pages
    instead of aggregating over every chapter's rows (a twentieth of a millisecond, whatever the registry's
    size, against 35 ms a batch at 100,000 chapters)."""

    __tablename__ = "registry_version"

    id: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    chapter_rows: Mapped[int] = mapped_column(BigInteger)
    id_sum: Mapped[int] = mapped_column(BigInteger)
    max_id: Mapped[int] = mapped_column(BigInteger)
    last_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # one more at every statement (PostgreSQL) or row (SQLite) that writes or deletes a chapter's rows: what
    # a page records it was compared at (Page.registry_serial)
    serial: Mapped[int] = mapped_column(BigInteger, default=0, server_default=sql_text("0"))


REGISTRY_LOCK_KEY = 0x66707276  # "fprv"
"""The PostgreSQL advisory lock a change of the registry takes exclusively (its triggers) and a batch of pages
shared from its last look at the registry to its commit (:func:`compare.chapter_index.hold_registry`)."""


def registry_version_ddl(dialect: str) -> list[str]:
    """Statements that create the triggers keeping ``registry_version`` in step with the chapters'
    ``fingerprints`` rows and its one row (``storage/sql/registry_version.<dialect>.sql``)."""
    return _sql_statements(f"registry_version.{'postgresql' if dialect == 'postgresql' else 'sqlite'}.sql")


def code_index_cascade_ddl(dialect: str) -> list[str]:
    """Statements that make deleting a ``fingerprints`` row delete its ``code_index`` rows (what ``ON DELETE
    CASCADE`` did, without a foreign-key check per inserted row). Deletes cascading from pages and works reach
    ``fingerprints`` as ordinary deletes, so they fire it too. PostgreSQL: one statement-level trigger over
    the deleted rows; SQLite: a row trigger on the primary-key prefix."""
    if dialect == "postgresql":
        return [
            (
                "CREATE OR REPLACE FUNCTION fptrack_delete_code_rows() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ "
                "BEGIN DELETE FROM code_index c USING deleted_fingerprints d WHERE c.fingerprint_id = d.id; "
                "RETURN NULL; END $$"
            ),
            "DROP TRIGGER IF EXISTS tr_fingerprints_delete_code_rows ON fingerprints",
            (
                "CREATE TRIGGER tr_fingerprints_delete_code_rows AFTER DELETE ON fingerprints "
                "REFERENCING OLD TABLE AS deleted_fingerprints FOR EACH STATEMENT "
                "EXECUTE FUNCTION fptrack_delete_code_rows()"
            ),
        ]
    return [
        "DROP TRIGGER IF EXISTS tr_fingerprints_delete_code_rows",
        (
            "CREATE TRIGGER tr_fingerprints_delete_code_rows AFTER DELETE ON fingerprints FOR EACH ROW "
            "BEGIN DELETE FROM code_index WHERE fingerprint_id = OLD.id; END"
        ),
    ]


def match_rollup_ddl(dialect: str) -> list[str]:
    """Statements that keep ``match_rollups`` in step with ``matches`` (see :class:`MatchRollup`): triggers on
    ``matches`` and ``pages``, written out with the reasons in ``storage/sql/match_rollups.<dialect>.sql``
    (PostgreSQL: statement-level triggers over transition tables; any other dialect: SQLite's row
    triggers)."""
    return _sql_statements(f"match_rollups.{'postgresql' if dialect == 'postgresql' else 'sqlite'}.sql")


def _sql_statements(name: str) -> list[str]:
    """The statements of ``storage/sql/<name>``, shipped with the package.

    The file's format: statements end with ``;`` and are separated by a blank line, lines starting with ``--``
    are comments; a statement's lines are joined by single spaces and its final ``;`` dropped (what
    ``exec_driver_sql`` and Alembic's ``op.execute`` take).
    """
    text = files("fptrack.storage").joinpath("sql", name).read_text(encoding="utf-8")
    kept = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    statements = []
    for block in re.split(r"\n\s*\n", kept):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        statement = " ".join(lines)
        if not statement.endswith(";"):
            raise ValueError(f"storage/sql/{name}: a statement does not end with ';': {statement[:80]!r}")
        statements.append(statement[:-1])
    return statements


class CorpusStatistics(Base):
    """A version of corpus statistics (IDF, entropy, pinyin reference...) as the fingerprint stage serialises
    them (``payload``: opaque bytes, e.g. ``CorpusStats.to_bytes()``). The newest version of a name wins."""

    __tablename__ = "corpus_stats"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(60))
    version: Mapped[int] = mapped_column(Integer)
    document_count: Mapped[int] = mapped_column(BigInteger, default=0)
    payload: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Match(Base):
    """A page found to copy (part of) a chapter of a registered work; ``spans`` are the evidence
    (``[page_start, page_end, work_start, work_end]`` in characters of the original texts)."""

    __tablename__ = "matches"
    __table_args__ = (
        UniqueConstraint("page_id", "chapter_id"),
        # the admin's review list, newest first, with and without a status filter: ``id`` (the tie-break of
        # the order) in the key makes a deep page an index-only walk, without a sort or a visit to the rows it
        # skips
        Index("ix_matches_status_first_seen_id", "status", "first_seen", "id"),
        Index("ix_matches_first_seen_id", "first_seen", "id"),
        # takedown re-checks: the matches due (jobs/rechecks.py) and the takedown figures
        # (analytics/takedowns.py)
        Index("ix_matches_status_rechecked_at", "status", "rechecked_at"),
        Index("ix_matches_recheck_state_taken_down_at", "recheck_state", "taken_down_at"),
        Index("ix_matches_status_recheck_due_at", "status", "recheck_due_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    page_id: Mapped[int] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"), index=True)
    work_id: Mapped[int] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"), index=True)
    chapter_id: Mapped[int] = mapped_column(ForeignKey("chapters.id", ondelete="CASCADE"))
    score: Mapped[float] = mapped_column(Float)
    methods: Mapped[list[Any]] = mapped_column(JSON, default=list)
    spans: Mapped[list[Any]] = mapped_column(JSON, default=list)
    # a chapter split over pages, matched joined (compare.multipage): the passages on its later parts,
    # [{"page_id", "url", "part", "spans": [[page_start, page_end, work_start, work_end], ...]}, ...]; else
    # NULL
    part_spans: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    status: Mapped[str] = mapped_column(String(20), default=MatchStatus.FLAGGED.value)
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # takedown re-checks (jobs/rechecks.py): the latest check, its outcome (one of TAKEDOWN_OUTCOMES; NULL =
    # never checked) and the first check that found the copy gone or removed (cleared when it comes back)
    rechecked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    recheck_state: Mapped[str | None] = mapped_column(String(10))
    taken_down_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # the copy's life (storage/match_life.py): when its page is due for a re-check (NULL: now), the
    # first fetch of a removal not yet confirmed by a second one (NULL: none pending), and the page version
    # the spans point into when the page's current text no longer holds the copy (NULL: the page's text).
    # A plain column, not a foreign key: SQLite cannot add one to an existing table, and versions go only
    # with their page, whose matches go with it.
    recheck_due_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    down_seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    evidence_version_id: Mapped[int | None] = mapped_column(BigInteger)
    # a copy that keeps the meaning, not the words (jobs.meaning, issue 36): its kind (``rewrite``,
    # ``translation:en``, ...: compare.meaning.MeaningAlignment.kind; NULL = an exact copy) and the sentences
    # aligned in order, {"coverage", "pairs": [[page_start, page_end, chapter_start, chapter_end,
    # similarity], ...], "page_sentences", "chapter_sentences", "model"} (chapter offsets into the chapter's
    # text; NULL on an exact match). Such a match fills ``score`` (the coverage), ``methods`` (["meaning"])
    # and ``spans`` (the pairs' offsets) too, so every reader of matches keeps working.
    kind: Mapped[str | None] = mapped_column(String(32))
    alignment: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)

    page: Mapped[Page] = relationship()
    work: Mapped[Work] = relationship()
    chapter: Mapped[Chapter] = relationship()


MEANING_CHECK_STATES = ("pending", "done")
# why the gate sent a page to the meaning path: a Chinese page's near misses of the exact compare, or a page
# in another language whose named entities point at chapters (compare.entities), or a changed page that holds
# meaning matches (each observed present or removed by the check)
MEANING_GATE_REASONS = ("near_miss", "entities", "recheck")


class MeaningCheck(Base):
    """A page the meaning path's gate sent on (jobs.meaning): its candidate chapters, ``[[chapter_id, score],
    ...]`` best first, and the page text they were chosen for (``content_sha256``); ``pending`` until a task
    of queue ``meaning`` aligned it with them, then ``done`` with the matches it recorded and the CPU it took.
    One row a page: a re-delivery or a restart finds the decision made and does the work once."""

    __tablename__ = "meaning_checks"
    __table_args__ = (
        UniqueConstraint("page_id"),
        CheckConstraint(
            "state IN (" + ", ".join(f"'{s}'" for s in MEANING_CHECK_STATES) + ")", name="known_state"
        ),
        Index("ix_meaning_checks_state_id", "state", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    page_id: Mapped[int] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"))
    content_sha256: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(10), default="pending")
    reason: Mapped[str] = mapped_column(String(16))
    candidates: Mapped[list[Any]] = mapped_column(JSON, default=list)
    gated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    checked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    matches: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cpu_seconds: Mapped[float | None] = mapped_column(Float)


class ChapterVectors(Base):
    """A chapter's sentences embedded once per model (compare.meaning_store): the sentence offsets into the
    chapter's text and their unit vectors as float16 (``len(spans)`` x 384, 768 bytes a sentence), with the
    SHA-256 of the text they came from: vectors of a text that has since changed are never used, and are
    replaced on the next use."""

    __tablename__ = "chapter_vectors"

    chapter_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("chapters.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    model: Mapped[str] = mapped_column(String(64), primary_key=True)
    text_sha256: Mapped[str] = mapped_column(String(64))
    spans: Mapped[list[Any]] = mapped_column(JSON)
    vectors: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TakedownCheck(Base):
    """One re-check of a match's page: what it found (``outcome``, one of :data:`TAKEDOWN_OUTCOMES`), the HTTP
    status when there was a response, and why (``detail``). History: the match carries the latest."""

    __tablename__ = "takedown_checks"
    __table_args__ = (
        CheckConstraint(
            "outcome IN (" + ", ".join(f"'{o}'" for o in TAKEDOWN_OUTCOMES) + ")", name="known_outcome"
        ),
        Index("ix_takedown_checks_match_id_checked_at", "match_id", "checked_at"),
        # the checks that found the copy down, few among many: was a copy back up ever seen down?
        # (analytics.takedowns.copy_state)
        Index(
            "ix_takedown_checks_down_match_id",
            "match_id",
            postgresql_where=sql_text(TAKEDOWN_DOWN_CHECK),
            sqlite_where=sql_text(TAKEDOWN_DOWN_CHECK),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    match_id: Mapped[int] = mapped_column(ForeignKey("matches.id", ondelete="CASCADE"))
    checked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    outcome: Mapped[str] = mapped_column(String(10))
    http_status: Mapped[int | None] = mapped_column(SmallInteger)
    detail: Mapped[str] = mapped_column(Text, default="", server_default="")
    # what fetched the page: a crawl of its site or a re-check (CHECK_SOURCES)
    source: Mapped[str] = mapped_column(String(10), default="recheck", server_default="recheck")


class MatchRollup(Base):
    """How many matches there are per first-seen day (UTC), work, page host and status: what the dashboard and
    ``analytics`` read instead of counting a million matches.

    Kept by the database itself (:func:`match_rollup_ddl`: triggers on ``matches`` and ``pages``), in the same
    transaction as every write that changes a match's key or status (``compare.service.record_matches``,
    ``services.review.record_decision``, re-comparisons, cascades from deleted works, chapters, pages), so no
    write path can forget it. Rows that fall to zero are removed. ``fptrack analytics rebuild`` recomputes it.
    No foreign keys: a row outlives nothing, and deletes cascade through ``matches``' own triggers.
    """

    __tablename__ = "match_rollups"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    work_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    host: Mapped[str] = mapped_column(String(255), primary_key=True)
    status: Mapped[str] = mapped_column(String(20), primary_key=True)
    matches: Mapped[int] = mapped_column(BigInteger)


# what a reviewer says a confirmed copy is: the whole chapter, a substantial part of it, or an excerpt (which
# may be fair use or quotation: confirming one records that this was considered, services.review)
COPY_KINDS = ("whole_chapter", "substantial_part", "excerpt")


class ReviewDecision(Base):
    """What a person decided about a match, kept as history (the match's ``status`` is the latest). A
    confirmation carries the reviewer's basis: ``copy_kind`` (one of :data:`COPY_KINDS`, empty: not stated),
    ``fair_use_considered`` (fair use, quotation and licences weighed before confirming: True; NULL: not
    stated) and ``basis`` (the reviewer's short note on it)."""

    __tablename__ = "review_decisions"
    __table_args__ = (
        CheckConstraint(
            "decision IN (" + ", ".join(f"'{d}'" for d in REVIEW_DECISIONS) + ")", name="known_decision"
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    match_id: Mapped[int] = mapped_column(ForeignKey("matches.id", ondelete="CASCADE"), index=True)
    decision: Mapped[str] = mapped_column(String(20))
    reviewer: Mapped[str] = mapped_column(String(200), default="")
    note: Mapped[str] = mapped_column(Text, default="")
    decided_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    copy_kind: Mapped[str] = mapped_column(String(20), default="")
    fair_use_considered: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    basis: Mapped[str] = mapped_column(Text, default="")

    match: Mapped[Match] = relationship()


class LicensedSite(Base):
    """A site where a work is published under licence (``compare.licensing``): copies found there are recorded
    as ``licensed``, not flagged."""

    __tablename__ = "licensed_sites"
    __table_args__ = (UniqueConstraint("work_id", "site"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    work_id: Mapped[int] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"), index=True)
    site: Mapped[str] = mapped_column(String(300))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class User(Base):
    """An account of the admin. ``password_hash`` is a salted scrypt hash (``werkzeug.security``), never the
    password; ``username`` is stored lower-case (see ``services.accounts.users``)."""

    __tablename__ = "users"
    __table_args__ = (
        CheckConstraint("role IN (" + ", ".join(f"'{r}'" for r in USER_ROLES) + ")", name="known_role"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    username: Mapped[str] = mapped_column(String(150), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(20), default="viewer")
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_login_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # bumped by a logout: every session of the user (each browser, each copied cookie) carries the version it
    # was opened under and stops working when it changes (admin.security)
    session_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class LoginFailure(Base):
    """One failed login, counted per username and per client address to rate-limit guessing; rows older than
    the window are pruned as new ones arrive."""

    __tablename__ = "login_failures"
    __table_args__ = (
        Index("ix_login_failures_username_failed_at", "username", "failed_at"),
        Index("ix_login_failures_client_failed_at", "client", "failed_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    username: Mapped[str] = mapped_column(String(150))
    client: Mapped[str] = mapped_column(String(64))
    failed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MatchNote(Base):
    """A reviewer's note on a match (no change of status): the evidence page shows them with the decisions."""

    __tablename__ = "match_notes"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    match_id: Mapped[int] = mapped_column(ForeignKey("matches.id", ondelete="CASCADE"), index=True)
    author: Mapped[str] = mapped_column(String(200))
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ApiToken(Base):
    """A bearer token of the admin's JSON API, acting as its user (and that user's role). Only the SHA-256 of
    the token is stored (the token is 256 random bits, so a fast hash is enough); ``prefix`` is the token's
    first characters, shown to tell tokens apart. Removing the user removes its tokens."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    prefix: Mapped[str] = mapped_column(String(16))
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    user: Mapped[User] = relationship()


class MonitorLock(Base):
    """A claim on one unit of scheduled work (``site:<id>`` for a site's crawl): at most one holder at a time,
    across processes and machines. The holder refreshes ``heartbeat_at``; a claim whose heartbeat is older
    than ``FPTRACK_CRAWL_STALE_SECONDS`` belonged to a process that died and may be taken over."""

    __tablename__ = "monitor_locks"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    token: Mapped[str] = mapped_column(String(64))
    owner: Mapped[str] = mapped_column(String(200), default="")
    job_id: Mapped[int | None] = mapped_column(ForeignKey("crawl_jobs.id", ondelete="SET NULL"))
    acquired_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# ------------------------------------------------------------------------------------- takedown notices
# (jobs/notices.py: what a notice carries and its life; jobs/delivery.py: sending it)

# a notice's life: drafted, sent (to whom, how, when: notice_events), acknowledged by its recipient, its
# copies all gone (the re-checks), followed by a second notice or an escalation upstream, or withdrawn
NOTICE_STATES = ("draft", "sent", "acknowledged", "copy_gone", "escalated", "withdrawn")
# the first notice to a host, the second one to the same recipient, one to the next recipient upstream
NOTICE_KINDS = ("notice", "reminder", "escalation")
NOTICE_LANGUAGES = ("zh", "en")
# who sends notices: a natural person (本人, signs) or a company (我司, seals); the owner of the rights or the
# owner's agent (代理人), who needs an authorisation (授权委托书)
SENDER_KINDS = ("person", "company")
SENDER_ROLES = ("owner", "agent")
# what a proof proves: a work's ownership (作品登记证书 / 版权证明: attached to the work), an agent's
# authorisation (授权委托书: to the sender, for one work or in general), the sender's identity (营业执照 /
# 身份证明: to the sender), or something else (the proofs filed before proofs had kinds, which name no work)
PROOF_KINDS = ("ownership_certificate", "authorisation", "identity", "other")
NOTICE_EVENT_KINDS = (
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
# who a host contact is: the site's own abuse address, its hosting provider, its CDN, its domain's registrar
# (designated_agent: the DMCA agent a US service provider designates, 17 U.S.C. 512(c)(2), as listed in the
# Copyright Office's directory)
CONTACT_KINDS = ("site", "hosting", "cdn", "registrar", "designated_agent", "other")


class Sender(Base):
    """A rights holder (or the agent acting for one) who signs takedown notices: the contact details and the
    signer that 17 U.S.C. 512(c)(3)(A) and 信息网络传播权保护条例 第十四条 require, and proofs of ownership.

    ``kind``: a person or a company (:data:`SENDER_KINDS`), with a company's unified social credit code
    (统一社会信用代码) and legal representative (法定代表人); ``role``: the owner of the works' rights or the
    owner's agent (:data:`SENDER_ROLES`; an agent's notices name each work's owner as 权利人);
    ``rights_owner``: the owner's name when the sender acts for someone else and a work names no owner;
    ``signer_title``: the signer's capacity, i.e. the authority to act for the owner. Checked by
    ``jobs.notices.save_sender`` (the columns came by a plain ADD COLUMN, without a CHECK)."""

    __tablename__ = "senders"
    __table_args__ = (
        CheckConstraint(
            "language IN (" + ", ".join(f"'{lang}'" for lang in NOTICE_LANGUAGES) + ")", name="known_language"
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(300), unique=True)
    rights_owner: Mapped[str] = mapped_column(String(300), default="")
    address: Mapped[str] = mapped_column(Text, default="")
    email: Mapped[str] = mapped_column(String(320), default="")
    phone: Mapped[str] = mapped_column(String(100), default="")
    signer_name: Mapped[str] = mapped_column(String(300), default="")
    signer_title: Mapped[str] = mapped_column(String(300), default="")
    language: Mapped[str] = mapped_column(String(5), default="en")
    kind: Mapped[str] = mapped_column(String(10), default="company")
    role: Mapped[str] = mapped_column(String(10), default="owner")
    credit_code: Mapped[str] = mapped_column(String(50), default="")
    legal_representative: Mapped[str] = mapped_column(String(300), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    proofs: Mapped[list[RightsProof]] = relationship(
        back_populates="sender", passive_deletes=True, order_by="RightsProof.id"
    )


class RightsProof(Base):
    """A file proving a right (``kind``, one of :data:`PROOF_KINDS`): a work's ownership certificate (on the
    work), an agent's authorisation (on the sender, for the work ``work_id`` or for every work when it is
    NULL), the sender's identity (on the sender). Stored as bytes with their SHA-256; a notice attaches the
    proofs of its works and its sender's identity and authorisations (``jobs.notices.notice_proofs``)."""

    __tablename__ = "rights_proofs"
    __table_args__ = (
        CheckConstraint("kind IN (" + ", ".join(f"'{k}'" for k in PROOF_KINDS) + ")", name="known_kind"),
        CheckConstraint("work_id IS NOT NULL OR sender_id IS NOT NULL", name="work_or_sender"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    kind: Mapped[str] = mapped_column(String(30), default="other")
    work_id: Mapped[int | None] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"), index=True)
    sender_id: Mapped[int | None] = mapped_column(ForeignKey("senders.id", ondelete="CASCADE"), index=True)
    filename: Mapped[str] = mapped_column(String(300))
    media_type: Mapped[str] = mapped_column(String(100), default="application/octet-stream")
    sha256: Mapped[str] = mapped_column(String(64))
    content: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    work: Mapped[Work | None] = relationship(back_populates="proofs")
    sender: Mapped[Sender | None] = relationship(back_populates="proofs")


class HostContact(Base):
    """Who receives notices about a host, in escalation order: ``level`` 0 is asked first (the site's own
    abuse address), a copy still up after a notice and a second notice goes to the next level up (its hosting
    provider, CDN, registrar: ``kind``). ``language``: the recipient's (empty: the sender's)."""

    __tablename__ = "host_contacts"
    __table_args__ = (
        UniqueConstraint("host", "level"),
        CheckConstraint("kind IN (" + ", ".join(f"'{k}'" for k in CONTACT_KINDS) + ")", name="known_kind"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    level: Mapped[int] = mapped_column(SmallInteger, default=0)
    kind: Mapped[str] = mapped_column(String(20), default="site")
    name: Mapped[str] = mapped_column(String(300), default="")
    email: Mapped[str] = mapped_column(String(320))
    language: Mapped[str] = mapped_column(String(5), default="")
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Notice(Base):
    """A takedown notice: who sends it to whom about which host, in which language, and where it stands
    (``state``, one of :data:`NOTICE_STATES`). ``text`` and ``text_sha256`` are the notice as rendered (as
    sent, once sent: never rendered again). ``parent_id``: the notice this one follows up (a reminder or an
    escalation), ``escalation_level`` how many follow-ups came before it."""

    __tablename__ = "notices"
    __table_args__ = (
        CheckConstraint("state IN (" + ", ".join(f"'{s}'" for s in NOTICE_STATES) + ")", name="known_state"),
        CheckConstraint("kind IN (" + ", ".join(f"'{k}'" for k in NOTICE_KINDS) + ")", name="known_kind"),
        CheckConstraint(
            "language IN (" + ", ".join(f"'{lang}'" for lang in NOTICE_LANGUAGES) + ")", name="known_language"
        ),
        # the follow-up's question: the sent notices whose copies are still up, oldest first
        Index("ix_notices_state_sent_at", "state", "sent_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    sender_id: Mapped[int | None] = mapped_column(ForeignKey("senders.id", ondelete="RESTRICT"))
    host: Mapped[str] = mapped_column(String(255), index=True)
    recipient_name: Mapped[str] = mapped_column(String(300), default="")
    recipient_address: Mapped[str] = mapped_column(String(320), default="")
    recipient_kind: Mapped[str] = mapped_column(String(20), default="site")
    contact_level: Mapped[int] = mapped_column(SmallInteger, default=0)
    language: Mapped[str] = mapped_column(String(5), default="en")
    state: Mapped[str] = mapped_column(String(20), default="draft")
    kind: Mapped[str] = mapped_column(String(20), default="notice")
    escalation_level: Mapped[int] = mapped_column(SmallInteger, default=0)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("notices.id", ondelete="SET NULL"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(200), default="")
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    sent_by: Mapped[str] = mapped_column(String(200), default="")
    message_id: Mapped[str] = mapped_column(String(255), default="")
    text: Mapped[str] = mapped_column(Text, default="")
    text_sha256: Mapped[str] = mapped_column(String(64), default="")
    state_changed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # what was sent, provable later: the message's bytes as handed to the relay (.eml) and their SHA-256, the
    # relay's reply to the message's DATA (code and text) and when it came, and an RFC 3161 time-stamp token
    # over that SHA-256 when an authority is configured (FPTRACK_EVIDENCE_TSA_URL)
    sent_message: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    sent_message_sha256: Mapped[str] = mapped_column(String(64), default="")
    relay_reply: Mapped[str] = mapped_column(Text, default="")
    relay_replied_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    sent_timestamp: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)

    sender: Mapped[Sender | None] = relationship()
    parent: Mapped[Notice | None] = relationship(remote_side="Notice.id")
    items: Mapped[list[NoticeItem]] = relationship(
        back_populates="notice", cascade="all, delete-orphan", passive_deletes=True, order_by="NoticeItem.id"
    )
    events: Mapped[list[NoticeEvent]] = relationship(
        back_populates="notice", cascade="all, delete-orphan", passive_deletes=True, order_by="NoticeEvent.id"
    )


class NoticeItem(Base):
    """One infringing copy named by a notice (a confirmed match), as it stood when the notice was drafted:
    its URL, the work and chapter, the passages side by side (``passages``: ``[[original, copy], ...]``), the
    snapshot hash and the evidence bundle (bytes and SHA-256). ``closed_at``: when the copy was found gone
    (the match's ``taken_down_at``); NULL while it is up. The match may be deleted later: the item keeps what
    was sent."""

    __tablename__ = "notice_items"
    __table_args__ = (UniqueConstraint("notice_id", "match_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    notice_id: Mapped[int] = mapped_column(ForeignKey("notices.id", ondelete="CASCADE"))
    match_id: Mapped[int | None] = mapped_column(ForeignKey("matches.id", ondelete="SET NULL"), index=True)
    url: Mapped[str] = mapped_column(String(2048))
    page_title: Mapped[str] = mapped_column(Text, default="")
    work_title: Mapped[str] = mapped_column(String(500), default="")
    chapter_title: Mapped[str] = mapped_column(String(500), default="")
    first_seen: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    fetched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    snapshot_sha256: Mapped[str] = mapped_column(String(64), default="")
    passages: Mapped[list[Any]] = mapped_column(JSON, default=list)
    bundle: Mapped[bytes | None] = mapped_column(LargeBinary)
    bundle_sha256: Mapped[str] = mapped_column(String(64), default="")
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # what the reviewer said the copy is (COPY_KINDS; empty: not stated): a notice does not call an excerpt
    # a copy of the chapter
    copy_kind: Mapped[str] = mapped_column(String(20), default="")
    # the work it names, whose owner and proofs the notice cites (a plain column: SQLite cannot add a foreign
    # key to an existing table; a removed work leaves the id of no row, and the item unsendable)
    work_id: Mapped[int | None] = mapped_column(BigInteger)
    # a copy in a downloaded file: the files of the archive (or e-book) its passages are in, one a line
    # (fingerprint.containers.members_at); '' for a page
    file_members: Mapped[str] = mapped_column(Text, default="", server_default="")

    notice: Mapped[Notice] = relationship(back_populates="items")
    work: Mapped[Work | None] = relationship(primaryjoin="foreign(NoticeItem.work_id) == Work.id")


class NoticeEvent(Base):
    """What happened to a notice, when (``kind``, one of :data:`NOTICE_EVENT_KINDS`): sent by SMTP to whom
    with which Message-ID, a bounce, an acknowledgement, a copy found gone by a re-check, an escalation."""

    __tablename__ = "notice_events"
    __table_args__ = (
        CheckConstraint(
            "kind IN (" + ", ".join(f"'{k}'" for k in NOTICE_EVENT_KINDS) + ")", name="known_kind"
        ),
        Index("ix_notice_events_notice_id_at", "notice_id", "at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    notice_id: Mapped[int] = mapped_column(ForeignKey("notices.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    kind: Mapped[str] = mapped_column(String(20))
    actor: Mapped[str] = mapped_column(String(200), default="")
    recipient: Mapped[str] = mapped_column(String(320), default="")
    message_id: Mapped[str] = mapped_column(String(255), default="")
    detail: Mapped[str] = mapped_column(Text, default="")

    notice: Mapped[Notice] = relationship(back_populates="events")


class PageExchange(Base):
    """The HTTP exchange of one fetch of a page, as the crawler received it: the request it sent, the
    response's status line and headers and its body (plus, for a page read through Chromium, the DOM it
    rendered), zlib-compressed in ``data`` (:mod:`storage.exchanges` has the format). Kept only while a match
    may rest on it: written by the crawl store, dropped once the page is compared and has no match, and for a
    page with matches kept for its current content and every version kept of it (keyed by the snapshot
    SHA-256 each of them records). An evidence bundle writes it as WARC request and response records whose
    payload hashes to ``snapshot_sha256`` (services/evidence/bundle.py)."""

    __tablename__ = "page_exchanges"
    __table_args__ = (UniqueConstraint("page_id", "snapshot_sha256"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    page_id: Mapped[int] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"))
    snapshot_sha256: Mapped[str] = mapped_column(String(64))
    fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    rendered: Mapped[bool] = mapped_column(Boolean, default=False)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    # format 3 (a payload above storage.exchanges.BLOB_MIN_BYTES): the blob holding the payload as received
    blob_sha256: Mapped[str | None] = mapped_column(String(64), index=True)


class Blob(Base):
    """A downloaded file's payload as received, kept once however many exchanges (URLs, fetches) served it:
    ``page_exchanges`` rows in format 3 name it by ``sha256`` (:mod:`storage.exchanges`). Dropped by
    :func:`storage.exchanges.prune_exchanges` only once no exchange names it."""

    __tablename__ = "blobs"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    first_stored: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CaptureStamp(Base):
    """The RFC 3161 time-stamp of one kept exchange of a flagged page (:class:`PageExchange`, same page and
    snapshot): ``capture_sha256`` is the SHA-256 of its capture statement
    (:func:`storage.capture_stamps.capture_statement`), ``token`` the authority's DER time-stamp response
    over it, ``stamped_at`` the time the token states. Written when the page is flagged (or by the sweep
    that stamps what an unreachable authority left), never changed."""

    __tablename__ = "capture_stamps"
    __table_args__ = (UniqueConstraint("page_id", "snapshot_sha256"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    page_id: Mapped[int] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"))
    snapshot_sha256: Mapped[str] = mapped_column(String(64))
    capture_sha256: Mapped[str] = mapped_column(String(64))
    authority: Mapped[str] = mapped_column(String(2048))
    token: Mapped[bytes] = mapped_column(LargeBinary)
    stamped_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


@event.listens_for(CodeIndexRow.__table__, "after_create")
def _create_code_index_cascade(target: Any, connection: Any, **kw: Any) -> None:
    for statement in code_index_cascade_ddl(connection.dialect.name):
        connection.exec_driver_sql(statement)


@event.listens_for(Base.metadata, "after_create")
def _create_registry_version_triggers(target: Any, connection: Any, **kw: Any) -> None:
    for statement in registry_version_ddl(connection.dialect.name):
        connection.exec_driver_sql(statement)


@event.listens_for(Base.metadata, "after_create")
def _create_match_rollup_triggers(target: Any, connection: Any, **kw: Any) -> None:
    # after every table exists: the triggers read pages and write match_rollups
    for statement in match_rollup_ddl(connection.dialect.name):
        connection.exec_driver_sql(statement)


# ------------------------------------------------------------------------------ pirate networks, discovery

DISCOVERY_SOURCES = ("link", "search", "network")
"""Where a candidate site was first seen: a link on a monitored pirate site, a search provider's result, or
the near-duplicate pages of a network."""
CANDIDATE_STATES = ("new", "probed", "clean", "failed", "accepted", "rejected", "licensed")
"""``new`` (not probed yet), ``probed`` (copies found: waiting for a person), ``clean`` (probed, no copy),
``failed`` (the probe got nothing to judge), then a person's decision: ``accepted`` (a monitored site),
``rejected`` or ``licensed`` (remembered: never proposed again)."""
OUTBOUND_KINDS = ("link", "mirror", "redirect")


class NearDuplicate(Base):
    """Two pages of different sites whose page Simhashes lie within the layout's k bits
    (:mod:`compare.networks`). ``page_id`` arrived when ``earlier_page_id`` was already stored: the earlier
    page's site had the text first."""

    __tablename__ = "near_duplicates"

    page_id: Mapped[int] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"), primary_key=True)
    earlier_page_id: Mapped[int] = mapped_column(
        ForeignKey("pages.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    distance: Mapped[int] = mapped_column(SmallInteger)
    found_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SitePair(Base):
    """The evidence that two sites serve the same texts, counted as near-duplicate pages are found:
    ``shared_pages`` pairs of pages (Hamming <= k), ``close_pages`` of them nearly identical (Hamming <=
    :data:`compare.networks.CLOSE_DISTANCE`: the same source's text), ``a_first`` with site A's page there
    first and ``b_first`` with site B's. ``site_a < site_b``."""

    __tablename__ = "site_pairs"
    __table_args__ = (CheckConstraint("site_a < site_b", name="ordered"),)

    site_a: Mapped[int] = mapped_column(ForeignKey("sites.id", ondelete="CASCADE"), primary_key=True)
    site_b: Mapped[int] = mapped_column(
        ForeignKey("sites.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    shared_pages: Mapped[int] = mapped_column(Integer, default=0)
    close_pages: Mapped[int] = mapped_column(Integer, default=0)
    a_first: Mapped[int] = mapped_column(Integer, default=0)
    b_first: Mapped[int] = mapped_column(Integer, default=0)
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SiteOutboundHost(Base):
    """A host that a site's pages point to: a plain link (friend links, ads), a ``mirror`` notice
    (新域名, 最新网址, 备用网址...) or a ``redirect`` of the site itself. Kept by discovery
    (:mod:`jobs.discovery`), one row per (site, host)."""

    __tablename__ = "site_outbound_hosts"
    __table_args__ = (
        CheckConstraint("kind IN (" + ", ".join(f"'{k}'" for k in OUTBOUND_KINDS) + ")", name="known_kind"),
    )

    site_id: Mapped[int] = mapped_column(ForeignKey("sites.id", ondelete="CASCADE"), primary_key=True)
    host: Mapped[str] = mapped_column(String(255), primary_key=True)
    kind: Mapped[str] = mapped_column(String(10), default="link")
    links: Mapped[int] = mapped_column(Integer, default=0)
    example_url: Mapped[str] = mapped_column(String(2048), default="")
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class DiscoveryCandidate(Base):
    """A site nobody listed, proposed by discovery (``source``, one of :data:`DISCOVERY_SOURCES`; ``detail``
    says why: the query, the linking site, the network), probed (``pages_probed`` pages with ``requests``
    requests, ``copies`` of them copying registered chapters of ``works``; ``score`` = copies / pages probed)
    and decided (``state``, one of :data:`CANDIDATE_STATES`). ``mirror_of_site_id``: a known site whose pages
    the probe found near-identical. ``site_id``: the monitored site an accept made."""

    __tablename__ = "discovery_candidates"
    __table_args__ = (
        CheckConstraint(
            "state IN (" + ", ".join(f"'{s}'" for s in CANDIDATE_STATES) + ")", name="known_state"
        ),
        CheckConstraint(
            "source IN (" + ", ".join(f"'{s}'" for s in DISCOVERY_SOURCES) + ")", name="known_source"
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    host: Mapped[str] = mapped_column(String(255), unique=True)
    url: Mapped[str] = mapped_column(String(2048))
    source: Mapped[str] = mapped_column(String(10))
    detail: Mapped[str] = mapped_column(Text, default="")
    via_site_id: Mapped[int | None] = mapped_column(ForeignKey("sites.id", ondelete="SET NULL"))
    state: Mapped[str] = mapped_column(String(10), default="new", index=True)
    score: Mapped[float] = mapped_column(Float, default=0.0)
    copies: Mapped[int] = mapped_column(Integer, default=0)
    pages_probed: Mapped[int] = mapped_column(Integer, default=0)
    requests: Mapped[int] = mapped_column(Integer, default=0)
    works: Mapped[list[Any]] = mapped_column(JSON, default=list)
    mirror_of_site_id: Mapped[int | None] = mapped_column(ForeignKey("sites.id", ondelete="SET NULL"))
    error: Mapped[str] = mapped_column(Text, default="")
    site_id: Mapped[int | None] = mapped_column(ForeignKey("sites.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    probed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    decided_by: Mapped[str] = mapped_column(String(200), default="")


LEAD_STATES = ("new", "confirmed", "dismissed")


class ShareLead(Base):
    """A cloud-drive share link seen on crawled pages (crawler/leads.py), one per ``(platform, share_id)``:
    a lead to a whole book. ``work_id``: the registered work whose title the text around the link names (''
    when none does; the works of the matches on the pages it was seen on count too, storage/leads.py).
    ``state``: ``new`` until a reviewer confirms it (only confirmed leads go into notices) or dismisses it."""

    __tablename__ = "share_leads"
    __table_args__ = (
        UniqueConstraint("platform", "share_id"),
        CheckConstraint("state IN (" + ", ".join(f"'{s}'" for s in LEAD_STATES) + ")", name="known_state"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    platform: Mapped[str] = mapped_column(String(20))
    share_id: Mapped[str] = mapped_column(String(200))
    url: Mapped[str] = mapped_column(String(2048))
    code: Mapped[str] = mapped_column(String(20), default="")
    work_id: Mapped[int | None] = mapped_column(ForeignKey("works.id", ondelete="SET NULL"), index=True)
    state: Mapped[str] = mapped_column(String(10), default="new")
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    reviewed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    reviewed_by: Mapped[str] = mapped_column(String(200), default="")


class ShareLeadSighting(Base):
    """A page a :class:`ShareLead` was seen on, with the text around the link there (the last fetch's)."""

    __tablename__ = "share_lead_sightings"
    __table_args__ = (UniqueConstraint("lead_id", "page_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    lead_id: Mapped[int] = mapped_column(ForeignKey("share_leads.id", ondelete="CASCADE"))
    page_id: Mapped[int] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"), index=True)
    context: Mapped[str] = mapped_column(Text, default="")
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


RELEASE_SOURCES = ("registration", "feed")


class Release(Base):
    """A new chapter (or volume) of ``work_id`` came out at ``released_at``: registered as a release of it
    (``fptrack works add FILE --release-of WORK``: ``source`` ``registration``, ``ref`` ``work:<new id>``,
    ``new_work_id`` the work that holds the new text) or read from the work's release feed (``feed``, ``ref``
    the entry's id or link). The sites that copied the work are crawled at a quicker pace for a while after it
    (jobs/releases.py)."""

    __tablename__ = "releases"
    __table_args__ = (
        UniqueConstraint("work_id", "ref"),
        CheckConstraint(
            "source IN (" + ", ".join(f"'{s}'" for s in RELEASE_SOURCES) + ")", name="known_source"
        ),
        Index("ix_releases_released_at", "released_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    work_id: Mapped[int] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"))
    released_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    source: Mapped[str] = mapped_column(String(16))
    ref: Mapped[str] = mapped_column(String(2048))
    new_work_id: Mapped[int | None] = mapped_column(ForeignKey("works.id", ondelete="SET NULL"))
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ReleaseFeed(Base):
    """The RSS, Atom or JSON feed a work's releases are read from (jobs/releases.py), one per work: when it is
    next read, when it was last, and that fetch's error ('' when it was read)."""

    __tablename__ = "release_feeds"

    work_id: Mapped[int] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"), primary_key=True)
    url: Mapped[str] = mapped_column(String(2048))
    next_check_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    checked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error: Mapped[str] = mapped_column(Text, default="", server_default="")


class EntityChapter(Base):
    """A chapter whose named entities are in ``entity_postings`` (``compare.entities.index_chapters``), with
    how many terms it has there. A process learns of a change from :class:`EntityStamp` (a delete here moves
    it on by a trigger, an insert by ``index_chapters``), not from this table's count."""

    __tablename__ = "entity_chapters"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    chapter_id: Mapped[int] = mapped_column(ForeignKey("chapters.id", ondelete="CASCADE"), unique=True)
    work_id: Mapped[int] = mapped_column(ForeignKey("works.id", ondelete="CASCADE"), index=True)
    terms: Mapped[int] = mapped_column(Integer)
    indexed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class EntityPosting(Base):
    """A named entity of a chapter (a Han term, or its pinyin or Wade-Giles key: ``compare.entities.forms``):
    how often the chapter has it and where first, in ten thousandths of the chapter."""

    __tablename__ = "entity_postings"

    term: Mapped[str] = mapped_column(String(64), primary_key=True)
    chapter_id: Mapped[int] = mapped_column(
        ForeignKey("chapters.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    occurrences: Mapped[int] = mapped_column(Integer)
    first: Mapped[int] = mapped_column(Integer)


class EntityTerm(Base):
    """A term of ``entity_postings`` with how many chapters hold it (the idf's document frequency):
    ``compare.entities.index_chapters`` adds, a trigger on ``entity_postings`` takes off (migration 0036). A
    term whose chapters are all gone stays with 0."""

    __tablename__ = "entity_terms"

    term: Mapped[str] = mapped_column(String(64), primary_key=True)
    chapters: Mapped[int] = mapped_column(Integer)


class EntityStamp(Base):
    """One row (id 1): a serial one more at every change of the entity index and the indexed chapters'
    count, what a process's term cache is checked against (``compare.entities``; a trigger on
    ``entity_chapters`` keeps it on deletes)."""

    __tablename__ = "entity_stamp"

    id: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    serial: Mapped[int] = mapped_column(BigInteger)
    chapters: Mapped[int] = mapped_column(BigInteger)
