"""What a takedown notice says, in Chinese and in English, and which legal element it lacks.

A notice is sent under two laws at once, because a Chinese site's host, CDN or registrar is as often in the
United States as in China:

- 17 U.S.C. 512(c)(3)(A): (i) a physical or electronic signature of a person authorised to act for the owner;
  (ii) identification of the copyrighted work; (iii) identification of the infringing material and information
  reasonably sufficient to locate it; (iv) the complaining party's contact information (address, telephone,
  email); (v) a statement of good-faith belief that the use is not authorised; (vi) a statement that the
  notice is accurate and, under penalty of perjury, that the signer is authorised to act.
- 信息网络传播权保护条例 第十四条: （一）权利人的姓名（名称）、联系方式和地址；（二）要求删除或者断开链接的
  侵权作品的名称和网络地址；（三）构成侵权的初步证明材料；and 权利人应当对通知书的真实性负责.

One structure carries both: the sender (name, owner, address, email, telephone), the works and their proof of
ownership, every infringing URL with its original passages beside the copy and its evidence bundle's SHA-256,
the statements, and a typed electronic signature (``/s/ Name``, the signer's capacity, the date). The same
sections are written in each language (:data:`TEXTS`), each as its readers write it: the Chinese one speaks
as the company (我司), dates in 北京时间 as 年月日 (:func:`format_day`, :func:`format_minute`), asks for an
answer by a day (:func:`reply_deadline`), guarantees its truth with an indemnity and closes with the
sender's seal (盖章) line above the signer's. :func:`render_text` is the notice as sent in the message body
and stored with its SHA-256, :func:`render_html` the same for the admin, the PDF and the HTML part of the
message.

:func:`missing_elements` names each element a notice lacks, by law and article, with what is missing: a
notice lacking one cannot be sent (:func:`jobs.notices.send_notice`). It checks the data (a signer, an
address, works, URLs, passages, evidence, ownership proof) and the rendered text (the statements and every URL
are in it), so a notice whose stored text was cut or edited is refused as well.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from fptrack.core.phrase import Phrase
from fptrack.services.evidence.alignment import LANGUAGE_NAMES, translation_language
from fptrack.services.evidence.bundle import bundle_capture_sealed, bundle_key_fingerprint
from fptrack.services.rights import (
    PROOF_LABELS,
    Owner,
    notice_proofs,
    notice_works,
    owner_of,
    rights_gaps,
    rights_in_short,
    rights_named,
)
from fptrack.storage.models import Notice, NoticeItem, Sender, as_utc

__all__ = [
    "BEIJING",
    "ELEMENTS",
    "REPLY_DAYS",
    "STATEMENTS",
    "TEXTS",
    "Element",
    "NavLink",
    "absent_elements",
    "bundle_filename",
    "capture_sealed",
    "electronic_signature",
    "format_day",
    "format_minute",
    "item_kind",
    "item_meaning",
    "item_pairs",
    "key_fingerprints",
    "missing_elements",
    "notice_subject",
    "render_html",
    "render_text",
    "reply_deadline",
    "signature_line",
    "statements_for",
]

TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class Element:
    """One element a notice must carry: ``key`` (stable, for tests and scripts), ``ref`` (the law and
    article, as a person cites it) and ``title`` (a :class:`Phrase` where the admin translates it: the
    English titles of 17 U.S.C. 512)."""

    key: str
    ref: str
    title: str


ELEMENTS: tuple[Element, ...] = (
    Element("us_i_signature", "17 U.S.C. 512(c)(3)(A)(i)", Phrase("signature of a person authorised to act")),
    Element("us_ii_work", "17 U.S.C. 512(c)(3)(A)(ii)", Phrase("identification of the copyrighted work")),
    Element(
        "us_iii_material", "17 U.S.C. 512(c)(3)(A)(iii)", Phrase("the infringing material and where it is")
    ),
    Element(
        "us_iv_contact", "17 U.S.C. 512(c)(3)(A)(iv)", Phrase("contact information of the complaining party")
    ),
    Element("us_v_good_faith", "17 U.S.C. 512(c)(3)(A)(v)", Phrase("statement of good-faith belief")),
    Element(
        "us_vi_accuracy",
        "17 U.S.C. 512(c)(3)(A)(vi)",
        Phrase("accuracy and authority under penalty of perjury"),
    ),
    Element("cn14_1_holder", "信息网络传播权保护条例 第十四条（一）", "权利人的姓名（名称）、联系方式和地址"),
    Element("cn14_2_works", "信息网络传播权保护条例 第十四条（二）", "侵权作品的名称和网络地址"),
    Element("cn14_3_evidence", "信息网络传播权保护条例 第十四条（三）", "构成侵权的初步证明材料"),
    Element("cn14_truth", "信息网络传播权保护条例 第十四条", "权利人对通知书的真实性负责"),
)
_BY_KEY = {element.key: element for element in ELEMENTS}

# The statements, word for word as they must appear in the text of each language (missing_elements looks for
# good_faith, accuracy and truth; every statement of a language is printed, in this order). The English ones
# follow 512(c)(3)(A)(v) and (vi). The Chinese ones are written as a Chinese company's legal department
# writes them (我司, not a translated 本人): the good faith, the guarantee of truthfulness (保证声明) with
# the liability that stands in for the perjury clause, the indemnity, and 第十四条's own sentence.
STATEMENTS: Mapping[str, Mapping[str, str]] = {
    "en": {
        "good_faith": (
            "I have a good faith belief that use of the material in the manner complained of is not "
            "authorized by the copyright owner, its agent, or the law."
        ),
        "accuracy": (
            "The information in this notification is accurate, and under penalty of perjury, I am authorized "
            "to act on behalf of the owner of an exclusive right that is allegedly infringed."
        ),
        "truth": "The sender is responsible for the truthfulness of this notice.",
    },
    "zh": {
        "good_faith": "我司基于善意确信，上述侵权内容的使用未经著作权人、其代理人许可，亦无法律依据。",
        "accuracy": (
            "我司保证本通知书所述内容真实、准确，签署人有权代表被侵权的专有权利的权利人发出本通知书；"
            "如有不实，我司愿承担由此产生的全部法律责任。"
        ),
        "indemnity": "因本通知书内容不实给贵司或任何第三方造成损失的，由我司承担赔偿责任。",
        "truth": "权利人对本通知书的真实性负责。",
    },
}

# Days the recipient is given to answer (the date is printed; the follow-up's own delay,
# FPTRACK_NOTICE_ESCALATE_AFTER, is at least a day and 7 by default, so the deadline falls before a reminder).
REPLY_DAYS = 3

# China has kept UTC+8 all year since 1991: a fixed offset, no time-zone database needed.
BEIJING = timezone(timedelta(hours=8), "北京时间")

# Every fixed string of a notice, per language; {placeholders} are filled by the renderers. ``opening`` and
# ``opening_agent`` (empty: none) introduce the sender, as owner or as the owner's agent.
TEXTS: Mapping[str, Mapping[str, str]] = {
    "en": {
        "title": "Notice of copyright infringement",
        "subject": "{title}: {host} (no. {number})",
        "laws": "(under 17 U.S.C. 512(c)(3) and the Regulations on the Protection of the Right of "
        "Communication through Information Network (信息网络传播权保护条例), Article 14)",
        "date": "Date",
        "to": "To",
        "to_agent": "designated agent to receive notifications of claimed infringement, 17 U.S.C. 512(c)(2)",
        "site": "Site concerned",
        "number": "Notice number",
        "opening": "",
        "opening_agent": "{name} sends this notice on behalf of the copyright owner {owner}, as its "
        "authorised agent (the authorisation is attached).",
        "reminder": "This is a second notice. Our notice of {date} ({reference}) named the material below; "
        "it is still available.",
        "escalation": "You provide services to the site {host}. It has not acted on our notice of {date} "
        "({reference}) and its reminder; the material below is still available through your services.",
        "reference": "no. {number}",
        "reference_message": ", Message-ID {message_id}",
        "s1": "1. The rights holder (name, contact information and address)",
        "name": "Name",
        "holder": "Rights owner",
        "agent": "Authorised agent",
        "credit_code": "Unified social credit code",
        "legal_rep": "Legal representative",
        "author": "Author",
        "registration": "Registration certificate no.",
        "original_url": "Authorised original",
        "address": "Postal address",
        "email": "Email",
        "phone": "Telephone",
        "s2": "2. The copyrighted works",
        "work": '"{work}", {chapter}; rights owned by {owner}',
        "proof": "{label}, attached: {name} (SHA-256 {sha256})",
        "no_proof": "Proof of ownership: none attached",
        "s3": "3. The infringing material and where it is (title and network address)",
        "url": "Network address (URL)",
        "page_title": "Page title",
        "copies": "Copies",
        "in_files": "In the downloaded archive, the file(s)",
        "extent": "Extent",
        "extent_whole_chapter": "the whole chapter",
        "extent_substantial_part": "a substantial part of the chapter",
        "extent_excerpt": "an excerpt of the chapter, not a complete copy (fair use, quotation and licences "
        "were considered before this notice)",
        "first_seen": "First found",
        "fetched": "Page fetched",
        "snapshot": "SHA-256 of the page as fetched",
        "sealed": "Capture sealed (RFC 3161 time-stamp, capture.tsr in the evidence bundle)",
        "passage": "Passage {number}",
        "original": "Original",
        "copy": "Copy",
        "rights": "Rights infringed",
        "kind": "Kind of copy",
        "kind_rewrite": "a rewrite of the chapter (洗稿): its sentences reworded, in the original's order",
        "kind_translation": "a translation of the chapter into {language}",
        "coverage": "Coverage",
        "coverage_value": "{coverage} of the original chapter, sentence by sentence in order",
        "aligned": "{shown} of the {pairs} aligned sentence pairs, from the chapter's beginning to its end "
        "(similarity of the two sentences' meaning, 0 to 1):",
        "pair": "Pair {number}, similarity {similarity}",
        "similarity": "Similarity",
        "s4": "4. Prima facie evidence of infringement",
        "evidence": "Each page's evidence bundle is attached (the page as archived in WARC with its fetch "
        "record, the passages, SHA-256 checksums); the original passages stand beside the copies in "
        "section 3.",
        "bundle": "Evidence bundle for {url}: {name} (SHA-256 {sha256})",
        "no_bundle": "Evidence bundle for {url}: not attached",
        "signing_key": "The evidence bundles are signed with our Ed25519 key, fingerprint {fingerprint}: "
        "check one with fptrack evidence verify <bundle> --fingerprint {fingerprint} (or as its README.txt "
        "says).",
        "s5": "5. Statements",
        "request": "We ask that you remove, or disable access to, the material listed in section 3, and "
        "reply to us by {deadline}.",
        "esign": "Electronic signature: this notice is sent by email and signed /s/ {signer} for {name}. "
        "Under Article 13 of the PRC Electronic Signature Law (电子签名法 第十三条) a signature is reliable "
        "when the data that create it belong to the signer alone, are under the signer's sole control when "
        "signing, and any later change to the signature or to the message can be detected. {key} {name} "
        "keeps the SHA-256 of this notice's text as sent.",
        "esign_key": "The attached evidence bundles are signed with {name}'s key, fingerprint "
        "{fingerprints}, held and controlled by {name} alone: any change to a bundle breaks its signature.",
        "esign_no_key": "No signing key is attached to this notice.",
        "person_signature": "Signature: /s/ {signer}",
        "agent_of": "authorised agent of {owner}",
        "gone": "(taken down since)",
        "separator": "; ",
    },
    "zh": {
        "title": "侵权通知书",
        "subject": "{title}：{host}（编号 {number}）",
        "laws": "（依据《信息网络传播权保护条例》第十四条及《美国法典》第17编第512(c)(3)条）",
        "date": "日期",
        "to": "致",
        "to_agent": "服务提供者依美国版权法第 512 条指定的侵权通知接收代理人",
        "site": "涉及网站",
        "number": "通知编号",
        "opening": "{name}（以下简称“我司”）是下列作品的著作权人。我司发现，网站 {host} 未经许可，通过"
        "信息网络向公众提供我司享有著作权的下列作品，侵犯了我司依法享有的{rights}。根据《信息网络"
        "传播权保护条例》第十四条的规定，特此通知贵司。",
        "opening_agent": "{name}（以下简称“我司”）受著作权人{owner}委托，就下列作品发出本通知书。我司发现，"
        "网站 {host} 未经许可，通过信息网络向公众提供下列作品，侵犯了{owner}依法享有的{rights}。"
        "根据《信息网络传播权保护条例》第十四条的规定，特此通知贵司。",
        "reminder": "本函系我司就同一事项发出的第二次通知。"
        "我司已于{date}向贵司发出侵权通知书（{reference}），所列侵权内容至今仍可访问。",
        "escalation": "贵司为网站 {host} 提供网络服务。"
        "我司已于{date}向该网站发出侵权通知书（{reference}），其后再次通知，该网站至今未删除下列侵权内容，"
        "上述内容仍通过贵司的服务向公众传播。",
        "reference": "编号 {number}",
        "reference_message": "，邮件标识 {message_id}",
        "s1": "一、权利人的姓名（名称）、联系方式和地址",
        "name": "名称",
        "holder": "权利人",
        "agent": "代理人",
        "credit_code": "统一社会信用代码",
        "legal_rep": "法定代表人",
        "author": "作者",
        "registration": "作品登记证书号",
        "original_url": "授权作品原文地址",
        "address": "地址",
        "email": "电子邮件",
        "phone": "电话",
        "s2": "二、被侵权作品",
        "work": "《{work}》{chapter}；著作权人：{owner}",
        "proof": "{label}（附件）：{name}（SHA-256 校验值 {sha256}）",
        "no_proof": "权属证明：未附",
        "s3": "三、要求删除或者断开链接的侵权作品的名称和网络地址",
        "url": "网络地址",
        "page_title": "网页标题",
        "copies": "侵权作品",
        "in_files": "压缩包内文件",
        "extent": "侵权范围",
        "extent_whole_chapter": "整章",
        "extent_substantial_part": "该章的实质部分",
        "extent_excerpt": "该章的节选，并非完整复制（发出本通知前已审查合理使用、适当引用及授权情况）",
        "first_seen": "首次发现",
        "fetched": "抓取时间",
        "snapshot": "抓取内容的 SHA-256 校验值",
        "sealed": "抓取内容可信时间戳（证据包内附时间戳文件）",
        "passage": "段落 {number}",
        "original": "原文",
        "copy": "侵权内容",
        "rights": "被侵犯的权利",
        "kind": "侵权方式",
        "kind_rewrite": "洗稿改写：逐句改写原章节的文字，保留原文的内容和顺序",
        "kind_translation": "将原章节翻译为{language}",
        "coverage": "覆盖范围",
        "coverage_value": "按原文顺序逐句对应，覆盖原章节 {coverage}",
        "aligned": "逐句对照（共 {pairs} 对，自章首至章末选列 {shown} 对；"
        "相似度为两句语义的相似程度，0 至 1）：",
        "pair": "第 {number} 对，相似度 {similarity}",
        "similarity": "相似度",
        "s4": "四、构成侵权的初步证明材料",
        "evidence": "每个网页的证据包均随本通知书附上（网页存档 WARC 及抓取记录、比对段落、SHA-256 校验值）；"
        "原文与侵权内容的对照见第三部分。",
        "bundle": "{url} 的证据包：{name}（SHA-256 校验值 {sha256}）",
        "no_bundle": "{url} 的证据包：未附",
        "signing_key": "证据包均以我司的签名密钥签署，公钥指纹：{fingerprint}"
        "（核验方法见各证据包的说明文件）。",
        "s5": "五、保证声明",
        "request": "请贵司在收到本通知书后立即删除第三部分所列侵权内容，或者断开与其的链接，并于{deadline}前"
        "将处理结果书面回复我司。",
        "seal": "{name}（盖章）",
        "person_signature": "签名：/s/ {signer}",
        "esign": "电子签名声明：本通知书以电子邮件（数据电文）发出，由{signer}代表{name}以电子签名"
        "“/s/ {signer}”签署。依《中华人民共和国电子签名法》第十三条，电子签名同时符合下列条件的，视为"
        "可靠的电子签名：电子签名制作数据用于电子签名时属于电子签名人专有，签署时仅由电子签名人控制，"
        "签署后对电子签名及数据电文内容和形式的任何改动能够被发现。{key}本通知书正文的 SHA-256 校验值"
        "由{name}留存备查。",
        "esign_key": "随附证据包以{name}的签名密钥签署（公钥指纹：{fingerprints}），该密钥仅由{name}"
        "持有和控制，对证据包的任何改动均会使签名失效。",
        "esign_no_key": "本通知书未附签名密钥。",
        "signer": "授权签署人：/s/ {signer}",
        "signer_title": "授权签署人：/s/ {signer}（{title}）",
        "gone": "（已删除）",
        "separator": "；",
    },
}


@dataclass(frozen=True)
class NavLink:
    """A link the admin puts above a notice shown on screen (never printed, never sent)."""

    label: str
    href: str
    css_class: str = ""


def _person(sender: Sender | None) -> bool:
    return sender is not None and sender.kind == "person"


def _voice(texts: Mapping[str, str], sender: Sender | None) -> Mapping[str, str]:
    """A Chinese notice speaks as 我司 for a company and as 本人 for a natural person."""
    if not _person(sender):
        return texts
    return {key: value.replace("我司", "本人") for key, value in texts.items()}


def statements_for(language: str, sender: Sender | None) -> Mapping[str, str]:
    """The statements (:data:`STATEMENTS`) of ``language`` as ``sender`` makes them: a person's Chinese ones
    say 本人 where a company's say 我司."""
    return _voice(STATEMENTS.get(language, STATEMENTS["en"]), sender)


