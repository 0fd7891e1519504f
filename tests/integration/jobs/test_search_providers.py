"""Discovery's search providers against a fake provider on loopback answering in each real API's format
(SerpAPI with each engine, Brave, SearXNG, Google): results parsed, the query templates of a work, quota,
refused keys, rate limits waited out, failures and malformed JSON as one clear error each that never shows
the key; ``bing`` (retired) refused in one line; through ``run_discovery`` and ``fptrack discover``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA
from fptrack.compare.works import register_work_file
from fptrack.core.plain_http import HttpReply
from fptrack.core.settings import ConfigurationError, Settings
from fptrack.jobs.discovery import run_discovery
from fptrack.jobs.search_providers import (
    BING_RETIRED,
    GOOGLE_ENDS,
    MAX_WAIT,
    SearchError,
    SearchProvider,
    configured_providers,
    first_sentence,
    provider_named,
    queries_for_work,
)
from fptrack.storage.db import session_factory
from testbed.search_provider import KEY, serve_search_provider
from tests.support.cli import fptrack

ROWS = [
    ("http://pirate-one.example/book/1.html", "灯塔守望人最新章节", "第一章 ..."),
    ("https://licensed.example/read/1", "灯塔守望人 正版", "..."),
]
# the providers a user can configure: (FPTRACK_SEARCH_PROVIDERS entry, other settings)
CASES: dict[str, tuple[str, dict[str, object]]] = {
    "serpapi-baidu": ("serpapi", {}),
    "serpapi-bing": ("serpapi", {"search_serpapi_engine": "bing"}),
    "serpapi-google": ("serpapi", {"search_serpapi_engine": "google"}),
    "brave": ("brave", {}),
    "searxng": ("searxng", {}),
    "google": ("google", {}),
}


def _provider(case: str, endpoints: dict[str, str], sleeps: list[float] | None = None) -> SearchProvider:
    name, extra = CASES[case]
    settings = Settings().with_overrides(search_providers=(name,), **endpoints, **extra)
    return provider_named(name, settings, sleep=(sleeps if sleeps is not None else []).append)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_provider_parses_its_own_format(case: str) -> None:
    with serve_search_provider(lambda q: ROWS if "灯塔" in q else []) as fake:
        provider = _provider(case, fake.endpoints())
        results = provider.search("灯塔守望人 最新章节")
        assert [r.url for r in results] == [url for url, _, _ in ROWS]
        assert results[0].title == "灯塔守望人最新章节" and results[0].snippet == "第一章 ..."
        assert results[0].provider == CASES[case][0]
        assert provider.search("无人知晓") == []  # no results is not an error
    name = CASES[case][0]
    assert fake.requests == [(name, "灯塔守望人 最新章节"), (name, "无人知晓")]
    sent = fake.params[0]
    if name == "serpapi":
        engine = CASES[case][1].get("search_serpapi_engine", "baidu")
        assert sent["engine"] == engine
        assert {"baidu": sent.get("rn"), "bing": sent.get("count"), "google": "10"}[str(engine)] == "10"
    if name == "searxng":
        assert sent["format"] == "json" and "engines" not in sent


def test_results_are_cut_to_the_number_asked_for() -> None:
    many = [(f"http://site{i}.example/", f"t{i}", "") for i in range(40)]
    with serve_search_provider(lambda q: many) as fake:
        for case, (name, extra) in CASES.items():
            settings = Settings().with_overrides(search_results=25, **fake.endpoints(), **extra)
            got = len(provider_named(name, settings).search("q"))
            # Brave answers 20 at most, Google's APIs a page of 10; SearXNG sends all it has
            assert got == {"brave": 20, "google": 10, "serpapi-google": 10}.get(case, 25), case


KEY_FAILURES = {"serpapi": "key", "brave": "key", "google": "key", "searxng": "disabled"}


@pytest.mark.parametrize("case", ["serpapi-baidu", "brave", "searxng", "google"])
@pytest.mark.parametrize(
    ("failure", "quota", "says"),
    [
        ("quota", True, ""),
        ("key", False, ""),
        ("server", False, "try again later"),
        ("garbage", False, "not the provider's JSON"),
        ("truncated", False, "not the provider's JSON"),
    ],
)
def test_quota_and_errors_are_one_clear_error(case: str, failure: str, quota: bool, says: str) -> None:
    name = CASES[case][0]
    sleeps: list[float] = []
    with serve_search_provider(
        lambda q: ROWS, {name: KEY_FAILURES[name] if failure == "key" else failure}
    ) as fake:
        provider = _provider(case, fake.endpoints(), sleeps)
        with pytest.raises(SearchError) as raised:
            provider.search("灯塔守望人")
    message = str(raised.value)
    assert raised.value.quota is quota and says in message
    assert message.startswith(f"search provider {name}: ") and "\n" not in message
    assert KEY not in message and sleeps == []  # never the key; a quota is not waited for
    if failure == "key":
        assert {
            "serpapi": "the API key was refused (HTTP 401): Invalid API key.",
            "brave": "the API key was refused (HTTP 422): The provided subscription token is invalid.",
            "google": "the API key was refused (HTTP 400): API key not valid.",
            "searxng": "refuses JSON (HTTP 403): add json to search.formats in its settings.yml "
            "(formats: [html, json]) and restart it",
        }[name] in message
    if failure == "quota" and name == "brave":
        assert message.endswith("Request rate limit exceeded for plan.; it resets in 16 days")
    if failure == "quota" and name == "searxng":
        assert "server.limiter: false" in message


def test_brave_waits_out_a_per_second_rate_limit_and_says_so() -> None:
    sleeps: list[float] = []
    with serve_search_provider(lambda q: ROWS, {"brave": "ratelimit-once"}) as fake:
        provider = _provider("brave", fake.endpoints(), sleeps)
        assert [r.url for r in provider.search("灯塔守望人")] == [url for url, _, _ in ROWS]
        assert provider.search("灯塔守望人 全文阅读")  # the window is open again: no wait
    assert sleeps == [1.0] and len(fake.requests) == 3  # the 429, its retry, the next query
    assert provider.summary() == ["search provider brave: rate-limited, waited 1 time(s), 1.0 s in all"]


def test_a_used_up_window_paces_the_next_request_and_a_long_reset_is_a_quota() -> None:
    replies = [
        HttpReply(200, {"x-ratelimit-remaining": "0, 7", "x-ratelimit-reset": "2, 99"}, b'{"web": {}}'),
        HttpReply(200, {"x-ratelimit-remaining": "1, 6", "x-ratelimit-reset": "1, 98"}, b'{"web": {}}'),
        HttpReply(429, {"retry-after": "3600"}, b"{}"),
    ]
    sent: list[str] = []

    def fetch(url: str, headers: dict[str, str]) -> HttpReply:
        sent.append(headers["X-Subscription-Token"])
        return replies[len(sent) - 1]

    sleeps: list[float] = []
    settings = Settings().with_overrides(search_brave_key="k")
    provider = provider_named("brave", settings, fetch, sleep=sleeps.append)
    assert provider.search("a") == [] and sleeps == []
    assert provider.search("b") == [] and len(sleeps) == 1 and 1.5 < sleeps[0] <= 2.0  # paced
    with pytest.raises(SearchError, match=r"it resets in 60 min$") as raised:
        provider.search("c")
    assert raised.value.quota and len(sleeps) == 1 and 3600 > MAX_WAIT


def test_bing_is_refused_in_one_line_and_the_others_still_search(session: Session, engine: Engine) -> None:
    with pytest.raises(SearchError) as raised:
        provider_named("bing", Settings())
    assert str(raised.value) == f"search provider bing: {BING_RETIRED}"
    assert "use serpapi with engine=bing, or brave" in BING_RETIRED and "2025-08-11" in BING_RETIRED
    register_work_file(session, DEMO_DATA / "lighthouse.txt")
    session.commit()
    with serve_search_provider(lambda q: ROWS[:1]) as fake:
        settings = Settings().with_overrides(search_providers=("bing", "brave"), **fake.endpoints())
        report = run_discovery(session_factory(engine), settings, probe=False)
    assert report.errors == [f"search provider bing: {BING_RETIRED}"]
    assert {(c["host"], c["source"]) for c in report.candidates} == {("pirate-one.example", "search")}
    assert {name for name, _ in fake.requests} == {"brave"}


def test_a_refused_key_stops_the_provider_and_a_failure_is_one_line_a_run(
    session: Session, engine: Engine
) -> None:
    for name in ("lighthouse.txt", "alley.txt", "library_news.txt"):
        register_work_file(session, DEMO_DATA / name)
    session.commit()
    with serve_search_provider(lambda q: ROWS[:1], {"brave": "key", "serpapi": "server"}) as fake:
        settings = Settings().with_overrides(search_providers=("brave", "serpapi"), **fake.endpoints())
        report = run_discovery(session_factory(engine), settings, probe=False)
    refused = "The provided subscription token is invalid."
    assert report.errors == [
        f"search provider brave: the API key was refused (HTTP 422): {refused}",
        "search provider serpapi: the provider failed (HTTP 502); try again later (3 works)",
    ]
    # the refused key is asked once; a failing provider once a work (its other queries skipped)
    assert [name for name, _ in fake.requests] == ["brave", "serpapi", "serpapi", "serpapi"]
    assert report.searches == {"brave": 1, "serpapi": 3}
    assert report.candidates == []


def test_google_warns_once_per_run_with_its_end_date(session: Session, engine: Engine) -> None:
    for name in ("lighthouse.txt", "alley.txt"):
        register_work_file(session, DEMO_DATA / name)
    session.commit()
    with serve_search_provider(lambda q: ROWS[:1]) as fake:
        settings = Settings().with_overrides(search_providers=("google", "searxng"), **fake.endpoints())
        report = run_discovery(session_factory(engine), settings, probe=False)
    assert len(fake.requests) >= 2 * 6  # every query of both works, through both providers
    assert report.errors == [] and sum(report.searches.values()) == len(fake.requests)
    assert report.warnings == [
        f"search provider google: {GOOGLE_ENDS}",
        "search provider searxng: engines that did not answer: sogou (timeout)",
    ]
    assert "2027-01-01" in GOOGLE_ENDS


def test_an_unreachable_provider_a_missing_key_and_bad_settings_are_errors_not_crashes() -> None:
    settings = Settings().with_overrides(
        search_providers=("searxng",), search_searxng_url="http://admin:hunter2-pw@127.0.0.1:9/"
    )
    with pytest.raises(SearchError) as raised:
        configured_providers(settings)[0].search("x")
    assert str(raised.value).startswith("search provider searxng: cannot reach http://127.0.0.1:9/search")
    assert "hunter2" not in str(raised.value) and "hunter2" not in repr(settings)
    with pytest.raises(SearchError, match="set FPTRACK_SEARCH_GOOGLE_KEY"):
        configured_providers(Settings().with_overrides(search_providers=("google",)))
    with pytest.raises(SearchError, match="set FPTRACK_SEARCH_SEARXNG_URL"):
        configured_providers(Settings().with_overrides(search_providers=("searxng",)))
    with pytest.raises(SearchError, match="unknown provider; FPTRACK_SEARCH_PROVIDERS takes serpapi, brave"):
        configured_providers(Settings().with_overrides(search_providers=("altavista",)))
    with pytest.raises(ConfigurationError, match="FPTRACK_SEARCH_SERPAPI_ENGINE='yahoo' is not one of baidu"):
        Settings.from_env({"FPTRACK_SEARCH_SERPAPI_ENGINE": "yahoo"})
    with pytest.raises(
        ConfigurationError, match="FPTRACK_SEARCH_SEARXNG_URL='127.0.0.1:8888' is not an http"
    ):
        Settings.from_env({"FPTRACK_SEARCH_SEARXNG_URL": "127.0.0.1:8888"})


def test_a_searxng_behind_basic_auth_gets_the_login_in_a_header() -> None:
    seen: list[tuple[str, dict[str, str]]] = []

    def fetch(url: str, headers: dict[str, str]) -> HttpReply:
        seen.append((url, headers))
        return HttpReply(200, {}, b'{"results": []}')

    settings = Settings().with_overrides(search_searxng_url="http://me:p%40ss@127.0.0.1:8888/sx/")
    assert provider_named("searxng", settings, fetch).search("x") == []
    url, headers = seen[0]
    assert url == "http://127.0.0.1:8888/sx/search?q=x&format=json"
    assert headers["Authorization"] == "Basic bWU6cEBzcw=="  # me:p@ss


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "variables"),
    [
        ("serpapi", {"FPTRACK_SEARCH_SERPAPI_ENGINE": "bing"}),
        ("brave", {}),
        ("searxng", {"FPTRACK_SEARCH_SEARXNG_ENGINES": "baidu,sogou"}),
        ("google", {}),
    ],
)
def test_fptrack_discover_with_each_provider(tmp_path: Path, case: str, variables: dict[str, str]) -> None:
    """As a user runs it: a registered work, the provider configured by its variables, `fptrack discover`:
    the results are candidates; a bad key is one warning line without the key."""
    assert fptrack(tmp_path, "init").returncode == 0
    assert fptrack(tmp_path, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode == 0
    with serve_search_provider(lambda q: ROWS[:1] if "灯塔" in q else []) as fake:
        env = {**fake.environment(), **variables, "FPTRACK_SEARCH_PROVIDERS": f"{case},bing"}
        result = fptrack(tmp_path, "discover", "--no-probe", "--format", "json", **env)
        wrong = "wrong-key-4f1d9a"
        bad_key = {f"FPTRACK_SEARCH_{case.upper()}_KEY": wrong} if case != "searxng" else {}
        refused = fptrack(tmp_path, "discover", "--no-probe", **{**env, **bad_key})
    assert result.returncode == 0, result.stderr
    entries = json.loads(result.stdout)["candidates"]  # one object: the run's summary with its candidates
    assert [(e["host"], e["source"], e["state"]) for e in entries] == [
        ("pirate-one.example", "search", "new")
    ]
    assert entries[0]["detail"].startswith(f"{case}: ")
    warnings = result.stderr.splitlines()
    assert f"warning: search provider bing: {BING_RETIRED}" in warnings
    assert (f"warning: search provider google: {GOOGLE_ENDS}" in warnings) is (case == "google")
    assert {name for name, _ in fake.requests} == {case}
    if case == "searxng":
        assert {p["engines"] for p in fake.params} == {"baidu,sogou"}
    if case == "serpapi":
        assert {p["engine"] for p in fake.params} == {"bing"}
    assert refused.returncode == 0 and "Traceback" not in refused.stderr
    if case != "searxng":
        assert wrong not in refused.stdout + refused.stderr
        lines = [
            line
            for line in refused.stderr.splitlines()
            if f"search provider {case}:" in line and GOOGLE_ENDS not in line
        ]
        assert len(lines) == 1 and "the API key was refused" in lines[0], refused.stderr
        assert f"request(s), 1 {case} search(es)" in refused.stdout  # stopped after the refusal


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
