"""End to end: `fptrack crawl` of a loopback forum whose threads post cloud-drive share links (a link, a
disguised link, the 提取码 on the next line) records each share once as a lead of the work the page copies or
the text beside the link names, with every page it was seen on; a second crawl adds nothing; `fptrack leads`
lists, filters, exports and reviews them. In-process on SQLite and PostgreSQL (the ``settings`` fixture), and
with two Celery worker processes over Redis on PostgreSQL: the same leads."""

from __future__ import annotations

import csv
import io
import json
import uuid
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from fptrack.core.settings import Settings
from testbed.sites import Page, serve_site
from tests.conftest import REDIS_URL
from tests.e2e.conftest import Fptrack
from tests.support.books import book
from tests.support.workers import wait_indexed, worker_processes

pytestmark = pytest.mark.slow

BOOK_A = book(201, 4, title="山海长歌")
BOOK_B = book(202, 4, title="青灯夜话")


def _forum() -> dict[str, Page]:
    chapter = BOOK_A.split("\n", 1)[1][:3000]  # the first chapter or so of 山海长歌, copied into a thread
    paragraphs = "".join(f"<p>{line}</p>" for line in chapter.splitlines() if line.strip())
    thread_1 = (
        "<html><head><title>楼主分享</title></head><body><div class='post'>"
        f"{paragraphs}"
        "<p>全本下载：<a href='https://pan.baidu.com/s/1AbCdEfGhIjKlMnOp'>百度网盘</a></p>"
        "<p>提取码：x7k2</p>"
        "<p>备用：pan . quark . cn / s / 0123456789ab</p>"
        "</div></body></html>"
    )
    thread_2 = (
        "<html><head><title>资源帖</title></head><body><div class='post'>"
        "<p>《青灯夜话》全集 阿里云盘 https://www.alipan.com/s/Ab1Cd2Ef3Gh 提取码: 3x9k</p>"
        "<p>百度的也还在：https：//ｐａｎ．ｂａｉｄｕ．ｃｏｍ/s/1AbCdEfGhIjKlMnOp</p>"
        + "<p>今天天气不错，大家看书愉快。</p>" * 20
        + "</div></body></html>"
    )
    index = "<html><body><a href='/thread/1'>一</a> <a href='/thread/2'>二</a></body></html>"
    return {"/": Page.html(index), "/thread/1": Page.html(thread_1), "/thread/2": Page.html(thread_2)}


def _leads(fptrack: Any, *args: str) -> dict[str, dict[str, Any]]:
    out = fptrack.run("leads", "--format", "json", *args).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {row["url"]: row for row in rows}


def _register(fptrack: Fptrack, tmp_path: Any) -> None:
    for name, book_text in (("a", BOOK_A), ("b", BOOK_B)):
        path = tmp_path / f"{name}.txt"
        path.write_text(book_text, encoding="utf-8")
        fptrack.run("works", "add", str(path))


def _crawl_twice(fptrack: Fptrack) -> str:
    with serve_site(_forum()) as base:
        for _ in range(2):  # a second crawl of the same pages records nothing new
            fptrack.run("crawl", base + "/", "--allow-private-host", base.key, "--depth", "1")
    assert any(m["work_title"] == "山海长歌" for m in fptrack.matches())
    return str(base)


def _answer(fptrack: Fptrack, base: str) -> set[tuple[Any, ...]]:
    return {
        (
            row["platform"],
            row["share_id"],
            row["code"],
            row["basis"],
            tuple(w["work_title"] for w in row["works"]),
            tuple(sorted(p["page_url"].removeprefix(base) for p in row["pages"])),
        )
        for row in _leads(fptrack).values()
    }


EXPECTED = {
    ("baidu", "1AbCdEfGhIjKlMnOp", "x7k2", "page", ("山海长歌",), ("/thread/1", "/thread/2")),
    ("quark", "0123456789ab", "", "page", ("山海长歌",), ("/thread/1",)),
    ("aliyun", "Ab1Cd2Ef3Gh", "3x9k", "title", ("青灯夜话",), ("/thread/2",)),
}


