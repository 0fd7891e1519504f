"""``/reports``: takedown notices per domain (printable HTML and PDF) and evidence bundles per match.

A notice lists the infringing URLs of one site with their evidence: URL, first and last seen, the snapshot
SHA-256 of the page as fetched, the registered work and chapter, and the copied passages. By default it lists
the site's *confirmed* matches (``?status=flagged`` lists the ones still waiting for review).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from flask import Blueprint, Response, abort, render_template, request
from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload

from fptrack.admin.evidence_bundle import evidence_bundle
from fptrack.admin.pdf import PdfUnavailable, html_to_pdf
from fptrack.admin.review import match_history
from fptrack.admin.views.context import db_session
from fptrack.admin.views.matches import load_evidence, match_record
from fptrack.admin.views.queries import MATCH_STATUSES
from fptrack.analytics.rollups import match_rollup
from fptrack.storage.match_life import evidence_of
from fptrack.storage.models import Chapter, Match, Page, Work

__all__ = ["NOTICE_LIMIT", "NoticeEntry", "blueprint", "notice_entries"]

blueprint = Blueprint("reports", __name__)

NOTICE_LIMIT = 500
PASSAGE_LIMIT = 600


@dataclass(frozen=True)
class NoticeEntry:
    match_id: int
    url: str
    title: str
    first_seen: datetime
    last_seen: datetime
    fetched_at: datetime
    snapshot_sha256: str
    work_title: str
    chapter: str
    score: float
    passages: list[str]


def notice_entries(
    session: Session, host: str, status: str, limit: int = NOTICE_LIMIT
) -> tuple[list[NoticeEntry], int]:
    """The matches of ``host`` with ``status`` (oldest first) as notice entries, at most ``limit``; and how
    many there are in all."""
    condition = (Match.status == status, Match.page_id.in_(select(Page.id).where(Page.host == host)))
    total = session.scalar(select(func.count()).select_from(Match).where(*condition)) or 0
    matches = session.scalars(
        select(Match)
        .where(*condition)
        .options(
            joinedload(Match.page),
            joinedload(Match.work).defer(Work.text),
            joinedload(Match.chapter).defer(Chapter.text),
        )
        .order_by(Match.first_seen, Match.id)
        .limit(limit)
    ).unique()
    entries = []
    for match in matches:
        # the text the spans point into: the version kept when the page has changed (or gone) since
        stored = evidence_of(session, match)
        passages = []
        for raw in match.spans or []:
            try:
                start, end = int(raw[0]), int(raw[1])
            except (TypeError, ValueError, IndexError):
                continue
            passage = stored.text[max(0, start) : max(0, end)]
            passages.append(passage[:PASSAGE_LIMIT] + "…" if len(passage) > PASSAGE_LIMIT else passage)
        entries.append(
            NoticeEntry(
                match.id,
                match.page.url,
                stored.title,
                match.first_seen,
                match.last_seen,
                stored.fetched_at,
                stored.snapshot_sha256,
                match.work.title,
                f"{match.chapter.index}. {match.chapter.title}",
                float(match.score),
                passages,
            )
        )
    return entries, total


@blueprint.get("/reports")
def index() -> str:
    return render_template("reports.html", hosts=match_rollup(db_session(), "host"))


def _notice_args() -> tuple[str, str, str]:
    host = (request.args.get("host") or "").strip().lower()
    if not host or len(host) > 255:
        abort(400, description="Name the site: ?host=example.com (as in the matches' site column).")
    status = (request.args.get("status") or "confirmed").strip()
    if status not in MATCH_STATUSES:
        abort(400, description=f"status must be one of {', '.join(MATCH_STATUSES)}.")
    sender = (request.args.get("sender") or "").strip()[:300]
    return host, status, sender


def _render_notice(for_pdf: bool) -> str:
    host, status, sender = _notice_args()
    entries, total = notice_entries(db_session(), host, status)
    return render_template(
        "notice.html",
        host=host,
        status=status,
        sender=sender,
        entries=entries,
        total=total,
        limit=NOTICE_LIMIT,
        for_pdf=for_pdf,
        today=datetime.now(UTC),
    )


@blueprint.get("/reports/notice")
def notice() -> str:
    return _render_notice(for_pdf=False)


@blueprint.get("/reports/notice.pdf")
def notice_pdf() -> Response:
    html = _render_notice(for_pdf=True)
    try:
        pdf = html_to_pdf(html)
    except PdfUnavailable as error:
        abort(503, description=str(error))
    host, _, _ = _notice_args()
    name = "".join(char if char.isalnum() or char in ".-" else "_" for char in host)[:80]
    return Response(
        pdf,
        mimetype="application/pdf",
        headers={"Content-Disposition": f'attachment; filename="takedown-notice-{name}.pdf"'},
    )


@blueprint.get("/matches/<int:match_id>/bundle.zip")
def bundle(match_id: int) -> Response:
    """The evidence of one match as a zip: the page as stored in a WARC file, the evidence JSON,
    SHA256SUMS."""
    session = db_session()
    match = session.get(
        Match, match_id, options=[joinedload(Match.page), joinedload(Match.work), joinedload(Match.chapter)]
    )
    if match is None:
        abort(404, description=f"There is no match with id {match_id}.")
    evidence = load_evidence(match, session)
    document = {
        "match": match_record(match),
        "last_seen": match.last_seen.isoformat(),
        "passages": [
            {
                "number": span.number,
                "page": [span.page_start, span.page_end],
                "work": [span.work_start, span.work_end],
                "page_text": (evidence.stored.text or "")[span.page_start : span.page_end],
                "work_text": (match.work.text or "")[span.work_start : span.work_end],
                "differences": None
                if span.number not in evidence.diffs
                else {
                    "changed": evidence.diffs[span.number].changed,
                    "inserted": evidence.diffs[span.number].inserted,
                    "deleted": evidence.diffs[span.number].deleted,
                },
            }
            for span in evidence.spans
        ],
    }
    history = [
        {"kind": e.kind, "at": e.at.isoformat(), "who": e.who, "text": e.text, "status": e.status}
        for e in match_history(session, match_id)
    ]
    data = evidence_bundle(match.page, document, history, evidence.stored)
    return Response(
        data,
        mimetype="application/zip",
        headers={"Content-Disposition": f'attachment; filename="fptrack-match-{match_id}-evidence.zip"'},
    )
