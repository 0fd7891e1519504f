"""The life of a takedown notice: drafted for confirmed matches, sent, acknowledged, its copies gone, followed
up; and the senders and host contacts it needs. The CLI (``fptrack notices``, ``fptrack senders``,
``fptrack contacts``) and the admin call these same functions; what a notice says is
:mod:`jobs.notice_render`, how it travels :mod:`jobs.delivery`.

Who may make one: a notice asserts, under penalty of perjury, that the listed copies infringe; a wrong one is
the sender's liability (17 U.S.C. 512(f); 信息网络传播权保护条例 第二十四条). So a notice names only matches a
reviewer *confirmed* (:func:`notice_matches` refuses flagged, dismissed and licensed ones by id and status),
and the admin lets only reviewers and admins draft or send (the CLI has no roles: whoever runs it owns the
database).

The life (``notices.state``):

- ``draft``: made by :func:`draft_notice`; each item carries its copy as it stood (URL, passages beside the
  original, snapshot hash) and its evidence bundle (bytes and SHA-256: :func:`services.evidence.bundle.
  build_bundle`, signed with the key of the settings passed as ``bundle_settings``);
- ``sent``: :func:`send_notice` first leaves out each copy that may no longer be named
  (:func:`not_noticeable`: dismissed, licensed, taken down, already in an open notice to the address;
  nothing left: not sent, :class:`NothingLeftError`), refuses a notice lacking an element
  (:func:`jobs.notice_render.missing_elements`) or a recipient, renders the text once more dated now,
  stores it with its SHA-256 (never rendered again), sends it and records the Message-ID, the relay and
  the recipient (``notice_events``);
- ``acknowledged`` / ``withdrawn``: :func:`mark_notice` (a recipient's answer, the sender's change of mind);
  a bounce is recorded as an event and leaves the notice as it was;
- ``copy_gone``: :func:`follow_up` closes each item whose match the re-checks found taken down
  (``matches.taken_down_at``, :mod:`storage.match_life`) and reopens one that came back; a notice with every
  item closed is done;
- ``escalated``: a copy still up ``FPTRACK_NOTICE_ESCALATE_AFTER`` days after a notice was sent gets a
  follow-up: after a first notice (or an escalation) a *reminder* to the same recipient, after a reminder an
  *escalation* to the host's next contact upstream (``host_contacts``, by level). The follow-up carries the
  items still up that may still be named, the same evidence, and waits as a draft for a person to send it
  (it repeats the sworn statements), unless ``notice_auto_follow_up`` allows sending it at once. Without a
  next contact the chain stops, and says so once (``no_upstream``).

Times are passed in (``now``) so that tests and the beat agree on what "N days later" means; nothing sleeps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload, selectinload

from fptrack.compare.licensing import is_licensed, licensed_hosts_of
from fptrack.compare.records import match_files
from fptrack.core.errors import FptrackError
from fptrack.core.settings import Settings
from fptrack.jobs.delivery import DeliveryError, SmtpTransport, Transport, attachment_names, notice_message
from fptrack.jobs.notice_proof import keep_what_was_sent
from fptrack.jobs.notice_render import missing_elements, render_html, render_text
from fptrack.jobs.rechecks import PageVerdict, refetch_matches
from fptrack.services.accounts.contact_fields import InvalidField, check_email, check_fields, check_one_line
from fptrack.services.evidence.alignment import match_alignment, quoted_pairs
from fptrack.services.evidence.bundle import build_bundle
from fptrack.services.evidence.passages import EvidenceSpan, quote_pair
from fptrack.services.evidence.screenshot import one_browser
from fptrack.services.review import BASIS_BELOW, basis_needed, latest_basis
from fptrack.services.rights import RightsError, check_credit_code
from fptrack.storage.match_life import evidence_of
from fptrack.storage.models import (
    CONTACT_KINDS,
    NOTICE_LANGUAGES,
    SENDER_KINDS,
    SENDER_ROLES,
    HostContact,
    Match,
    MatchStatus,
    Notice,
    NoticeEvent,
    NoticeItem,
    Page,
    Sender,
    as_utc,
    utcnow,
)

__all__ = [
    "MARKS",
    "NOTICE_LIMIT",
    "PASSAGE_LIMIT",
    "SENDER_FIELDS",
    "FollowUpSummary",
    "NothingLeftError",
    "NoticeError",
    "add_contact",
    "default_sender",
    "draft_notice",
    "edit_contact",
    "find_contact",
    "find_sender",
    "follow_up",
    "list_contacts",
    "list_notices",
    "load_notice",
    "mark_notice",
    "not_noticeable",
    "notice_matches",
    "preview_notice",
    "remove_contact",
    "remove_sender",
    "save_sender",
    "send_notice",
]

NOTICE_LIMIT = 500
"""Items in one notice at most (a host with more confirmed copies gets several notices)."""
PASSAGE_LIMIT = 600
"""Characters of each passage (original and copy) quoted in a notice, the two cut at the same place of the
text (``services.evidence.passages.quote_pair``); the bundle has them whole."""
MEANING_PAIRS = 5
"""Aligned sentence pairs a notice quotes of a copy that keeps the meaning (a rewrite, a translation), spread
from the chapter's beginning to its end, with the share of the chapter the whole alignment covers."""
SENDER_FIELDS = (
    "rights_owner",
    "address",
    "email",
    "phone",
    "signer_name",
    "signer_title",
    "language",
    "kind",
    "role",
    "credit_code",
    "legal_representative",
)
# what a person may record about a sent notice (mark_notice): the new state, or an event only
MARKS = {"acknowledged": "acknowledged", "withdrawn": "withdrawn", "bounced": None}
OPEN_STATES = ("sent", "acknowledged")
# a notice whose copies are still being pursued: open, or followed up by a reminder or an escalation
PURSUED_STATES = (*OPEN_STATES, "escalated")