def test_a_forum_crawl_records_each_share_once_as_a_lead_of_its_work(fptrack, tmp_path) -> None:
    fptrack.run("init")
    _register(fptrack, tmp_path)
    base = _crawl_twice(fptrack)
    assert _answer(fptrack, base) == EXPECTED

    leads = _leads(fptrack)
    baidu = "https://pan.baidu.com/s/1AbCdEfGhIjKlMnOp"
    quark = "https://pan.quark.cn/s/0123456789ab"
    aliyun = "https://www.alipan.com/s/Ab1Cd2Ef3Gh"
    assert set(leads) == {baidu, quark, aliyun}
    assert leads[baidu]["code"] == "x7k2" and leads[aliyun]["code"] == "3x9k" and leads[quark]["code"] == ""
    assert sorted(p["page_url"] for p in leads[baidu]["pages"]) == [base + "/thread/1", base + "/thread/2"]
    assert [p["page_url"] for p in leads[quark]["pages"]] == [base + "/thread/1"]
    # the thread copying 山海长歌 makes its links leads of 山海长歌; the text beside the Aliyun link names
    # 青灯夜话 (and not the Baidu link after it, whose own text names no work)
    assert [w["work_title"] for w in leads[quark]["works"]] == ["山海长歌"] and leads[quark][
        "basis"
    ] == "page"
    assert [w["work_title"] for w in leads[baidu]["works"]] == ["山海长歌"] and leads[baidu][
        "basis"
    ] == "page"
    assert [w["work_title"] for w in leads[aliyun]["works"]] == ["青灯夜话"] and leads[aliyun][
        "basis"
    ] == "title"
    assert all(row["state"] == "new" for row in leads.values())
    assert "提取码" in leads[baidu]["pages"][0]["context"]

    work_a = leads[quark]["works"][0]["work_id"]
    assert set(_leads(fptrack, "--work", str(work_a))) == {baidu, quark}
    assert set(_leads(fptrack, "--platform", "aliyun")) == {aliyun}

    confirmed = fptrack.run("leads", "confirm", str(leads[baidu]["id"]), "--by", "reviewer")
    assert "confirmed" in confirmed.stdout
    assert set(_leads(fptrack, "--state", "confirmed")) == {baidu}
    missing = fptrack.run("leads", "confirm", "999999", check=False)
    assert missing.returncode != 0 and "no lead 999999" in missing.stderr

    exported = list(csv.DictReader(io.StringIO(fptrack.run("leads", "--format", "csv").stdout)))
    assert {row["url"] for row in exported} == {baidu, quark, aliyun}
    notice = fptrack.run("leads", "notice", "--platform", "baidu", "--work", str(work_a)).stdout
    assert (
        notice.startswith("drafted notice") and baidu in notice and "x7k2" in notice and quark not in notice
    )
    table = fptrack.run("leads").stdout
    assert "0123456789ab" in table and "山海长歌" in table


@pytest.mark.postgres
def test_the_leads_are_the_same_when_workers_compare_the_pages(
    postgres_settings: Settings, tmp_path: Any
) -> None:
    database = f"fptrack_leads_{uuid.uuid4().hex[:8]}"
    admin = create_engine(postgres_settings.database_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {database}"))
    try:
        url = f"{postgres_settings.database_url.rsplit('/', 1)[0]}/{database}"
        settings = Settings(data_dir=tmp_path / "workers", database_url=url)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        queue = f"fptrack-leads-{uuid.uuid4().hex[:8]}"
        workers = Fptrack(settings, {"FPTRACK_BROKER_URL": REDIS_URL, "FPTRACK_TASK_QUEUE": queue})
        workers.run("init")
        with worker_processes(workers.env(), tmp_path, 2):
            _register(workers, tmp_path)
            wait_indexed(settings)
            base = _crawl_twice(workers)
        assert _answer(workers, base) == EXPECTED
    finally:
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
        admin.dispose()
