"""A fake web search API on 127.0.0.1 answering in each real provider's response format, so that discovery's
search providers are tested without the internet.

- ``/serpapi/search.json``: SerpAPI (``engine`` baidu, bing or google, ``q``, ``api_key``, ``rn`` / ``count``)
  -> ``{"search_metadata": {...}, "search_parameters": {...}, "organic_results": [{"position", "title",
  "link", "snippet", "displayed_link"}]}``; no results -> ``{"error": "Baidu hasn't returned any results for
  this query."}``; a wrong key -> 401 ``{"error": "Invalid API key. ..."}``; quota -> 429 ``{"error": "Your
  account has run out of searches."}``;
- ``/brave/res/v1/web/search``: the Brave Search API (``X-Subscription-Token`` header, ``q``, ``count``) ->
  ``{"type": "search", "query": {...}, "mixed": {...}, "web": {"type": "search", "results": [{"title",
  "url", "description", "type": "search_result", ...}]}}`` (no ``web`` when nothing is found), every answer
  with ``X-RateLimit-Limit`` / ``-Policy`` / ``-Remaining`` / ``-Reset`` for a 1-per-second and a monthly
  window; a wrong key -> 422 ``ErrorResponse`` ``SUBSCRIPTION_TOKEN_INVALID``; ``ratelimit`` -> 429
  ``RATE_LIMITED`` with the second's window used up (reset 1 s); ``quota`` -> 429 with the month's used up;
- ``/searxng/search``: a SearXNG instance (``q``, ``format=json``, ``engines``) -> ``{"query",
  "number_of_results", "results": [{"url", "title", "content", "engine", "engines", "score", "category"}],
  "answers", "corrections", "infoboxes", "suggestions", "unresponsive_engines"}``; ``disabled`` (JSON off
  in its settings.yml) -> 403 Forbidden in HTML; ``quota`` -> 429 from its limiter, in HTML;
- ``/google/customsearch/v1``: the Programmable Search JSON API (``key``, ``cx``, ``q``, ``num``) ->
  ``{"kind": "customsearch#search", "items": [{"kind", "title", "link", "displayLink", "snippet"}]}`` (no
  ``items`` when nothing is found); quota -> 429 ``RESOURCE_EXHAUSTED``.

``results(query)`` gives the ``(url, title, snippet)`` of a query; ``failures`` maps a provider name to what
to answer instead: ``quota``, ``key``, ``server`` (502), ``garbage`` (200 with HTML), ``truncated`` (200
with cut JSON), ``ratelimit`` (Brave), ``disabled`` (SearXNG); ``<kind>-once`` answers so once, then
normally. ``requests`` lists ``(provider, query)`` in order, ``params`` each request's query parameters.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

__all__ = ["KEY", "FakeSearch", "serve_search_provider"]

KEY = "test-key-0123456789abcdef"
Results = Callable[[str], list[tuple[str, str, str]]]
Rows = list[tuple[str, str, str]]
MONTHLY = 2000  # the fake Brave plan: 1 query a second, 2,000 a month


@dataclass
class FakeSearch:
    base_url: str
    results: Results
    failures: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    params: list[dict[str, str]] = field(default_factory=list)

    def endpoints(self) -> dict[str, str]:
        """Settings overrides pointing every provider here, with the keys it accepts."""
        return {
            "search_serpapi_endpoint": f"{self.base_url}/serpapi/search.json",
            "search_brave_endpoint": f"{self.base_url}/brave/res/v1/web/search",
            "search_searxng_url": f"{self.base_url}/searxng",
            "search_google_endpoint": f"{self.base_url}/google/customsearch/v1",
            "search_serpapi_key": KEY,
            "search_brave_key": KEY,
            "search_google_key": KEY,
            "search_google_cx": "017576662512468239146:omuauf_lfve",
        }

    def environment(self) -> dict[str, str]:
        """The same as ``FPTRACK_*`` variables, for a child ``fptrack`` process."""
        return {f"FPTRACK_{name.upper()}": value for name, value in self.endpoints().items()}


def _serpapi(query: str, rows: Rows, count: int, engine: str) -> dict[str, object]:
    if not rows:
        return {
            "search_metadata": {"status": "Success"},
            "error": f"{engine.capitalize()} hasn't returned any results for this query.",
        }
    return {
        "search_metadata": {
            "id": "fake",
            "status": "Success",
            "json_endpoint": "https://serpapi.com/searches/fake.json",
        },
        "search_parameters": {"engine": engine, "q": query},
        "search_information": {"total_results": len(rows)},
        "organic_results": [
            {
                "position": i + 1,
                "title": title,
                "link": url,
                "snippet": snippet,
                "displayed_link": urlsplit(url).netloc,
            }
            for i, (url, title, snippet) in enumerate(rows[:count])
        ],
    }


def _brave(query: str, rows: Rows, count: int) -> dict[str, object]:
    payload: dict[str, object] = {
        "type": "search",
        "query": {"original": query, "show_strict_warning": False, "is_navigational": False},
        "mixed": {"type": "mixed", "main": [{"type": "web", "index": i, "all": False} for i in range(count)]},
    }
    if rows:
        payload["web"] = {
            "type": "search",
            "results": [
                {
                    "title": title,
                    "url": url,
                    "is_source_local": False,
                    "is_source_both": False,
                    "description": snippet,
                    "language": "zh-hans",
                    "family_friendly": True,
                    "type": "search_result",
                    "subtype": "generic",
                    "meta_url": {"scheme": "https", "netloc": urlsplit(url).netloc, "path": "› book"},
                }
                for url, title, snippet in rows[:count]
            ],
            "family_friendly": True,
        }
    return payload


def _brave_error(status: int, code: str, detail: str) -> dict[str, object]:
    return {
        "type": "ErrorResponse",
        "error": {
            "id": "6a1f9c2e-0d4b-4b7e-9a55-2c1d0e7f3b21",
            "status": status,
            "code": code,
            "detail": detail,
            "meta": {"component": "rate_limiter" if status == 429 else "authentication"},
        },
        "time": 1764400000,
    }


def _searxng(query: str, rows: Rows) -> dict[str, object]:
    return {
        "query": query,
        "number_of_results": 0,
        "results": [
            {
                "url": url,
                "title": title,
                "content": snippet,
                "engine": "baidu",
                "parsed_url": ["http", urlsplit(url).netloc, urlsplit(url).path, "", "", ""],
                "template": "default.html",
                "engines": ["baidu", "bing"],
                "positions": [i + 1],
                "score": 2.0 / (i + 1),
                "category": "general",
            }
            for i, (url, title, snippet) in enumerate(rows)
        ],
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [["sogou", "timeout"]],
    }


def _google(query: str, rows: Rows, count: int) -> dict[str, object]:
    payload: dict[str, object] = {
        "kind": "customsearch#search",
        "url": {
            "type": "application/json",
            "template": "https://www.googleapis.com/customsearch/v1?q={searchTerms}",
        },
        "queries": {
            "request": [
                {
                    "title": "Google Custom Search - " + query,
                    "searchTerms": query,
                    "count": min(count, len(rows)),
                    "startIndex": 1,
                }
            ]
        },
        "searchInformation": {"searchTime": 0.2, "totalResults": str(len(rows))},
    }
    if rows:
        payload["items"] = [
            {
                "kind": "customsearch#result",
                "title": title,
                "htmlTitle": title,
                "link": url,
                "displayLink": urlsplit(url).netloc,
                "snippet": snippet,
                "htmlSnippet": snippet,
            }
            for url, title, snippet in rows[:count]
        ]
    return payload


_JSON = "application/json"
# provider -> failure -> (status, body, content type)
_FAILURES: dict[str, dict[str, tuple[int, object, str]]] = {
    "serpapi": {
        "quota": (429, {"error": "Your account has run out of searches."}, _JSON),
        "key": (
            401,
            {"error": "Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key"},
            _JSON,
        ),
    },
    "brave": {
        "quota": (429, _brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan."), _JSON),
        "ratelimit": (429, _brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan."), _JSON),
        "key": (
            422,
            _brave_error(422, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid."),
            _JSON,
        ),
    },
    "searxng": {
        "disabled": (403, "<!doctype html><title>403 Forbidden</title><h1>Forbidden</h1>", "text/html"),
        "quota": (
            429,
            "<!doctype html><title>429 Too Many Requests</title><h1>Too Many Requests</h1>",
            "text/html",
        ),
    },
    "google": {
        "quota": (
            429,
            {
                "error": {
                    "code": 429,
                    "message": "Quota exceeded for quota metric 'Queries'",
                    "status": "RESOURCE_EXHAUSTED",
                }
            },
            _JSON,
        ),
        "key": (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "API key not valid. Please pass a valid API key.",
                    "status": "INVALID_ARGUMENT",
                }
            },
            _JSON,
        ),
    },
}


def _brave_headers(failure: str | None, used: int) -> dict[str, str]:
    """Brave's rate-limit headers: a 1-per-second window and a monthly one (reset in ~16 days)."""
    second = "0" if failure == "ratelimit" else "1"
    month = "0" if failure == "quota" else str(MONTHLY - used)
    return {
        "X-RateLimit-Limit": f"1, {MONTHLY}",
        "X-RateLimit-Policy": f"1;w=1, {MONTHLY};w=2592000",
        "X-RateLimit-Remaining": f"{second}, {month}",
        "X-RateLimit-Reset": "1, 1419704",
    }