class NoticeError(FptrackError, ValueError):
    """A notice that cannot be made, sent or changed as asked; the message says why (which match is not
    confirmed, which element is missing...)."""


class NothingLeftError(NoticeError):
    """A notice not sent because none of its copies may still be named (each dismissed, licensed, taken down
    or already in an open notice to the same recipient); the message says why for each."""


def _clean(text: str | None, limit: int) -> str:
    return (text or "").strip()[:limit]


# ------------------------------------------------------------------------------------ senders, contacts


def _check_typed(fields: Mapping[str, str | None]) -> None:
    """Refuse a field that would break or add to the email's headers
    (``services.accounts.contact_fields``)."""
    try:
        check_fields(fields)
    except InvalidField as error:
        raise NoticeError(str(error)) from None


def _check_headers(notice: Notice) -> None:
    """Refuse to send a notice whose sender or recipient, stored before these fields were checked, would
    break the email's headers: one line saying which and what to fix, never a traceback."""
    sender = notice.sender
    try:
        check_one_line("the sender's name", sender.name if sender else "")
        check_one_line("the recipient's name", notice.recipient_name)
        for field_name, address in (
            ("the sender's email", sender.email if sender else ""),
            ("the recipient's address", notice.recipient_address),
        ):
            if address:
                check_email(field_name, address)
    except InvalidField as error:
        raise NoticeError(
            f"notice {notice.id} cannot be sent: {error} (correct the sender or the contact and draft "
            "it again)"
        ) from None


def find_sender(session: Session, name: str) -> Sender:
    sender = session.scalar(select(Sender).where(Sender.name == name.strip()))
    if sender is None:
        raise NoticeError(f"no sender named {name!r} (fptrack senders list)")
    return sender


def default_sender(session: Session) -> Sender | None:
    """The sender of a notice when none is named: the only one there is (None when there are none or many)."""
    senders = session.scalars(select(Sender).limit(2)).all()
    return senders[0] if len(senders) == 1 else None


def save_sender(session: Session, name: str, *, create: bool, **fields: str | None) -> Sender:
    """Add (``create``) or change the sender ``name``; ``fields`` not None are set (:data:`SENDER_FIELDS`).
    The caller commits."""
    name = _clean(name, 300)
    if not name:
        raise NoticeError("a sender needs a name (a person's or a company's)")
    _check_typed({"name": name, **fields})
    existing = session.scalar(select(Sender).where(Sender.name == name))
    if create and existing is not None:
        raise NoticeError(f"a sender named {name!r} exists already (fptrack senders edit)")
    if not create and existing is None:
        raise NoticeError(f"no sender named {name!r} (fptrack senders list)")
    sender = existing or Sender(name=name, language="en", kind="company", role="owner")
    for key, value in fields.items():
        if key not in SENDER_FIELDS:
            raise NoticeError(f"a sender has no field {key!r}")
        if value is None:
            continue
        if key == "language" and value not in NOTICE_LANGUAGES:
            raise NoticeError(f"language must be one of {', '.join(NOTICE_LANGUAGES)}, not {value!r}")
        if key == "kind" and value not in SENDER_KINDS:
            raise NoticeError(f"a sender is a {' or a '.join(SENDER_KINDS)}, not {value!r}")
        if key == "role" and value not in SENDER_ROLES:
            raise NoticeError(f"a sender's role is {' or '.join(SENDER_ROLES)} (代理人), not {value!r}")
        if key == "credit_code" and value.strip():
            try:
                value = check_credit_code(value)
            except RightsError as error:
                raise NoticeError(str(error)) from None
        setattr(sender, key, value.strip() if key != "address" else value.strip()[:2000])
    if fields.get("role") is None and existing is None and (sender.rights_owner or "") not in ("", name):
        sender.role = "agent"  # it named the owner it acts for (as migration 0027 read the senders before)
    if sender.kind == "person" and ((sender.credit_code or "") or (sender.legal_representative or "")):
        raise NoticeError(
            "a unified social credit code and a legal representative are a company's: set --kind company "
            "or leave them empty"
        )
    sender.updated_at = utcnow()
    if existing is None:
        session.add(sender)
    session.flush()
    return sender


def add_contact(
    session: Session,
    host: str,
    email: str,
    *,
    level: int | None = None,
    kind: str = "site",
    name: str = "",
    language: str = "",
    note: str = "",
) -> HostContact:
    """Add the next contact of ``host`` (``level``: its place in the escalation order; default: after the
    last one). The caller commits."""
    host = host.strip().lower()
    email = email.strip()
    if not host or "@" not in email:
        raise NoticeError("a host contact needs a host and an email address (abuse@hosting.example)")
    _check_typed({"host": host, "email": email, "name": name, "note": note})
    if kind not in CONTACT_KINDS:
        raise NoticeError(f"kind must be one of {', '.join(CONTACT_KINDS)}, not {kind!r}")
    if language and language not in NOTICE_LANGUAGES:
        raise NoticeError(f"language must be one of {', '.join(NOTICE_LANGUAGES)}, not {language!r}")
    if level is None:
        top = session.scalar(select(func.max(HostContact.level)).where(HostContact.host == host))
        level = 0 if top is None else top + 1
    if session.scalar(select(HostContact.id).where(HostContact.host == host, HostContact.level == level)):
        raise NoticeError(f"{host} has a contact at level {level} already")
    contact = HostContact(
        host=host,
        level=level,
        kind=kind,
        name=_clean(name, 300),
        email=email[:320],
        language=language,
        note=note.strip(),
    )
    session.add(contact)
    session.flush()
    return contact


