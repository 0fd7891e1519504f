"""``/notices``: takedown notices (list, draft from a host or a match, preview, send, what became of them)
for reviewers and admins; ``/senders``: who signs them and whom each host's notices go to, for admins. The
same services as ``fptrack notices``, ``fptrack senders`` and ``fptrack contacts`` (:mod:`jobs.notices`).

Viewers see none of it: a notice asserts infringement under penalty of perjury, and its sender's contact
details are nobody else's business. The notice itself is rendered by :mod:`jobs.notice_render` (the same text
and HTML that are sent), with the admin's stylesheet and links on screen."""

from __future__ import annotations

import json

from flask import Blueprint, Response, abort, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext
from flask_login import current_user
from markupsafe import Markup
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.admin.security import requires_role
from fptrack.admin.views.context import admin_state, db_session
from fptrack.admin.vocabulary import label
from fptrack.core.phrase import Phrase
from fptrack.jobs.delivery import DeliveryError, infringing_urls, lumen_json, urls_by_work
from fptrack.jobs.notice_proof import timestamp_time
from fptrack.jobs.notice_render import NavLink, missing_elements, render_html
from fptrack.jobs.notices import (
    MARKS,
    SENDER_FIELDS,
    NothingLeftError,
    NoticeError,
    add_contact,
    draft_notice,
    edit_contact,
    follow_up,
    list_contacts,
    list_notices,
    load_notice,
    mark_notice,
    remove_contact,
    remove_sender,
    save_sender,
    send_notice,
)
from fptrack.services.pdf import PdfUnavailable, html_to_pdf
from fptrack.services.queries import MAX_ID
from fptrack.services.rights import PROOF_LABELS, RightsError, add_proof
from fptrack.storage.models import (
    CONTACT_KINDS,
    NOTICE_LANGUAGES,
    NOTICE_STATES,
    SENDER_KINDS,
    SENDER_ROLES,
    HostContact,
    Notice,
    Sender,
    Work,
    utcnow,
)

__all__ = ["blueprint", "notice_document", "senders_blueprint"]

blueprint = Blueprint("notices", __name__, url_prefix="/notices")
senders_blueprint = Blueprint("senders", __name__, url_prefix="/senders")

STYLESHEET_FOR_PDF = "notice.css"  # services.pdf resolves bare names in admin/static
# how a reason's parameters are shown: data (URLs, names, titles), commands and citations, marked as such
MARKED_PARAMS = {
    "url": Markup('<span class="url">%s</span>'),
    "name": Markup('<span class="name">%s</span>'),
    "title": Markup('<span class="title">%s</span>'),
    "command": Markup("<code>%s</code>"),
    "ref": Markup('<span class="citation">%s</span>'),  # a law's article: 17 U.S.C. 512(c)(3)(A)(iv)
}


def _actor() -> str:
    return f"admin:{current_user.username}"


def _message(error: Exception) -> str:
    text = str(error)
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _database_id(text: str, what: str) -> int:
    """A form's id: 400 unless a number, 404 unless one a database row can have (1 to 2**63 - 1)."""
    try:
        number = int(text)
    except ValueError:
        abort(400, description=f"A {what} is named by its number.")
    if not 1 <= number <= MAX_ID:
        abort(404, description=f"There is no {what} {text[:40]}.")
    return number


def _notice_or_404(session: Session, notice_id: int) -> Notice:
    try:
        return load_notice(session, notice_id)
    except NoticeError:
        abort(404, description=gettext("There is no notice with id %(id)s.", id=notice_id))


def said(phrase: Phrase) -> Markup:
    """A phrase of the layers below (:mod:`core.phrase`) in the page's language, as HTML: its template
    translated, its parameters escaped and marked up by :data:`MARKED_PARAMS` (URLs are crawled data)."""

    def mark(name: str, value: object) -> object:
        return MARKED_PARAMS[name] % value if name in MARKED_PARAMS else value

    return Markup(phrase.say(lambda template: Markup.escape(gettext(template)), mark))


