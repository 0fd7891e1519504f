"""``/works`` and ``/works/<id>``: the registered works and their chapters, with match counts; on a work's
page, its rights (author, owner, registration number, authorised original) and the files that prove them,
which an admin sets (:mod:`services.rights`)."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext

from fptrack.admin.security import requires_role
from fptrack.admin.views.context import db_session
from fptrack.admin.views.read_sessions import read_session
from fptrack.services.queries import MAX_ID, chapter_rows, work_rows
from fptrack.services.rights import (
    PROOF_LABELS,
    WORK_RIGHTS_FIELDS,
    RightsError,
    add_proof,
    assign_proof,
    save_work_rights,
)
from fptrack.storage.models import Sender, Work

__all__ = ["blueprint"]

blueprint = Blueprint("works", __name__, url_prefix="/works")


@blueprint.get("")
def index() -> str:
    return render_template("works.html", works=work_rows(read_session()))


def _detail(work_id: int, error: str = "", status: int = 200) -> tuple[str, int]:
    session = read_session()
    rows = work_rows(session, work_id)
    rights = session.get(Work, work_id) if rows else None
    if rights is None:
        abort(404, description=gettext("There is no work with id %(id)s.", id=work_id))
    page = render_template(
        "work.html",
        work=rows[0],
        chapters=chapter_rows(session, work_id),
        rights=rights,
        proof_labels=PROOF_LABELS["en"],
        agents=[s for s in session.query(Sender).order_by(Sender.name) if s.role == "agent"],
        error=error,
    )
    return page, status


@blueprint.get("/<int:work_id>")
def detail(work_id: int) -> ResponseReturnValue:
    return _detail(work_id)


@blueprint.post("/<int:work_id>/rights")
@requires_role("admin")
def rights(work_id: int) -> ResponseReturnValue:
    """Save the work's rights data, and the proof uploaded or the stored proof named (``use_proof``)."""
    session = db_session()
    work = session.get(Work, work_id) if 1 <= work_id <= MAX_ID else None
    if work is None:
        abort(404, description=gettext("There is no work with id %(id)s.", id=work_id))
    form = request.form
    try:
        fields = {name: (form.get(name) or "")[:2048] for name in WORK_RIGHTS_FIELDS if name in form}
        save_work_rights(session, work_id, **fields)
        upload = request.files.get("proof")
        if upload is not None and upload.filename:
            kind = form.get("proof_kind") or "ownership_certificate"
            sender = None
            if kind == "authorisation":
                agent = (form.get("agent") or "").strip()
                sender = session.get(Sender, int(agent)) if agent.isdigit() and int(agent) <= MAX_ID else None
                if sender is None:
                    raise RightsError("an authorisation names the agent it authorises")
            elif kind != "ownership_certificate":
                raise RightsError(
                    f"a work's proof is an ownership certificate or an authorisation, not {kind!r}"
                )
            add_proof(
                session,
                upload.filename,
                upload.read(),
                kind=kind,
                work=work,
                sender=sender,
                media_type=upload.mimetype or None,
            )
        use = (form.get("use_proof") or "").strip()
        if use:
            if not use.isdigit() or int(use) > MAX_ID:
                raise RightsError(f"a proof's id is a number, not {use!r}")
            assign_proof(session, int(use), work=work)
    except RightsError as error:
        session.rollback()
        return _detail(work_id, str(error), 400)
    session.commit()
    flash(gettext("Saved the rights of work #%(id)d.", id=work_id))
    return redirect(url_for("works.detail", work_id=work_id), code=303)
