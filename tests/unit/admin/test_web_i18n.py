"""The admin in Chinese and English: the language chosen, every visible word translated, the catalog complete,
times in the installation's zone, sites by name (on SQLite and PostgreSQL, the ``settings`` fixture)."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from babel.messages.extract import extract_from_dir, extract_python
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from flask import Flask
from flask.testing import FlaskClient
from lxml import html as lxml_html
from markupsafe import escape
from sqlalchemy.orm import Session

from fptrack.admin.i18n import LANGUAGE_COOKIE, TRANSLATIONS
from fptrack.admin.web import create_app
from fptrack.core.settings import ConfigurationError, Settings
from fptrack.jobs.notice_render import missing_elements
from fptrack.jobs.notices import add_contact, draft_notice, save_sender
from fptrack.storage.models import Match, Site
from tests.support.accounts import add_account, csrf_token_in, log_in
from tests.support.admin_seed import Seeded

ADMIN = TRANSLATIONS.parent
PO = TRANSLATIONS / "zh" / "LC_MESSAGES" / "messages.po"
MO = PO.with_suffix(".mo")
PHRASE_SOURCES = [ADMIN.parent / "jobs" / "notice_render.py", ADMIN.parent / "services" / "rights.py"]

# Words that stay as they are in a Chinese page: names of formats, protocols and the product.
_KEPT = {
    "fptrack", "csv", "json", "pdf", "html", "http", "https", "url", "urls", "sha", "warc", "api", "smtp",
    "id", "p90", "lumen", "eml", "robots", "txt", "cron", "utc", "rfc", "opencc", "simhash64", "winnowing",
    "english", "dmca", "ok", "ip", "tsa", "ed25519", "cc", "bcc", "sha256sums", "gb", "mb", "kb",
}  # fmt: skip
# Elements whose text is data (crawled or registered text, hosts, URLs, hashes, names, code, a law's citation
# as the law writes it: 17 U.S.C. 512(c)(3)(A)(iv)), not ours.
_DATA_CLASSES = {
    "url", "host", "page-title", "text", "note", "hash", "who", "page-note", "methods", "error", "detail",
    "kept-version", "title", "name", "email", "site-name", "diff-summary", "muted-data", "citation",
}  # fmt: skip
# The seed's own texts (a work's title, a chapter's, the account's name), shown as they were registered.
_SEEDED = re.compile(r"Other <script>alert\(1\)</script>|Chapter 1|\bada\b")
_DATA_TAGS = {"code", "pre", "script", "style", "textarea", "option", "mark", "ins", "del"}


@pytest.fixture
def client(app: Flask, settings: Settings) -> FlaskClient:
    add_account(settings, "ada", "admin")
    client = app.test_client()
    log_in(client, "ada")
    return client


def _untranslated(page: str) -> list[str]:
    """Runs of English words in a page's visible text and labelling attributes, outside data."""
    tree = lxml_html.fromstring(page)
    found: list[str] = []
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        data = any(
            ancestor.tag in _DATA_TAGS or _DATA_CLASSES & set((ancestor.get("class") or "").split())
            for ancestor in element.iterancestors()
        ) or _DATA_CLASSES & set((element.get("class") or "").split())
        texts: list[str] = []
        if element.tag not in _DATA_TAGS and not data:
            texts.append(element.text or "")
            texts += [element.get(name) or "" for name in ("title", "placeholder", "alt", "aria-label")]
        parent_data = any(
            ancestor.tag in _DATA_TAGS or _DATA_CLASSES & set((ancestor.get("class") or "").split())
            for ancestor in element.iterancestors()
        )
        if not parent_data:
            texts.append(element.tail or "")
        for text in texts:
            text = re.sub(r"[\w-]+(\.[\w-]+)+", "", _SEEDED.sub("", text))  # host names, file names
            for word in re.findall(r"[A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]", text):
                if word.lower() not in _KEPT and not re.fullmatch(r"[A-Z]{2,}(-\d+)?", word):
                    found.append(f"{word!r} in {text.strip()[:80]!r}")
    return found


def _pages(seeded: Seeded) -> list[str]:
    return [
        "/?days=0",
        "/works",
        f"/works/{seeded.work_id}",
        "/matches",
        "/takedowns",
        f"/matches/{seeded.hostile_match_id}",
        f"/matches/{seeded.plain_match_id}",
        "/reports",
        "/sites",
        "/sites/new",
        "/crawls",
        "/networks",
        "/notices",
        "/senders",
        "/users",
        "/leads",
    ]


