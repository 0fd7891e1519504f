"""Notices of cloud-drive leads: a platform's confirmed share links of a work, drafted as one notice addressed
to that platform's complaint channel, with the notice machinery of :mod:`jobs.notices` (a :class:`Notice`
whose items are the share links: no match, no passages; the work's owner and proofs cited as for any copy).

:data:`COMPLAINT_CHANNELS` is the built-in table of where each platform takes copyright complaints. A host
contact (``fptrack contacts add pan.baidu.com copyright@... --name ...``) overrides it: the notice then goes
to that address, as a site's notice goes to the site's contact."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from fptrack.crawler.leads import PLATFORMS
from fptrack.jobs.notice_render import render_text
from fptrack.jobs.notices import NoticeError, default_sender, list_contacts
from fptrack.storage.leads import LeadRow, list_leads
from fptrack.storage.models import Notice, NoticeItem, Sender, Work, utcnow

__all__ = ["COMPLAINT_CHANNELS", "ComplaintChannel", "draft_lead_notice"]


@dataclass(frozen=True)
class ComplaintChannel:
    """Where a platform takes copyright complaints about a share: ``host`` (the notice's host, and the host a
    user's own contact is added under), the channel's ``name``, a web ``url`` and an ``email`` ('' when the
    platform publishes none), and ``source``: where this entry comes from."""

    host: str
    name: str
    url: str
    email: str
    source: str


# Written down 2026-11-29 from the platforms' own pages as known then; this machine reaches no web, so none
# was fetched again here: check before sending, and override with `fptrack contacts add <host> <email>`.
COMPLAINT_CHANNELS: dict[str, ComplaintChannel] = {
    "baidu": ComplaintChannel(
        host="pan.baidu.com",
        name="百度网盘 侵权投诉（分享页「举报」→ 侵权投诉；百度版权投诉服务平台）",
        url="https://pan.baidu.com/",
        email="",
        source="Baidu Netdisk's statement on its copyright complaint channels (share pages' 举报 entry, the "
        "侵权投诉 entry of its feedback page, Baidu's copyright complaint service platform)",
    ),
    "aliyun": ComplaintChannel(
        host="www.alipan.com",
        name="阿里巴巴知识产权保护平台（阿里云盘）",
        url="https://ipp.alibabagroup.com/",
        email="",
        source="Alibaba Group's intellectual property protection platform, which takes complaints about "
        "Alibaba's services; 阿里云盘 share pages also have a 举报 entry",
    ),
    "quark": ComplaintChannel(
        host="pan.quark.cn",
        name="阿里巴巴知识产权保护平台（夸克网盘）",
        url="https://ipp.alibabagroup.com/",
        email="",
        source="Quark is an Alibaba service: Alibaba Group's intellectual property protection platform; "
        "夸克网盘 share pages also have a 举报 entry",
    ),
    "123pan": ComplaintChannel(
        host="www.123pan.com",
        name="123云盘 举报（分享页「举报」）",
        url="https://www.123pan.com/",
        email="",
        source="the 举报 entry of 123云盘 share pages; no complaint address published that we know of",
    ),
    "lanzou": ComplaintChannel(
        host="www.lanzoux.com",
        name="蓝奏云 举报（分享页「举报」）",
        url="https://www.lanzoux.com/",
        email="",
        source="the 举报 entry of 蓝奏云 share pages; no complaint address published that we know of",
    ),
}


def _item(lead: LeadRow, work: Work, platform_name: str) -> NoticeItem:
    posted = ", ".join(s.page_url for s in lead.sightings)
    code = f"，提取码 {lead.code}" if lead.code else ""
    item = NoticeItem(
        match_id=None,
        url=lead.url,
        page_title=f"{platform_name} 分享{code}；posted on {posted}"[:2000],
        work_title=work.title,
        chapter_title="全本 / the whole book",
        first_seen=lead.first_seen,
        fetched_at=lead.last_seen,
        snapshot_sha256="",
        passages=[],
        bundle=None,
        bundle_sha256="",
        copy_kind="",
        file_members="",
    )
    item.work = work  # its owner and proofs are what the notice cites
    return item


def draft_lead_notice(
    session: Session,
    *,
    platform: str,
    work_id: int,
    actor: str,
    sender: Sender | None = None,
    language: str | None = None,
    recipient: str | None = None,
    now: datetime | None = None,
) -> Notice:
    """Draft and keep a notice of ``work_id``'s confirmed leads on ``platform``, addressed to the platform's
    contact (a host contact added by the user) or its built-in complaint channel. The caller commits."""
    channel = COMPLAINT_CHANNELS.get(platform)
    if channel is None:
        raise NoticeError(f"unknown platform {platform!r} (one of: {', '.join(COMPLAINT_CHANNELS)})")
    work = session.get(Work, work_id)
    if work is None:
        raise NoticeError(f"no work {work_id} (fptrack works list)")
    leads = list_leads(session, work_id=work_id, platform=platform, state="confirmed")
    if not leads:
        raise NoticeError(
            f"no confirmed {platform} leads of work {work_id}: confirm them first (fptrack leads confirm ID)"
        )
    now = now or utcnow()
    sender = sender if sender is not None else default_sender(session)
    contacts = list_contacts(session, channel.host)
    contact = contacts[0] if contacts and not recipient else None
    address = (recipient or "").strip() or (contact.email if contact else channel.email)
    name = contact.name if contact else ("" if recipient else f"{channel.name} {channel.url}")
    chosen = language or (contact.language if contact else "") or (sender.language if sender else "") or "zh"
    notice = Notice(
        host=channel.host,
        language=chosen,
        state="draft",
        kind="notice",
        escalation_level=0,
        contact_level=contact.level if contact else 0,
        recipient_kind=contact.kind if contact else "site",
        recipient_name=name[:300],
        recipient_address=address[:320],
        created_at=now,
        state_changed_at=now,
        message_id="",
        sent_by="",
        created_by=actor,
    )
    notice.sender = sender
    notice.items = [_item(lead, work, PLATFORMS[platform][0]) for lead in leads]
    session.add(notice)
    session.flush()  # the notice's number goes into its text
    notice.text = render_text(notice, now)
    notice.text_sha256 = hashlib.sha256(notice.text.encode("utf-8")).hexdigest()
    return notice
