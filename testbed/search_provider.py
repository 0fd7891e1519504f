"""A fake web search API on 127.0.0.1 answering in each real provider's response format, so that discovery's
search providers are tested without the internet.

- ``/bing/v7.0/search``: Bing Web Search API v7 (``Ocp-Apim-Subscription-Key`` header, ``q``, ``count``) ->
  ``{"_type": "SearchResponse", "queryContext": ..., "webPages": {"value": [{"id", "name", "url",
  "displayUrl", "snippet", ...}]}}``; a wrong key -> 401 ``{"error": {"code": "401", "message": ...}}``;
- ``/google/customsearch/v1``: the Programmable Search JSON API (``key``, ``cx``, ``q``, ``num``) ->
  ``{"kind": "customsearch#search", "items": [{"kind", "title", "link", "displayLink", "snippet"}]}``
  (no ``items`` when nothing is found); quota -> 429 ``{"error": {"code": 429, "message", "status":
  "RESOURCE_EXHAUSTED"}}``;
- ``/serpapi/search.json``: SerpAPI (``engine=baidu``, ``q``, ``api_key``) -> ``{"search_metadata": {...},
  "search_parameters": {...}, "organic_results": [{"position", "title", "link", "snippet"}]}``; errors ->
  ``{"error": "..."}``.

``results(query)`` gives the ``(url, title, snippet)`` of a query; ``failures`` maps a provider name to
``(status, kind)`` to answer instead (``quota``, ``key``, ``server``, ``garbage``). ``requests`` lists
``(provider, query)`` in order.
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

KEY = "test-key"
Results = Callable[[str], list[tuple[str, str, str]]]


@dataclass
class FakeSearch:
    base_url: str
    results: Results
    failures: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)

    def endpoints(self) -> dict[str, str]:
        """Settings overrides pointing every provider here, with the keys it accepts."""
        return {
            "search_bing_endpoint": f"{self.base_url}/bing/v7.0/search",
            "search_google_endpoint": f"{self.base_url}/google/customsearch/v1",
            "search_serpapi_endpoint": f"{self.base_url}/serpapi/search.json",
            "search_bing_key": KEY,
            "search_google_key": KEY,
            "search_google_cx": "017576662512468239146:omuauf_lfve",
            "search_serpapi_key": KEY,
        }


def _bing(query: str, rows: list[tuple[str, str, str]], count: int) -> dict[str, object]:
    return {
        "_type": "SearchResponse",
        "queryContext": {"originalQuery": query},
        "webPages": {
            "webSearchUrl": f"https://www.bing.com/search?q={query}",
            "totalEstimatedMatches": len(rows),
            "value": [
                {
                    "id": f"https://api.bing.microsoft.com/api/v7/#WebPages.{i}",
                    "name": title,
                    "url": url,
                    "isFamilyFriendly": True,
                    "displayUrl": url.split("://", 1)[-1],
                    "snippet": snippet,
                    "dateLastCrawled": "2026-11-20T08:00:00.0000000Z",
                    "language": "zh_chs",
                }
                for i, (url, title, snippet) in enumerate(rows[:count])
            ],
        },
        "rankingResponse": {
            "mainline": {
                "items": [{"answerType": "WebPages", "resultIndex": i} for i in range(min(count, len(rows)))]
            }
        },
    }


def _google(query: str, rows: list[tuple[str, str, str]], count: int) -> dict[str, object]:
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


def _serpapi(query: str, rows: list[tuple[str, str, str]], count: int) -> dict[str, object]:
    if not rows:
        return {
            "search_metadata": {"status": "Success"},
            "error": "Baidu hasn't returned any results for this query.",
        }
    return {
        "search_metadata": {
            "id": "fake",
            "status": "Success",
            "json_endpoint": "https://serpapi.com/searches/fake.json",
        },
        "search_parameters": {"engine": "baidu", "q": query},
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


_FAILURES: dict[str, dict[str, tuple[int, object]]] = {
    "bing": {
        "quota": (429, {"error": {"code": "429", "message": "Rate limit is exceeded. Try again later."}}),
        "key": (401, {"error": {"code": "401", "message": "Access denied due to invalid subscription key."}}),
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
        ),
    },
    "serpapi": {
        "quota": (429, {"error": "Your account has run out of searches."}),
        "key": (
            401,
            {"error": "Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key"},
        ),
    },
}


@contextmanager
def serve_search_provider(results: Results, failures: dict[str, str] | None = None) -> Iterator[FakeSearch]:
    fake = FakeSearch("", results, dict(failures or {}))

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            params = {k: v[0] for k, v in parse_qs(parts.query).items()}
            provider = parts.path.strip("/").split("/", 1)[0]
            query = params.get("q", "")
            fake.requests.append((provider, query))
            key = {
                "bing": self.headers.get("Ocp-Apim-Subscription-Key"),
                "google": params.get("key"),
                "serpapi": params.get("api_key"),
            }.get(provider)
            failure = fake.failures.get(provider)
            if failure is None and key != KEY:
                failure = "key"
            if failure == "server":
                self._send(502, b"<html>Bad Gateway</html>", "text/html")
                return
            if failure == "garbage":
                self._send(200, b"<html>not json</html>", "text/html")
                return
            if failure is not None:
                status, body = _FAILURES[provider][failure]
                self._send(status, json.dumps(body).encode(), "application/json")
                return
            if provider == "serpapi" and params.get("engine") != "baidu":
                self._send(400, json.dumps({"error": "Unsupported engine"}).encode(), "application/json")
                return
            rows = fake.results(query)
            count = int(params.get("count") or params.get("num") or params.get("rn") or 10)
            build = {"bing": _bing, "google": _google, "serpapi": _serpapi}.get(provider)
            if build is None:
                self._send(404, b"{}", "application/json")
                return
            body = json.dumps(build(query, rows, count), ensure_ascii=False).encode()
            self._send(200, body, "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", f"{content_type}; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
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