def remove_sender(session: Session, name: str) -> list[int]:
    """Remove the sender ``name`` and its own proof files (identity, authorisations); returns the drafts that
    named it (they now name no sender, which they show as missing). Refused while a sent notice names it:
    what was sent keeps its sender. The caller commits."""
    sender = find_sender(session, name)
    named = session.execute(select(Notice.id, Notice.state).where(Notice.sender_id == sender.id)).all()
    sent = [notice_id for notice_id, state in named if state != "draft"]
    if sent:
        raise NoticeError(
            f"sender {sender.name!r} signed notice(s) {', '.join(map(str, sorted(sent)))}: a sent notice "
            "keeps its sender, so it cannot be removed (edit it instead)"
        )
    drafts = sorted(notice_id for notice_id, _state in named)
    for notice in session.scalars(select(Notice).where(Notice.id.in_(drafts))):
        notice.sender = None
    for proof in sender.proofs:
        if proof.work_id is not None and proof.kind != "authorisation":
            proof.sender_id = None  # a work's own proof, once filed through the sender, stays the work's
    session.flush()
    session.delete(sender)
    session.flush()
    return drafts


def find_contact(session: Session, host: str, level: int) -> HostContact:
    contact = session.scalar(
        select(HostContact).where(HostContact.host == host.strip().lower(), HostContact.level == level)
    )
    if contact is None:
        raise NoticeError(f"{host.strip().lower()} has no contact at level {level} (fptrack contacts list)")
    return contact


def edit_contact(
    session: Session,
    contact: HostContact,
    *,
    email: str | None = None,
    kind: str | None = None,
    name: str | None = None,
    language: str | None = None,
    note: str | None = None,
) -> HostContact:
    """Change the fields of ``contact`` that are not None, checked as :func:`add_contact` checks them.
    Notices already drafted or sent keep the recipient they name. The caller commits."""
    email = contact.email if email is None else email.strip()
    if "@" not in email:
        raise NoticeError("a host contact needs an email address (abuse@hosting.example)")
    name = contact.name if name is None else _clean(name, 300)
    note = contact.note if note is None else note.strip()
    _check_typed({"email": email, "name": name, "note": note})
    kind = contact.kind if kind is None else kind
    if kind not in CONTACT_KINDS:
        raise NoticeError(f"kind must be one of {', '.join(CONTACT_KINDS)}, not {kind!r}")
    language = contact.language if language is None else language
    if language and language not in NOTICE_LANGUAGES:
        raise NoticeError(f"language must be one of {', '.join(NOTICE_LANGUAGES)}, not {language!r}")
    contact.email, contact.name, contact.note, contact.kind, contact.language = (
        email[:320],
        name,
        note,
        kind,
        language,
    )
    session.flush()
    return contact


def remove_contact(session: Session, contact: HostContact) -> None:
    """Remove a host contact. Refused while a notice sent to it is still pursued (sent, acknowledged or
    followed up): its reminders go to the same recipient and its escalation to the next level up. The caller
    commits."""
    pursued = session.scalars(
        select(Notice.id)
        .where(
            Notice.host == contact.host,
            Notice.contact_level == contact.level,
            Notice.recipient_address == contact.email,
            Notice.state.in_(PURSUED_STATES),
        )
        .order_by(Notice.id)
    ).all()
    if pursued:
        raise NoticeError(
            f"notice(s) {', '.join(map(str, pursued))} to {contact.email} are still pursued (their follow-up "
            f"goes to this contact of {contact.host}); remove it once they are closed or withdrawn"
        )
    session.delete(contact)
    session.flush()


def list_contacts(session: Session, host: str | None = None) -> list[HostContact]:
    statement = select(HostContact).order_by(HostContact.host, HostContact.level)
    if host:
        statement = statement.where(HostContact.host == host.strip().lower())
    return list(session.scalars(statement))


def _contact(session: Session, host: str, above: int = -1) -> HostContact | None:
    """The host's first contact whose level is above ``above``."""
    return session.scalar(
        select(HostContact)
        .where(HostContact.host == host, HostContact.level > above)
        .order_by(HostContact.level)
        .limit(1)
    )


# ------------------------------------------------------------------------------------------------ drafts


def notice_matches(
    session: Session, *, match_ids: Sequence[int] = (), host: str | None = None
) -> list[Match]:
    """The matches a notice names: ``match_ids`` (each must exist and be confirmed, all on one host), or
    every confirmed match on ``host`` (oldest first, at most :data:`NOTICE_LIMIT`)."""
    options = (joinedload(Match.page), joinedload(Match.work), joinedload(Match.chapter))
    if match_ids:
        found = {
            m.id: m for m in session.scalars(select(Match).where(Match.id.in_(match_ids)).options(*options))
        }
        for match_id in match_ids:
            match = found.get(match_id)
            if match is None:
                raise NoticeError(f"there is no match with id {match_id}")
            if match.status != MatchStatus.CONFIRMED.value:
                raise NoticeError(
                    f"match {match_id} is {match.status}, not confirmed: a notice names only copies a "
                    "reviewer confirmed (fptrack review / the admin's evidence page)"
                )
        matches = [found[i] for i in dict.fromkeys(match_ids)]
        hosts = {m.page.host for m in matches}
        if len(hosts) > 1:
            raise NoticeError(
                f"the matches are on several hosts ({', '.join(sorted(hosts))}): one notice per host"
            )
        return matches
    host = (host or "").strip().lower()
    if not host:
        raise NoticeError("name the matches (--match ID) or the host (--host HOST)")
    matches = list(
        session.scalars(
            select(Match)
            .join(Page, Page.id == Match.page_id)
            .where(Page.host == host, Match.status == MatchStatus.CONFIRMED.value)
            .options(*options)
            .order_by(Match.first_seen, Match.id)
            .limit(NOTICE_LIMIT)
        ).unique()
    )
    if not matches:
        raise NoticeError(f"no confirmed match on {host}: a notice names only copies a reviewer confirmed")
    return matches