def _texts(notice: Notice) -> tuple[str, Mapping[str, str]]:
    language = notice.language if notice.language in TEXTS else "en"
    return language, _voice(TEXTS[language], notice.sender)


def format_day(moment: datetime | None, language: str = "en") -> str:
    """A day as each side writes it: ``2026-11-25`` (UTC) in English, ``2026年11月26日`` (北京时间) in
    Chinese. Empty for None."""
    if moment is None:
        return ""
    if language == "zh":
        local = as_utc(moment).astimezone(BEIJING)
        return f"{local.year}年{local.month}月{local.day}日"
    return as_utc(moment).strftime("%Y-%m-%d")


def format_minute(moment: datetime | None, language: str = "en") -> str:
    """A moment to the minute: ``2026-11-25 18:00 UTC`` in English, ``2026年11月26日 02:00（北京时间）`` in
    Chinese. Empty for None."""
    if moment is None:
        return ""
    if language == "zh":
        return f"{format_day(moment, language)} {as_utc(moment).astimezone(BEIJING):%H:%M}（北京时间）"
    return as_utc(moment).strftime("%Y-%m-%d %H:%M UTC")


def reply_deadline(when: datetime, language: str = "en") -> str:
    """The day by which the recipient is asked to answer a notice sent at ``when``: :data:`REPLY_DAYS` later,
    counted in the reader's calendar (北京时间 for a Chinese notice)."""
    return format_day(when + timedelta(days=REPLY_DAYS), language)


