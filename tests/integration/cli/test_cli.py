"""The command line as a user meets it: one-line errors and non-zero exits for bad input, never a
traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from fptrack.cli.demo import DEMO_DATA
from testbed.sites import closed_port_url
from tests.support.cli import assert_clean_error, fptrack


@pytest.fixture
def initialised(tmp_path: Path) -> Path:
    assert fptrack(tmp_path, "init").returncode == 0
    return tmp_path


def test_every_command_has_help(tmp_path: Path) -> None:
    for command in (
        ["--help"],
        ["init", "--help"],
        ["works", "add", "--help"],
        ["crawl", "--help"],
        ["check", "--help"],
        ["report", "--help"],
        ["maintain", "--help"],
        ["matches", "--help"],
        ["serve", "--help"],
        ["demo", "--help"],
        ["worker", "--help"],
        ["works", "list", "--help"],
    ):
        result = fptrack(tmp_path, *command)
        assert result.returncode == 0, (command, result.stderr)
        assert "Usage: " in result.stdout and len(result.stdout.splitlines()) > 4


def test_missing_file(initialised: Path) -> None:
    assert_clean_error(fptrack(initialised, "works", "add", "no-such.txt"), "no-such.txt: no such file")


def test_empty_file(initialised: Path) -> None:
    (initialised / "empty.txt").write_bytes(b"")
    assert_clean_error(fptrack(initialised, "works", "add", str(initialised / "empty.txt")), "empty")


def test_binary_file(initialised: Path) -> None:
    (initialised / "cover.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    assert_clean_error(fptrack(initialised, "works", "add", str(initialised / "cover.png")), "binary")


def test_one_bad_file_does_not_stop_the_others(initialised: Path) -> None:
    result = fptrack(initialised, "works", "add", "missing.txt", str(DEMO_DATA / "alley.txt"))
    assert result.returncode == 1
    assert "registered work #1 '青石巷'" in result.stdout
    assert "missing.txt: no such file" in result.stderr


def test_gbk_and_big5_files_are_detected(initialised: Path) -> None:
    text = (DEMO_DATA / "lighthouse.txt").read_text("utf-8")
    (initialised / "gbk.txt").write_bytes(text.encode("gb18030"))
    result = fptrack(initialised, "works", "add", str(initialised / "gbk.txt"))
    assert "(gb18030)" in result.stdout and "3 chapters" in result.stdout
    import opencc

    traditional = opencc.OpenCC("s2t").convert((DEMO_DATA / "alley.txt").read_text("utf-8"))
    (initialised / "big5.txt").write_bytes(traditional.encode("big5", errors="xmlcharrefreplace"))
    result = fptrack(initialised, "works", "add", str(initialised / "big5.txt"))
    assert "(big5)" in result.stdout and "3 chapters" in result.stdout


def test_unreachable_url(initialised: Path) -> None:
    url = closed_port_url()
    result = fptrack(initialised, "crawl", url, "--allow-private-host", url.split("/")[2])
    assert_clean_error(result, "cannot crawl")
    assert "connection refused" in result.stderr.lower()


def test_not_an_http_url(initialised: Path) -> None:
    assert_clean_error(fptrack(initialised, "crawl", "ftp://example.org/"))


def test_malformed_database_url(tmp_path: Path) -> None:
    result = fptrack(tmp_path, "init", FPTRACK_DATABASE_URL="postgres//oops")
    assert_clean_error(result, "FPTRACK_DATABASE_URL", "not a database URL")


def test_unreachable_database(tmp_path: Path) -> None:
    port = closed_port_url().rsplit(":", 1)[1].strip("/")
    result = fptrack(tmp_path, "init", FPTRACK_DATABASE_URL=f"postgresql://nobody@127.0.0.1:{port}/x")
    assert_clean_error(result, "cannot open the database")


def test_uninitialised_database_says_run_init(tmp_path: Path) -> None:
    assert_clean_error(fptrack(tmp_path, "matches"), "fptrack init")


def test_check_a_file_highlights_the_copy(initialised: Path) -> None:
    fptrack(initialised, "works", "add", str(DEMO_DATA / "lighthouse.txt"))
    chapter = (DEMO_DATA / "lighthouse.txt").read_text("utf-8").split("第二章")[1].split("第三章")[0]
    (initialised / "suspect.txt").write_text("网友转载：\n" + chapter + "\n（完）", "utf-8")
    result = fptrack(initialised, "check", str(initialised / "suspect.txt"))
    assert result.returncode == 3, result.stderr
    assert "灯塔守望人 / chapter 2" in result.stdout
    (initialised / "clean.txt").write_text((DEMO_DATA / "library_news.txt").read_text("utf-8"), "utf-8")
    result = fptrack(initialised, "check", str(initialised / "clean.txt"))
    assert result.returncode == 0 and "no copy" in result.stdout


def test_matches_formats_when_empty(initialised: Path) -> None:
    assert fptrack(initialised, "matches", "--format", "json").stdout == ""
    csv_out = fptrack(initialised, "matches", "--format", "csv").stdout
    # the documented columns first, in their order; then the match id and its review status
    assert csv_out.splitlines() == [  # after the byte order mark spreadsheets need
        (
            "\ufeffpage_url,work_id,work_title,chapter_index,chapter_title,score,methods,spans,first_seen,kind,"
            "alignment,id,status"
        )
    ]


def test_maintain_reports_index_and_statistics(initialised: Path) -> None:
    fptrack(initialised, "works", "add", str(DEMO_DATA / "lighthouse.txt"))
    result = fptrack(initialised, "maintain")
    assert result.returncode == 0, result.stderr
    # the contract writes no Simhash for a chapter or a page (off the page path): the index is empty
    assert (
        "simhash index f64k3b4: 0 fingerprints" in result.stdout and "no overloaded buckets" in result.stdout
    )
    assert "orphaned index rows: none" in result.stdout
