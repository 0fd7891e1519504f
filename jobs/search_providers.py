"""Search providers for discovery: the queries a pirate site answers, sent through a web search API.

Readers reach pirate fiction mostly through search engines, so a search for a work the way readers search
for it finds the sites that serve it. :func:`queries_for_work` writes the queries of one work: its title
with 最新章节 / 全文阅读 / txt下载, an exact first sentence of a chapter in quotes, and its author's name
with the title when the text names one. A :class:`SearchProvider` sends one query and parses its API's own
response format into :class:`SearchResult` values:

- ``serpapi``: SerpAPI, ``GET <endpoint>?engine=baidu|bing|google&q=&api_key=`` (``FPTRACK_SEARCH_SERPAPI_
  ENGINE``; ``rn`` for Baidu and ``count`` for Bing ask for up to 50 results, Google answers its page of
  10); results in ``organic_results[]`` (``title``, ``link``, ``snippet``); errors as ``{"error": "..."}``
  with HTTP 401 (key) or 429 (searches used up, hourly throughput), and no results as the error "...
  hasn't returned any results for this query";
- ``brave``: the Brave Search API, ``GET <endpoint>?q=&count=`` (at most 20) with the key in the
  ``X-Subscription-Token`` header; results in ``web.results[]`` (``title``, ``url``, ``description``; no
  ``web`` when nothing is found); errors as ``{"type": "ErrorResponse", "error": {"status", "code",
  "detail"}}`` (``SUBSCRIPTION_TOKEN_INVALID`` with HTTP 422 for a bad key, ``RATE_LIMITED`` with 429);
  every answer carries ``X-RateLimit-Remaining`` / ``X-RateLimit-Reset``, one value per window (per second,
  per month);
- ``searxng``: a SearXNG instance the user runs, ``GET <base>/search?q=&format=json`` (``engines=`` when
  ``FPTRACK_SEARCH_SEARXNG_ENGINES`` names some); results in ``results[]`` (``url``, ``title``,
  ``content``), the engines that failed in ``unresponsive_engines``; HTTP 403 when the instance's
  ``search.formats`` leaves out ``json``, 429 from its limiter;
- ``google``: the Programmable Search (Custom Search) JSON API, ``GET <endpoint>?key=&cx=&q=&num=`` (``num``
  at most 10); results in ``items[]``; errors as ``{"error": {"code", "message", "status"}}``. Closed to new
  customers, and its whole-web search ends on 2027-01-01: kept while it works, with a warning in each run's
  summary (:data:`GOOGLE_ENDS`).

``bing`` is refused with one line: the Bing Web Search API was retired on 2025-08-11 (:data:`BING_RETIRED`).

Endpoints and keys are settings (``FPTRACK_SEARCH_*``; tests point the endpoints at a fake provider on
loopback). A provider that refuses the key (401/403, Brave's 422), fails (5xx, a timeout, a body that is not
its JSON) or is out of quota raises :class:`SearchError` with a message a person can act on, never the key;
discovery records it and goes on with the next work, or without that provider for the rest of the run when no
later query can fare better (``SearchError.stop``: a quota, a refused key, an unreachable provider). Rate
limits are waited out when short: an answer saying a window is used up (``X-RateLimit-Remaining`` 0) makes the
next request wait for its ``X-RateLimit-Reset``, and a 429 whose reset (or ``Retry-After``) is at most
:data:`MAX_WAIT` seconds is retried after it, :data:`MAX_RETRIES` times at most; the waits are one line in the
run's summary (:meth:`SearchProvider.summary`). A longer reset (a monthly quota) is a quota error saying when
it resets.
"""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from fptrack.core.errors import FptrackError
from fptrack.core.plain_http import HttpReply, http_request
from fptrack.core.settings import Settings

__all__ = [
    "BING_RETIRED",
    "GOOGLE_ENDS",
    "PROVIDERS",
    "BraveSearch",
    "GoogleProgrammableSearch",
    "SearXNG",
    "SearchError",
    "SearchProvider",
    "SearchResult",
    "SerpApi",
    "configured_providers",
    "provider_named",
    "queries_for_work",
    "rate_limit_wait",
]

SEARCH_TIMEOUT = 20.0
MAX_WAIT = 10.0  # seconds: a rate-limit reset at most this long is waited out, a longer one is a quota
MAX_RETRIES = 3  # 429s waited out per query
TITLE_SUFFIXES = ("最新章节", "全文阅读", "txt下载")
BING_RETIRED = "the Bing Web Search API was retired on 2025-08-11; use serpapi with engine=bing, or brave"
GOOGLE_ENDS = (
    "Google's Custom Search JSON API is closed to new customers and stops searching the whole web on "
    "2027-01-01; move to serpapi (FPTRACK_SEARCH_SERPAPI_ENGINE=google), brave or searxng"
)
_AUTHOR = re.compile(r"作\s*者\s*[:：]\s*([^\s，,。；;）)]{2,20})")
_SENTENCE_END = re.compile(r"[。！？!?]")