def notice_subject(notice: Notice) -> str:
    """The email's subject: the title, the site and the notice's number, in the notice's language."""
    _language, t = _texts(notice)
    return t["subject"].format(title=t["title"], host=notice.host, number=notice.id)


def bundle_filename(item: NoticeItem) -> str:
    """The name an item's evidence bundle is attached under."""
    return f"fptrack-match-{item.match_id or item.id}-evidence.zip"


def signature_line(
    sender: Sender | None, when: datetime, language: str = "en", owners: Sequence[str] = ()
) -> list[str]:
    """The signature block, as each side signs. A company seals (盖章: the sender's name with the place of
    its seal, on a printed copy) and its authorised signer signs ``/s/`` with the title; a person signs
    (签名：/s/ Name). English: the typed electronic signature ``/s/ Name``, the signer's capacity (for an
    agent, whose agent: ``owners``), the date (UTC); Chinese: the day in 北京时间. Empty without a signer."""
    if sender is None or not sender.signer_name.strip():
        return []
    signer, title = sender.signer_name.strip(), sender.signer_title.strip()
    day = format_day(when, language)
    if language == "zh":
        t = TEXTS["zh"]
        if _person(sender):
            return [t["person_signature"].format(signer=signer), *([title] if title else []), day]
        signed = t["signer_title" if title else "signer"].format(signer=signer, title=title)
        return [t["seal"].format(name=sender.name.strip()), signed, day]
    t = TEXTS["en"]
    if _person(sender):
        agent = [t["agent_of"].format(owner=", ".join(owners))] if sender.role == "agent" and owners else []
        capacity = ", ".join([*([title] if title else []), *agent])
        return [t["person_signature"].format(signer=signer), *([capacity] if capacity else []), day]
    parts = [title, sender.name.strip()]
    if sender.role == "agent" and owners:
        parts.append(t["agent_of"].format(owner=", ".join(owners)))
    return [f"/s/ {signer}", ", ".join(part for part in parts if part), day]


