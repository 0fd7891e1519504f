"""A live pirate web on loopback for ``benchmarks.monitoring.freshness``: sites whose copies appear,
disappear, come back and move while a monitor watches them, with the ground truth of when each copy was up.

Each site is a ``ThreadingHTTPServer`` on its own port of 127.0.0.1: a home page linking to the tables of
contents (目录) of its books, and chapter pages in a pirate-style template (navigation, ads, 上一章 / 下一章 /
目录 links, footer). Book 1 holds chapters of the registered work(s), book 2 innocent chapters (texts that are
not registered, so precision means something), book 3 a second registered work when there is one.

Site kinds (:data:`KINDS`):

- ``plain``: a pirate site; ``validators=True`` sends ``ETag`` / ``Last-Modified`` and answers conditional
  requests with 304, ``False`` sends neither;
- ``mirror``: the same chapters as the first plain site, on the same timeline, in another template and URL
  scheme;
- ``ratelimited``: more than :data:`RATE_LIMIT` requests within one second get ``429`` with
  ``Retry-After: 5``, and every request inside those 5 seconds gets 429 too and is counted
  (``inside_window``): a polite client sends none;
- ``script``: the chapter page's HTML has no text; a script fills it from a JSON endpoint
  (``testbed/jspages.py``). A removal there is a real one: the endpoint then gives the removal notice,
  and the page's HTML does not change;
- ``mover``: chapters move to new URLs during the run, half with ``301`` from the old URL, half with the old
  URL answering 404 and the table of contents linking the new one.

The timeline is drawn from a seeded ``random.Random`` (the same seed gives the same web): times are seconds
from the start of the clock (:meth:`LiveWeb.start`); before it, everything is as at time 0. A copy's states:
``absent`` (not yet published: 404, not listed), ``up``, ``gone`` (404, not listed), ``notice`` (200, listed,
the chapter replaced by "该章节已被删除"), ``moved301`` / ``moved404`` (mover site: served at its new URL).

Every request is logged (:class:`Request`: wall time, site, path, status, inside a Retry-After window or not).
"""

from __future__ import annotations

import hashlib
import html
import itertools
import random
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from testbed.jspages import json_chapter, json_endpoint

__all__ = [
    "KINDS",
    "NOTICE",
    "RATE_LIMIT",
    "RETRY_AFTER",
    "Copy",
    "LiveWeb",
    "Request",
    "Response",
    "Site",
    "Text",
    "build_live_web",
]

KINDS = ("plain", "mirror", "ratelimited", "script", "mover")
NOTICE = ("该章节已被删除", "因版权方要求，本章节已被删除，请阅读本站其他作品。")
RATE_LIMIT = 2
"""Requests a rate-limited site accepts within one second; one more opens a Retry-After window."""
RETRY_AFTER = 5
UP_STATES = ("up", "moved301", "moved404")
LISTED_STATES = ("up", "notice", "moved301", "moved404")


@dataclass(frozen=True)
class Text:
    """A chapter to publish: ``key`` is ``<work>:<number>`` for a registered chapter, ``innocent:<n>``
    otherwise."""

    key: str
    title: str
    paragraphs: tuple[str, ...]

    @property
    def registered(self) -> bool:
        return not self.key.startswith("innocent:")


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    at: float  # wall clock (time.time())
    site: str
    path: str
    status: int
    inside_window: bool