def not_noticeable(
    session: Session,
    match_ids: Collection[int | None],
    *,
    recipient: str = "",
    besides: Collection[int] = (),
    basis_below: float = BASIS_BELOW,
) -> dict[int | None, str]:
    """Why each of ``match_ids`` may not be named in a notice now (a match that may is absent): deleted, no
    longer confirmed, on a site since licensed for its work, found taken down, confirmed without the
    reviewer's basis it needs (an excerpt, or a score below ``basis_below``: :mod:`services.review`; a
    confirmation made before the basis was recorded), or (with ``recipient``) named
    by a notice to the same address whose copies are still pursued (sent, acknowledged or followed up) and
    not found gone, other than the notices ``besides`` (a follow-up's own chain). Asked when a notice is
    drafted, sent and followed up: a notice is sworn when it is sent, not when it was drafted."""
    wanted = {match_id for match_id in match_ids if match_id is not None}
    reasons: dict[int | None, str] = {}
    if None in match_ids:
        reasons[None] = "its match was deleted"
    matches = {
        m.id: m
        for m in session.scalars(select(Match).where(Match.id.in_(wanted)).options(joinedload(Match.page)))
    }
    licensed = licensed_hosts_of(session, {m.work_id for m in matches.values()})
    for match_id in sorted(wanted):
        match = matches.get(match_id)
        if match is None:
            reasons[match_id] = f"match {match_id} was deleted"
        elif match.status != MatchStatus.CONFIRMED.value:
            reasons[match_id] = f"match {match_id} is {match.status}, not confirmed"
        elif match.taken_down_at is not None:
            when = as_utc(match.taken_down_at).date().isoformat()
            reasons[match_id] = f"match {match_id} was found taken down on {when}"
        elif is_licensed(match.page.url, licensed[match.work_id]):
            reasons[match_id] = f"match {match_id} is on {match.page.host}, licensed for its work"
        elif basis_needed(match, basis_below=basis_below):
            basis = latest_basis(session, match_id)
            if not (basis.copy_kind and basis.fair_use_considered and basis.note):
                why = basis_needed(match, basis.copy_kind, basis_below)
                reasons[match_id] = (
                    f"match {match_id} was confirmed without the reviewer's basis, needed since {why}: "
                    f"confirm it again with it (fptrack review {match_id} confirm --copy-kind ... "
                    "--fair-use-considered --basis ...)"
                )
    if recipient and wanted:
        for noticed_id, notice_id, state in session.execute(
            select(NoticeItem.match_id, Notice.id, Notice.state)
            .join(Notice, Notice.id == NoticeItem.notice_id)
            .where(
                NoticeItem.match_id.in_(wanted),
                NoticeItem.closed_at.is_(None),
                Notice.state.in_(PURSUED_STATES),
                func.lower(Notice.recipient_address) == recipient.strip().lower(),
                Notice.id.not_in(list(besides) or [-1]),
            )
            .order_by(Notice.id)
        ):
            reasons.setdefault(
                noticed_id,
                f"match {noticed_id} is in notice {notice_id} to {recipient} ({state}): follow that one up "
                f"(fptrack notices follow-up) or mark it withdrawn first",
            )
    return reasons


def _chain(notice: Notice) -> set[int]:
    """The ids of ``notice`` and of the notices it follows up."""
    ids: set[int] = set()
    current: Notice | None = notice
    while current is not None and current.id is not None and current.id not in ids:
        ids.add(current.id)
        current = current.parent
    return ids


def _meaning_passages(session: Session, match: Match) -> list[Any]:
    """A copy that keeps the meaning, not the words (``match.kind``): what :func:`_item` stores as its
    passages, a header ``{"kind", "coverage", "pairs"}`` (the kind of copy, the share of the chapter covered,
    the number of aligned pairs) and then :data:`MEANING_PAIRS` aligned pairs spread over the chapter,
    ``[original, copy, similarity]`` each (``services.evidence.alignment``); the notice names the right of
    translation or adaptation from the kind (``services.rights.rights_named``). Empty when nothing aligns."""
    alignment = match_alignment(session, match)
    if alignment is None or not alignment.pairs:
        return []
    header = {"kind": alignment.kind, "coverage": round(alignment.coverage, 4), "pairs": len(alignment.pairs)}
    return [header, *quoted_pairs(alignment, MEANING_PAIRS, PASSAGE_LIMIT)]


def _item(session: Session, match: Match, bundle_settings: Settings | None) -> NoticeItem:
    stored = evidence_of(session, match)
    work_text = match.work.text or ""
    passages: list[Any] = []
    for raw in [] if match.kind else match.spans or []:
        try:
            page_start, page_end, work_start, work_end = (int(value) for value in raw[:4])
        except (TypeError, ValueError):
            continue
        copy = stored.text[max(0, page_start) : max(0, page_end)]
        original = work_text[max(0, work_start) : max(0, work_end)]
        if copy or original:  # both columns cut at the same place of the text
            span = EvidenceSpan(len(passages) + 1, page_start, page_end, work_start, work_end)
            passages.append(list(quote_pair(stored.text, work_text, span, PASSAGE_LIMIT)))
    if match.kind:  # its spans are sentence offsets into the chapter, not copied passages of the work
        passages = _meaning_passages(session, match)
    bundle = build_bundle(session, match.id, bundle_settings) if bundle_settings is not None else None
    item = NoticeItem(
        match_id=match.id,
        url=match.page.url,
        page_title=stored.title or "",
        work_title=match.work.title,
        chapter_title=f"{match.chapter.index}. {match.chapter.title}",
        first_seen=match.first_seen,
        fetched_at=stored.fetched_at,
        snapshot_sha256=stored.snapshot_sha256 or "",
        passages=passages,
        bundle=bundle,
        bundle_sha256=hashlib.sha256(bundle).hexdigest() if bundle is not None else "",
        copy_kind=latest_basis(session, match.id).copy_kind,
        file_members="\n".join(match_files(session, match)),
    )
    item.work = match.work  # its owner and proofs are what the notice cites
    return item


