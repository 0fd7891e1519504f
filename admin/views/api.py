"""The JSON API under ``/api``: every list of the admin and every review action, described by an OpenAPI 3
document at ``/api/openapi.json`` (``admin.openapi``).

Authentication: the admin's login session (then state changes need the ``X-CSRFToken`` header), or an API
token (``Authorization: Bearer ...``, see ``services.accounts.tokens``). Match objects are
``compare.records.match_to_dict`` (the fields of ``fptrack matches --format json``) plus ``id`` and
``status``. Errors are JSON too: ``{"error": "..."}`` with the HTTP status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Blueprint, abort, request
from flask_login import current_user
from sqlalchemy import select
from sqlalchemy.orm import joinedload

from fptrack.admin.openapi import openapi_document
from fptrack.admin.security import requires_role
from fptrack.admin.views.context import admin_state, db_session
from fptrack.admin.views.crawls import crawl_rows
from fptrack.admin.views.read_sessions import read_session
from fptrack.admin.views.sites import site_rows
from fptrack.analytics.rollups import match_rollup
from fptrack.analytics.takedowns import STATES, takedown_records, takedown_stats
from fptrack.compare.records import match_to_dict
from fptrack.services.evidence.alignment import match_alignment
from fptrack.services.queries import (
    MAX_ID,
    chapter_rows,
    collect_stats,
    count_matches,
    list_matches,
    match_filter_from_args,
    matching_ids,
    positive_int_arg,
    work_rows,
)
from fptrack.services.review import (
    BULK_LIMIT,
    Basis,
    add_note,
    match_history,
    record_bulk_decision,
    record_decision,
)
from fptrack.services.rights import work_rights_json
from fptrack.storage.models import Chapter, Match, Page, Work, iso_utc

__all__ = ["API_MAX_PER_PAGE", "API_PER_PAGE", "blueprint", "match_json"]

API_PER_PAGE = 50
API_MAX_PER_PAGE = 500

blueprint = Blueprint("api", __name__, url_prefix="/api")


def match_json(match: Match, *, detail: bool = False) -> dict[str, Any]:
    """A match as the API gives it: the documented fields with ``id`` and ``status``; ``detail`` (one match)
    adds what the page said of itself (``page_note``: text cut or repaired), the passages on the later parts
    of a chapter split over pages (``parts``) and the takedown state (``takedown``)."""
    found = {"id": match.id, **match_to_dict(match), "status": match.status}
    if not detail:
        return found
    return {
        **found,
        "page_note": match.page.note or "",
        "parts": [
            {
                "page_id": int(part["page_id"]),
                "url": str(part["url"]),
                "part": int(part["part"]),
                "spans": [list(map(int, span)) for span in part["spans"]],
            }
            for part in match.part_spans or []
        ],
        "takedown": {
            "state": match.recheck_state or "unchecked",
            "rechecked_at": iso_utc(match.rechecked_at),
            "taken_down_at": iso_utc(match.taken_down_at),
        },
        "aligned": _aligned(match),
    }


def _aligned(match: Match) -> list[dict[str, Any]] | None:
    """A meaning match's aligned sentence pairs with their texts (``services.evidence.alignment``: the page's
    text as copied beside the chapter's), in order; None for an exact copy."""
    alignment = match_alignment(read_session(), match)
    if alignment is None:
        return None
    return [
        {
            "number": pair.number,
            "page": [pair.page_start, pair.page_end],
            "chapter": [pair.chapter_start, pair.chapter_end],
            "similarity": round(pair.similarity, 4),
            "page_text": pair.page_text,
            "chapter_text": pair.chapter_text,
        }
        for pair in alignment.pairs
    ]


def _bad(error: Exception) -> None:
    message = str(error)
    abort(400, description=message[:1].upper() + message[1:])


def _body() -> Mapping[str, Any]:
    """The request's JSON object, or its form fields."""
    if request.is_json:
        try:
            body = request.get_json(silent=True)
        except RecursionError:  # nested deeper than the parser goes: not a body any route takes
            abort(400, description="The body is not valid JSON: nested too deep.")
        if not isinstance(body, dict):
            abort(400, description="The body must be a JSON object.")
        return body
    return request.form