class SearchError(FptrackError):
    """A provider gave no results to use: ``quota`` says it is out of quota or rate-limited (429);
    ``stop`` that no later query of the run can fare better (a quota, a refused key, an unreachable or
    misconfigured provider), so discovery asks it nothing more in that run."""

    def __init__(self, provider: str, message: str, *, quota: bool = False, stop: bool = False) -> None:
        super().__init__(f"search provider {provider}: {message}")
        self.provider = provider
        self.quota = quota
        self.stop = stop or quota


@dataclass(frozen=True)
class SearchResult:
    url: str
    title: str
    snippet: str
    provider: str
    query: str


class SearchProvider(Protocol):
    name: str
    requests: int  # sent to the API so far, 429s retried included

    def search(self, query: str) -> list[SearchResult]: ...

    def summary(self) -> list[str]:
        """Lines for the run's summary: waits for rate limits, a provider's end date."""
        ...


# fetch(url, headers) -> the reply; injectable so that a test can count requests
Fetch = Callable[[str, dict[str, str]], HttpReply]


def _get_json(url: str, headers: dict[str, str]) -> HttpReply:
    return http_request(url, headers={"Accept": "application/json", **headers}, timeout=SEARCH_TIMEOUT)


class _JsonProvider:
    name = ""

    def search(self, query: str) -> list[SearchResult]:
        raise NotImplementedError

    def __init__(
        self, settings: Settings, fetch: Fetch | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.settings = settings
        self.fetch = fetch or _get_json
        self.sleep = sleep
        self.requests = 0
        self.waits: list[float] = []  # seconds waited for a rate limit, one entry per wait
        self._not_before = 0.0  # time.monotonic() before which a used-up window forbids a request

    def summary(self) -> list[str]:
        if not self.waits:
            return []
        waited = f"waited {len(self.waits)} time(s), {sum(self.waits):.1f} s in all"
        return [f"search provider {self.name}: rate-limited, {waited}"]

    def _secrets(self) -> tuple[str, ...]:
        return ()

    def _error(self, message: str, *, quota: bool = False, stop: bool = False) -> SearchError:
        for secret in self._secrets():
            if secret:
                message = message.replace(secret, "***")
        return SearchError(self.name, message, quota=quota, stop=stop)

    def _wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.sleep(seconds)

    def _get(self, url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
        parts = urllib.parse.urlsplit(url)
        headers = dict(headers or {})
        if parts.username is not None:  # a SearXNG behind a proxy with basic auth: user:password@host
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            url = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        for attempt in range(MAX_RETRIES + 1):
            ahead = self._not_before - time.monotonic()
            if ahead > 0:
                self._wait(ahead)
            self._not_before = 0.0
            try:
                reply = self.fetch(url, headers)
            except OSError as error:  # HttpFailure, or what an injected fetch raises
                reason = getattr(error, "reason", error)
                raise self._error(f"cannot reach {_endpoint_of(url)}: {reason}", stop=True) from None
            self.requests += 1
            reset = rate_limit_wait(reply.headers)
            if reply.status == 429 and reset is not None and reset <= MAX_WAIT and attempt < MAX_RETRIES:
                self._wait(reset)
                continue
            if reset is not None and reset <= MAX_WAIT:
                self._not_before = time.monotonic() + reset
            return self._checked(reply, reset)
        raise AssertionError("unreachable")  # pragma: no cover

    def _checked(self, reply: HttpReply, reset: float | None) -> dict[str, Any]:
        status = reply.status
        try:
            payload = json.loads(reply.body.decode("utf-8")) if reply.body else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            payload = None
        if status == 429:
            when = f"; it resets in {_duration(reset)}" if reset is not None else ""
            raise self._error(f"{self._too_many(payload)}{when}", quota=True)
        refused = self._refused(status, payload)
        if refused:
            raise self._error(refused, stop=True)
        if status >= 500:
            raise self._error(f"the provider failed (HTTP {status}); try again later")
        if not isinstance(payload, dict):
            raise self._error(f"HTTP {status} with a body that is not the provider's JSON")
        if status != 200:
            raise self._error(f"HTTP {status}: {_message(payload)}")
        return payload

    def _too_many(self, payload: Any) -> str:
        return f"out of quota or rate-limited (HTTP 429): {_message(payload)}"

    def _refused(self, status: int, payload: Any) -> str:
        """Why the provider refused the request as unauthorised (or misconfigured), or ""."""
        if status in (401, 403):
            return f"the API key was refused (HTTP {status}): {_message(payload)}"
        return ""


def _endpoint_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "an unknown time"
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def _numbers(value: str | None) -> list[float]:
    numbers = []
    for item in (value or "").split(","):
        try:
            numbers.append(float(item.strip()))
        except ValueError:
            return []
    return numbers


def rate_limit_wait(headers: dict[str, str]) -> float | None:
    """Seconds until the rate-limit windows this answer says are used up reset: ``Retry-After`` (seconds),
    else the longest ``X-RateLimit-Reset`` of a window whose ``X-RateLimit-Remaining`` is 0 (Brave's headers
    list one value per window, shortest first). None when the answer says nothing of it."""
    retry_after = _numbers(headers.get("retry-after"))
    if len(retry_after) == 1:
        return max(retry_after[0], 0.0)
    remaining = _numbers(headers.get("x-ratelimit-remaining"))
    resets = _numbers(headers.get("x-ratelimit-reset"))
    if not remaining or len(remaining) != len(resets):
        return None
    used_up = [reset for left, reset in zip(remaining, resets, strict=True) if left <= 0]
    return max(max(used_up), 0.0) if used_up else None


def _message(payload: Any) -> str:
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict):
            return str(
                error.get("message")
                or error.get("detail")
                or error.get("status")
                or error.get("code")
                or error
            )
        if isinstance(error, str):
            return error
        errors = payload.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return str(errors[0].get("message") or errors[0])
    return "no message"


def _results(
    rows: Any, keys: tuple[str, str, str], provider: str, query: str, limit: int
) -> list[SearchResult]:
    """The ``(url, title, snippet)`` keys of each row of ``rows`` as results, the first ``limit``."""
    url_key, title_key, snippet_key = keys
    if not isinstance(rows, list):
        return []
    found: list[SearchResult] = []
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get(url_key), str) and row[url_key].startswith("http"):
            found.append(
                SearchResult(
                    url=row[url_key],
                    title=str(row.get(title_key) or ""),
                    snippet=str(row.get(snippet_key) or ""),
                    provider=provider,
                    query=query,
                )
            )
    return found[:limit]


