"""Discovery's search providers against a fake provider on loopback answering in each real API's format:
results parsed, the query templates of a work, quota, refused keys and failures as one clear error each."""

from __future__ import annotations

import pytest

from fptrack.core.settings import Settings
from fptrack.jobs.search_providers import (
    PROVIDERS,
    SearchError,
    configured_providers,
    first_sentence,
    queries_for_work,
)
from testbed.search_provider import serve_search_provider

ROWS = [
    ("http://pirate-one.example/book/1.html", "灯塔守望人最新章节", "第一章 ..."),
    ("https://licensed.example/read/1", "灯塔守望人 正版", "..."),
]


def _settings(endpoints: dict[str, str], **extra: object) -> Settings:
    return Settings().with_overrides(search_providers=tuple(PROVIDERS), **endpoints, **extra)


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_each_provider_parses_its_own_format(name: str) -> None:
    with serve_search_provider(lambda q: ROWS if "灯塔" in q else []) as fake:
        providers = {p.name: p for p in configured_providers(_settings(fake.endpoints()))}
        results = providers[name].search("灯塔守望人 最新章节")
        assert [r.url for r in results] == [url for url, _, _ in ROWS]
        assert results[0].title == "灯塔守望人最新章节" and results[0].provider == name
        assert providers[name].search("无人知晓") == []  # no results is not an error
        assert fake.requests == [(name, "灯塔守望人 最新章节"), (name, "无人知晓")]


@pytest.mark.parametrize("name", sorted(PROVIDERS))
@pytest.mark.parametrize(
    ("failure", "quota", "says"),
    [
        ("quota", True, ""),
        ("key", False, ""),
        ("server", False, "try again later"),
        ("garbage", False, "JSON"),
    ],
)
def test_quota_and_errors_are_one_clear_error(name: str, failure: str, quota: bool, says: str) -> None:
    with serve_search_provider(lambda q: ROWS, {name: failure}) as fake:
        provider = {p.name: p for p in configured_providers(_settings(fake.endpoints()))}[name]
        with pytest.raises(SearchError) as raised:
            provider.search("灯塔守望人")
    assert raised.value.quota is quota
    assert str(raised.value).startswith(f"search provider {name}: ") and says in str(raised.value)


def test_an_unreachable_provider_and_a_missing_key_are_errors_not_crashes() -> None:
    settings = Settings().with_overrides(
        search_providers=("bing",), search_bing_key="k", search_bing_endpoint="http://127.0.0.1:9/v7.0/search"
    )
    with pytest.raises(SearchError, match="cannot reach http://127.0.0.1:9/v7.0/search"):
        configured_providers(settings)[0].search("x")
    with pytest.raises(SearchError, match="set FPTRACK_SEARCH_GOOGLE_KEY"):
        configured_providers(Settings().with_overrides(search_providers=("google",)))
    with pytest.raises(SearchError, match="unknown provider"):
        configured_providers(Settings().with_overrides(search_providers=("altavista",)))


def test_the_queries_of_a_work() -> None:
    text = "灯塔守望人\n作者：林远\n\n第一章 山路\n清晨的山谷里雾气很重，老人沿着石阶慢慢往上走。"
    chapter = "第一章 山路\n清晨的山谷里雾气很重，老人沿着石阶慢慢往上走。"
    assert first_sentence(chapter) == "清晨的山谷里雾气很重，老人沿着石阶慢慢往上走"
    assert queries_for_work("灯塔守望人", text, [chapter]) == [
        "灯塔守望人 最新章节",
        "灯塔守望人 全文阅读",
        "灯塔守望人 txt下载",
        '"清晨的山谷里雾气很重，老人沿着石阶慢慢往上走"',
        "林远 灯塔守望人",
    ]