def electronic_signature(notice: Notice, fingerprints: Sequence[str]) -> str:
    """The statement on the notice's electronic signature (电子签名法 第十三条): what makes a signature
    reliable, who signs it for whom, the fingerprint of the key that signed its evidence bundles
    (``fingerprints``: :func:`key_fingerprints`) and that the sender keeps the text's SHA-256. It claims no
    more: the typed ``/s/`` signature is not itself a cryptographic one. Empty without a signer."""
    sender = notice.sender
    if sender is None or not sender.signer_name.strip():
        return ""
    _language, t = _texts(notice)
    name = sender.name.strip()
    key = (
        t["esign_key"].format(name=name, fingerprints=", ".join(fingerprints))
        if fingerprints
        else t["esign_no_key"]
    )
    return t["esign"].format(signer=sender.signer_name.strip(), name=name, key=key)


def capture_sealed(item: NoticeItem) -> datetime | None:
    """When an item's capture was sealed by the time-stamping authority (its bundle's ``capture.tsr``): the
    page was captured no later than that; None when the bundle carries no seal."""
    return bundle_capture_sealed(item.bundle) if item.bundle else None


def key_fingerprints(notice: Notice) -> list[str]:
    """The fingerprints of the keys that signed the notice's evidence bundles (one, unless the key changed
    between drafts), printed in the notice so that a recipient can tie a bundle to the sender
    (``fptrack evidence verify --fingerprint``): the key inside a bundle alone proves nothing."""
    found = (bundle_key_fingerprint(item.bundle) for item in notice.items if item.bundle)
    return sorted({fingerprint for fingerprint in found if fingerprint})


