"""jobs.leads.draft_lead_notice on SQLite and PostgreSQL: a work's confirmed share links on one platform are
drafted as one notice (kept with the others) to the platform's built-in complaint channel, or to a contact the
user added for the platform's host; unconfirmed leads are not named."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from fptrack.crawler.leads import find_share_links
from fptrack.jobs.leads import COMPLAINT_CHANNELS, draft_lead_notice
from fptrack.jobs.notices import NoticeError, add_contact, list_notices
from fptrack.storage.leads import list_leads, record_share_links, review_lead
from fptrack.storage.models import Page, Work, utcnow


def _seed(session: Session) -> Work:
    work = Work(title="青灯夜话", content_sha256="a" * 64, text="正文")
    url = "http://pirate.example/thread/7"
    page = Page(url=url, final_url=url, host="pirate.example", status=200, text="x", content_sha256="0" * 64)
    session.add_all([work, page])
    session.flush()
    markup = (
        "《青灯夜话》全本 pan.baidu.com/s/1AbCdEfGh 提取码 ab12"
        "<p>《青灯夜话》备份 https://pan.baidu.com/s/1ZzZzZzZz</p>"
        "<p>《青灯夜话》夸克 pan.quark.cn/s/0123456789ab</p>"
    )
    record_share_links(session, [(page.id, utcnow(), find_share_links(markup))])
    session.flush()
    return work


def test_a_notice_names_the_confirmed_leads_of_a_work_on_one_platform(session: Session) -> None:
    work = _seed(session)
    with pytest.raises(NoticeError, match="no confirmed baidu leads"):
        draft_lead_notice(session, platform="baidu", work_id=work.id, actor="test")
    leads = {row.share_id: row for row in list_leads(session)}
    review_lead(session, leads["1AbCdEfGh"].id, "confirmed")
    review_lead(session, leads["0123456789ab"].id, "confirmed")  # another platform's: not in this notice
    notice = draft_lead_notice(session, platform="baidu", work_id=work.id, actor="test")
    session.commit()
    assert notice.host == "pan.baidu.com" and notice.state == "draft"
    assert COMPLAINT_CHANNELS["baidu"].name in notice.recipient_name
    assert [item.url for item in notice.items] == ["https://pan.baidu.com/s/1AbCdEfGh"]
    assert "https://pan.baidu.com/s/1AbCdEfGh" in notice.text and "ab12" in notice.text
    assert (
        "1ZzZzZzZz" not in notice.text and "0123456789ab" not in notice.text
    )  # not confirmed / other platform
    assert "青灯夜话" in notice.text and "http://pirate.example/thread/7" in notice.text
    assert [n.id for n in list_notices(session)] == [notice.id]

    add_contact(session, "pan.baidu.com", "copyright@pan.example", name="Baidu copyright desk")
    again = draft_lead_notice(session, platform="baidu", work_id=work.id, actor="test")
    assert (
        again.recipient_address == "copyright@pan.example" and again.recipient_name == "Baidu copyright desk"
    )
    with pytest.raises(NoticeError, match="unknown platform"):
        draft_lead_notice(session, platform="dropbox", work_id=work.id, actor="test")
