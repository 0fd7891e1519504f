"""Test web sites: serve a dict of pages on 127.0.0.1, and render pirate-site-like chapter pages.

Serving::

    pages = {
        "/": Page.html("<a href='/1.html'>第一章</a>"),
        "/1.html": chapter_page("第一章 山路", ["清晨的山谷里雾气很重。"], encoding="gbk"),
        "/old": Redirect("/1.html"),
        "/cover.png": Page(b"\\x89PNG...", content_type="image/png"),
        "/slow": Page.html("<p>late</p>", delay=3.0),
        "/drip": Page.html("<p>...</p>", drip=0.5),         # one byte every 0.5 s, chunked
        "/cal/": Generated(lambda path: Page.html(...)),    # every path under /cal/ (an endless calendar)
    }
    with serve_site(pages) as base_url:      # 'http://127.0.0.1:<free port>'
        ...                                  # base_url.requests: paths requested so far, in order

Unknown paths get a plain 404. Loopback only; each site runs a ``ThreadingHTTPServer`` in a daemon thread.

Rendering: :func:`render_chapter` builds a chapter page in one of :data:`TEMPLATES` (navigation bars,
ads, footers, breadcrumbs around the text, as Chinese pirate sites do), encoded as asked; Big5 pages get
Traditional Chinese through OpenCC ``s2t`` (use :func:`as_served` to get the text as it will appear).
"""

from __future__ import annotations

import html as html_lib
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import urlsplit

__all__ = [
    "TEMPLATES",
    "Generated",
    "Page",
    "Redirect",
    "SiteURL",
    "as_served",
    "chapter_page",
    "closed_port_url",
    "free_port",
    "render_chapter",
    "serve_site",
    "to_traditional",
]


@dataclass(frozen=True)
class Page:
    """A response: status, body bytes, Content-Type (``None`` sends no Content-Type), extra headers, an
    optional delay in seconds before the response is sent (for timeouts), ``chunked`` to send the body without
    a Content-Length, and ``drip`` to send it chunked one byte every ``drip`` seconds (a slow-drip server)."""

    body: bytes = b""
    status: int = 200
    content_type: str | None = "text/html; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunked: bool = False
    drip: float = 0.0

    @classmethod
    def html(cls, markup: str, *, encoding: str = "utf-8", declare: bool = True, **kwargs: object) -> Page:
        content_type = f"text/html; charset={encoding}" if declare else "text/html"
        return cls(markup.encode(encoding), content_type=content_type, **kwargs)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Redirect:
    """A redirect to ``location`` (a path on the same site or an absolute URL)."""

    location: str
    status: int = 302


@dataclass(frozen=True)
class Generated:
    """Every path under the key it is served at (a prefix ending in ``/``) answered by ``render(path)``:
    endless sites (a calendar whose every day links to the next)."""

    render: Callable[[str], Page | Redirect]


class SiteURL(str):
    """The base URL of a served site (``http://127.0.0.1:<port>``), which also records the requests."""

    requests: list[str]
    user_agents: list[str]
    request_times: list[float]  # time.monotonic() at each request, beside ``requests``

    def __new__(cls, value: str) -> Self:
        instance = super().__new__(cls, value)
        instance.requests = []
        instance.user_agents = []
        instance.request_times = []
        return instance

    def url(self, path: str) -> str:
        return self + path

    @property
    def key(self) -> str:
        """The site key (``127.0.0.1:<port>``): what a crawl must be allowed to reach, loopback being refused
        by the private-address guard unless allowed (``--allow-private-host``)."""
        return self.split("://", 1)[1]

    @property
    def page_requests(self) -> list[str]:
        """The paths requested, without the crawler's ``/robots.txt`` look-ups."""
        return [path for path in self.requests if path != "/robots.txt"]


