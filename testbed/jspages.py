"""Chapter pages whose text only a browser sees, as pirate sites build them to keep plain crawlers out.

- :func:`json_chapter`: an empty ``<div id="content">`` ("正在加载……") that a script fills from a JSON
  endpoint (:func:`json_endpoint`), in GBK with the charset declared in ``<meta>`` as such sites do;
- :func:`written_chapter`: every paragraph printed by ``document.write`` from an inline script;
- :func:`fetching_page`: a page whose script fetches ``url`` and shows what it gets (for the guard's tests).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

from testbed.sites import Page

__all__ = ["fetching_page", "json_chapter", "json_endpoint", "written_chapter"]

_NAV = '<div class="nav"><a href="/">首页</a> <a href="/top/">排行榜</a> <a href="/full/">全本小说</a></div>'
_FOOTER = '<div class="footer">本站所有小说均由网友上传，如有侵权请联系删除。</div>'


def json_chapter(title: str, endpoint: str, *, encoding: str = "gbk") -> Page:
    """A chapter page whose paragraphs arrive from ``endpoint`` (JSON ``{"paragraphs": [...]}``) after
    load."""
    script = (
        f"fetch({json.dumps(endpoint)}).then(function (r) {{ return r.json(); }}).then(function (data) {{"
        " var box = document.getElementById('content'); box.innerHTML = '';"
        " data.paragraphs.forEach(function (text) { var p = document.createElement('p');"
        " p.textContent = text; box.appendChild(p); }); });"
    )
    markup = (
        f'<!DOCTYPE html><html><head><meta charset="{encoding}"><title>{html.escape(title)}</title>'
        f"<script src='/js/common.js'></script></head><body>{_NAV}<div "
        f"class='bookname'><h1>{html.escape(title)}</h1></div>"
        f"<div id='content'>正在加载……</div>{_FOOTER}<script>{script}</script></body></html>"
    )
    return Page(markup.encode(encoding), content_type="text/html")


def json_endpoint(paragraphs: Sequence[str]) -> Page:
    body = json.dumps({"paragraphs": list(paragraphs)}, ensure_ascii=False).encode("utf-8")
    return Page(body, content_type="application/json; charset=utf-8")


def written_chapter(title: str, paragraphs: Sequence[str]) -> Page:
    """A chapter page whose paragraphs are printed by ``document.write`` while the page is parsed."""
    writes = "".join(f"document.write({json.dumps('<p>' + html.escape(p) + '</p>')});" for p in paragraphs)
    markup = (
        f"<!DOCTYPE html><html><head><title>{html.escape(title)}</title></head><body>{_NAV}"
        f"<h1>{html.escape(title)}</h1><div "
        f"id='content'><script>{writes}</script></div>{_FOOTER}</body></html>"
    )
    return Page.html(markup)


def fetching_page(url: str) -> Page:
    """A page whose script fetches ``url`` and puts the answer into its content box."""
    script = (
        f"fetch({json.dumps(url)}).then(function (r) {{ return r.text(); }}).then(function (text) {{"
        " document.getElementById('content').innerHTML = text; });"
    )
    markup = (
        f"<!DOCTYPE html><html><head><title>内容</title></head><body>{_NAV}<div id='content'>正在加载……</div>"
        f"<script>{script}</script></body></html>"
    )
    return Page.html(markup)