def _language(language: str | None, contact: HostContact | None, sender: Sender | None) -> str:
    for candidate in (language, contact.language if contact else None, sender.language if sender else None):
        if candidate:
            if candidate not in NOTICE_LANGUAGES:
                raise NoticeError(f"language must be one of {', '.join(NOTICE_LANGUAGES)}, not {candidate!r}")
            return candidate
    return "en"


def _rerender(notice: Notice, now: datetime) -> None:
    notice.text = render_text(notice, now)
    notice.text_sha256 = hashlib.sha256(notice.text.encode("utf-8")).hexdigest()


def preview_notice(
    session: Session,
    *,
    match_ids: Sequence[int] = (),
    host: str | None = None,
    sender: Sender | None = None,
    language: str | None = None,
    recipient: str | None = None,
    bundle_settings: Settings | None = None,
    now: datetime | None = None,
) -> Notice:
    """A notice for the matches (see :func:`notice_matches`) as :func:`draft_notice` would make it, not added
    to the session. ``sender``: default the only sender; ``recipient``: an email address, default the host's
    first contact; ``language``: default the recipient's, then the sender's, then English."""
    notice, _left_out = _preview(
        session,
        match_ids=match_ids,
        host=host,
        sender=sender,
        language=language,
        recipient=recipient,
        bundle_settings=bundle_settings,
        now=now or utcnow(),
    )
    return notice


def _preview(
    session: Session,
    *,
    match_ids: Sequence[int],
    host: str | None,
    sender: Sender | None,
    language: str | None,
    recipient: str | None,
    bundle_settings: Settings | None,
    now: datetime,
) -> tuple[Notice, dict[int | None, str]]:
    """:func:`preview_notice`, and why each match of the host left out was left out. Named matches
    (``match_ids``) that may not be noticed (:func:`not_noticeable`) are refused; a host's are left out."""
    matches = notice_matches(session, match_ids=match_ids, host=host)
    target_host = matches[0].page.host
    sender = sender if sender is not None else default_sender(session)
    contact = _contact(session, target_host)
    if recipient:
        _check_typed({"recipient": recipient})
    address = (recipient or "").strip() or (contact.email if contact else "")
    below = bundle_settings.review_basis_below if bundle_settings is not None else BASIS_BELOW
    left_out = not_noticeable(session, [m.id for m in matches], recipient=address, basis_below=below)
    if left_out and match_ids:
        raise NoticeError("; ".join(left_out.values()))
    matches = [m for m in matches if m.id not in left_out]
    if not matches:
        raise NothingLeftError(f"nothing to notice on {target_host}: " + "; ".join(left_out.values()))
    notice = Notice(
        host=target_host,
        language=_language(language, contact, sender),
        state="draft",
        kind="notice",
        escalation_level=0,
        contact_level=contact.level if contact and not recipient else 0,
        recipient_kind=contact.kind if contact and not recipient else "site",
        recipient_name=contact.name if contact and not recipient else "",
        recipient_address=address,
        created_at=now,
        state_changed_at=now,
        message_id="",
        sent_by="",
        created_by="",
    )
    notice.sender = sender
    # one Chromium for the screenshots of every copy's bundle, not one started per copy
    with one_browser(bundle_settings) if bundle_settings is not None else nullcontext():
        notice.items = [_item(session, match, bundle_settings) for match in matches]
    _rerender(notice, now)
    return notice, left_out


def draft_notice(
    session: Session,
    *,
    actor: str,
    match_ids: Sequence[int] = (),
    host: str | None = None,
    sender: Sender | None = None,
    language: str | None = None,
    recipient: str | None = None,
    bundle_settings: Settings | None = None,
    now: datetime | None = None,
) -> Notice:
    """Make and keep a draft notice (:func:`preview_notice`'s, with an evidence bundle per item signed
    with ``bundle_settings``' key). Drafting again what an unsent draft already names (a copy of the same
    host in common: :func:`_unsent_draft`) redoes that draft, its number kept, instead of a second one.
    The caller commits."""
    now = now or utcnow()
    notice, left_out = _preview(
        session,
        match_ids=match_ids,
        host=host,
        sender=sender,
        language=language,
        recipient=recipient,
        bundle_settings=bundle_settings,
        now=now,
    )
    earlier = _unsent_draft(session, notice)
    if earlier is not None:
        notice = _redo(session, earlier, notice)
    else:
        notice.created_by = actor
        session.add(notice)
    session.flush()  # the notice's number goes into its text
    _rerender(notice, now)
    detail = ("drafted again: " if earlier is not None else "") + (
        f"{len(notice.items)} item(s), language {notice.language}"
    )
    if left_out:
        detail += "; left out: " + "; ".join(left_out.values())
    _event(notice, "drafted", now, actor=actor, detail=detail)
    return notice