def _reference(notice: Notice, parent: Notice | None, language: str) -> str | None:
    """The sentence by which a reminder or an escalation cites the earlier notice, or None."""
    if parent is None or notice.kind == "notice":
        return None
    first = parent
    # an escalation refers to the first notice of the chain, a reminder to the notice it follows
    if notice.kind == "escalation" and parent.kind == "reminder" and parent.parent is not None:
        first = parent.parent
    t = TEXTS[language]
    reference = t["reference"].format(number=first.id)
    if first.message_id:
        reference += t["reference_message"].format(message_id=first.message_id)
    template = t["escalation" if notice.kind == "escalation" else "reminder"]
    return template.format(
        date=format_day(first.sent_at or first.created_at, language), reference=reference, host=notice.host
    )


def _owners(notice: Notice) -> list[Owner]:
    """The rights owners of the notice's works (:func:`services.rights.owner_of`), each once, in item
    order."""
    found = [owner_of(item.work, notice.sender) for item in notice.items]
    return list(dict.fromkeys(owner for owner in found if owner.name)) or [owner_of(None, notice.sender)]


def _opening(notice: Notice, t: Mapping[str, str], owners: Sequence[Owner]) -> str:
    """The paragraph that introduces the sender as the owner or as the owners' agent (English: the agent's
    only)."""
    sender = notice.sender
    if sender is None:
        return ""
    separator = "、" if notice.language == "zh" else ", "
    owner_names = separator.join(owner.name for owner in owners if owner.name)
    template = t["opening_agent" if sender.role == "agent" else "opening"]
    rights = rights_in_short([item_kind(item) for item in notice.items])
    return template.format(name=sender.name, owner=owner_names, host=notice.host, rights=rights)


def item_meaning(item: NoticeItem) -> Mapping[str, Any] | None:
    """The header of an item that copies the meaning, not the words (a rewrite, a translation:
    ``jobs.notices._meaning_passages``): ``{"kind", "coverage", "pairs"}``; None for an exact copy."""
    passages = item.passages or []
    head = passages[0] if passages else None
    return head if isinstance(head, Mapping) and isinstance(head.get("kind"), str) else None


def item_kind(item: NoticeItem) -> str | None:
    """The kind of copy an item is (``rewrite``, ``translation:en``...; None: an exact copy)."""
    meaning = item_meaning(item)
    return str(meaning["kind"]) if meaning is not None else None


def item_pairs(item: NoticeItem) -> list[list[Any]]:
    """The item's quoted passages, ``[original, copy]`` each (an exact copy) or ``[original, copy,
    similarity]`` (aligned sentences of a copy that keeps the meaning), without the header."""
    return [list(pair) for pair in item.passages or [] if isinstance(pair, list | tuple) and len(pair) >= 2]


def _kind_text(kind: str | None, t: Mapping[str, str], language: str) -> str:
    """What the notice says an item of ``kind`` is: a rewrite, a translation into a named language."""
    code = translation_language(kind)
    if code is not None:
        return t["kind_translation"].format(language=LANGUAGE_NAMES[language].get(code, code))
    return t["kind_rewrite"] if kind == "rewrite" else ""


