"""Who holds the rights in each work, and the files that prove it: what a notice cites as 权利人 and attaches
as 构成侵权的初步证明材料 (信息网络传播权保护条例 第十四条), shared by the notices, the admin and the CLI.

A work carries its author, its rights owner (name, address, email, telephone; empty: the sender of a notice,
when the sender is the owner), its registration number (作品登记证书号) and where the authorised original is
published. Proofs are typed (:data:`storage.models.PROOF_KINDS`): a work's *ownership certificate*
(作品登记证书, 版权证明) belongs to the work; an agent's *authorisation* (授权委托书) to the sender, for
one work or for every work; the sender's *identity* (营业执照, 身份证明) to the sender. A notice cites and
attaches the proofs of ITS works (:func:`notice_proofs`), never another work's certificate, and is not
sendable while a work lacks an ownership certificate or an agent lacks an authorisation for it
(:func:`rights_gaps`).
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from sqlalchemy.orm import Session

from fptrack.core.errors import FptrackError
from fptrack.core.phrase import Phrase
from fptrack.services.accounts.contact_fields import InvalidField, check_email, check_one_line
from fptrack.storage.models import PROOF_KINDS, Notice, RightsProof, Sender, Work

__all__ = [
    "PROOF_LABELS",
    "WORK_RIGHTS_FIELDS",
    "Owner",
    "RightsError",
    "add_proof",
    "assign_proof",
    "check_credit_code",
    "notice_proofs",
    "notice_works",
    "owner_of",
    "rights_gaps",
    "rights_in_short",
    "rights_infringed",
    "rights_named",
    "save_work_rights",
    "work_rights_json",
]

WORK_RIGHTS_FIELDS = (
    "author",
    "owner_name",
    "owner_address",
    "owner_email",
    "owner_phone",
    "registration_number",
    "original_url",
)
_LIMITS = {"owner_address": 2000, "owner_email": 320, "owner_phone": 100, "registration_number": 100}

PROOF_LABELS: Mapping[str, Mapping[str, str]] = {
    "en": {
        "ownership_certificate": "Proof of ownership (registration certificate)",
        "authorisation": "Authorisation of the agent",
        "identity": "Proof of the sender's identity",
        "other": "Other document",
    },
    "zh": {
        "ownership_certificate": "权属证明（作品登记证书 / 版权证明）",
        "authorisation": "授权委托书",
        "identity": "主体身份证明（营业执照 / 身份证明）",
        "other": "其他材料",
    },
}

# GB 32100-2015: 18 characters of this alphabet (no I, O, S, V, Z), the last a check character
_CREDIT_ALPHABET = "0123456789ABCDEFGHJKLMNPQRTUWXY"
_CREDIT_WEIGHTS = (1, 3, 9, 27, 19, 26, 16, 17, 20, 29, 25, 13, 8, 24, 10, 30, 28)


class RightsError(FptrackError, ValueError):
    """Rights data that cannot be stored as given; the message says which field or proof and why."""


def check_credit_code(code: str) -> str:
    """``code`` upper-cased if it is a unified social credit code (统一社会信用代码, GB 32100-2015: 18
    characters whose last is the check character of the first 17), else :class:`RightsError`."""
    value = code.strip().upper()
    if not re.fullmatch(f"[{_CREDIT_ALPHABET}]{{18}}", value):
        raise RightsError(
            f"a unified social credit code (统一社会信用代码) is 18 digits and capital letters, not {code!r}"
        )
    total = sum(_CREDIT_ALPHABET.index(char) * weight for char, weight in zip(value, _CREDIT_WEIGHTS))
    if _CREDIT_ALPHABET[(31 - total % 31) % 31] != value[17]:
        raise RightsError(
            f"the unified social credit code {code!r} fails its check character (GB 32100-2015)"
        )
    return value


def save_work_rights(session: Session, work_id: int, **fields: str | None) -> Work:
    """Set the rights data of work ``work_id``: each of :data:`WORK_RIGHTS_FIELDS` given (not None) is set
    (an empty string clears it). The caller commits."""
    work = session.get(Work, work_id)
    if work is None:
        raise RightsError(f"there is no work with id {work_id} (fptrack works list)")
    for key, value in fields.items():
        if key not in WORK_RIGHTS_FIELDS:
            raise RightsError(f"a work has no field {key!r}")
        if value is None:
            continue
        value = value.strip()
        try:
            if key == "owner_email" and value:
                value = check_email("the owner's email", value)
            elif key != "owner_address":
                check_one_line(key.replace("_", " "), value)
        except InvalidField as error:
            raise RightsError(str(error)) from None
        if "\x00" in value:
            raise RightsError(f"{key.replace('_', ' ')} holds a NUL character")
        if key == "original_url" and value:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise RightsError(f"the original's URL must be an http(s) URL, not {value!r}")
        setattr(work, key, value[: _LIMITS.get(key, 300 if key != "original_url" else 2048)])
    session.flush()
    return work


def add_proof(
    session: Session,
    filename: str,
    content: bytes,
    *,
    kind: str,
    work: Work | None = None,
    sender: Sender | None = None,
    media_type: str | None = None,
) -> RightsProof:
    """Keep a file proving a right (stored with its SHA-256): an ``ownership_certificate`` of ``work``, an
    ``authorisation`` of ``sender`` (for ``work``, or for every work without one), an ``identity`` of
    ``sender``. The same file of the same kind for the same holder is kept once. The caller commits."""
    if kind not in PROOF_KINDS:
        raise RightsError(f"a proof's kind is one of {', '.join(PROOF_KINDS)}, not {kind!r}")
    if kind == "ownership_certificate" and work is None:
        raise RightsError("an ownership certificate proves a work's rights: attach it to the work")
    if kind in ("authorisation", "identity") and sender is None:
        raise RightsError(f"an {kind} proof belongs to a sender")
    if kind == "identity" and work is not None:
        raise RightsError("an identity proof belongs to the sender, not to a work")
    if not content:
        raise RightsError(f"the proof {filename!r} is empty")
    digest = hashlib.sha256(content).hexdigest()
    holder_proofs = sender.proofs if sender is not None else work.proofs if work is not None else []
    for proof in holder_proofs:
        if proof.sha256 == digest and proof.kind == kind and proof.work is work:
            return proof
    guessed = media_type or mimetypes.guess_type(filename)[0] or "application/octet-stream"
    name = " ".join(filename.split())[:300] or "proof"
    proof = RightsProof(kind=kind, filename=name, media_type=guessed, sha256=digest, content=content)
    proof.work = work
    proof.sender = sender
    session.add(proof)
    session.flush()
    return proof


def assign_proof(
    session: Session, proof_id: int, *, work: Work, kind: str = "ownership_certificate"
) -> RightsProof:
    """Say which work a stored proof proves (a proof filed for a sender before proofs had kinds: ``other``):
    the same row, the same bytes, now ``kind`` of ``work``. The caller commits."""
    proof = session.get(RightsProof, proof_id)
    if proof is None:
        raise RightsError(f"there is no proof with id {proof_id} (fptrack senders list --format json)")
    if kind not in ("ownership_certificate", "authorisation"):
        raise RightsError(
            f"a proof given to a work is an ownership_certificate or an authorisation, not {kind!r}"
        )
    if kind == "authorisation" and proof.sender is None:
        raise RightsError(f"proof {proof_id} belongs to no sender: an authorisation is an agent's")
    proof.kind = kind
    proof.work = work
    session.flush()
    return proof


@dataclass(frozen=True)
class Owner:
    """The rights owner of a work as a notice names it (权利人): name, address, email, telephone."""

    name: str
    address: str = ""
    email: str = ""
    phone: str = ""


def owner_of(work: Work | None, sender: Sender | None) -> Owner:
    """Whom a notice names as the owner of ``work``: the work's owner when it names one; else the sender when
    the sender is the owner; else (an agent) the name the agent gave, without address or contacts."""
    if work is not None and work.owner_name.strip():
        return Owner(work.owner_name.strip(), work.owner_address, work.owner_email, work.owner_phone)
    if sender is None:
        return Owner("")
    if sender.role != "agent":
        return Owner(sender.name, sender.address, sender.email, sender.phone)
    return Owner(sender.rights_owner.strip())


def notice_works(notice: Notice) -> list[Work]:
    """The works a notice names, each once, in item order (items whose work is gone left out)."""
    found: dict[int, Work] = {}
    for item in notice.items:
        work = item.work
        if work is not None and work.id not in found:
            found[work.id] = work
    return list(found.values())


def _authorisations(sender: Sender, work: Work) -> list[RightsProof]:
    return [
        proof
        for proof in sender.proofs
        if proof.kind == "authorisation" and (proof.work_id is None or proof.work is work)
    ] + [proof for proof in work.proofs if proof.kind == "authorisation" and proof.sender is sender]


def notice_proofs(notice: Notice) -> list[RightsProof]:
    """The proofs a notice cites and attaches: each work's ownership certificates, an agent sender's
    authorisations for those works (or general ones), the sender's identity; each file once."""
    sender = notice.sender
    found: dict[int, RightsProof] = {}
    chosen: list[RightsProof] = []
    for work in notice_works(notice):
        chosen += [proof for proof in work.proofs if proof.kind == "ownership_certificate"]
        if sender is not None and sender.role == "agent":
            chosen += _authorisations(sender, work)
    if sender is not None:
        chosen += [proof for proof in sender.proofs if proof.kind == "identity"]
    for proof in chosen:
        found.setdefault(id(proof), proof)
    return list(found.values())