def _unsent_draft(session: Session, fresh: Notice) -> Notice | None:
    """The latest first notice to ``fresh``'s host that is still an unsent draft, names one of its matches
    and goes to the same address (or to none yet), or None: a draft to another recipient (the host's
    provider, say) is a notice of its own."""
    match_ids = {item.match_id for item in fresh.items if item.match_id is not None}
    drafts = session.scalars(
        select(Notice)
        .where(
            Notice.host == fresh.host,
            Notice.state == "draft",
            Notice.kind == "notice",
            Notice.sent_at.is_(None),
            Notice.recipient_address.in_(("", fresh.recipient_address)),
        )
        .options(selectinload(Notice.items))
        .order_by(Notice.id.desc())
    )
    return next((d for d in drafts if match_ids & {item.match_id for item in d.items}), None)


def _redo(session: Session, draft: Notice, fresh: Notice) -> Notice:
    """``draft`` made what ``fresh`` is (sender, language, recipient, the items and their new bundles)."""
    for name in ("language", "contact_level", "recipient_kind", "recipient_name", "recipient_address"):
        setattr(draft, name, getattr(fresh, name))
    draft.sender = fresh.sender
    draft.items.clear()
    session.flush()  # its items gone before the new ones, which name the same matches, are written
    items, fresh.items = list(fresh.items), []
    draft.items = items
    return draft


def _event(
    notice: Notice,
    kind: str,
    at: datetime,
    *,
    actor: str = "",
    recipient: str = "",
    message_id: str = "",
    detail: str = "",
) -> NoticeEvent:
    event = NoticeEvent(
        kind=kind, at=at, actor=actor, recipient=recipient, message_id=message_id, detail=detail
    )
    notice.events.append(event)
    return event


def _set_state(notice: Notice, state: str, now: datetime) -> None:
    notice.state = state
    notice.state_changed_at = now


def load_notice(session: Session, notice_id: int) -> Notice:
    notice = session.get(
        Notice,
        notice_id,
        options=[
            selectinload(Notice.items),
            selectinload(Notice.events),
            joinedload(Notice.sender).selectinload(Sender.proofs),
        ],
    )
    if notice is None:
        raise NoticeError(f"there is no notice with id {notice_id} (fptrack notices list)")
    return notice


def list_notices(session: Session, *, state: str | None = None, host: str | None = None) -> list[Notice]:
    statement = (
        select(Notice)
        .options(selectinload(Notice.items), joinedload(Notice.sender))
        .order_by(Notice.id.desc())
    )
    if state:
        statement = statement.where(Notice.state == state)
    if host:
        statement = statement.where(Notice.host == host.strip().lower())
    return list(session.scalars(statement).unique())


# ------------------------------------------------------------------------------------------------ sending


def send_notice(
    session: Session,
    notice: Notice,
    settings: Settings,
    *,
    actor: str,
    transport: Transport | None = None,
    now: datetime | None = None,
    refetch: bool = True,
) -> Notice:
    """Send a draft: refused (:class:`NoticeError`, naming each missing element) unless it carries every
    element and has a recipient. The text is rendered once more, dated ``now``, kept with its SHA-256 and sent
    with the HTML, the bundles and the proofs attached. A relay that fails leaves the notice a draft, with a
    ``send_failed`` event, and raises :class:`jobs.delivery.DeliveryError` (the caller commits the event).
    Just before, each copy's page is fetched again (``settings.notice_refetch`` and ``refetch``:
    :func:`_leave_out_gone`). The caller commits (also after :class:`NothingLeftError`: the fetches and why
    it was not sent are recorded)."""
    now = now or utcnow()
    if notice.state != "draft":
        raise NoticeError(f"notice {notice.id} is {notice.state}: only a draft is sent")
    _leave_out_unnoticeable(session, notice, now, settings.review_basis_below)
    unsure: list[str] = []
    if refetch and settings.notice_refetch:
        unsure = _leave_out_gone(session, notice, settings, now, actor=actor)
    _rerender(notice, now)
    missing = missing_elements(notice)
    if missing:
        raise NoticeError(f"notice {notice.id} cannot be sent; it lacks: " + "; ".join(missing))
    if not notice.recipient_address:
        raise NoticeError(
            f"notice {notice.id} has no recipient: add the host's abuse address (fptrack contacts add "
            f"{notice.host} abuse@...) and draft it again"
        )
    _check_headers(notice)
    transport = transport or SmtpTransport.from_settings(settings)
    notice.sent_at = now
    html = render_html(notice, now)
    message = notice_message(notice, notice.text, html, from_address=settings.smtp_from)
    try:
        delivered = transport.send(message)
    except DeliveryError as error:
        notice.sent_at = None
        _event(notice, "send_failed", now, actor=actor, recipient=notice.recipient_address, detail=str(error))
        raise
    notice.message_id = str(message["Message-ID"])
    notice.sent_by = actor
    _set_state(notice, "sent", now)
    attached = ", ".join(attachment_names(message))
    detail = (
        f"via {transport.describe()}; text sha256 {notice.text_sha256}; attached: {attached or 'nothing'}"
    )
    detail += "; " + keep_what_was_sent(notice, delivered, settings)
    if unsure:
        detail += "; kept though not fetched again: " + "; ".join(unsure)
    _event(
        notice,
        "sent",
        now,
        actor=actor,
        recipient=notice.recipient_address,
        message_id=notice.message_id,
        detail=detail,
    )
    return notice