class SerpApi(_JsonProvider):
    name = "serpapi"
    # the parameter asking an engine for more results, and its largest value (Google's page is 10)
    _COUNT: ClassVar[dict[str, tuple[str, int]]] = {
        "baidu": ("rn", 50),
        "bing": ("count", 50),
        "google": ("", 10),
    }

    def _secrets(self) -> tuple[str, ...]:
        return (self.settings.search_serpapi_key,)

    def search(self, query: str) -> list[SearchResult]:
        engine = self.settings.search_serpapi_engine
        params = {"engine": engine, "q": query}
        count_key, most = self._COUNT[engine]
        if count_key:
            params[count_key] = str(min(self.settings.search_results, most))
        params["api_key"] = self.settings.search_serpapi_key
        payload = self._get(f"{self.settings.search_serpapi_endpoint}?{urllib.parse.urlencode(params)}")
        error = payload.get("error")
        if isinstance(error, str):
            if "hasn't returned any results" in error:
                return []
            quota = "run out of searches" in error or "exhausted" in error or "throughput" in error
            raise self._error(error, quota=quota, stop="Invalid API key" in error)
        return _results(
            payload.get("organic_results"),
            ("link", "title", "snippet"),
            self.name,
            query,
            self.settings.search_results,
        )


class BraveSearch(_JsonProvider):
    name = "brave"

    def _secrets(self) -> tuple[str, ...]:
        return (self.settings.search_brave_key,)

    def _refused(self, status: int, payload: Any) -> str:
        error = payload.get("error") if isinstance(payload, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        if status in (401, 403) or code == "SUBSCRIPTION_TOKEN_INVALID":
            return f"the API key was refused (HTTP {status}): {_message(payload)}"
        return ""

    def search(self, query: str) -> list[SearchResult]:
        params = {"q": query, "count": str(min(self.settings.search_results, 20))}
        url = f"{self.settings.search_brave_endpoint}?{urllib.parse.urlencode(params)}"
        payload = self._get(url, {"X-Subscription-Token": self.settings.search_brave_key})
        web = payload.get("web")
        return _results(
            web.get("results") if isinstance(web, dict) else None,
            ("url", "title", "description"),
            self.name,
            query,
            self.settings.search_results,
        )


class SearXNG(_JsonProvider):
    name = "searxng"

    def __init__(
        self, settings: Settings, fetch: Fetch | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        super().__init__(settings, fetch, sleep)
        self.unresponsive: dict[str, str] = {}  # engine -> its reason, over the run

    def _secrets(self) -> tuple[str, ...]:
        return (urllib.parse.urlsplit(self.settings.search_searxng_url).password or "",)

    def _refused(self, status: int, payload: Any) -> str:
        if status == 403:
            return (
                "the instance refuses JSON (HTTP 403): add json to search.formats in its settings.yml "
                "(formats: [html, json]) and restart it"
            )
        if status == 401:
            return "the instance (or its proxy) asks for a login (HTTP 401): put user:password@ in its URL"
        return ""

    def _too_many(self, payload: Any) -> str:
        return (
            "the instance's limiter refused the query (HTTP 429): a private instance needs no limiter "
            "(server.limiter: false in its settings.yml)"
        )

    def summary(self) -> list[str]:
        lines = super().summary()
        if self.unresponsive:
            engines = ", ".join(f"{engine} ({why})" for engine, why in sorted(self.unresponsive.items()))
            lines.append(f"search provider searxng: engines that did not answer: {engines}")
        return lines

    def search(self, query: str) -> list[SearchResult]:
        params = {"q": query, "format": "json"}
        if self.settings.search_searxng_engines:
            params["engines"] = ",".join(self.settings.search_searxng_engines)
        base = self.settings.search_searxng_url.rstrip("/")
        payload = self._get(f"{base}/search?{urllib.parse.urlencode(params)}")
        for entry in payload.get("unresponsive_engines") or []:
            if isinstance(entry, list) and len(entry) == 2:
                self.unresponsive[str(entry[0])] = str(entry[1])
        return _results(
            payload.get("results"),
            ("url", "title", "content"),
            self.name,
            query,
            self.settings.search_results,
        )


class GoogleProgrammableSearch(_JsonProvider):
    name = "google"

    def _secrets(self) -> tuple[str, ...]:
        return (self.settings.search_google_key,)

    def summary(self) -> list[str]:
        return [*super().summary(), f"search provider google: {GOOGLE_ENDS}"]

    def _refused(self, status: int, payload: Any) -> str:
        if status in (401, 403) or (status == 400 and "API key not valid" in _message(payload)):
            return f"the API key was refused (HTTP {status}): {_message(payload)}"
        return ""

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
            raise self._error(_message(payload), quota=quota)
        return _results(
            payload.get("items"), ("link", "title", "snippet"), self.name, query, self.settings.search_results
        )


PROVIDERS: dict[str, type[_JsonProvider]] = {
    "serpapi": SerpApi,
    "brave": BraveSearch,
    "searxng": SearXNG,
    "google": GoogleProgrammableSearch,
}


def provider_named(
    name: str, settings: Settings, fetch: Fetch | None = None, sleep: Callable[[float], None] = time.sleep
) -> SearchProvider:
    """The provider ``name`` of ``FPTRACK_SEARCH_PROVIDERS``; :class:`SearchError` for ``bing`` (retired),
    an unknown name or a provider without its key or URL."""
    if name == "bing":
        raise SearchError(name, BING_RETIRED)
    if name not in PROVIDERS:
        raise SearchError(name, f"unknown provider; FPTRACK_SEARCH_PROVIDERS takes {', '.join(PROVIDERS)}")
    needs = {
        "serpapi": ("FPTRACK_SEARCH_SERPAPI_KEY", settings.search_serpapi_key),
        "brave": ("FPTRACK_SEARCH_BRAVE_KEY", settings.search_brave_key),
        "searxng": (
            "FPTRACK_SEARCH_SEARXNG_URL (your instance, e.g. http://127.0.0.1:8888)",
            settings.search_searxng_url,
        ),
        "google": (
            "FPTRACK_SEARCH_GOOGLE_KEY and FPTRACK_SEARCH_GOOGLE_CX",
            settings.search_google_key and settings.search_google_cx,
        ),
    }
    variable, value = needs[name]
    if not value:
        raise SearchError(name, f"set {variable} to use it")
    return PROVIDERS[name](settings, fetch, sleep)


def configured_providers(settings: Settings, fetch: Fetch | None = None) -> list[SearchProvider]:
    """The providers ``FPTRACK_SEARCH_PROVIDERS`` names; :class:`SearchError` for the first that cannot be
    used (:func:`provider_named`)."""
    return [provider_named(name, settings, fetch) for name in settings.search_providers]


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