def _percent(share: object) -> str:
    return f"{round(float(share) * 100) if isinstance(share, int | float) else 0}%"


def _similarity(value: object) -> str:
    return f"{float(value):.2f}" if isinstance(value, int | float) and not isinstance(value, bool) else "–"


def _item_facts(item: NoticeItem, t: Mapping[str, str], language: str) -> dict[str, str]:
    """The rights the item's copy infringes, and for a copy that keeps the meaning its kind, its coverage
    and the heading of its aligned pairs, as the notice's text and document show them."""
    kind = item_kind(item)
    facts = {"rights": rights_named(kind, language)}
    meaning = item_meaning(item)
    if meaning is not None:
        shown = len(item_pairs(item))
        facts["kind"] = _kind_text(kind, t, language)
        facts["coverage"] = t["coverage_value"].format(coverage=_percent(meaning.get("coverage")))
        facts["aligned"] = t["aligned"].format(shown=shown, pairs=meaning.get("pairs", shown))
    return facts


def _works(notice: Notice) -> list[tuple[str, str, str]]:
    """(work, chapter, its owner's name) of the notice's items, each once, in item order."""
    return list(
        dict.fromkeys(
            (item.work_title, item.chapter_title, owner_of(item.work, notice.sender).name)
            for item in notice.items
        )
    )


def _work_facts(notice: Notice, t: Mapping[str, str], colon: str) -> list[tuple[str, str]]:
    """(title, "author: …; registration no.: …; authorised original: …") of each work that records any."""
    separator = t["separator"]
    facts = []
    for work in notice_works(notice):
        parts = [
            f"{t[label]}{colon}{value.strip()}"
            for label, value in (
                ("author", work.author),
                ("registration", work.registration_number),
                ("original_url", work.original_url),
            )
            if value.strip()
        ]
        if parts:
            facts.append((work.title, separator.join(parts)))
    return facts


def _context(notice: Notice, when: datetime, parent: Notice | None) -> dict[str, Any]:
    language, t = _texts(notice)
    sender = notice.sender

    def minute(moment: datetime | None) -> str:
        return format_minute(moment, language)

    owners = _owners(notice)
    fingerprints = key_fingerprints(notice)
    colon = "：" if language == "zh" else ": "
    item_owners = {id(item): owner_of(item.work, sender).name for item in notice.items}
    return {
        "notice": notice,
        "language": language,
        "t": t,
        "statements": statements_for(language, sender),
        "sender": sender,
        "agent": sender is not None and sender.role == "agent",
        "company": sender is not None and not _person(sender),
        "owners": owners,
        "item_owner": lambda item: item_owners.get(id(item), ""),
        "item_facts": lambda item: _item_facts(item, t, language),
        "item_pairs": item_pairs,
        "similarity": _similarity,
        "proofs": [(PROOF_LABELS[language][p.kind], p) for p in notice_proofs(notice)],
        "works": _works(notice),
        "work_facts": _work_facts(notice, t, colon),
        "items": list(notice.items),
        "date": minute(when),
        "reference": _reference(notice, parent, language),
        "opening": _opening(notice, t, owners),
        "request": t["request"].format(deadline=reply_deadline(when, language)),
        "electronic_signature": electronic_signature(notice, fingerprints),
        "signature": signature_line(sender, when, language, [owner.name for owner in owners if owner.name]),
        "bundle_filename": bundle_filename,
        "minute": minute,
        "key_fingerprints": fingerprints,
        "capture_sealed": capture_sealed,
    }


def _parent(notice: Notice) -> Notice | None:
    return notice.parent if notice.parent_id is not None else None


