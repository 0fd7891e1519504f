"""The downloader-side rules on real Scrapy objects: registrable domains for start-page redirects, redirect
loops."""

from __future__ import annotations

import pytest
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request, Response

from fptrack.crawler.middlewares import RefuseRedirectLoops, same_registrable_domain


@pytest.mark.parametrize(
    ("start", "target", "same"),
    [
        ("http://example.com/", "http://www.example.com/", True),
        ("http://www.example.com/", "https://m.example.com/book/", True),
        ("http://a.example.co.uk/", "http://b.example.co.uk/", True),
        ("http://example.com/", "http://example.net/", False),
        ("http://example.co.uk/", "http://other.co.uk/", False),
        ("http://alice.github.io/", "http://bob.github.io/", False),  # a private public suffix
        ("http://127.0.0.1:8000/", "http://127.0.0.1:9000/", True),  # same host, another port
        ("http://127.0.0.1:8000/", "http://localhost:8000/", False),
        ("http://10.0.0.1/", "http://10.0.0.2/", False),
        ("http://example.com/", "mailto:a@example.com", False),
    ],
)
def test_same_registrable_domain(start: str, target: str, same: bool) -> None:
    assert same_registrable_domain(start, target) is same


def _redirect(
    url: str, location: str, chain: tuple[str, ...] = (), status: int = 302
) -> tuple[Request, Response]:
    request = Request(url, meta={"redirect_urls": list(chain)} if chain else {})
    return request, Response(url, status=status, headers={"Location": location}, request=request)


def test_a_redirect_back_into_its_own_chain_is_refused_with_the_loop() -> None:
    request, response = _redirect("http://a.test/b", "/a#top", chain=("http://a.test/a",))
    with pytest.raises(
        IgnoreRequest, match=r"^redirect loop: http://a.test/a -> http://a.test/b -> http://a.test/a$"
    ):
        RefuseRedirectLoops().process_response(request, response)


def test_a_page_redirecting_to_itself_is_a_loop() -> None:
    request, response = _redirect("http://a.test/x", "http://a.test/x", status=301)
    with pytest.raises(IgnoreRequest, match=r"^redirect loop: http://a.test/x -> http://a.test/x$"):
        RefuseRedirectLoops().process_response(request, response)


def test_redirects_forward_and_other_responses_pass() -> None:
    request, response = _redirect("http://a.test/b", "/c", chain=("http://a.test/a",))
    assert RefuseRedirectLoops().process_response(request, response) is response
    plain = Response("http://a.test/a", status=200, request=Request("http://a.test/a"))
    assert RefuseRedirectLoops().process_response(plain.request, plain) is plain
