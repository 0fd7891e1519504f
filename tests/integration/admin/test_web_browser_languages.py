"""Every main page of the admin in Chromium, in English and in Chinese: the language the browser asks for, the
header's switch, no English left on a Chinese page, a screenshot of each page in each language (under
``$FPTRACK_TEST_ARTIFACTS/admin-browser/``). Widths and overflow are not checked here."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from werkzeug.serving import make_server

from fptrack.admin.web import create_app
from fptrack.core.settings import Settings
from tests.integration.admin.test_web_browser import ARTIFACTS, CHROMIUM_ARGS, CHROMIUM_PATH, _seed
from tests.support.accounts import PASSWORD, add_account
from tests.unit.admin.test_web_i18n import _untranslated

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LOGIN = {"en": ("Username", "Password", "Log in"), "zh": ("用户名", "密码", "登录")}
LOCALES = {"en": "en-US", "zh": "zh-CN"}


@pytest.fixture
def served_admin(sqlite_settings: Settings) -> Iterator[tuple[str, int]]:
    match_id = _seed(sqlite_settings)
    add_account(sqlite_settings, "ada", "admin")
    app = create_app(sqlite_settings)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", match_id
    finally:
        server.shutdown()
        thread.join(timeout=10)
        app.extensions["fptrack"].engine.dispose()


def _pages(match_id: int) -> dict[str, str]:
    return {
        "dashboard": "/?days=0",
        "works": "/works",
        "work": "/works/1",
        "matches": "/matches",
        "takedowns": "/takedowns",
        "match": f"/matches/{match_id}",
        "reports": "/reports",
        "sites": "/sites",
        "site-new": "/sites/new",
        "crawls": "/crawls",
        "networks": "/networks",
        "notices": "/notices",
        "senders": "/senders",
        "users": "/users",
        "leads": "/leads",
    }


@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_main_page_in_each_language(served_admin: tuple[str, int], language: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    base_url, match_id = served_admin
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(locale=LOCALES[language], viewport={"width": 1400, "height": 900})
            page.goto(base_url + "/login")
            expect(page.locator("html")).to_have_attribute("lang", "zh-CN" if language == "zh" else "en")
            username, password, log_in = LOGIN[language]
            page.get_by_label(username).fill("ada")
            page.get_by_label(password).fill(PASSWORD)
            page.get_by_role("button", name=log_in).click()
            expect(page).to_have_url(base_url + "/")
            problems: dict[str, list[str]] = {}
            for name, path in _pages(match_id).items():
                response = page.goto(base_url + path)
                assert response is not None and response.status == 200, (language, path)
                page.screenshot(path=str(ARTIFACTS / f"{language}-{name}.png"), full_page=True)
                if language == "zh" and (left := _untranslated(page.content())):
                    problems[path] = left
            assert not problems, problems

            # the header's switch: the other language, kept for the next pages, on the same page
            other, nav = ("zh", "作品") if language == "en" else ("en", "Works")
            page.goto(base_url + "/matches?status=flagged")
            page.locator(f'form.language button[value="{other}"]').click()
            expect(page).to_have_url(base_url + "/matches?status=flagged")
            expect(page.locator("header nav a").nth(1)).to_have_text(nav)
            page.goto(base_url + "/works")
            expect(page.locator("header nav a").nth(1)).to_have_text(nav)
        finally:
            browser.close()
