"""``/matches``: the review queue (filters, sort, URL search, bulk decisions, CSV/JSON export) and
``/matches/<id>``: the evidence of one match, with the copied passages, the differences inside them, the
history of decisions and notes, and the decision buttons."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask import (
    Blueprint,
    Response,
    abort,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_babel import gettext, ngettext
from flask_login import current_user
from sqlalchemy import select
from sqlalchemy.orm import Session, joinedload, object_session
from werkzeug.wrappers import Response as BaseResponse

from fptrack.admin.security import requires_role
from fptrack.admin.views.context import admin_state, db_session
from fptrack.admin.views.read_sessions import read_session
from fptrack.admin.vocabulary import label
from fptrack.compare.records import copied_characters, match_files, match_to_dict
from fptrack.services.evidence.alignment import match_alignment
from fptrack.services.evidence.passages import (
    EvidenceSpan,
    Segment,
    SpanDiff,
    chapter_ranges,
    evidence_spans,
    highlight_segments,
    page_ranges,
    span_diff,
)
from fptrack.services.exports import CSV_MATCH_COLUMNS, csv_lines, csv_match_row, spooled
from fptrack.services.queries import (
    MATCH_STATUSES,
    MAX_ID,
    REVIEW_STATUSES,
    SORT_KEYS,
    TAKEDOWN_STATES,
    MatchFilter,
    copy_states,
    count_matches,
    iter_matches,
    list_matches,
    match_filter_from_args,
    matching_ids,
    positive_int_arg,
    work_choices,
)
from fptrack.services.review import (
    BULK_LIMIT,
    COPY_KIND_LABELS,
    Basis,
    add_note,
    basis_needed,
    match_history,
    record_bulk_decision,
    record_decision,
)
from fptrack.storage.match_life import Evidence as StoredEvidence
from fptrack.storage.match_life import evidence_of
from fptrack.storage.models import Match, TakedownCheck

__all__ = ["PER_PAGE", "Evidence", "blueprint", "load_evidence", "match_record"]

PER_PAGE = 50

blueprint = Blueprint("matches", __name__, url_prefix="/matches")


def match_record(match: Match) -> dict[str, object]:
    """The documented match fields (``compare.records.match_to_dict``) plus ``id`` and ``status``."""
    return {**match_to_dict(match), "id": match.id, "status": match.status}


def _filter_or_400(args: object) -> MatchFilter:
    try:
        return match_filter_from_args(args)  # type: ignore[arg-type]
    except ValueError as error:
        abort(400, description=str(error)[:1].upper() + str(error)[1:] + ".")


@blueprint.get("")
def index() -> str:
    match_filter = _filter_or_400(request.args)
    try:
        number = positive_int_arg(request.args, "page", 1)
    except ValueError as error:
        abort(400, description=str(error))
    session = read_session()
    listing = list_matches(session, match_filter, number, PER_PAGE)
    link_filters = match_filter.as_args()
    return render_template(
        "matches.html",
        listing=listing,
        match_filter=match_filter,
        filters={
            **dict.fromkeys(
                ("status", "work", "site", "q", "from", "to", "min_score", "max_score", "takedown"), ""
            ),
            **link_filters,
        },
        copy_states=copy_states(session, [match.id for match in listing.items]),
        takedown_states=TAKEDOWN_STATES,
        link_filters=link_filters,
        statuses=MATCH_STATUSES,
        sort_keys=SORT_KEYS,
        works=work_choices(session),
        bulk_limit=BULK_LIMIT,
    )


# --------------------------------------------------------------------------------------------- exports


def _export(chunks: Iterator[str], mimetype: str, extension: str) -> Response:
    """The whole export written first (``services.exports.spooled``), then sent with its length: one that
    fails midway is an error page (500, or 503 with the database gone), never a 200 cut short."""
    body = spooled(chunks)
    response = Response(
        body,
        mimetype=mimetype,
        headers={
            "Content-Disposition": f'attachment; filename="{_export_name(extension)}"',
            "Content-Length": str(body.size),
        },
    )
    response.call_on_close(body.spool.close)  # a HEAD request never reads it
    return response


def _export_name(extension: str) -> str:
    return f"fptrack-matches-{datetime.now(UTC):%Y%m%d-%H%M%S}.{extension}"


@blueprint.get("/export.csv")
def export_csv() -> Response:
    """Every match of the filtered list (no pagination) as CSV, UTF-8 with a byte order mark (so that
    spreadsheets read Chinese correctly), formula cells guarded (``services.exports``)."""
    match_filter = _filter_or_400(request.args)

    def lines(session: Session) -> Iterator[str]:
        records = (csv_match_row(match_record(match)) for match in iter_matches(session, match_filter))
        yield from csv_lines(CSV_MATCH_COLUMNS, records, bom=True)

    return _export(lines(read_session()), "text/csv", "csv")


@blueprint.get("/export.json")
def export_json() -> Response:
    """Every match of the filtered list as one JSON array of match objects (the API's fields)."""
    match_filter = _filter_or_400(request.args)

    def chunks(session: Session) -> Iterator[str]:
        yield "["
        for number, match in enumerate(iter_matches(session, match_filter)):
            yield ("," if number else "") + "\n" + json.dumps(match_record(match), ensure_ascii=False)
        yield "\n]\n"

    return _export(chunks(read_session()), "application/json", "json")


# ------------------------------------------------------------------------------------------ bulk review


@blueprint.post("/bulk")
@requires_role("reviewer")
def bulk() -> BaseResponse:
    """Confirm, dismiss or reopen the selected matches of a filtered list, or all of them (``scope=all``, at
    most ``BULK_LIMIT``, and only if the list still has the ``expected`` number of matches the reviewer saw).

    The list's filter travels as form fields named like its query arguments (``status``, ``site``, ...); the
    decision is ``decision`` (confirmed, dismissed or flagged) with an optional ``note``."""
    match_filter = _filter_or_400(request.form)
    filter_args: dict[str, Any] = dict(match_filter.as_args())
    back = url_for("matches.index", **filter_args)
    session = db_session()
    scope = request.form.get("scope", "selected")
    if scope == "all":
        total = count_matches(session, match_filter)
        expected = request.form.get("expected", "")
        if expected != str(total):
            abort(
                409,
                description=f"The list has changed since you saw it: it now has {total} matches. "
                "Look at it again before acting on all of them.",
            )
        if total > BULK_LIMIT:
            abort(400, description=f"A bulk action changes at most {BULK_LIMIT} matches; narrow the filter.")
        ids = matching_ids(session, match_filter, BULK_LIMIT)
    elif scope == "selected":
        chosen = _ids(request.form.getlist("ids"))
        if not chosen:
            flash(
                gettext(
                    "No match was selected: tick the matches to act on, or choose all matches of the list."
                )
            )
            return redirect(back, code=303)
        ids = _on_list(session, match_filter, chosen)
    else:
        abort(400, description="scope must be 'selected' or 'all'.")
    try:
        decisions = record_bulk_decision(
            session,
            ids,
            request.form.get("decision", ""),
            current_user.username,
            request.form.get("note", ""),
            basis_below=admin_state().settings.review_basis_below,
        )
    except LookupError as error:
        session.rollback()
        abort(404, description=str(error)[:1].upper() + str(error)[1:] + ".")
    except ValueError as error:
        session.rollback()
        abort(400, description=str(error)[:1].upper() + str(error)[1:] + ".")
    session.commit()
    changed = sum(1 for decision in decisions if decision.previous_status != decision.status)
    status = request.form.get("decision", "")
    flash(
        ngettext(
            "%(num)d match now %(status)s", "%(num)d matches now %(status)s", changed, status=label(status)
        )
        + gettext("; %(acted)d acted on.", acted=len(decisions))
    )
    return redirect(back, code=303)


def _ids(raw: list[str]) -> list[int]:
    ids: list[int] = []
    for value in raw:
        try:
            number = int(value)
        except ValueError:
            abort(400, description=f"Match ids are integers, not {value[:40]!r}.")
        if not 1 <= number <= MAX_ID:
            abort(404, description=gettext("There is no match with id %(id)s.", id=value[:40]))
        ids.append(number)
    if len(ids) > BULK_LIMIT:
        abort(400, description=f"A bulk action changes at most {BULK_LIMIT} matches.")
    return ids


def _on_list(session: Session, match_filter: MatchFilter, ids: list[int]) -> list[int]:
    """The ids of ``ids`` that the filter selects (a selection never reaches past the list it was made on)."""
    if not ids:
        return []
    query = match_filter.apply(select(Match.id).where(Match.id.in_(ids)))
    selected = set(session.scalars(query))
    return [match_id for match_id in ids if match_id in selected]


# ------------------------------------------------------------------------------------------- evidence


@dataclass(frozen=True)
class Evidence:
    """What the evidence page (and a takedown notice) shows of one match."""

    match: Match
    spans: list[EvidenceSpan]
    diffs: dict[int, SpanDiff]
    page_segments: list[Segment]
    chapter_segments: list[Segment]
    stored: StoredEvidence  # the content the spans point into: the page's, or the version kept of it

    @property
    def copied_chars(self) -> int:
        """The page characters the copied passages cover (``compare.records.copied_characters``, the number
        ``fptrack check`` gives for the same page)."""
        return copied_characters((span.page_start, span.page_end) for span in self.spans)

    def passages(self, limit: int = 0) -> list[str]:
        """The copied passages as the page had them when copied (cut to ``limit`` characters when ``limit``
        > 0)."""
        text = self.stored.text or ""
        out = []
        for span in self.spans:
            passage = text[span.page_start : span.page_end]
            out.append(passage[:limit] + "…" if limit and len(passage) > limit else passage)
        return out


def load_evidence(match: Match, session: Session | None = None) -> Evidence:
    """Spans, character diffs and highlighted segments of ``match`` (its page, work and chapter loaded), read
    in the text the spans point into: the page's current text, or the version of it kept when a later fetch
    replaced it (the copy was taken down, the page changed: :func:`storage.match_life.evidence_of`)."""
    session = session if session is not None else object_session(match)
    if session is None:
        raise ValueError("the match is not attached to a session")
    stored = evidence_of(session, match)
    chapter = match.chapter
    # a copy that keeps the meaning (match.kind) has aligned sentences, not copied passages: its spans are
    # sentence offsets into the chapter, shown as pairs (services.evidence.alignment), never highlighted here
    spans = evidence_spans(match.spans) if not match.kind else []
    page_text = stored.text or ""
    work_text = match.work.text or ""
    # Spans are offsets into Work.text; the chapter shown is that text's [start, end) slice.
    chapter_text = work_text[chapter.start : chapter.end] if work_text else chapter.text
    diffs = {span.number: span_diff(page_text, work_text, span) for span in spans} if work_text else {}
    shift = chapter.start
    chapter_edits = [(s - shift, e - shift, n, k) for d in diffs.values() for s, e, n, k in d.work_edits]
    chapter_gaps = [(p - shift, n, length, k) for d in diffs.values() for p, n, length, k in d.work_gaps]
    return Evidence(
        match=match,
        stored=stored,
        spans=spans,
        diffs=diffs,
        page_segments=highlight_segments(
            page_text,
            page_ranges(spans),
            [edit for d in diffs.values() for edit in d.page_edits],
            [gap for d in diffs.values() for gap in d.page_gaps],
        ),
        chapter_segments=highlight_segments(
            chapter_text, chapter_ranges(spans, chapter.start), chapter_edits, chapter_gaps
        ),
    )


def _load_match(match_id: int) -> Match:
    match = read_session().get(
        Match,
        match_id,
        options=[joinedload(Match.page), joinedload(Match.work), joinedload(Match.chapter)],
    )
    if match is None:
        abort(404, description=gettext("There is no match with id %(id)s.", id=match_id))
    return match


@blueprint.get("/<int:match_id>")
def detail(match_id: int) -> str:
    match = _load_match(match_id)
    evidence = load_evidence(match, read_session())
    return render_template(
        "match.html",
        match=match,
        evidence=evidence,
        alignment=match_alignment(read_session(), match),
        spans=evidence.spans,
        diffs=evidence.diffs,
        page_segments=evidence.page_segments,
        chapter_segments=evidence.chapter_segments,
        history=match_history(read_session(), match_id),
        takedown_checks=_takedown_checks(match_id),
        review_statuses=REVIEW_STATUSES,
        copy_kinds=COPY_KIND_LABELS,
        files=match_files(read_session(), match),
        basis_needed=basis_needed(match, basis_below=admin_state().settings.review_basis_below),
    )


TAKEDOWN_CHECKS_SHOWN = 20


def _takedown_checks(match_id: int) -> list[TakedownCheck]:
    """The latest re-checks of the match's page (jobs.rechecks), newest first."""
    statement = (
        select(TakedownCheck)
        .where(TakedownCheck.match_id == match_id)
        .order_by(TakedownCheck.checked_at.desc(), TakedownCheck.id.desc())
        .limit(TAKEDOWN_CHECKS_SHOWN)
    )
    return list(read_session().scalars(statement))


@blueprint.post("/<int:match_id>/status")
@requires_role("reviewer")
def set_status(match_id: int) -> BaseResponse:
    # Host, Origin, login, role and the CSRF token were checked before this view ran (see admin.security).
    session = db_session()
    try:
        decision = record_decision(
            session,
            match_id,
            request.form.get("status", ""),
            reviewer=current_user.username,
            note=request.form.get("note", ""),
            basis=_basis_of_form(),
            basis_below=admin_state().settings.review_basis_below,
        )
    except LookupError:
        abort(404, description=gettext("There is no match with id %(id)s.", id=match_id))
    except ValueError as error:
        abort(400, description=str(error)[:1].upper() + str(error)[1:] + ".")
    session.commit()
    flash(gettext("Match %(id)d is now %(status)s.", id=match_id, status=label(decision.status)))
    return redirect(url_for("matches.detail", match_id=match_id), code=303)


def _basis_of_form() -> Basis | None:
    """The reviewer's basis of a confirmation from the review form (copy_kind, fair_use_considered: yes,
    basis), or None for another decision."""
    if request.form.get("status") != "confirmed":
        return None
    considered = request.form.get("fair_use_considered", "")
    return Basis(
        copy_kind=request.form.get("copy_kind", ""),
        fair_use_considered=True if considered == "yes" else (False if considered == "no" else None),
        note=request.form.get("basis", ""),
    )


@blueprint.post("/<int:match_id>/notes")
@requires_role("reviewer")
def note(match_id: int) -> BaseResponse:
    session = db_session()
    try:
        add_note(session, match_id, current_user.username, request.form.get("text", ""))
    except LookupError:
        abort(404, description=gettext("There is no match with id %(id)s.", id=match_id))
    except ValueError as error:
        abort(400, description=str(error)[:1].upper() + str(error)[1:] + ".")
    session.commit()
    flash(gettext("Note added."))
    return redirect(url_for("matches.detail", match_id=match_id, _anchor="history"), code=303)