def render_text(notice: Notice, when: datetime) -> str:
    """The notice as plain text in its language, dated ``when`` (the time it is sent; for a draft, now)."""
    c = _context(notice, when, _parent(notice))
    t: Mapping[str, str] = c["t"]
    minute = c["minute"]
    colon = "：" if c["language"] == "zh" else ": "
    lines: list[str] = [t["title"].upper() if c["language"] == "en" else t["title"], t["laws"], ""]
    lines.append(f"{t['date']}{colon}{c['date']}")
    recipient = notice.recipient_name or notice.recipient_address
    if notice.recipient_name and notice.recipient_address:
        recipient = f"{notice.recipient_name} <{notice.recipient_address}>"
    if recipient and notice.recipient_kind == "designated_agent":  # the DMCA agent, addressed as such
        recipient += f" ({t['to_agent']})" if c["language"] == "en" else f"（{t['to_agent']}）"
    if recipient:
        lines.append(f"{t['to']}{colon}{recipient}")
    lines.append(f"{t['site']}{colon}{notice.host}")
    if notice.id is not None:
        lines.append(f"{t['number']}{colon}{notice.id}")
    for paragraph in (c["opening"], c["reference"]):
        if paragraph:
            lines += ["", paragraph]
    sender: Sender | None = c["sender"]
    lines += ["", t["s1"]]
    if sender is not None:
        indent = "  "
        if c["agent"]:
            for owner in c["owners"]:
                lines.append(f"  {t['holder']}{colon}{owner.name}")
                lines += _contact_lines(t, colon, "    ", owner.address, owner.email, owner.phone)
            lines.append(f"  {t['agent']}{colon}{sender.name}")
            indent = "    "
        else:
            lines.append(f"  {t['name']}{colon}{sender.name}")
        if c["company"]:
            lines += [
                f"{indent}{t[label]}{colon}{value.strip()}"
                for label, value in (
                    ("credit_code", sender.credit_code),
                    ("legal_rep", sender.legal_representative),
                )
                if value.strip()
            ]
        lines += _contact_lines(t, colon, indent, sender.address, sender.email, sender.phone)
    lines += ["", t["s2"]]
    lines += [f"  - {t['work'].format(work=w, chapter=ch, owner=owner)}" for w, ch, owner in c["works"]]
    lines += [
        f"  《{title}》{colon}{facts}" if c["language"] == "zh" else f'  "{title}": {facts}'
        for title, facts in c["work_facts"]
    ]
    lines += [
        f"  {t['proof'].format(label=label, name=p.filename, sha256=p.sha256)}" for label, p in c["proofs"]
    ]
    if not any(p.kind == "ownership_certificate" for _label, p in c["proofs"]):
        lines.append(f"  {t['no_proof']}")
    lines += ["", t["s3"]]
    for number, item in enumerate(notice.items, start=1):
        lines += [
            "",
            f"  3.{number} {t['url']}{colon}{item.url}" + (f" {t['gone']}" if item.closed_at else ""),
        ]
        if item.page_title:
            lines.append(f"      {t['page_title']}{colon}{' '.join(item.page_title.split())}")
        owner = c["item_owner"](item)
        copies = t["work"].format(work=item.work_title, chapter=item.chapter_title, owner=owner)
        lines.append(f"      {t['copies']}{colon}{copies}")
        if item.file_members:  # a copy in a downloaded file: the archive's files it is in
            files = ("、" if c["language"] == "zh" else ", ").join(item.file_members.splitlines())
            lines.append(f"      {t['in_files']}{colon}{files}")
        facts = _item_facts(item, t, c["language"])
        if "kind" in facts:  # a rewrite or a translation: what it is, and how much of the chapter it covers
            lines.append(f"      {t['kind']}{colon}{facts['kind']}")
            lines.append(f"      {t['coverage']}{colon}{facts['coverage']}")
        lines.append(f"      {t['rights']}{colon}{facts['rights']}")
        if item.copy_kind:  # the reviewer's word: an excerpt is not called a copy of the chapter
            lines.append(f"      {t['extent']}{colon}{t['extent_' + item.copy_kind]}")
        seen, fetched = minute(item.first_seen), minute(item.fetched_at)
        lines.append(f"      {t['first_seen']}{colon}{seen}{t['separator']}{t['fetched']}{colon}{fetched}")
        if item.snapshot_sha256:
            lines.append(f"      {t['snapshot']}{colon}{item.snapshot_sha256}")
        if (sealed := capture_sealed(item)) is not None:
            lines.append(f"      {t['sealed']}{colon}{minute(sealed)}")
        if "aligned" in facts:
            lines.append(f"      {facts['aligned']}")
        for index, pair in enumerate(item_pairs(item), start=1):
            original, copy = str(pair[0]), str(pair[1])
            heading = t["passage"].format(number=index)
            if len(pair) > 2:  # an aligned sentence pair, with its similarity
                heading = t["pair"].format(number=index, similarity=_similarity(pair[2]))
            lines += [
                f"      {heading}",
                f"        {t['original']}{colon}{original}",
                f"        {t['copy']}{colon}{copy}",
            ]
    lines += ["", t["s4"], f"  {t['evidence']}"]
    for item in notice.items:
        if item.bundle_sha256:
            name = bundle_filename(item)
            lines.append(f"  - {t['bundle'].format(url=item.url, name=name, sha256=item.bundle_sha256)}")
        else:
            lines.append(f"  - {t['no_bundle'].format(url=item.url)}")
    lines += [f"  {t['signing_key'].format(fingerprint=f)}" for f in c["key_fingerprints"]]
    statements: Mapping[str, str] = c["statements"]
    lines += ["", t["s5"], *(f"  {statement}" for statement in statements.values())]
    lines += ["", c["request"], ""]
    if c["electronic_signature"]:
        lines += [c["electronic_signature"], ""]
    lines += c["signature"]
    return "\n".join(lines).rstrip() + "\n"


def _contact_lines(
    t: Mapping[str, str], colon: str, indent: str, address: str, email: str, phone: str
) -> list[str]:
    return [
        f"{indent}{t['address']}{colon}{' '.join(address.split())}",
        f"{indent}{t['email']}{colon}{email}",
        f"{indent}{t['phone']}{colon}{phone}",
    ]


def _environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True, default_for_string=True),
        keep_trailing_newline=True,
    )


def render_html(
    notice: Notice,
    when: datetime,
    *,
    stylesheet: str | None = None,
    nav: Sequence[NavLink] = (),
    missing: Sequence[str] = (),
    missing_heading: str = "This notice cannot be sent yet. Missing:",
) -> str:
    """The notice as an HTML document: the same sections as :func:`render_text`, the passages side by side.
    ``stylesheet``: the href of a stylesheet to link (the admin's ``notice.css``); None: a small style
    element of its own (a message's HTML part has no stylesheet to link). ``nav`` and ``missing`` are shown
    on screen only (links of the admin, the elements still missing, under ``missing_heading``)."""
    template = _environment().get_template("notice_document.html")
    return template.render(
        **_context(notice, when, _parent(notice)),
        stylesheet=stylesheet,
        nav=list(nav),
        missing=list(missing),
        missing_heading=missing_heading,
    )