def _leave_out_unnoticeable(
    session: Session, notice: Notice, now: datetime, basis_below: float = BASIS_BELOW
) -> None:
    """Take out of a draft each copy that may no longer be named (:func:`not_noticeable`), recording why;
    :class:`NothingLeftError` (the draft unchanged) when none is left."""
    reasons = not_noticeable(
        session,
        [item.match_id for item in notice.items],
        recipient=notice.recipient_address,
        besides=_chain(notice),
        basis_below=basis_below,
    )
    if not reasons:
        return
    if all(item.match_id in reasons for item in notice.items):
        why = "; ".join(dict.fromkeys(reasons[item.match_id] for item in notice.items))
        raise NothingLeftError(f"notice {notice.id} not sent: nothing left to notice ({why})")
    for item in [item for item in notice.items if item.match_id in reasons]:
        notice.items.remove(item)
        why = reasons[item.match_id]
        _event(notice, "item_gone", now, detail=f"{item.url} left out before sending: {why}")


GONE_OUTCOMES = ("gone", "removed")


def _leave_out_gone(
    session: Session, notice: Notice, settings: Settings, now: datetime, *, actor: str
) -> list[str]:
    """Fetch the page of each of ``notice``'s copies again now (:func:`jobs.rechecks.refetch_matches`,
    recorded as a re-check records it) and take out each copy seen gone (404, 410, 451, no such host) or
    no longer copying its chapter: one such fetch is enough to leave it out of this notice, though a
    takedown is recorded only once a second fetch confirms it (the re-checks' rule). A fetch that tells
    nothing (a time-out, a 5xx, a challenge page) keeps the copy: the returned lines say which and why.
    With nothing left, a ``send_failed`` event says why and :class:`NothingLeftError` is raised."""
    wanted = [item.match_id for item in notice.items if item.match_id is not None]
    verdicts: dict[int, PageVerdict] = refetch_matches(
        session, settings, wanted, note=f"fetched again before sending notice {notice.id}"
    )
    gone = {m: v for m, v in verdicts.items() if v.outcome in GONE_OUTCOMES}
    unsure = [
        f"{item.url} ({verdicts[item.match_id].detail})"
        for item in notice.items
        if item.match_id in verdicts and verdicts[item.match_id].outcome == "error"
    ]
    if not gone:
        return unsure
    if all(item.match_id in gone for item in notice.items):
        why = "; ".join(f"{item.url}: {_gone_reason(gone[item.match_id])}" for item in notice.items)  # type: ignore[index]
        message = f"notice {notice.id} not sent: every copy is gone when fetched again ({why})"
        _event(notice, "send_failed", now, actor=actor, recipient=notice.recipient_address, detail=message)
        raise NothingLeftError(message)
    for item in [item for item in notice.items if item.match_id in gone]:
        notice.items.remove(item)
        why = _gone_reason(gone[item.match_id])  # type: ignore[index]
        _event(notice, "item_gone", now, detail=f"{item.url} left out before sending: {why}")
    return unsure


def _gone_reason(verdict: PageVerdict) -> str:
    seen = "gone" if verdict.outcome == "gone" else "no longer copied"
    return f"{seen} when fetched again ({verdict.detail})"


def mark_notice(
    session: Session, notice: Notice, mark: str, *, actor: str, note: str = "", now: datetime | None = None
) -> Notice:
    """Record what became of a notice: ``acknowledged`` (its recipient answered), ``bounced`` (the message
    came back: an event; the notice stays as it was) or ``withdrawn`` (by its sender). The caller commits."""
    now = now or utcnow()
    if mark not in MARKS:
        raise NoticeError(f"mark must be one of {', '.join(MARKS)}, not {mark!r}")
    if mark == "withdrawn" and notice.state not in ("draft", *OPEN_STATES):
        raise NoticeError(
            f"notice {notice.id} is {notice.state}: only a draft or an open notice is withdrawn"
        )
    if mark in ("acknowledged", "bounced") and notice.state not in OPEN_STATES:
        raise NoticeError(f"notice {notice.id} is {notice.state}: only a sent notice is {mark}")
    _event(notice, mark, now, actor=actor, recipient=notice.recipient_address, detail=note.strip()[:2000])
    state = MARKS[mark]
    if state is not None:
        _set_state(notice, state, now)
    return notice


# ---------------------------------------------------------------------------------------------- follow-up


@dataclass
class FollowUpSummary:
    """What one :func:`follow_up` run did."""

    items_closed: int = 0
    items_reopened: int = 0
    copies_gone: list[int] = field(default_factory=list)
    reminders: list[int] = field(default_factory=list)
    escalations: list[int] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)
    not_sent: dict[int, str] = field(default_factory=dict)
    no_upstream: list[int] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            "items_closed": self.items_closed,
            "items_reopened": self.items_reopened,
            "copies_gone": self.copies_gone,
            "reminders": self.reminders,
            "escalations": self.escalations,
            "sent": self.sent,
            "not_sent": {str(k): v for k, v in self.not_sent.items()},
            "no_upstream": self.no_upstream,
        }


def _close_items(session: Session, now: datetime, summary: FollowUpSummary) -> None:
    """Items of notices still in play follow their match: closed when it is taken down, reopened when it
    came back."""
    rows = session.execute(
        select(NoticeItem, Match.taken_down_at)
        .join(Match, Match.id == NoticeItem.match_id)
        .join(Notice, Notice.id == NoticeItem.notice_id)
        .where(Notice.state.in_(PURSUED_STATES))
    ).all()
    for item, taken_down_at in rows:
        if item.closed_at is None and taken_down_at is not None:
            item.closed_at = taken_down_at
            summary.items_closed += 1
            _event(
                item.notice,
                "item_gone",
                now,
                detail=f"{item.url} taken down at {as_utc(taken_down_at).isoformat()}",
            )
        elif item.closed_at is not None and taken_down_at is None:
            item.closed_at = None
            summary.items_reopened += 1
            _event(item.notice, "item_back", now, detail=f"{item.url} is up again")