def test_every_page_in_chinese_has_no_english_left(client: FlaskClient, seeded: Seeded) -> None:
    client.set_cookie(LANGUAGE_COOKIE, "zh")
    problems: dict[str, list[str]] = {}
    for path in _pages(seeded):
        response = client.get(path)
        assert response.status_code == 200, path
        page = response.get_data(as_text=True)
        assert '<html lang="zh-CN">' in page, path
        if left := _untranslated(page):
            problems[path] = left
    logged_out = client.application.test_client()
    logged_out.set_cookie(LANGUAGE_COOKIE, "zh")
    if left := _untranslated(logged_out.get("/login").get_data(as_text=True)):
        problems["/login"] = left
    assert not problems, "\n".join(f"{path}: {word}" for path, words in problems.items() for word in words)


def test_the_language_follows_the_browser_then_the_choice(client: FlaskClient, seeded: Seeded) -> None:
    english = client.get("/works").get_data(as_text=True)
    assert ">Works</a>" in english and '<html lang="en">' in english
    chinese = client.get("/works", headers={"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.5"})
    assert ">作品</a>" in chinese.get_data(as_text=True)
    assert ">Works</a>" in client.get("/works", headers={"Accept-Language": "fr-FR,de"}).get_data(
        as_text=True
    )

    token = csrf_token_in(english)
    switched = client.post("/language", data={"language": "zh", "next": "/works?x=1", "csrf_token": token})
    assert switched.status_code == 303 and switched.headers["Location"] == "/works?x=1"
    assert ">作品</a>" in client.get("/works").get_data(as_text=True)
    back = client.post("/language", data={"language": "en", "next": "//evil.example/", "csrf_token": token})
    assert back.headers["Location"] == "/"  # never a redirect to another site
    page = client.get("/works", headers={"Accept-Language": "zh-CN"}).get_data(as_text=True)
    assert ">Works</a>" in page  # the choice wins over the browser
    assert client.post("/language", data={"language": "zh"}).status_code == 400  # no CSRF token


def test_flash_messages_are_translated(client: FlaskClient, seeded: Seeded) -> None:
    client.set_cookie(LANGUAGE_COOKIE, "zh")
    page = client.get(f"/matches/{seeded.plain_match_id}").get_data(as_text=True)
    token = csrf_token_in(page)
    client.post(f"/matches/{seeded.plain_match_id}/notes", data={"text": "看过", "csrf_token": token})
    after = client.get(f"/matches/{seeded.plain_match_id}").get_data(as_text=True)
    assert "已添加备注。" in after and "Note added." not in after


def test_catalog_translates_every_message_and_the_mo_is_compiled_from_it() -> None:
    with PO.open("rb") as handle:
        catalog = read_po(handle)
    ids = {message.id if isinstance(message.id, str) else message.id[0] for message in catalog if message.id}
    missing = [
        message.id
        for message in catalog
        if message.id
        and (
            message.fuzzy
            or not all(message.string if isinstance(message.string, tuple) else [message.string])
        )
    ]
    assert not missing, missing
    method_map = [("**.py", "python"), ("**/templates/**.html", "jinja2")]
    extracted = {
        message if isinstance(message, str) else message[0]
        for _file, _line, message, _comments, _context in extract_from_dir(
            str(ADMIN),
            method_map,
            keywords={"_": None, "gettext": None, "ngettext": (1, 2), "N_": None, "lazy_gettext": None},
        )
    }
    # the phrases the layers below make for the admin to say (core.phrase): their templates, Phrase("...")
    for path in PHRASE_SOURCES:
        with path.open("rb") as handle:
            found = extract_python(handle, ["Phrase"], [], {})
            extracted |= {message[0] if isinstance(message, tuple) else message for _, _, message, _ in found}
    assert extracted - ids == set(), "msgids not in messages.po: run pybabel update (docs/admin.md)"
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    assert MO.read_bytes() == compiled.getvalue(), "messages.mo is older than messages.po: pybabel compile"


def test_times_are_shown_in_the_installation_zone(app: Flask, settings: Settings) -> None:
    with app.test_request_context("/"):
        when = app.jinja_env.filters["when"]
        seconds = app.jinja_env.filters["when_seconds"]
        moment = datetime(2026, 11, 29, 6, 22, 22, 532881, tzinfo=UTC)
        assert when(moment) == "2026-11-29 14:22"
        assert seconds(moment) == "2026-11-29 14:22:22"
        assert when(moment.replace(tzinfo=None)) == "2026-11-29 14:22"  # SQLite's naive UTC
        assert when(None) == ""
    utc_app = create_app(replace(settings, timezone="UTC"))
    try:
        with utc_app.test_request_context("/"):
            assert utc_app.jinja_env.filters["when"](moment) == "2026-11-29 06:22"
    finally:
        utc_app.extensions["fptrack"].engine.dispose()