def rights_gaps(notice: Notice) -> list[tuple[str, Phrase]]:
    """``(element key, what is missing)`` (keys of :data:`jobs.notice_render.ELEMENTS`) for the rights a
    notice must show: an item whose work is unknown, a work without an ownership certificate, an agent
    sender without an authorisation for a work, an owner (an agent's principal) without a name, address or
    way to reach them. Each reason is an English :class:`Phrase` the admin says in its reader's language."""
    gaps: list[tuple[str, Phrase]] = []
    sender = notice.sender
    for item in notice.items:
        if item.work is None:
            gaps.append(
                ("cn14_3_evidence", Phrase("the work of %(url)s is no longer registered", url=item.url))
            )
    for work in notice_works(notice):
        named = Phrase("《%(title)s》 (work %(id)s)", title=work.title, id=work.id)
        edit = f"fptrack works edit {work.id}"
        if not any(proof.kind == "ownership_certificate" for proof in work.proofs):
            command = f"{edit} --proof FILE"
            reason = Phrase("%(work)s has no proof of ownership (%(command)s)", work=named, command=command)
            gaps.append(("cn14_3_evidence", reason))
        if sender is None or sender.role != "agent":
            continue
        if not _authorisations(sender, work):
            command = f"fptrack senders edit {sender.name!r} --authorisation FILE --for-work {work.id}"
            reason = Phrase(
                "the agent %(name)s has no authorisation (授权委托书) for %(work)s (%(command)s)",
                name=sender.name,
                work=named,
                command=command,
            )
            gaps += [(key, reason) for key in ("us_vi_accuracy", "cn14_1_holder")]
        owner = owner_of(work, sender)
        if not owner.name:
            command = f"{edit} --owner NAME"
            reason = Phrase("%(work)s names no rights owner (%(command)s)", work=named, command=command)
            gaps.append(("cn14_1_holder", reason))
        if not owner.address.strip():
            command = f"{edit} --owner-address"
            reason = Phrase("the owner of %(work)s has no address (%(command)s)", work=named, command=command)
            gaps.append(("cn14_1_holder", reason))
        if not (owner.email.strip() or owner.phone.strip()):
            command = f"{edit} --owner-email / --owner-phone"
            reason = Phrase(
                "the owner of %(work)s has neither email nor telephone (%(command)s)",
                work=named,
                command=command,
            )
            gaps.append(("cn14_1_holder", reason))
    return gaps


