"""The Leads page through Flask's test client on SQLite and PostgreSQL: in the navigation, everyone reads the
list with its filters, hostile text from the crawled page is escaped, a reviewer confirms a lead and a viewer
may not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from sqlalchemy.orm import Session

from fptrack.admin.web import create_app
from fptrack.core.settings import Settings
from fptrack.crawler.leads import find_share_links
from fptrack.storage.leads import list_leads, record_share_links
from fptrack.storage.models import Page, utcnow
from tests.support.accounts import add_account, csrf_token_in, log_in

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    app = create_app(settings)
    yield app
    app.extensions["fptrack"].engine.dispose()


def _seed(session: Session) -> None:
    url = "http://pirate.example/t?x=<b>"
    page = Page(url=url, final_url=url, host="pirate.example", status=200, text="x", content_sha256="0" * 64)
    session.add(page)
    session.flush()
    # the page's text (its markup unescaped) holds a script tag beside the link
    markup = (
        "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"
        "<p>pan.baidu.com/s/1AbCdEfGh 提取码 ab12</p><p>pan.quark.cn/s/0123456789ab</p>"
    )
    links = find_share_links(markup)
    assert SCRIPT in links[0].context
    record_share_links(session, [(page.id, utcnow(), links)])
    session.commit()


def test_the_leads_page_lists_filters_escapes_and_takes_a_reviewers_decision(
    app: Flask, settings: Settings, session: Session
) -> None:
    _seed(session)
    add_account(settings, "rita", "reviewer")
    add_account(settings, "vic", "viewer")
    reviewer = app.test_client()
    log_in(reviewer, "rita")
    page = reviewer.get("/leads")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'href="/leads"' in html  # in the navigation
    assert "https://pan.baidu.com/s/1AbCdEfGh" in html and "ab12" in html
    assert SCRIPT not in html and "&lt;script&gt;" in html
    assert "x=<b>" not in html
    only_quark = reviewer.get("/leads?platform=quark").get_data(as_text=True)
    assert "0123456789ab" in only_quark and "1AbCdEfGh" not in only_quark
    assert reviewer.get("/leads?platform=nowhere").status_code == 400
    assert reviewer.get("/leads?work=abc").status_code == 400

    baidu = next(row for row in list_leads(session) if row.platform == "baidu")
    viewer = app.test_client()
    log_in(viewer, "vic")
    token = csrf_token_in(viewer.get("/leads").get_data(as_text=True))  # its log-out form's token
    refused = viewer.post(f"/leads/{baidu.id}/confirm", data={"csrf_token": token})
    assert refused.status_code == 403
    token = csrf_token_in(reviewer.get("/leads").get_data(as_text=True))
    done = reviewer.post(f"/leads/{baidu.id}/confirm", data={"csrf_token": token})
    assert done.status_code == 303
    session.expire_all()
    assert [row.platform for row in list_leads(session, state="confirmed")] == ["baidu"]
    assert reviewer.post("/leads/999999/confirm", data={"csrf_token": token}).status_code == 404