def still_missing(notice: Notice) -> list[Markup]:
    """What a draft lacks before it may be sent (:func:`jobs.notice_render.missing_elements`), in the page's
    language. A preview (a notice not kept, ``id`` None) has no evidence bundles yet: keeping it as a draft
    makes them, so their absence is the next step, not a flaw of the case."""
    if notice.state != "draft":
        return []
    return [said(line) for line in missing_elements(notice, bundles_due=notice.id is not None)]


def smtp_relay_missing() -> str:
    """Why no notice can be sent by email from here ('' when an SMTP relay is configured)."""
    if admin_state().settings.smtp_host:
        return ""
    return str(
        gettext(
            "No SMTP relay is configured (FPTRACK_SMTP_HOST): download the notice and send it yourself, or "
            "ask the administrator to set one."
        )
    )


def notice_document(notice: Notice, *, for_pdf: bool, nav: list[NavLink] | None = None) -> str:
    """The notice as an HTML document: linked to the admin's stylesheet, with ``nav`` and, for a draft, what
    it still lacks (on screen only)."""
    stylesheet = STYLESHEET_FOR_PDF if for_pdf else url_for("static", filename="notice.css")
    missing = [] if for_pdf else still_missing(notice)
    when = notice.sent_at or utcnow()
    return render_html(
        notice,
        when,
        stylesheet=stylesheet,
        nav=[] if for_pdf else (nav or []),
        missing=missing,
        missing_heading=str(gettext("This notice cannot be sent yet. Missing:")),
    )


def pdf_response(html: str, filename: str) -> Response:
    try:
        pdf = html_to_pdf(html)
    except PdfUnavailable as error:
        abort(503, description=str(error))
    return Response(
        pdf, mimetype="application/pdf", headers={"Content-Disposition": f'attachment; filename="{filename}"'}
    )


# ------------------------------------------------------------------------------------------------ notices


@blueprint.get("")
@requires_role("reviewer")
def index() -> ResponseReturnValue:
    state = request.args.get("state") or None
    if state is not None and state not in NOTICE_STATES:
        abort(400, description=f"state must be one of {', '.join(NOTICE_STATES)}.")
    session = db_session()
    senders = list(session.scalars(select(Sender).order_by(Sender.name)))
    return render_template(
        "notices.html",
        notices=list_notices(session, state=state),
        state=state,
        states=NOTICE_STATES,
        senders=senders,
        languages=NOTICE_LANGUAGES,
        host=(request.args.get("host") or "").strip(),
        match=(request.args.get("match") or "").strip(),
    )


@blueprint.post("")
@requires_role("reviewer")
def draft() -> ResponseReturnValue:
    """A draft for a host's confirmed matches or for one confirmed match, with its evidence bundles."""
    form = request.form
    host = (form.get("host") or "").strip().lower()[:255] or None
    match_text = (form.get("match") or "").strip()
    if bool(host) == bool(match_text):
        abort(400, description="Name a site or a match (not both).")
    match_ids = [_database_id(match_text, "match")] if match_text else []
    session = db_session()
    sender = None
    if form.get("sender"):
        sender = session.get(Sender, _database_id(form.get("sender") or "", "sender"))
        if sender is None:
            abort(400, description="There is no such sender.")
    language = form.get("language") or None
    if language is not None and language not in NOTICE_LANGUAGES:
        abort(400, description=f"language must be one of {', '.join(NOTICE_LANGUAGES)}.")
    try:
        notice = draft_notice(
            session,
            actor=_actor(),
            match_ids=match_ids,
            host=host,
            sender=sender,
            language=language,
            recipient=(form.get("recipient") or "").strip()[:320] or None,
            bundle_settings=admin_state().settings,
        )
    except NoticeError as error:
        session.rollback()
        abort(400, description=_message(error))
    session.commit()
    flash(gettext("Drafted notice %(id)d.", id=notice.id))
    return redirect(url_for("notices.show", notice_id=notice.id), code=303)


@blueprint.get("/<int:notice_id>")
@requires_role("reviewer")
def show(notice_id: int) -> ResponseReturnValue:
    notice = _notice_or_404(db_session(), notice_id)
    return render_template(
        "notice_page.html",
        notice=notice,
        missing=still_missing(notice),
        no_relay=smtp_relay_missing(),
        marks=list(MARKS),
        sent_stamped_at=timestamp_time(notice),
    )


