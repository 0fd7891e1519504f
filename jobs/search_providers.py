"""Search providers for discovery: the queries a pirate site answers, sent through a web search API.

Readers reach pirate fiction mostly through search engines, so a search for a work the way readers search
for it finds the sites that serve it. :func:`queries_for_work` writes the queries of one work: its title
with 最新章节 / 全文阅读 / txt下载, an exact first sentence of a chapter in quotes, and its author's name
with the title when the text names one. A :class:`SearchProvider` sends one query and parses its API's own
response format into :class:`SearchResult` values:

- ``bing``: Bing Web Search API v7, ``GET <endpoint>?q=&count=&mkt=zh-CN`` with the key in the
  ``Ocp-Apim-Subscription-Key`` header; results in ``webPages.value[]`` (``name``, ``url``, ``snippet``);
  errors as ``{"error": {"code", "message"}}`` (v7 also answers ``{"errors": [...]}``);
- ``google``: the Programmable Search (Custom Search) JSON API, ``GET <endpoint>?key=&cx=&q=&num=`` (``num``
  at most 10); results in ``items[]`` (``title``, ``link``, ``snippet``); errors as ``{"error": {"code",
  "message", "status"}}``;
- ``serpapi``: SerpAPI with ``engine=baidu``, ``GET <endpoint>?engine=baidu&q=&rn=&api_key=``; results in
  ``organic_results[]`` (``title``, ``link``, ``snippet``); errors as ``{"error": "..."}``.

Endpoints and keys are settings (``FPTRACK_SEARCH_*``; tests point the endpoints at a fake provider on
loopback). A provider that is out of quota (HTTP 429, Google's ``RESOURCE_EXHAUSTED``, SerpAPI's "run out of
searches"), refuses the key (401/403) or fails (5xx, a timeout, a body that is not its JSON) raises
:class:`SearchError` with a message a person can act on; discovery records it and goes on without that
provider (a quota is not retried within a run).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fptrack.core.errors import FptrackError
from fptrack.core.plain_http import http_request
from fptrack.core.settings import Settings

__all__ = [
    "PROVIDERS",
    "BingWebSearch",
    "GoogleProgrammableSearch",
    "SearchError",
    "SearchProvider",
    "SearchResult",
    "SerpApiBaidu",
    "configured_providers",
    "queries_for_work",
]

SEARCH_TIMEOUT = 20.0
TITLE_SUFFIXES = ("最新章节", "全文阅读", "txt下载")
_AUTHOR = re.compile(r"作\s*者\s*[:：]\s*([^\s，,。；;）)]{2,20})")
_SENTENCE_END = re.compile(r"[。！？!?]")


class SearchError(FptrackError):
    """A provider gave no results to use: ``quota`` says it is out of quota or rate-limited (429)."""

    def __init__(self, provider: str, message: str, *, quota: bool = False) -> None:
        super().__init__(f"search provider {provider}: {message}")
        self.provider = provider
        self.quota = quota


@dataclass(frozen=True)
class SearchResult:
    url: str
    title: str
    snippet: str
    provider: str
    query: str


class SearchProvider(Protocol):
    name: str

    def search(self, query: str) -> list[SearchResult]: ...


# fetch(url, headers) -> (status, body); injectable so that a test can count requests
Fetch = Callable[[str, dict[str, str]], tuple[int, bytes]]


def _get_json(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    reply = http_request(url, headers={"Accept": "application/json", **headers}, timeout=SEARCH_TIMEOUT)
    return reply.status, reply.body


class _JsonProvider:
    name = ""

    def search(self, query: str) -> list[SearchResult]:
        raise NotImplementedError

    def __init__(self, settings: Settings, fetch: Fetch | None = None) -> None:
        self.settings = settings
        self.fetch = fetch or _get_json

    def _get(self, url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
        try:
            status, body = self.fetch(url, headers or {})
        except OSError as error:  # HttpFailure, or what an injected fetch raises
            reason = getattr(error, "reason", error)
            raise SearchError(self.name, f"cannot reach {_endpoint_of(url)}: {reason}") from None
        try:
            payload = json.loads(body.decode("utf-8")) if body else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            payload = None
        if status == 429:
            raise SearchError(
                self.name, f"out of quota or rate-limited (HTTP 429): {_message(payload)}", quota=True
            )
        if status in (401, 403):
            raise SearchError(self.name, f"the API key was refused (HTTP {status}): {_message(payload)}")
        if status >= 500:
            raise SearchError(self.name, f"the provider failed (HTTP {status}); try again later")
        if not isinstance(payload, dict):
            raise SearchError(self.name, f"HTTP {status} with a body that is not the provider's JSON")
        if status != 200:
            raise SearchError(self.name, f"HTTP {status}: {_message(payload)}")
        return payload


def _endpoint_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _message(payload: Any) -> str:
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error.get("status") or error.get("code") or error)
        if isinstance(error, str):
            return error
        errors = payload.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return str(errors[0].get("message") or errors[0])
    return "no message"


def _results(rows: Any, url_key: str, title_key: str, provider: str, query: str) -> list[SearchResult]:
    if not isinstance(rows, list):
        return []
    found = []
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get(url_key), str) and row[url_key].startswith("http"):
            found.append(
                SearchResult(
                    url=row[url_key],
                    title=str(row.get(title_key) or ""),
                    snippet=str(row.get("snippet") or ""),
                    provider=provider,
                    query=query,
                )
            )
    return found


class BingWebSearch(_JsonProvider):
    name = "bing"

    def search(self, query: str) -> list[SearchResult]:
        params = {"q": query, "count": str(min(self.settings.search_results, 50)), "mkt": "zh-CN"}
        url = f"{self.settings.search_bing_endpoint}?{urllib.parse.urlencode(params)}"
        payload = self._get(url, {"Ocp-Apim-Subscription-Key": self.settings.search_bing_key})
        if "error" in payload or "errors" in payload:
            raise SearchError(self.name, _message(payload))
        pages = payload.get("webPages") or {}
        return _results(
            pages.get("value") if isinstance(pages, dict) else None, "url", "name", self.name, query
        )


class GoogleProgrammableSearch(_JsonProvider):
    name = "google"

    def search(self, query: str) -> list[SearchResult]:
        params = {
            "key": self.settings.search_google_key,
            "cx": self.settings.search_google_cx,
            "q": query,
            "num": str(min(self.settings.search_results, 10)),
        }
        payload = self._get(f"{self.settings.search_google_endpoint}?{urllib.parse.urlencode(params)}")
        error = payload.get("error")
        if isinstance(error, dict):
            quota = error.get("status") == "RESOURCE_EXHAUSTED" or error.get("code") == 429
            raise SearchError(self.name, _message(payload), quota=quota)
        return _results(payload.get("items"), "link", "title", self.name, query)


class SerpApiBaidu(_JsonProvider):
    name = "serpapi"

    def search(self, query: str) -> list[SearchResult]:
        params = {
            "engine": "baidu",
            "q": query,
            "rn": str(min(self.settings.search_results, 50)),
            "api_key": self.settings.search_serpapi_key,
        }
        payload = self._get(f"{self.settings.search_serpapi_endpoint}?{urllib.parse.urlencode(params)}")
        if isinstance(payload.get("error"), str):
            message = payload["error"]
            if "hasn't returned any results" in message:
                return []
            raise SearchError(self.name, message, quota="run out of searches" in message)
        return _results(payload.get("organic_results"), "link", "title", self.name, query)


PROVIDERS: dict[str, type[_JsonProvider]] = {
    "bing": BingWebSearch,
    "google": GoogleProgrammableSearch,
    "serpapi": SerpApiBaidu,
}


def configured_providers(settings: Settings, fetch: Fetch | None = None) -> list[SearchProvider]:
    """The providers ``FPTRACK_SEARCH_PROVIDERS`` names; :class:`SearchError` for an unknown name or a
    provider without its key."""
    providers: list[SearchProvider] = []
    needs = {
        "bing": ("FPTRACK_SEARCH_BING_KEY", settings.search_bing_key),
        "google": (
            "FPTRACK_SEARCH_GOOGLE_KEY and FPTRACK_SEARCH_GOOGLE_CX",
            settings.search_google_key and settings.search_google_cx,
        ),
        "serpapi": ("FPTRACK_SEARCH_SERPAPI_KEY", settings.search_serpapi_key),
    }
    for name in settings.search_providers:
        if name not in PROVIDERS:
            raise SearchError(
                name, f"unknown provider; FPTRACK_SEARCH_PROVIDERS takes {', '.join(PROVIDERS)}"
            )
        variable, value = needs[name]
        if not value:
            raise SearchError(name, f"set {variable} to use it")
        providers.append(PROVIDERS[name](settings, fetch))
    return providers


def first_sentence(text: str, *, shortest: int = 12, longest: int = 40) -> str:
    """The first sentence of a chapter worth searching for verbatim: at least ``shortest`` characters (a
    heading or "第一章" is not), cut to ``longest``."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("第") and len(line) < 30:
            continue
        for sentence in _SENTENCE_END.split(line):
            sentence = sentence.strip(" \u3000“”\"'")
            if len(sentence) >= shortest:
                return sentence[:longest]
    return ""


def queries_for_work(title: str, text: str, chapter_texts: Sequence[str] = ()) -> list[str]:
    """The queries of one work (module docstring), most telling first, without duplicates."""
    title = title.strip()
    queries = [f"{title} {suffix}" for suffix in TITLE_SUFFIXES] if title else []
    for chapter in list(chapter_texts)[:2]:
        sentence = first_sentence(chapter)
        if sentence:
            queries.append(f'"{sentence}"')
    author = _AUTHOR.search(text[:2000])
    if author and title:
        queries.append(f"{author.group(1)} {title}")
    return list(dict.fromkeys(queries))