@contextmanager
def serve_search_provider(results: Results, failures: dict[str, str] | None = None) -> Iterator[FakeSearch]:
    fake = FakeSearch("", results, dict(failures or {}))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            params = {k: v[0] for k, v in parse_qs(parts.query).items()}
            provider = parts.path.strip("/").split("/", 1)[0]
            query = params.get("q", "")
            with lock:
                fake.requests.append((provider, query))
                fake.params.append(params)
                failure = fake.failures.get(provider)
                if failure is not None and failure.endswith("-once"):
                    del fake.failures[provider]
                    failure = failure.removesuffix("-once")
            key = {
                "serpapi": params.get("api_key"),
                "brave": self.headers.get("X-Subscription-Token"),
                "searxng": KEY,
                "google": params.get("key"),
            }.get(provider)
            if failure is None and key != KEY:
                failure = "key"
            headers = _brave_headers(failure, len(fake.requests)) if provider == "brave" else {}
            if failure == "server":
                self._send(502, b"<html>Bad Gateway</html>", "text/html", headers)
                return
            if failure == "garbage":
                self._send(200, b"<html>not json</html>", "text/html", headers)
                return
            if failure == "truncated":
                self._send(200, b'{"organic_results": [{"link": "http://a.example/", "ti', _JSON, headers)
                return
            if failure is not None:
                status, body, content_type = _FAILURES[provider][failure]
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self._send(status, data, content_type, headers)
                return
            if provider == "searxng" and (parts.path != "/searxng/search" or params.get("format") != "json"):
                self._send(400, b"<html>Bad Request</html>", "text/html", headers)
                return
            if provider == "serpapi" and params.get("engine") not in ("baidu", "bing", "google"):
                self._send(400, json.dumps({"error": "Unsupported engine"}).encode(), _JSON, headers)
                return
            rows = fake.results(query)
            count = int(params.get("count") or params.get("num") or params.get("rn") or 10)
            payload: object
            if provider == "serpapi":
                payload = _serpapi(query, rows, count, params["engine"])
            elif provider == "brave":
                payload = _brave(query, rows, count)
            elif provider == "searxng":
                payload = _searxng(query, rows)
            elif provider == "google":
                payload = _google(query, rows, count)
            else:
                self._send(404, b"{}", _JSON, headers)
                return
            self._send(200, json.dumps(payload, ensure_ascii=False).encode(), _JSON, headers)

        def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", f"{content_type}; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