def _handler_for(
    pages: Mapping[str, Page | Redirect | Generated], site: SiteURL
) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            path = self.path
            with lock:
                site.requests.append(path)
                site.user_agents.append(self.headers.get("User-Agent", ""))
                site.request_times.append(time.monotonic())
            found = pages.get(path) or pages.get(urlsplit(path).path)
            if found is None:
                found = next(
                    (
                        g
                        for prefix, g in pages.items()
                        if isinstance(g, Generated) and path.startswith(prefix)
                    ),
                    None,
                )
            spec = found.render(path) if isinstance(found, Generated) else found
            if spec is None:
                spec = Page(b"<html><body><h1>404 Not Found</h1></body></html>", status=404)
            if isinstance(spec, Redirect):
                self.send_response(spec.status)
                self.send_header("Location", spec.location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if spec.delay:
                time.sleep(spec.delay)
            try:
                self.send_response(spec.status)
                if spec.content_type is not None:
                    self.send_header("Content-Type", spec.content_type)
                for name, value in spec.headers.items():
                    self.send_header(name, value)
                if spec.chunked or spec.drip:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self._send_chunked(spec)
                    return
                self.send_header("Content-Length", str(len(spec.body)))
                self.end_headers()
                self.wfile.write(spec.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def _send_chunked(self, spec: Page) -> None:
            size = 1 if spec.drip else 64 * 1024
            for start in range(0, len(spec.body), size):
                piece = spec.body[start : start + size]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                if spec.drip:
                    self.wfile.flush()
                    time.sleep(spec.drip)
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep test output clean

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)  # type: ignore[arg-type]
        # a client that hangs up (timeout and size-cap tests) is expected, not an error


@contextmanager
def serve_site(pages: Mapping[str, Page | Redirect | Generated]) -> Iterator[SiteURL]:
    """Serve ``pages`` on a free port of 127.0.0.1 for the duration of the ``with`` block."""
    server = _QuietServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    site = SiteURL(f"http://127.0.0.1:{server.server_address[1]}")
    server.RequestHandlerClass = _handler_for(dict(pages), site)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def free_port() -> int:
    """A loopback port nothing listens on now (for a server a test starts). A port is bound then released;
    another process could grab it in between, which is unlikely enough for tests."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def closed_port_url() -> str:
    """A loopback URL on which nothing listens (connection refused)."""
    return f"http://127.0.0.1:{free_port()}/"


@lru_cache(maxsize=1)
def _s2t() -> object:
    import opencc

    return opencc.OpenCC("s2t")


def to_traditional(text: str) -> str:
    """Simplified -> Traditional Chinese (OpenCC ``s2t``)."""
    return _s2t().convert(text)  # type: ignore[attr-defined, no-any-return]


def as_served(text: str, encoding: str) -> str:
    """``text`` as a page in ``encoding`` shows it (Traditional for Big5)."""
    return to_traditional(text) if encoding.lower().startswith("big5") else text


_NAV = (
    '<div class="nav"><ul><li><a href="/">首页</a></li><li><a href="/xuanhuan/">玄幻小说</a></li>'
    '<li><a href="/xiuzhen/">修真小说</a></li><li><a href="/dushi/">都市小说</a></li>'
    '<li><a href="/lishi/">历史小说</a></li><li><a href="/paihang/">排行榜单</a></li></ul></div>'
)
_CHAPTER_BAR = (
    '<div class="bottem1"><a href="/book/1/prev.html">上一章</a> &larr; <a href="/book/1/">章节目录</a>'
    ' &rarr; <a href="/book/1/next.html">下一章</a> <a href="/bookcase/">加入书签</a></div>'
)
_FOOTER = (
    '<div class="footer"><p>本站所有小说为转载作品，'
    "所有章节均由网友上传，转载至本站只是为了宣传本书让更多读者欣赏。</p>"
    "<p>Copyright &copy; 2024 书友小说网 All Rights Reserved.</p></div>"
)
_AD = '<div class="gg"><a href="/app/">下载客户端，免费看全本小说，无广告更流畅！</a></div>'
_PROMO_LINE = "天才一秒记住本站地址：www.shuyou-example.com。手机版阅读网址：m.shuyou-example.com"


def _paragraphs_br(paragraphs: Sequence[str]) -> str:
    return "<br /><br />".join("&nbsp;&nbsp;&nbsp;&nbsp;" + html_lib.escape(p) for p in paragraphs)


def _biquge(title: str, paragraphs: Sequence[str]) -> str:
    return (
        f"{_NAV}<div class='content_read'><div class='box_con'>"
        "<div class='con_top'><a href='/'>书友小说网</a> &gt; <a href='/book/1/'>某书</a> &gt; "
        f"{html_lib.escape(title)}</div>"
        f"<div class='bookname'><h1>{html_lib.escape(title)}</h1>{_CHAPTER_BAR}</div>"
        f"<div id='content'>{_PROMO_LINE}<br /><br />{_paragraphs_br(paragraphs)}</div>"
        f"{_CHAPTER_BAR}</div></div>{_FOOTER}"
    )


def _p_paragraphs(title: str, paragraphs: Sequence[str]) -> str:
    body = "".join(f"<p>\u3000\u3000{html_lib.escape(p)}</p>" for p in paragraphs)
    return (
        "<header class='site-header'><a href='/'>首页</a> | <a href='/top/'>排行</a> | <a "
        "href='/full/'>全本</a></header>"
        f"{_NAV}<div class='reader'><h1 class='chapter-title'>{html_lib.escape(title)}</h1>"
        f"<div class='read-content'>{body}</div>{_CHAPTER_BAR}</div>"
        f"<ul class='related'><li><a href='/b/2/'>推荐：另一本书</a></li>"
        f"<li><a href='/b/3/'>推荐：第三本书</a></li></ul>{_FOOTER}"
    )


def _split_divs(title: str, paragraphs: Sequence[str]) -> str:
    half = max(1, len(paragraphs) // 2)
    first = "<br>".join(html_lib.escape(p) for p in paragraphs[:half])
    second = "<br>".join(html_lib.escape(p) for p in paragraphs[half:])
    return (
        f"{_NAV}<table width='100%'><tr><td><h2>{html_lib.escape(title)}</h2></td></tr></table>"
        f"<div id='main'><div class='txt'>{first}</div>{_AD}<div class='txt'>{second}</div></div>"
        f"{_CHAPTER_BAR}{_FOOTER}"
    )


def _ad_inside(title: str, paragraphs: Sequence[str]) -> str:
    half = max(1, len(paragraphs) // 2)
    lines = [f"\u3000\u3000{html_lib.escape(p)}" for p in paragraphs]
    return (
        f"{_NAV}<div class='bookname'><h1>{html_lib.escape(title)}</h1></div>"
        f"<div id='chaptercontent'>{'<br/>'.join(lines[:half])}<br/>{_AD}"
        f"<script>document.write('<a href=\"/ad\">ad</a>');</script><style>.x{{color:red}}</style>"
        f"<!-- 注释不应出现 -->{'<br/>'.join(lines[half:])}</div>{_FOOTER}"
    )


def _html5_article(title: str, paragraphs: Sequence[str]) -> str:
    body = "\n".join(f"<p>{html_lib.escape(p)}</p>" for p in paragraphs)
    return (
        f"<nav><a href='/'>首页</a><a href='/list/'>书库</a><a href='/rank/'>排行</a></nav>"
        f"<main><article><h1>{html_lib.escape(title)}</h1>{body}</article>"
        "<aside><h3>热门推荐</h3><ul><li><a href='/b/9/'>热门书一</a></li><li><a "
        "href='/b/8/'>热门书二</a></li></ul></aside></main>"
        f"<footer>Copyright 2024 示例书站 备案号：京ICP备00000000号</footer>"
    )


TEMPLATES = ("biquge", "p-paragraphs", "split-divs", "ad-inside", "html5-article")
_RENDERERS = {
    "biquge": _biquge,
    "p-paragraphs": _p_paragraphs,
    "split-divs": _split_divs,
    "ad-inside": _ad_inside,
    "html5-article": _html5_article,
}


def render_chapter(
    title: str,
    paragraphs: Sequence[str],
    *,
    template: str = "biquge",
    encoding: str = "utf-8",
    meta_charset: bool = True,
    site_name: str = "书友小说网",
) -> bytes:
    """A whole chapter page as bytes in ``encoding`` (Big5 pages converted to Traditional first).

    ``meta_charset`` puts ``<meta charset>`` in the head; whether the HTTP header declares it is up to
    :func:`chapter_page`.
    """
    if template not in _RENDERERS:
        raise ValueError(f"unknown template {template!r}; choose one of {', '.join(TEMPLATES)}")
    body = _RENDERERS[template](title, paragraphs)
    meta = (
        f'<meta http-equiv="Content-Type" content="text/html; charset={encoding}" />' if meta_charset else ""
    )
    document = (
        f"<!DOCTYPE html><html><head>{meta}<title>{html_lib.escape(title)}_某书_{site_name}</title>"
        f"<script src='/js/common.js'></script><style>body{{font-size:16px}}</style></head>"
        f"<body>{body}</body></html>"
    )
    # OpenCC's s2t may give a character Big5 lacks (裏): send it as a character reference, as servers do.
    return as_served(document, encoding).encode(encoding, errors="xmlcharrefreplace")


def chapter_page(
    title: str,
    paragraphs: Sequence[str],
    *,
    template: str = "biquge",
    encoding: str = "utf-8",
    header_charset: bool = True,
    meta_charset: bool = True,
) -> Page:
    """A :class:`Page` for :func:`render_chapter`, its charset declared in the HTTP header or not."""
    body = render_chapter(title, paragraphs, template=template, encoding=encoding, meta_charset=meta_charset)
    content_type = f"text/html; charset={encoding}" if header_charset else "text/html"
    return Page(body, content_type=content_type)