def _successor(
    session: Session, notice: Notice, settings: Settings, now: datetime
) -> tuple[Notice | None, str]:
    """The reminder or escalation that follows ``notice``, or None and why not. With
    ``settings.notice_refetch`` each copy still up is fetched again first; one seen gone is not carried
    (an ``item_gone`` event on ``notice`` says why)."""
    open_items = [item for item in notice.items if item.closed_at is None]
    barred = not_noticeable(
        session, [item.match_id for item in open_items], basis_below=settings.review_basis_below
    )
    carried = [item for item in open_items if item.match_id not in barred]
    if carried and settings.notice_refetch:
        verdicts = refetch_matches(
            session,
            settings,
            [item.match_id for item in carried if item.match_id is not None],
            note=f"fetched again before following up notice {notice.id}",
        )
        for item in list(carried):
            verdict = verdicts.get(item.match_id) if item.match_id is not None else None
            if verdict is not None and verdict.outcome in GONE_OUTCOMES:
                carried.remove(item)
                why = _gone_reason(verdict)
                _event(notice, "item_gone", now, detail=f"{item.url} not followed up: {why}")
        if not carried:
            return None, "every copy still up was gone when fetched again"
    if not carried:
        return None, "no copy still up is still confirmed, unlicensed and not taken down"
    if notice.kind == "reminder":
        contact = _contact(session, notice.host, above=notice.contact_level)
        if contact is None:
            return (
                None,
                f"no contact of {notice.host} above level {notice.contact_level} (fptrack contacts add)",
            )
        kind, level, address = "escalation", contact.level, contact.email
        name, recipient_kind, language = contact.name, contact.kind, contact.language or notice.language
    else:
        kind, level, address = "reminder", notice.contact_level, notice.recipient_address
        name, recipient_kind, language = notice.recipient_name, notice.recipient_kind, notice.language
    successor = Notice(
        sender_id=notice.sender_id,
        host=notice.host,
        recipient_name=name,
        recipient_address=address,
        recipient_kind=recipient_kind,
        contact_level=level,
        language=language,
        state="draft",
        kind=kind,
        escalation_level=notice.escalation_level + 1,
        parent_id=notice.id,
        created_at=now,
        created_by="follow-up",
        state_changed_at=now,
        message_id="",
        sent_by="",
    )
    successor.sender = notice.sender
    successor.parent = notice
    successor.items = [
        NoticeItem(
            match_id=item.match_id,
            work_id=item.work_id,
            url=item.url,
            page_title=item.page_title,
            work_title=item.work_title,
            chapter_title=item.chapter_title,
            first_seen=item.first_seen,
            fetched_at=item.fetched_at,
            snapshot_sha256=item.snapshot_sha256,
            passages=item.passages,
            bundle=item.bundle,
            bundle_sha256=item.bundle_sha256,
            copy_kind=item.copy_kind,
            file_members=item.file_members,
        )
        for item in carried
    ]
    session.add(successor)
    session.flush()
    _rerender(successor, now)
    _event(successor, "drafted", now, actor="follow-up", detail=f"{kind} of notice {notice.id}")
    return successor, ""


def follow_up(
    session: Session,
    settings: Settings,
    *,
    now: datetime | None = None,
    transport: Transport | None = None,
) -> FollowUpSummary:
    """One round of the follow-up (the module docstring): close and reopen items from the re-checks, mark
    notices whose copies are all gone, and follow up the notices whose copies are still up
    ``settings.notice_escalate_after`` days after they were sent. Follow-ups are sent through ``transport``
    (default: the configured relay; none configured: they stay drafts). The caller commits."""
    now = now or utcnow()
    summary = FollowUpSummary()
    _close_items(session, now, summary)
    session.flush()
    active = session.scalars(
        select(Notice)
        .where(Notice.state.in_(OPEN_STATES))
        .options(selectinload(Notice.items))
        .order_by(Notice.id)
    ).all()
    due_before = now - timedelta(days=settings.notice_escalate_after)
    if transport is None and settings.smtp_host:
        transport = SmtpTransport.from_settings(settings)
    for notice in active:
        if notice.items and all(item.closed_at is not None for item in notice.items):
            _set_state(notice, "copy_gone", now)
            _event(notice, "copy_gone", now, detail="every copy it named was found taken down")
            summary.copies_gone.append(notice.id)
            continue
        if notice.sent_at is None or as_utc(notice.sent_at) > due_before:
            continue
        successor, why = _successor(session, notice, settings, now)
        if successor is None:
            if not any(event.kind == "no_upstream" for event in notice.events):
                _event(notice, "no_upstream", now, detail=why)
                summary.no_upstream.append(notice.id)
            continue
        _set_state(notice, "escalated", now)
        detail = f"{successor.kind} {successor.id} to {successor.recipient_address or '(no address)'}"
        _event(
            notice, "escalated", now, actor="follow-up", recipient=successor.recipient_address, detail=detail
        )
        (summary.escalations if successor.kind == "escalation" else summary.reminders).append(successor.id)
        if not settings.notice_auto_follow_up:
            summary.not_sent[successor.id] = (
                f"waits for a person to send it (fptrack notices send {successor.id}; "
                "FPTRACK_NOTICE_AUTO_FOLLOW_UP=true sends follow-ups at once)"
            )
            continue
        if transport is None:
            summary.not_sent[successor.id] = "no SMTP relay configured (FPTRACK_SMTP_HOST)"
            continue
        try:
            send_notice(
                session, successor, settings, actor="follow-up", transport=transport, now=now, refetch=False
            )
        except (NoticeError, DeliveryError) as error:
            summary.not_sent[successor.id] = str(error)
            continue
        summary.sent.append(successor.id)
    return summary