@dataclass
class Copy:
    """One chapter published on one site, with its timeline of ``(seconds, state)`` events (sorted)."""

    site: str
    book: int
    number: int
    text: Text
    path: str
    new_path: str = ""  # mover site: where the chapter moves
    endpoint: str = ""  # script site: the JSON the page's script reads
    events: list[tuple[float, str]] = field(default_factory=list)

    def state(self, t: float) -> str:
        current = "absent"
        for at, state in self.events:
            if at > t:
                break
            current = state
        return current

    def changed_at(self, t: float) -> float:
        """The time of the last event at or before ``t`` (0 when none)."""
        return max((at for at, _ in self.events if at <= t), default=0.0)

    def current_path(self, t: float) -> str:
        return self.new_path if self.state(t) in ("moved301", "moved404") else self.path

    def intervals(self, end: float, states: Sequence[str]) -> list[tuple[float, float]]:
        """The intervals of ``[0, end)`` in which the copy's state is one of ``states``."""
        out: list[tuple[float, float]] = []
        bounds = [*self.events, (end, "")]
        for (at, state), (following, _) in itertools.pairwise(bounds):
            if state in states and at < end:
                start, stop = at, min(following, end)
                if out and out[-1][1] == start:
                    out[-1] = (out[-1][0], stop)
                elif stop > start:
                    out.append((start, stop))
        return out

    def url_intervals(self, path: str, end: float) -> list[tuple[float, float]]:
        """When ``path`` led to the chapter: the old path while up and while it redirects (301) to the new
        one, the new path once moved."""
        if path == self.path:
            return self.intervals(end, ("up", "moved301"))
        if path == self.new_path:
            return self.intervals(end, ("moved301", "moved404"))
        return []

    def removals(self) -> list[dict[str, Any]]:
        """Every time the copy stopped being readable at a URL: ``up`` to ``gone`` / ``notice`` (at the old
        path), ``up`` to ``moved404`` (the old path answers 404); with the time it came back, if it did."""
        out: list[dict[str, Any]] = []
        previous = "absent"
        for index, (at, state) in enumerate(self.events):
            if previous == "up" and state in ("gone", "notice", "moved404"):
                back = next((t for t, s in self.events[index + 1 :] if s == "up"), None)
                out.append({"path": self.path, "at": at, "kind": state, "back": back})
            previous = state
        return out


def _fingerprint(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:16] + '"'


_AD = '<div class="ad"><a href="/app/">下载APP，免费看全本小说，无弹窗广告！</a></div>'


def _bar(prev: str, toc: str, following: str) -> str:
    previous = f'<a href="{prev}">上一章</a>' if prev else "<span>没有了</span>"
    after = f'<a href="{following}">下一章</a>' if following else "<span>没有了</span>"
    return f'<div class="page_chapter">{previous} &larr; <a href="{toc}">目录</a> &rarr; {after}</div>'


def render_page(
    template: str, site_name: str, title: str, paragraphs: Sequence[str], prev: str, toc: str, following: str
) -> bytes:
    """A chapter page in one of three pirate-style templates (``box``, ``article``, ``split``)."""
    t = html.escape(title)
    bar = _bar(prev, toc, following)
    nav = f'<div class="nav"><a href="/">{html.escape(site_name)}首页</a> <a href="{toc}">章节目录</a></div>'
    footer = f'<div class="footer">本站小说均由网友上传，如有侵权请联系删除。© {html.escape(site_name)}</div>'
    if template == "box":
        lines = "<br /><br />".join("&nbsp;&nbsp;&nbsp;&nbsp;" + html.escape(p) for p in paragraphs)
        body = f"{nav}<div class='bookname'><h1>{t}</h1>{bar}</div>{_AD}<div id='content'>{lines}</div>{bar}"
    elif template == "article":
        lines = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
        body = f"<header>{nav}</header><main><article><h1>{t}</h1>{lines}</article>{bar}</main>{_AD}"
    elif template == "split":
        half = max(1, len(paragraphs) // 2)
        first = "<br>".join(html.escape(p) for p in paragraphs[:half])
        second = "<br>".join(html.escape(p) for p in paragraphs[half:])
        body = (
            f"{nav}<h2>{t}</h2>{bar}<div class='txt'>{first}</div>{_AD}<div class='txt'>{second}</div>{bar}"
        )
    else:
        raise ValueError(f"unknown template {template!r}")
    document = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{t}_{html.escape(site_name)}</title></head>"
        f"<body>{body}{footer}</body></html>"
    )
    return document.encode("utf-8")