def _text_field(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        abort(400, description=f"{name} must be a string.")
    return value


# ------------------------------------------------------------------------------------------------ lists


@blueprint.get("/matches")
def list_matches_json() -> dict[str, Any]:
    try:
        match_filter = match_filter_from_args(request.args)
        number = positive_int_arg(request.args, "page", 1)
        per_page = positive_int_arg(request.args, "per_page", API_PER_PAGE, maximum=API_MAX_PER_PAGE)
    except ValueError as error:
        _bad(error)
    listing = list_matches(read_session(), match_filter, number, per_page)
    return {
        "items": [match_json(match) for match in listing.items],
        "page": listing.number,
        "per_page": listing.per_page,
        "total": listing.total,
        "pages": listing.pages,
    }


def _load(match_id: int) -> Match:
    match = read_session().get(
        Match,
        match_id,
        options=[
            joinedload(Match.page).defer(Page.text),
            joinedload(Match.work).defer(Work.text),
            joinedload(Match.chapter).defer(Chapter.text),
        ],
    )
    if match is None:
        abort(404, description=f"There is no match with id {match_id}.")
    return match


@blueprint.get("/matches/<int:match_id>")
def match_detail_json(match_id: int) -> dict[str, Any]:
    return match_json(_load(match_id), detail=True)


@blueprint.get("/matches/<int:match_id>/history")
def match_history_json(match_id: int) -> dict[str, Any]:
    _load(match_id)
    return {
        "items": [
            {"kind": e.kind, "at": e.at.isoformat(), "who": e.who, "text": e.text, "status": e.status}
            for e in match_history(read_session(), match_id)
        ]
    }


@blueprint.get("/works")
def works_json() -> dict[str, Any]:
    return {
        "items": [
            {
                "id": w.id,
                "title": w.title,
                "source_name": w.source_name,
                "chapters": w.chapters,
                "matches": w.matches,
                "created_at": w.created_at.isoformat(),
            }
            for w in work_rows(read_session())
        ]
    }


@blueprint.get("/works/<int:work_id>")
def work_json(work_id: int) -> dict[str, Any]:
    session = read_session()
    rows = work_rows(session, work_id)
    if not rows:
        abort(404, description=f"There is no work with id {work_id}.")
    work = rows[0]
    stored = session.get(Work, work_id)
    return {
        "id": work.id,
        "title": work.title,
        "source_name": work.source_name,
        "matches": work.matches,
        "created_at": work.created_at.isoformat(),
        "rights": work_rights_json(stored) if stored is not None else None,
        "chapters": [
            {"id": c.id, "index": c.index, "title": c.title, "length": c.length, "matches": c.matches}
            for c in chapter_rows(session, work_id)
        ],
    }


@blueprint.get("/crawls")
def crawls_json() -> dict[str, Any]:
    return {
        "items": [
            {
                "id": c.id,
                "site": c.host,
                "start_urls": list(c.start_urls),
                "depth": c.depth,
                "max_pages": c.max_pages,
                "status": c.status,
                "started_at": c.started_at.isoformat(),
                "finished_at": c.finished_at.isoformat() if c.finished_at else None,
                "pages_seen": c.pages_seen,
                "pages_failed": c.pages_failed,
                "pages_matched": c.pages_matched,
                "error": c.error,
            }
            for c in crawl_rows(read_session())
        ]
    }


@blueprint.get("/sites")
def sites_json() -> dict[str, Any]:
    return {
        "items": [
            {
                "id": s.id,
                "name": s.name,
                "host": s.host,
                "enabled": s.enabled,
                "schedule": s.schedule,
                "next_crawl_at": s.next_crawl_at.isoformat() if s.next_crawl_at else None,
                "last_crawled_at": s.last_crawled_at.isoformat() if s.last_crawled_at else None,
                "last_status": s.last_status,
                "last_error": s.last_error,
                "running": s.running,
            }
            for s in site_rows(read_session())
        ]
    }


@blueprint.get("/takedowns")
def takedowns_json() -> dict[str, Any]:
    """The matches followed for takedown, oldest first, a page at a time (``analytics.takedowns``)."""
    state = request.args.get("state") or None
    domain = request.args.get("domain") or None
    try:
        if state is not None and state not in STATES:
            raise ValueError(f"state must be one of {', '.join(STATES)}.")
        work_id = positive_int_arg(request.args, "work", 0, maximum=2**63 - 1) or None  # 0: every work
        number = positive_int_arg(request.args, "page", 1)
        per_page = positive_int_arg(request.args, "per_page", API_PER_PAGE, maximum=API_MAX_PER_PAGE)
    except ValueError as error:
        _bad(error)
    items = takedown_records(
        read_session(),
        state=state,
        work_id=work_id,
        domain=domain,
        limit=per_page,
        offset=(number - 1) * per_page,
    )
    return {"items": items, "page": number, "per_page": per_page}


@blueprint.get("/takedowns/stats")
def takedown_stats_json() -> dict[str, Any]:
    by = request.args.get("by", "all")
    if by not in ("all", "host", "work"):
        abort(400, description="by must be all, host or work.")
    rows = takedown_stats(read_session(), by)  # type: ignore[arg-type]
    return {"by": by, "items": [{**row.as_json(), "rate": row.rate} for row in rows]}


@blueprint.get("/stats")
def stats_json() -> dict[str, object]:
    return collect_stats(read_session()).as_json()


@blueprint.get("/reports/rollup")
def rollup_json() -> dict[str, Any]:
    by = request.args.get("by", "work")
    if by not in ("work", "host", "day"):
        abort(400, description="by must be work, host or day.")
    return {"by": by, "items": [row.as_json() for row in match_rollup(read_session(), by)]}  # type: ignore[arg-type]


@blueprint.get("/openapi.json")
def openapi_json() -> dict[str, Any]:
    return openapi_document()


# ----------------------------------------------------------------------------------------------- review


@blueprint.post("/matches/<int:match_id>/review")
@requires_role("reviewer")
def review_json(match_id: int) -> dict[str, Any]:
    """``{"status": "confirmed"|"dismissed"|"flagged", "reason": "..."}``; a confirmation may carry (and
    for an excerpt or a low score must carry) the reviewer's basis: ``"copy_kind"`` (whole_chapter,
    substantial_part, excerpt), ``"fair_use_considered"`` (true) and ``"basis"`` (a short note)."""
    body = _body()
    session = db_session()
    considered = body.get("fair_use_considered")
    if considered is not None and not isinstance(considered, bool):
        abort(400, description="fair_use_considered must be true or false.")
    basis = Basis(_text_field(body, "copy_kind"), considered, _text_field(body, "basis"))
    try:
        decision = record_decision(
            session,
            match_id,
            _text_field(body, "status"),
            current_user.username,
            _text_field(body, "reason"),
            basis=basis,
            basis_below=admin_state().settings.review_basis_below,
        )
    except LookupError:
        abort(404, description=f"There is no match with id {match_id}.")
    except ValueError as error:
        _bad(error)
    session.commit()
    return {
        "id": match_id,
        "previous_status": decision.previous_status,
        "status": decision.status,
        "recorded": decision.recorded,
    }


@blueprint.post("/matches/<int:match_id>/notes")
@requires_role("reviewer")
def note_json(match_id: int) -> tuple[dict[str, Any], int]:
    """``{"text": "..."}``."""
    session = db_session()
    try:
        note = add_note(session, match_id, current_user.username, _text_field(_body(), "text"))
    except LookupError:
        abort(404, description=f"There is no match with id {match_id}.")
    except ValueError as error:
        _bad(error)
    session.commit()
    return {"id": note.id, "match_id": match_id, "author": note.author, "text": note.text}, 201


@blueprint.post("/matches/review")
@requires_role("reviewer")
def bulk_review_json() -> dict[str, Any]:
    """Bulk decision: ``{"status", "reason", "ids": [...]}`` on the given matches of the filtered list (the
    query string's filters), or ``{"status", "reason", "all": true, "expected": N}`` on every match of it
    (refused with 409 unless the list still has N matches)."""
    body = _body()
    try:
        match_filter = match_filter_from_args(request.args)
    except ValueError as error:
        _bad(error)
    session = db_session()
    if body.get("all") is True:
        total = count_matches(session, match_filter)
        if body.get("expected") != total:
            abort(409, description=f"The list has {total} matches, not {body.get('expected')!r}; look again.")
        if total > BULK_LIMIT:
            abort(400, description=f"A bulk action changes at most {BULK_LIMIT} matches; narrow the filter.")
        ids = matching_ids(session, match_filter, BULK_LIMIT)
    else:
        raw = body.get("ids")
        if not isinstance(raw, list) or not raw or len(raw) > BULK_LIMIT:
            abort(400, description=f"ids must be a list of 1 to {BULK_LIMIT} match ids (or send all: true).")
        if not all(isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= MAX_ID for i in raw):
            abort(400, description="ids must be match ids (positive integers).")
        on_list = set(session.scalars(match_filter.apply(select(Match.id).where(Match.id.in_(raw)))))
        ids = [match_id for match_id in raw if match_id in on_list]
    try:
        decisions = record_bulk_decision(
            session,
            ids,
            _text_field(body, "status"),
            current_user.username,
            _text_field(body, "reason"),
            basis_below=admin_state().settings.review_basis_below,
        )
    except ValueError as error:
        session.rollback()
        _bad(error)
    session.commit()
    return {
        "items": [
            {
                "id": d.match_id,
                "previous_status": d.previous_status,
                "status": d.status,
                "recorded": d.recorded,
            }
            for d in decisions
        ]
    }