# ------------------------------------------------------------------------------------------ the elements


def absent_elements(notice: Notice, *, bundles_due: bool = True) -> list[tuple[str, Phrase]]:
    """``(element key, what is missing)`` for each element of :data:`ELEMENTS` the notice lacks; an element
    may appear more than once (one line per missing part). Each reason is an English :class:`Phrase` the
    admin says again in its reader's language. ``bundles_due`` False: missing evidence bundles are not
    counted (a preview's: keeping it as a draft makes them, so their absence is the next step, not a flaw)."""
    absent: list[tuple[str, Phrase]] = []
    sender = notice.sender
    statements = statements_for(notice.language, sender)
    text = notice.text or ""

    def lacks(reason: Phrase, *keys: str) -> None:
        absent.extend((key, reason) for key in keys)

    if sender is None:
        lacks(
            Phrase("no sender (add one: %(command)s)", command="fptrack senders add"),
            "us_i_signature",
            "us_iv_contact",
            "us_vi_accuracy",
            "cn14_1_holder",
            "cn14_truth",
        )
    else:
        if not sender.signer_name.strip():
            lacks(Phrase("the sender names no signer for the /s/ signature"), "us_i_signature")
        # a person who owns the rights acts as the owner; anyone else says in what capacity the signer acts
        if not sender.signer_title.strip() and not (_person(sender) and sender.role == "owner"):
            lacks(Phrase("the signer's authority to act (title or capacity) is not given"), "us_vi_accuracy")
        if not (sender.rights_owner or sender.name).strip():
            lacks(Phrase("the rights holder's name is empty"), "cn14_1_holder")
        # 512(c)(3)(A)(iv): address, telephone and email; 第十四条（一）: the address and a way to reach them
        if not sender.address.strip():
            lacks(Phrase("the sender has no postal address"), "us_iv_contact", "cn14_1_holder")
        if not sender.phone.strip():
            lacks(Phrase("the sender has no telephone number"), "us_iv_contact")
        if not sender.email.strip():
            lacks(Phrase("the sender has no email address"), "us_iv_contact")
        if not (sender.phone.strip() or sender.email.strip()):
            lacks(Phrase("the sender has neither telephone nor email"), "cn14_1_holder")

    items = list(notice.items)
    if not items:
        lacks(
            Phrase("the notice names no infringing copy"),
            "us_ii_work",
            "us_iii_material",
            "cn14_2_works",
            "cn14_3_evidence",
        )
    for item in items:
        url = item.url
        if not item.work_title.strip():
            lacks(Phrase("no work named for %(url)s", url=url), "us_ii_work", "cn14_2_works")
        if not url.strip():
            lacks(Phrase("item %(item)s has no URL", item=item.id), "us_iii_material")
            lacks(Phrase("item %(item)s has no network address", item=item.id), "cn14_2_works")
        elif text and url not in text:
            lacks(Phrase("the text does not name %(url)s", url=url), "us_iii_material", "cn14_2_works")
        if not item.passages:
            lacks(Phrase("no copied passage identified on %(url)s", url=url), "us_iii_material")
            lacks(Phrase("no passage compared for %(url)s", url=url), "cn14_3_evidence")
        if bundles_due and not item.bundle_sha256:
            lacks(Phrase("no evidence bundle for %(url)s", url=url), "cn14_3_evidence")
    # the rights: each work's ownership proof, an agent's authorisation and principal (services.rights)
    absent += rights_gaps(notice)

    checks = (
        ("us_v_good_faith", "good_faith", Phrase("the good-faith statement")),
        ("us_vi_accuracy", "accuracy", Phrase("the statement of accuracy under penalty of perjury")),
        ("cn14_truth", "truth", Phrase("the sender's responsibility for the notice's truth")),
    )
    for key, statement, label in checks:
        if statements[statement] not in text:
            lacks(Phrase("the text lacks %(statement)s", statement=label), key)
    if sender is not None and sender.signer_name.strip() and f"/s/ {sender.signer_name.strip()}" not in text:
        lacks(Phrase("the text carries no /s/ signature"), "us_i_signature")
    return absent


def missing_elements(notice: Notice, *, bundles_due: bool = True) -> list[Phrase]:
    """Each element the notice lacks, named by law and article with what is missing, e.g. ``17 U.S.C.
    512(c)(3)(A)(iv) contact information of the complaining party: the sender has no postal address``.
    Empty: the notice carries every element of 512(c)(3)(A) and 第十四条 and may be sent. Each line is an
    English :class:`Phrase` (the element's title and the reason are phrases in it)."""
    found = []
    for key, reason in absent_elements(notice, bundles_due=bundles_due):
        element = _BY_KEY[key]
        line = Phrase(
            "%(ref)s %(element)s: %(reason)s", ref=element.ref, element=element.title, reason=reason
        )
        found.append(line)
    return list(dict.fromkeys(found))