def test_an_unknown_time_zone_is_a_one_line_error() -> None:
    with pytest.raises(ConfigurationError, match=r"FPTRACK_TIMEZONE='Mars/Base' is not an IANA time zone"):
        Settings.from_env({"FPTRACK_TIMEZONE": "Mars/Base"})
    assert Settings.from_env({}).timezone == "Asia/Shanghai"


def test_sites_are_shown_by_name_with_the_host_as_title(
    client: FlaskClient, seeded: Seeded, session: Session
) -> None:
    session.add(Site(host="copy.example", name="抄书网"))
    session.commit()
    page = client.get("/matches").get_data(as_text=True)
    assert '<td class="host"><span class="site-name" title="copy.example">抄书网</span></td>' in page
    assert '<td class="host">pirate.example</td>' in page  # no site names it: the host


def test_charts_speak_the_page_language(client: FlaskClient, seeded: Seeded) -> None:
    client.set_cookie(LANGUAGE_COOKIE, "zh")
    over_time = client.get("/charts/matches-over-time.svg?days=0&per=week").get_data(as_text=True)
    assert "每周首次发现的匹配" in over_time and "待审核" in over_time and "flagged<" not in over_time
    works = client.get("/charts/works.svg?days=0").get_data(as_text=True)
    assert "匹配最多的作品，全部时间" in works and "已确认" in works


def test_a_missing_record_is_said_in_chinese(client: FlaskClient, seeded: Seeded) -> None:
    client.set_cookie(LANGUAGE_COOKIE, "zh")
    for path, sentence in (
        ("/matches/999999", "没有编号为 999999 的匹配。"),
        ("/works/999999", "没有编号为 999999 的作品。"),
        ("/crawls/999999", "没有编号为 999999 的抓取。"),
    ):
        response = client.get(path)
        page = response.get_data(as_text=True)
        assert response.status_code == 404 and "404 · 未找到" in page and sentence in page, path
        assert not _untranslated(page), (path, _untranslated(page))
    english = client.application.test_client()
    log_in(english, "ada")
    assert "There is no match with id 999999." in english.get("/matches/999999").get_data(as_text=True)


def test_a_notice_preview_in_chinese_has_chinese_links_and_box(client: FlaskClient, seeded: Seeded) -> None:
    """The preview's links and the heading of what the notice still lacks follow the admin's language (the
    notice's own text follows the notice's)."""
    client.set_cookie(LANGUAGE_COOKIE, "zh")
    page = client.get("/reports/notice?host=pirate.example").get_data(as_text=True)
    assert "← 报告" in page and "保存为草稿（附证据包）" in page and "下载 PDF" in page
    assert "此通知书尚不能发送。缺少：" in page and "cannot be sent" not in page
    assert "Keep as a draft" not in page and "Reports" not in page


def test_a_notice_lacking_elements_says_why_in_chinese_and_the_cli_in_english(
    client: FlaskClient, seeded: Seeded, session: Session
) -> None:
    """The reasons a draft cannot be sent (jobs.notice_render, services.rights) are phrases the admin says in
    the page's language, their data (a URL, a work's title) escaped and marked as data; the command line
    prints the same lines in English."""
    match = session.get(Match, seeded.hostile_match_id)
    assert match is not None
    match.status = "confirmed"
    sender = save_sender(session, "山中出版社", create=True, email="rights@shan.example", signer_name="王五")
    add_contact(session, match.page.host, "abuse@pirate.example")
    notice = draft_notice(session, actor="admin:ada", host=match.page.host, sender=sender)
    session.commit()
    client.set_cookie(LANGUAGE_COOKIE, "zh")
    for path in (f"/notices/{notice.id}", f"/notices/{notice.id}/document"):
        page = client.get(path).get_data(as_text=True)
        assert "发送方没有通讯地址" in page and "发送方没有电话号码" in page, path
        assert "投诉方的联系方式：发送方没有电话号码" in page, path  # the element's title too
        assert f'<span class="url">{escape(match.page.url)}</span> 没有证据包' in page, path
        work = seeded.work_id
        assert (
            f"（作品 {work}）没有权属证明（<code>fptrack works edit {work} --proof FILE</code>）" in page
        ), path
        assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page, path
        (box,) = lxml_html.fromstring(page).find_class("missing-elements")  # the notice itself is in English
        assert not _untranslated(lxml_html.tostring(box, encoding="unicode")), path
    english = "\n".join(missing_elements(notice))  # what `fptrack notices draft` prints
    assert "contact information of the complaining party: the sender has no telephone number" in english
    assert f"no evidence bundle for {match.page.url}" in english and "没有" not in english
