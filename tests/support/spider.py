"""Scrapy responses and the items a spider's callback yields, for the unit tests of the spider (no network,
no reactor: a response is built from a string, an async callback is run to its end)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from scrapy.http import HtmlResponse, Request

from fptrack.crawler.spiders import REQUESTED_URL

# Written for these tests: one sentence of a made-up story, the main text of PAGE.
BODY = "窗外的桂花开了，满院子都是甜丝丝的香气，奶奶说今年会是个好年景。"


def html_response(
    url: str, html: str, *, depth: int, requested: str | None = None, status: int = 200
) -> HtmlResponse:
    request = Request(url, meta={"depth": depth, REQUESTED_URL: requested or url})
    return HtmlResponse(
        url,
        body=html.encode("utf-8"),
        headers={"Content-Type": "text/html; charset=utf-8"},
        request=request,
        status=status,
    )


PAGE = (
    "<html><body><div class='nav'><a href='/'>首页</a><a href='http://other.test/x'>友站</a></div>"
    f"<div id='content'>{BODY}</div>"
    f"<a href='/next.html#a'>下一章</a><a href='/next.html'>下一章</a></body></html>"
)


def callback_items(output: AsyncIterator[Any]) -> list[Any]:
    """Everything an async callback yields (the spider's callbacks are async: parsing runs in a thread)."""

    async def collect() -> list[Any]:
        return [item async for item in output]

    return asyncio.run(collect())
