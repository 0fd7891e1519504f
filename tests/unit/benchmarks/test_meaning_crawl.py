"""benchmarks.meaning_crawl: the one-in-ten site holds a meaning copy on every tenth chapter page and nothing
else changes, translations copy the chapters of a work registered whole, the scoring counts what the planted
copies say, and the benchmark runs end to end on tiny generated sites (no corpus, the real product and
model)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.meaning_crawl import (
    MEANING_SHARE,
    TRANSLATED_TITLE,
    CrawlRun,
    Sites,
    build_sites,
    measure,
    report,
    score,
)
from benchmarks.pipeline.throughput import Services
from benchmarks.pipeline_site import generated_pools

POOLS = generated_pools(seed=3)
# every third code point of the generated text has a "synonym": the one after it (never in the text)
SYNONYMS = {chr(0x4E00 + i): (chr(0x4E00 + i + 1),) for i in range(0, 6000, 3)}


def _by_character(text: str) -> list[str]:
    return list(text)


def _sites(pages: int = 40, *, corpus: Path | None = None, translations: dict | None = None) -> Sites:  # type: ignore[type-arg]
    return build_sites(
        POOLS,
        pages=pages,
        registry=10,
        translated=2,
        chapter_chars=600,
        seed=4,
        synonyms=SYNONYMS,
        translations=translations or {},
        corpus=corpus,
        segment=_by_character,
    )


def test_every_tenth_chapter_page_is_a_meaning_copy_and_the_rest_is_the_ordinary_site() -> None:
    sites = _sites()
    ordinary, one_in_ten = sites.ordinary, sites.one_in_ten
    planted = {c.path: c for c in sites.copies}
    assert len(planted) == 40 // MEANING_SHARE
    assert [c.kind for c in sites.copies] == ["rewrite", "rewrite_reorder"] * 2  # no translation data
    assert any("translation_en left out" in note for note in sites.notes)
    chapters = {c.key: c for c in ordinary.chapters}
    for position, (before, after) in enumerate(
        zip(ordinary.chapter_pages, one_in_ten.chapter_pages, strict=True)
    ):
        assert before.path == after.path
        if position % MEANING_SHARE == MEANING_SHARE // 2:
            copy = planted[after.path]
            assert after.kind == copy.kind and after.truth == copy.truth and copy.truth in chapters
            body = one_in_ten.pages[after.path].body.decode("utf-8")
            assert body != ordinary.pages[after.path].body.decode("utf-8")
            original = "".join(chapters[copy.truth].paragraphs)
            text = "".join(ch for ch in body if "\u4e00" <= ch <= "\u9fff")
            if copy.kind == "rewrite":  # the chapter's, reworded (the reorder swaps every word it can)
                assert sum(ch in original for ch in set(text)) > 0.5 * len(set(text))
            assert original[:40] not in text  # not the words in order
            # the page keeps its place in the site: the same links as the page it replaced
            for link in (f'href="{ordinary.chapter_pages[position - 1].path}"', 'href="/list/1.html"'):
                assert link in body
        else:
            assert after == before and one_in_ten.pages[after.path] == ordinary.pages[after.path]
    assert one_in_ten.pages["/"] == ordinary.pages["/"]
    assert sites.works == ordinary.works == one_in_ten.works


def test_translation_pages_copy_a_work_registered_whole(tmp_path: Path) -> None:
    novels = tmp_path / "zh_novels"
    novels.mkdir()
    rows = [
        {"chapter": 0, "title": "__front", "text": "前言"},
        {
            "chapter": 1,
            "title": "第一回 桃园结义",
            "text": "第一回 桃园结义\n刘备关羽张飞结为兄弟。\n三人同心。",
        },
        {"chapter": 2, "title": "第二回 怒鞭督邮", "text": "张飞鞭打督邮。"},
        {"chapter": 3, "title": "第三回 议温明", "text": "董卓议废立。\n丁原不从。"},
    ]
    (novels / "sanguoyanyi__tennessine.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    english = {
        ("sanguoyanyi", 1): ("en", "Liu Bei, Guan Yu and Zhang Fei swore brotherhood.\nThey were three.")
    }
    english[("sanguoyanyi", 3)] = ("en", "Dong Zhuo proposed to depose the Emperor.")
    sites = _sites(30, corpus=tmp_path, translations=english)
    assert [title for title, _ in sites.works][-1] == TRANSLATED_TITLE
    text = sites.works[-1][1]
    assert "第一回 桃园结义" in text and "第三回 议温明" in text and "第二回" not in text  # translated only
    assert text.count("第一回") == 1  # the heading is not repeated from the chapter's text
    translated = [c for c in sites.copies if c.kind == "translation_en"]
    assert [c.truth for c in translated] == [(TRANSLATED_TITLE, 1)]
    body = sites.one_in_ten.pages[translated[0].path].body.decode("utf-8")
    assert "swore brotherhood" in body and "刘备" not in body


def _run(site: str, matches: set[tuple[str, str, int, str]]) -> CrawlRun:
    run = CrawlRun(site, "sqlite", True, 0)
    run.matches = matches
    return run


def test_the_score_counts_found_by_meaning_right_chapter_and_false_meaning_matches() -> None:
    sites = _sites()
    rewrite, reorder, second, third = sites.copies
    exact = {(p.path, *p.truth, "") for p in sites.one_in_ten.chapter_pages if p.truth and p.path not in
             {c.path for c in sites.copies}}  # fmt: skip
    other = next(c.key for c in sites.ordinary.chapters if c.key != reorder.truth)
    unrelated = next(p.path for p in sites.one_in_ten.chapter_pages if p.truth is None)
    matches = exact | {
        (rewrite.path, *rewrite.truth, "rewrite"),  # found by the meaning path, right chapter
        (reorder.path, *reorder.truth, "rewrite"),
        (reorder.path, *other, "rewrite"),  # found, but with another chapter beside its own
        (second.path, *second.truth, ""),  # found by the exact path
        (unrelated, *other, "rewrite"),  # a false meaning match
    }
    figures = score(sites, _run("one_in_ten", matches))
    assert figures["kinds"]["rewrite"] == {"planted": 2, "found": 2, "by_meaning": 1, "right_chapter": 2}
    assert figures["kinds"]["rewrite_reorder"] == {
        "planted": 2,
        "found": 1,
        "by_meaning": 1,
        "right_chapter": 0,
    }
    assert third.kind == "rewrite_reorder"
    assert figures["recall"] == 0.75 and figures["right_chapter"] == round(2 / 3, 3)
    assert (
        figures["false_meaning_matches"] == 2
    )  # the unrelated page's, and the reordered page's other chapter
    assert figures["exact_missed"] == 0 and figures["exact_extra"] == 0
    # the ordinary site has no planted copy: its pages' truth is the exact one
    assert score(sites, _run("ordinary", set()))["exact_missed"] == len(sites.ordinary.expected_copies())


@pytest.mark.slow  # registers, serves and crawls both sites three times with the real command line: minutes
def test_the_benchmark_runs_end_to_end_on_tiny_sites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sites = _sites(20)
    args = argparse.Namespace(concurrency=4, rounds=1, redis="redis://127.0.0.1:6379/14")
    services = Services("postgresql://postgres@127.0.0.1:5432/postgres", args.redis)

    measured = measure(sites, ["sqlite"], args, services, tmp_path)
    figures = report(sites, measured, args)

    runs = {(r["site"], r["meaning"]): r for r in figures["runs"]}
    assert set(runs) == {("ordinary", False), ("ordinary", True), ("one_in_ten", True)}
    for run in runs.values():
        assert run["pages"] == 20 + 1 + 1  # the chapter pages, one index page, the root
        assert run["crawl_ratio_to_bare"] > 0 and run["crawl_seconds"] <= run["crawl_meaning_seconds"]
        assert run["cpu_ms_per_page_crawl"] > 0
    assert runs[("ordinary", False)]["checks"] == {}  # the path off: nothing gated
    planted = figures["found"]["one_in_ten/sqlite/meaning-on"]
    assert sum(k["planted"] for k in planted["kinds"].values()) == 2
    assert planted["exact_missed"] == 0 and planted["exact_extra"] == 0
    assert set(figures["gate_cost"]["sqlite"]) >= {"ratio_on", "ratio_off", "on_over_off", "cpu_on_over_off"}
    json.dumps(figures)
    out = capsys.readouterr().out
    assert "the gate's cost" in out and "one_in_ten" in out