def work_rights_json(work: Work) -> dict[str, object]:
    """A work's rights data and proofs as the CLI and the API print them."""
    return {
        **{key: getattr(work, key) for key in WORK_RIGHTS_FIELDS},
        "proofs": [
            {
                "id": proof.id,
                "kind": proof.kind,
                "filename": proof.filename,
                "sha256": proof.sha256,
                "bytes": len(proof.content),
                "sender": proof.sender.name if proof.sender is not None else None,
            }
            for proof in work.proofs
        ],
    }


# ------------------------------------------------------------------------------------------ rights infringed

# The rights a copy infringes, by its kind (Match.kind: None an exact copy, ``rewrite`` a 洗稿 rewrite,
# ``translation:<language>`` a translation), as each side of a notice cites them: the Copyright Law of the
# PRC, Article 10(1) (（十二）信息网络传播权, （十四）改编权, （十五）翻译权) and 17 U.S.C. 106 ((1)
# reproduction, (3) distribution, (5) public display; (2) derivative works, which a translation and an
# adaptation are under 17 U.S.C. 101).
_CN_RIGHTS: Mapping[str, Mapping[str, str]] = {
    "zh": {
        "communication": "信息网络传播权（《中华人民共和国著作权法》第十条第一款第（十二）项）",
        "adaptation": "改编权（同款第（十四）项）",
        "translation": "翻译权（同款第（十五）项）",
    },
    "en": {
        "communication": "the right of communication through information networks (信息网络传播权, "
        "Copyright Law of the PRC, Article 10(1)(12))",
        "adaptation": "the right of adaptation (改编权, Article 10(1)(14))",
        "translation": "the right of translation (翻译权, Article 10(1)(15))",
    },
}
_US_COPY = {
    "zh": "《美国法典》第17编第106条第(1)、(3)、(5)项（复制权、发行权、展示权）",
    "en": "the exclusive rights of reproduction, distribution and public display, "
    "17 U.S.C. 106(1), (3) and (5)",
}
_US_DERIVATIVE: Mapping[str, Mapping[str, str]] = {
    "zh": {
        "adaptation": "及第(2)项（演绎作品：改编）",
        "translation": "及第(2)项（演绎作品：翻译）",
    },
    "en": {
        "adaptation": ", and to prepare derivative works (an adaptation), 17 U.S.C. 106(2)",
        "translation": ", and to prepare derivative works (a translation), 17 U.S.C. 106(2)",
    },
}