@blueprint.get("/<int:notice_id>/notice.eml")
@requires_role("reviewer")
def sent_message(notice_id: int) -> Response:
    """The message exactly as the relay took it (its SHA-256 is on the notice's page)."""
    notice = _notice_or_404(db_session(), notice_id)
    if not notice.sent_message:
        abort(
            404,
            description=f"Notice {notice.id} has no stored message (unsent, or sent before they were kept).",
        )
    return Response(
        bytes(notice.sent_message),
        mimetype="message/rfc822",
        headers={"Content-Disposition": f'attachment; filename="notice-{notice.id}.eml"'},
    )


@blueprint.get("/<int:notice_id>/notice.eml.tsr")
@requires_role("reviewer")
def sent_timestamp(notice_id: int) -> Response:
    """The RFC 3161 time-stamp response over the stored message's SHA-256."""
    notice = _notice_or_404(db_session(), notice_id)
    if not notice.sent_timestamp:
        abort(404, description=f"Notice {notice.id} has no time-stamp on its message.")
    return Response(
        bytes(notice.sent_timestamp),
        mimetype="application/timestamp-reply",
        headers={"Content-Disposition": f'attachment; filename="notice-{notice.id}.eml.tsr"'},
    )


@blueprint.get("/<int:notice_id>/document")
@requires_role("reviewer")
def document(notice_id: int) -> ResponseReturnValue:
    notice = _notice_or_404(db_session(), notice_id)
    nav = [
        NavLink(str(gettext("← Notice %(id)s", id=notice.id)), url_for("notices.show", notice_id=notice.id)),
        NavLink(str(gettext("Download as PDF")), url_for("notices.pdf", notice_id=notice.id), "notice-pdf"),
    ]
    return notice_document(notice, for_pdf=False, nav=nav)


@blueprint.get("/<int:notice_id>/notice.txt")
@requires_role("reviewer")
def text(notice_id: int) -> Response:
    notice = _notice_or_404(db_session(), notice_id)
    return Response(notice.text, mimetype="text/plain")


@blueprint.get("/<int:notice_id>/notice.pdf")
@requires_role("reviewer")
def pdf(notice_id: int) -> Response:
    notice = _notice_or_404(db_session(), notice_id)
    return pdf_response(notice_document(notice, for_pdf=True), f"takedown-notice-{notice.id}.pdf")


@blueprint.get("/<int:notice_id>/export")
@requires_role("reviewer")
def export(notice_id: int) -> Response:
    """``?format=lumen`` (JSON) or ``?format=urls`` (the infringing URLs, one a line)."""
    notice = _notice_or_404(db_session(), notice_id)
    kind = request.args.get("format") or "lumen"
    if kind == "urls":
        return Response(infringing_urls(notice), mimetype="text/plain")
    if kind == "urls-by-work":
        return Response(urls_by_work(notice), mimetype="text/plain")
    if kind == "urls-csv":
        return Response(
            urls_by_work(notice, csv_format=True),
            mimetype="text/csv",
            headers={"Content-Disposition": f'attachment; filename="notice-{notice.id}-urls.csv"'},
        )
    if kind != "lumen":
        abort(400, description="format must be lumen, urls, urls-by-work or urls-csv.")
    return Response(
        json.dumps(lumen_json(notice), ensure_ascii=False, indent=2),
        mimetype="application/json",
        headers={"Content-Disposition": f'attachment; filename="notice-{notice.id}-lumen.json"'},
    )