class Site:
    """One site of the live web: its copies, its answers at a time, its request log."""

    def __init__(
        self,
        web: LiveWeb,
        name: str,
        kind: str,
        *,
        template: str = "box",
        validators: bool = False,
        toc: str = "/book/{b}/",
        chapter: str = "/book/{b}/{n}.html",
        moved: str = "",
        endpoint: str = "",
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown site kind {kind!r}")
        self.web = web
        self.name = name
        self.kind = kind
        self.template = template
        self.validators = validators
        self.toc_pattern = toc
        self.chapter_pattern = chapter
        self.moved_pattern = moved
        self.endpoint_pattern = endpoint
        self.copies: list[Copy] = []
        self.books: dict[int, str] = {}  # book number -> its title
        self.base = ""  # http://127.0.0.1:<port> once served
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self._recent: deque[float] = deque()
        self._window_until = 0.0

    @property
    def key(self) -> str:
        return self.base.split("://", 1)[1]

    def add(self, book: int, number: int, text: Text, events: list[tuple[float, str]]) -> Copy:
        copy = Copy(
            self.name,
            book,
            number,
            text,
            self.chapter_pattern.format(b=book, n=number),
            self.moved_pattern.format(b=book, n=number) if self.moved_pattern else "",
            self.endpoint_pattern.format(b=book, n=number) if self.endpoint_pattern else "",
            sorted(events),
        )
        self.copies.append(copy)
        return copy

    def toc_path(self, book: int) -> str:
        return self.toc_pattern.format(b=book)

    # --- answering

    def respond(self, raw_path: str, headers: Mapping[str, str], now: float) -> Response:
        """The answer to a GET of ``raw_path`` at wall time ``now``, logged."""
        path = urlsplit(raw_path).path
        inside = False
        limited: Response | None = None
        with self.lock:
            if self.kind == "ratelimited":
                if now < self._window_until:
                    inside = True
                    left = max(1, int(self._window_until - now + 0.999))
                    limited = Response(429, b"Too Many Requests", {"Retry-After": str(left)})
                else:
                    while self._recent and self._recent[0] <= now - 1.0:
                        self._recent.popleft()
                    self._recent.append(now)
                    if len(self._recent) > RATE_LIMIT:
                        self._window_until = now + RETRY_AFTER
                        self._recent.clear()
                        limited = Response(429, b"Too Many Requests", {"Retry-After": str(RETRY_AFTER)})
        response = limited or self._answer(path, headers, self.web.clock(now))
        with self.lock:
            self.requests.append(Request(now, self.name, path, response.status, inside))
        return response

    def _answer(self, path: str, headers: Mapping[str, str], t: float) -> Response:
        if path == "/":
            links = "".join(
                f'<li><a href="{self.toc_path(b)}">{html.escape(title)}</a></li>'
                for b, title in self.books.items()
            )
            markup = (
                f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{self.name} 小说网</title></head>"
                f"<body><h1>{self.name} 小说网</h1>{_AD}<ul class='books'>{links}</ul></body></html>"
            )
            changed = max((c.changed_at(t) for c in self.copies), default=0.0)
            return self._page(markup.encode("utf-8"), changed, headers)
        for book, title in self.books.items():
            if path == self.toc_path(book):
                return self._toc(book, title, headers, t)
        for copy in self.copies:
            state = copy.state(t)
            if path == copy.path:
                if state == "moved301":
                    return Response(301, b"", {"Location": copy.new_path})
                if state in ("up", "notice"):
                    return self._chapter(copy, state, headers, t)
                return Response(404, b"<html><body><h1>404 Not Found</h1></body></html>")
            if copy.new_path and path == copy.new_path and state in ("moved301", "moved404"):
                return self._chapter(copy, "up", headers, t)
            if copy.endpoint and path == copy.endpoint and state in ("up", "notice"):
                paragraphs = copy.text.paragraphs if state == "up" else NOTICE
                page = json_endpoint(paragraphs)
                return Response(200, page.body, {"Content-Type": str(page.content_type)})
        return Response(404, b"<html><body><h1>404 Not Found</h1></body></html>")

    def _listed(self, book: int, t: float) -> list[Copy]:
        return sorted(
            (c for c in self.copies if c.book == book and c.state(t) in LISTED_STATES), key=lambda c: c.number
        )

    def _toc(self, book: int, title: str, headers: Mapping[str, str], t: float) -> Response:
        listed = self._listed(book, t)
        links = "".join(
            f'<dd><a href="{c.current_path(t)}">{html.escape(c.text.title)}</a></dd>' for c in listed
        )
        markup = (
            f"<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}目录_{self.name}</title></head><body>"
            f"<div class='nav'><a href='/'>首页</a></div><h1>{html.escape(title)}</h1>"
            f"<div id='list'><dl><dt>《{html.escape(title)}》正文</dt>{links}</dl></div>{_AD}</body></html>"
        )
        changed = max((c.changed_at(t) for c in self.copies if c.book == book), default=0.0)
        return self._page(markup.encode("utf-8"), changed, headers)

    def _chapter(self, copy: Copy, state: str, headers: Mapping[str, str], t: float) -> Response:
        if self.kind == "script":
            # the HTML never changes: the script fills the text, or the removal notice
            page = json_chapter(copy.text.title, copy.endpoint)
            return Response(200, page.body, {"Content-Type": "text/html"})
        listed = self._listed(copy.book, t)
        index = next((i for i, c in enumerate(listed) if c is copy), -1)
        prev = listed[index - 1].current_path(t) if index > 0 else ""
        following = listed[index + 1].current_path(t) if 0 <= index < len(listed) - 1 else ""
        paragraphs = copy.text.paragraphs if state == "up" else NOTICE
        body = render_page(
            self.template, self.name, copy.text.title, paragraphs, prev, self.toc_path(copy.book), following
        )
        return self._page(body, copy.changed_at(t), headers)

    def _page(self, body: bytes, changed: float, headers: Mapping[str, str]) -> Response:
        out = {"Content-Type": "text/html; charset=utf-8"}
        if not self.validators:
            return Response(200, body, out)
        etag = _fingerprint(body)
        modified = self.web.wall(changed)
        validators = {"ETag": etag, "Last-Modified": formatdate(modified, usegmt=True)}
        if "if-none-match" in headers:
            if etag in [tag.strip() for tag in headers["if-none-match"].split(",")]:
                return Response(304, b"", validators)
        elif headers.get("if-modified-since"):
            try:
                if parsedate_to_datetime(headers["if-modified-since"]).timestamp() >= int(modified):
                    return Response(304, b"", validators)
            except (TypeError, ValueError):
                pass
        return Response(200, body, {**out, **validators})


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            headers = {name.lower(): value for name, value in self.headers.items()}
            response = site.respond(self.path, headers, time.time())
            try:
                self.send_response(response.status)
                for name, value in response.headers.items():
                    self.send_header(name, value)
                if response.status != 304:
                    self.send_header("Content-Length", str(len(response.body)))
                self.end_headers()
                if response.status != 304:
                    self.wfile.write(response.body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client hanging up is not the benchmark's business


class LiveWeb:
    """The sites, their clock and their servers."""

    def __init__(self, duration: float) -> None:
        self.duration = duration
        self.sites: dict[str, Site] = {}
        self.created = time.time()
        self.t0: float | None = None
        self._servers: list[tuple[_Server, threading.Thread]] = []

    def clock(self, now: float) -> float:
        """Seconds of the timeline at wall time ``now`` (0 before the clock starts)."""
        return 0.0 if self.t0 is None else max(0.0, now - self.t0)

    def wall(self, t: float) -> float:
        """The wall time of timeline second ``t`` (the web's creation stands for 0 before the start)."""
        return (self.created if self.t0 is None else self.t0) + t

    def start(self, t0: float | None = None) -> None:
        self.t0 = time.time() if t0 is None else t0

    def serve(self) -> None:
        """Serve every site on a free port of 127.0.0.1 (daemon threads)."""
        for site in self.sites.values():
            server = _Server(("127.0.0.1", 0), _handler(site))
            site.base = f"http://127.0.0.1:{server.server_address[1]}"
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            thread.start()
            self._servers.append((server, thread))

    def stop(self) -> None:
        for server, thread in self._servers:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
        self._servers.clear()

    def requests(self) -> list[Request]:
        out: list[Request] = []
        for site in self.sites.values():
            with site.lock:
                out.extend(site.requests)
        return sorted(out, key=lambda r: r.at)

    def copies(self) -> list[Copy]:
        return [c for site in self.sites.values() for c in site.copies]

    def site_of(self, netloc: str) -> Site | None:
        return next((s for s in self.sites.values() if s.key == netloc), None)

    def truth(self) -> list[dict[str, Any]]:
        """Per copy: site, key, paths, events and the intervals it was up (seconds of the timeline)."""
        return [
            {
                "site": c.site,
                "key": c.text.key,
                "path": c.path,
                "new_path": c.new_path,
                "events": c.events,
                "up": c.intervals(self.duration, UP_STATES),
            }
            for c in self.copies()
        ]


@dataclass(frozen=True)
class SiteSpec:
    name: str
    kind: str
    template: str
    validators: bool
    toc: str
    chapter: str
    moved: str = ""
    endpoint: str = ""


SITES = (
    SiteSpec("plain-a", "plain", "box", True, "/book/{b}/", "/book/{b}/{n}.html"),
    SiteSpec("plain-b", "plain", "article", False, "/read/{b}/", "/read/{b}/{n}/"),
    SiteSpec("mirror-a", "mirror", "split", False, "/m/{b}/index.html", "/m/{b}/{n}.html"),
    SiteSpec("limited", "ratelimited", "article", True, "/txt/{b}/", "/txt/{b}/{n}.htm"),
    SiteSpec("script", "script", "box", False, "/js/{b}/", "/js/{b}/{n}.html", endpoint="/api/{b}/{n}.json"),
    SiteSpec(
        "mover", "mover", "split", False, "/book/{b}/", "/book/{b}/{n}.html", moved="/b{b}/c{n}-v2.html"
    ),
)
"""The sites, in order; the mirror copies the first site."""


def _timeline(
    rng: random.Random, kind: str, duration: float, schedule: float, period: float, changes: list[str]
) -> list[tuple[float, str]]:
    """Events of a registered copy. Removals and moves happen late enough after the copy appeared for a
    crawl to have found it (a schedule plus 40 s), and early enough for two re-check periods to pass before
    the end; a copy that comes back does so a re-check period (and 30 s) after its removal at the earliest.
    ``changes`` holds the site's removals and moves so far: their kinds alternate, so that a site has both
    kinds as soon as it has two (the script site only ever shows the notice)."""
    appear = 0.0 if rng.random() < 0.5 else round(rng.uniform(0.1 * duration, 0.55 * duration), 1)
    events = [(appear, "up")]
    earliest, latest = appear + schedule + 40, duration - 2 * period - 30
    if earliest > latest:
        return events
    if kind == "mover":
        if rng.random() < 0.5:
            how = "moved301" if len(changes) % 2 == 0 else "moved404"
            changes.append(how)
            events.append((round(rng.uniform(earliest, latest), 1), how))
        return events
    if rng.random() < 0.45:
        at = round(rng.uniform(earliest, latest), 1)
        how = "notice" if kind == "script" or len(changes) % 2 else "gone"
        changes.append(how)
        events.append((at, how))
        back_earliest, back_latest = at + period + 30, duration - period - 20
        if back_earliest <= back_latest and rng.random() < 0.5:
            events.append((round(rng.uniform(back_earliest, back_latest), 1), "up"))
    return events


def build_live_web(
    works: Mapping[str, Sequence[Text]],
    innocent: Sequence[Text],
    *,
    duration: float,
    schedule: float,
    period: float,
    per_site: int,
    innocent_per_site: int,
    seed: int = 19,
) -> LiveWeb:
    """The live web of :data:`SITES` (not served yet: :meth:`LiveWeb.serve`).

    ``works``: registered chapters by work title (book 1 the first work, book 3 the second); ``innocent``:
    chapters that are not registered (book 2). Each site but the mirror publishes ``per_site`` registered
    chapters (drawn at random over the works) and ``innocent_per_site`` innocent ones; ``schedule`` (seconds
    between a site's crawls) and ``period`` (seconds between two re-checks of a young copy) bound when things
    may happen (:func:`_timeline`). The same arguments give the same web."""
    web = LiveWeb(duration)
    titles = list(works)
    pool = [
        (book, text)
        for index, title in enumerate(titles)
        for book in (1 if index == 0 else 3,)
        for text in works[title]
    ]
    for spec in SITES:
        site = Site(
            web,
            spec.name,
            spec.kind,
            template=spec.template,
            validators=spec.validators,
            toc=spec.toc,
            chapter=spec.chapter,
            moved=spec.moved,
            endpoint=spec.endpoint,
        )
        for index, title in enumerate(titles):
            site.books[1 if index == 0 else 3] = title
        if innocent:
            site.books[2] = "江湖旧事"
        web.sites[spec.name] = site
        if spec.kind == "mirror":
            for original in web.sites[SITES[0].name].copies:
                site.add(original.book, original.number, original.text, list(original.events))
            continue
        rng = random.Random(f"{seed}-{spec.name}")
        changes: list[str] = []
        chosen = sorted(rng.sample(range(len(pool)), min(per_site, len(pool))))
        for index in chosen:
            book, text = pool[index]
            number = int(text.key.rsplit(":", 1)[1])
            site.add(book, number, text, _timeline(rng, spec.kind, duration, schedule, period, changes))
        for number, text in enumerate(rng.sample(list(innocent), min(innocent_per_site, len(innocent))), 1):
            site.add(2, number, text, [(0.0, "up")])
    return web