def rights_infringed(kind: str | None) -> tuple[str, ...]:
    """The rights a copy of ``kind`` infringes under the Copyright Law of the PRC, Article 10(1): an exact
    copy put online the right of communication (信息网络传播权) alone; a rewrite the right of adaptation
    (改编权) beside it; a translation the right of translation (翻译权) beside it."""
    if kind and kind.startswith("translation:"):
        return ("communication", "translation")
    if kind == "rewrite":
        return ("communication", "adaptation")
    return ("communication",)


def rights_named(kind: str | None, language: str = "en") -> str:
    """The rights a copy of ``kind`` infringes as a notice in ``language`` names them, under both laws it is
    sent under: the articles of the Copyright Law of the PRC (:func:`rights_infringed`) and 17 U.S.C. 106,
    whose (2) (derivative works) a rewrite or a translation adds to (1), (3) and (5)."""
    side = "zh" if language == "zh" else "en"
    rights = rights_infringed(kind)
    chinese = [_CN_RIGHTS[side][right] for right in rights]
    american = _US_COPY[side] + "".join(_US_DERIVATIVE[side].get(right, "") for right in rights)
    if side == "zh":
        return "、".join(chinese) + "；" + american
    return " and ".join(chinese) + "; " + american


_CN_SHORT = {"communication": "信息网络传播权", "adaptation": "改编权", "translation": "翻译权"}


def rights_in_short(kinds: Sequence[str | None]) -> str:
    """The Chinese names of the rights copies of ``kinds`` infringe, each once (信息网络传播权、翻译权):
    what a Chinese notice's opening says was infringed."""
    rights = dict.fromkeys(right for kind in kinds for right in rights_infringed(kind))
    return "、".join(_CN_SHORT[right] for right in rights or ("communication",))