@blueprint.post("/<int:notice_id>/send")
@requires_role("reviewer")
def send(notice_id: int) -> ResponseReturnValue:
    session = db_session()
    notice = _notice_or_404(session, notice_id)
    if no_relay := smtp_relay_missing():
        flash(no_relay)  # the button was shown disabled with this reason: a form posted by hand
        return redirect(url_for("notices.show", notice_id=notice_id), code=303)
    before = len(notice.items)
    try:
        send_notice(session, notice, admin_state().settings, actor=_actor())
    except NothingLeftError as error:
        # not a mistake of the request: the copies changed since the draft; the draft stays as it was, and
        # what the copies' pages answered when fetched again, and why nothing was sent, are kept
        session.commit()
        flash(_message(error))
        return redirect(url_for("notices.show", notice_id=notice_id), code=303)
    except NoticeError as error:
        session.rollback()
        abort(400, description=_message(error))
    except DeliveryError as error:
        session.commit()  # the failed attempt is recorded
        abort(502, description=_message(error))
    session.commit()
    left_out = before - len(notice.items)
    flash(
        gettext("Sent notice %(id)d to %(address)s", id=notice.id, address=notice.recipient_address)
        + (gettext("; %(num)d copy(ies) left out, see its events.", num=left_out) if left_out else ".")
    )
    return redirect(url_for("notices.show", notice_id=notice.id), code=303)


@blueprint.post("/<int:notice_id>/mark")
@requires_role("reviewer")
def mark(notice_id: int) -> ResponseReturnValue:
    session = db_session()
    notice = _notice_or_404(session, notice_id)
    try:
        mark_notice(
            session,
            notice,
            request.form.get("mark") or "",
            actor=_actor(),
            note=request.form.get("note") or "",
        )
    except NoticeError as error:
        session.rollback()
        abort(400, description=_message(error))
    session.commit()
    flash(gettext("Notice %(id)d: %(mark)s.", id=notice.id, mark=label(request.form.get("mark"))))
    return redirect(url_for("notices.show", notice_id=notice.id), code=303)


@blueprint.post("/follow-up")
@requires_role("reviewer")
def run_follow_up() -> ResponseReturnValue:
    session = db_session()
    summary = follow_up(session, admin_state().settings)
    session.commit()
    flash(
        gettext(
            "Follow-up: %(closed)d copy(ies) found gone, %(done)d notice(s) done, %(reminders)d reminder(s), "
            "%(escalations)d escalation(s), %(sent)d sent, %(waiting)d waiting as draft(s).",
            closed=summary.items_closed,
            done=len(summary.copies_gone),
            reminders=len(summary.reminders),
            escalations=len(summary.escalations),
            sent=len(summary.sent),
            waiting=len(summary.not_sent),
        )
    )
    return redirect(url_for("notices.index"), code=303)


# ------------------------------------------------------------------------------------------------ senders


def _senders_page(error: str = "", status: int = 200) -> tuple[str, int]:
    session = db_session()
    senders = list(session.scalars(select(Sender).order_by(Sender.name)))
    return (
        render_template(
            "senders.html",
            senders=senders,
            contacts=list_contacts(session),
            languages=NOTICE_LANGUAGES,
            kinds=CONTACT_KINDS,
            sender_kinds=SENDER_KINDS,
            sender_roles=SENDER_ROLES,
            proof_labels=PROOF_LABELS["en"],
            works=list(session.execute(select(Work.id, Work.title).order_by(Work.id))),
            error=error,
        ),
        status,
    )


@senders_blueprint.get("")
@requires_role("admin")
def senders_index() -> ResponseReturnValue:
    return _senders_page()


def _sender_fields() -> dict[str, str | None]:
    form = request.form
    fields: dict[str, str | None] = {}
    for name in SENDER_FIELDS:
        value = form.get(name)
        fields[name] = None if value is None else value[:2000]
    return fields


@senders_blueprint.post("")
@requires_role("admin")
def senders_add() -> ResponseReturnValue:
    session = db_session()
    try:
        sender = save_sender(session, request.form.get("name") or "", create=True, **_sender_fields())
    except NoticeError as error:
        session.rollback()
        return _senders_page(_message(error), 400)
    session.commit()
    flash(gettext("Added sender %(name)s.", name=sender.name))
    return redirect(url_for("senders.senders_index"), code=303)


