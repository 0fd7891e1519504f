"""storage.leads on SQLite and PostgreSQL: recording the share links of stored pages is idempotent (a batch
written twice adds nothing), keeps every page a share was seen on with first and last sightings, keeps the
first code, and attributes a lead to the work its text names or to the work matched on its pages."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.crawler.leads import find_share_links
from fptrack.storage.leads import LeadError, list_leads, record_share_links, review_lead
from fptrack.storage.models import Chapter, Match, Page, ShareLead, ShareLeadSighting, Work, utcnow


def _page(session: Session, url: str) -> int:
    page = Page(url=url, final_url=url, host="pirate.example", status=200, text="x", content_sha256="0" * 64)
    session.add(page)
    session.flush()
    return page.id


def _work(session: Session, title: str) -> Work:
    work = Work(title=title, content_sha256=title.encode().hex().ljust(64, "0")[:64], text="正文")
    session.add(work)
    session.flush()
    return work


def test_recording_twice_adds_nothing_and_keeps_every_page(session: Session) -> None:
    named = _work(session, "青灯夜话")
    first, second = _page(session, "http://pirate.example/1"), _page(session, "http://pirate.example/2")
    on_first = find_share_links("楼主：pan.baidu.com/s/1AbCdEfGh 提取码 ab12 和 pan.quark.cn/s/0123456789ab")
    on_second = find_share_links("《青灯夜话》全本 https://pan.baidu.com/s/1AbCdEfGh")
    t0 = utcnow()
    batch = [(first, t0, on_first), (second, t0 + timedelta(minutes=1), on_second)]
    record_share_links(session, batch)
    record_share_links(session, batch)  # a batch stored again, a task delivered twice
    record_share_links(session, [(first, t0 + timedelta(hours=1), on_first)])  # a re-crawl
    session.commit()
    assert session.scalar(select(func.count()).select_from(ShareLead)) == 2
    assert session.scalar(select(func.count()).select_from(ShareLeadSighting)) == 3
    leads = {row.platform: row for row in list_leads(session)}
    baidu = leads["baidu"]
    assert baidu.code == "ab12"  # from the first page; the second names none
    assert [s.page_url for s in baidu.sightings] == ["http://pirate.example/1", "http://pirate.example/2"]
    assert baidu.last_seen.replace(tzinfo=None) == (t0 + timedelta(hours=1)).replace(tzinfo=None)
    # the first page named no work; the second's text names 青灯夜话 beside the link
    assert baidu.works == ((named.id, "青灯夜话"),) and baidu.basis == "title"
    assert leads["quark"].works == () and leads["quark"].basis == ""


def test_a_lead_is_of_the_work_matched_on_its_page_and_filters_by_it(session: Session) -> None:
    work = _work(session, "山海长歌")
    chapter = Chapter(work_id=work.id, index=1, title="第一章", start=0, end=2, text="正文")
    session.add(chapter)
    page_id = _page(session, "http://pirate.example/copy")
    session.flush()
    session.add(
        Match(page_id=page_id, work_id=work.id, chapter_id=chapter.id, score=0.9, methods=[], spans=[])
    )
    record_share_links(
        session, [(page_id, utcnow(), find_share_links("https://www.alipan.com/s/Ab1Cd2Ef3Gh"))]
    )
    session.commit()
    (lead,) = list_leads(session, work_id=work.id)
    assert lead.works == ((work.id, "山海长歌"),) and lead.basis == "page"
    assert list_leads(session, work_id=work.id + 1) == []
    assert list_leads(session, platform="baidu") == []
    review_lead(session, lead.id, "confirmed", by="ada")
    session.commit()
    assert [row.id for row in list_leads(session, state="confirmed")] == [lead.id]
    try:
        review_lead(session, lead.id + 100, "confirmed")
    except LeadError as error:
        assert f"no lead {lead.id + 100}" in str(error)
    else:
        raise AssertionError("an unknown lead was reviewed")