@senders_blueprint.post("/<int:sender_id>")
@requires_role("admin")
def senders_edit(sender_id: int) -> ResponseReturnValue:
    session = db_session()
    sender = session.get(Sender, sender_id)
    if sender is None:
        abort(404, description=gettext("There is no sender with id %(id)s.", id=sender_id))
    try:
        save_sender(session, sender.name, create=False, **_sender_fields())
        upload = request.files.get("proof")
        if upload is not None and upload.filename:
            kind = request.form.get("proof_kind") or "identity"
            if kind not in ("identity", "authorisation"):
                raise RightsError(f"a sender's proof is an identity or an authorisation, not {kind!r}")
            work = None
            for_work = (request.form.get("for_work") or "").strip()
            if for_work and kind == "authorisation":
                work = session.get(Work, int(for_work)) if for_work.isdigit() and len(for_work) < 19 else None
                if work is None:
                    raise RightsError(f"there is no work with id {for_work}")
            add_proof(
                session,
                upload.filename,
                upload.read(),
                kind=kind,
                work=work,
                sender=sender,
                media_type=upload.mimetype or None,
            )
    except (NoticeError, RightsError) as error:
        session.rollback()
        return _senders_page(_message(error), 400)
    session.commit()
    flash(gettext("Saved sender %(name)s.", name=sender.name))
    return redirect(url_for("senders.senders_index"), code=303)


@senders_blueprint.post("/contacts")
@requires_role("admin")
def contacts_add() -> ResponseReturnValue:
    session = db_session()
    form = request.form
    try:
        contact = add_contact(
            session,
            form.get("host") or "",
            form.get("email") or "",
            kind=form.get("kind") or "site",
            name=form.get("name") or "",
            language=form.get("language") or "",
            note=form.get("note") or "",
        )
    except NoticeError as error:
        session.rollback()
        return _senders_page(_message(error), 400)
    session.commit()
    flash(
        gettext(
            "Added %(email)s as level %(level)s of %(host)s.",
            email=contact.email,
            level=contact.level,
            host=contact.host,
        )
    )
    return redirect(url_for("senders.senders_index"), code=303)


@senders_blueprint.post("/<int:sender_id>/remove")
@requires_role("admin")
def senders_remove(sender_id: int) -> ResponseReturnValue:
    """Remove a sender no sent notice names (drafts that named it then name none)."""
    session = db_session()
    sender = session.get(Sender, sender_id)
    if sender is None:
        abort(404, description=gettext("There is no sender with id %(id)s.", id=sender_id))
    name = sender.name
    try:
        drafts = remove_sender(session, name)
    except NoticeError as error:
        session.rollback()
        return _senders_page(_message(error), 409)
    session.commit()
    flash(
        gettext("Removed sender %(name)s.", name=name)
        + (
            gettext(" Drafts now without a sender: %(ids)s.", ids=", ".join(map(str, drafts)))
            if drafts
            else ""
        )
    )
    return redirect(url_for("senders.senders_index"), code=303)


def _contact_or_404(session: Session, contact_id: int) -> HostContact:
    contact = session.get(HostContact, contact_id)
    if contact is None:
        abort(404, description=gettext("There is no contact with id %(id)s.", id=contact_id))
    return contact


@senders_blueprint.post("/contacts/<int:contact_id>")
@requires_role("admin")
def contacts_edit(contact_id: int) -> ResponseReturnValue:
    session = db_session()
    contact = _contact_or_404(session, contact_id)
    form = request.form
    try:
        edit_contact(
            session,
            contact,
            email=form.get("email"),
            kind=form.get("kind"),
            name=form.get("name"),
            language=form.get("language"),
            note=form.get("note"),
        )
    except NoticeError as error:
        session.rollback()
        return _senders_page(_message(error), 400)
    session.commit()
    flash(gettext("Saved contact %(email)s of %(host)s.", email=contact.email, host=contact.host))
    return redirect(url_for("senders.senders_index"), code=303)


@senders_blueprint.post("/contacts/<int:contact_id>/remove")
@requires_role("admin")
def contacts_remove(contact_id: int) -> ResponseReturnValue:
    session = db_session()
    contact = _contact_or_404(session, contact_id)
    email, host = contact.email, contact.host
    try:
        remove_contact(session, contact)
    except NoticeError as error:
        session.rollback()
        return _senders_page(_message(error), 409)
    session.commit()
    flash(gettext("Removed contact %(email)s of %(host)s.", email=email, host=host))
    return redirect(url_for("senders.senders_index"), code=303)
