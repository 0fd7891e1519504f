"""The one spider: request pages breadth first within the start sites, parse each with pure functions.

Parsing runs in a thread, :data:`PARSE_THREADS` pages at a time, never on Twisted's event loop: a page of
200,000 links or 9 MB of text takes seconds to parse, and the loop must stay free to answer a Ctrl+C or
SIGTERM and to keep other downloads moving. At most ``max_links`` links are taken from a page.

A managed site's crawl (:mod:`jobs.site_crawl`: its crawl job's trigger) is incremental: it reads the
pages it knows once when it starts (:mod:`crawler.known`) and does not follow links to known pages that
cannot have anything new (chapter pages stored already, without a due re-check): entry pages, tables of
contents and links not seen before are what a re-crawl fetches. ``fptrack crawl`` of a URL fetches everything
it meets, as asked."""

from __future__ import annotations

import hashlib
import queue
import re
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, ClassVar

import scrapy
from scrapy import signals
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.http import HtmlResponse, Request, Response
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred, DeferredSemaphore
from twisted.python.failure import Failure

from fptrack.crawler.images import CHAPTER_IMAGE, IMAGE_NOTE, OcrPlan, chapter_image_urls, needs_ocr
from fptrack.crawler.known import KnownPages, load_known_pages
from fptrack.crawler.leads import FOLLOWED_PLATFORMS, SHARE_MAX_STEPS, SHARE_WALK, share_download_step
from fptrack.crawler.links import links_to_follow, site_of
from fptrack.crawler.pages import CrawledPage, CrawlFailure
from fptrack.crawler.parse import ParsedResponse, describe_failure, parse_response
from fptrack.crawler.pipelines import HOOKS_SETTING
from fptrack.crawler.render import RENDER_DIRECT, RENDER_META, RenderPlan, rendered_response, take_document
from fptrack.crawler.resume import CrawlState
from fptrack.fingerprint.containers import ContainerLimits
from fptrack.fingerprint.ocr import read_images, tesseract_path
from fptrack.storage.match_life import IMAGES_UNREAD_NOTE

__all__ = ["PARSE_THREADS", "RENDER_ENOUGH", "RENDER_NEEDED", "PageSpider"]

PARSE_THREADS = 2  # pages parsed at once (each holds its tree in memory: bounded, whatever the concurrency)
BYTES_RECEIVED = "fptrack_bytes"  # request meta key: body bytes received so far (crawler.middlewares)

REQUESTED_URL = "fptrack_url"  # request meta key: the URL as first requested (kept through redirects)
START_PAGE = "fptrack_start"  # request meta key: True on start requests (kept through redirects)
# counters per site key: pages (listings aside) that needed the browser for their text, and pages whose static
# text was enough; a managed site's crawl stores its verdict from them (jobs.site_crawl, sites.render_direct)
RENDER_NEEDED = "fptrack/needs_browser/yes/"
RENDER_ENOUGH = "fptrack/needs_browser/no/"
PAGE_DEPTH = (
    "fptrack_depth"  # request meta key: link depth of the page (Scrapy's "depth" counts a render as a hop)
)


class PageSpider(scrapy.Spider):
    """Fetch ``start_urls`` (depth 0) and the same-site links of every HTML page down to ``depth``;
    emit one :class:`CrawledPage` per response, at most ``max_pages``, and a :class:`CrawlFailure` per
    request that got no response.

    In a distributed crawl (:mod:`crawler.distributed`) ``take_page`` draws on the budget shared by all its
    processes, and only the first process seeds the start URLs (``seed``); the others take requests from the
    shared frontier.

    With ``state`` (a site crawl, :mod:`crawler.resume`) every request is recorded on disk before the page
    that links to it is handed on; a resumed crawl requests what the earlier runs left pending, and its budget
    counts the pages they stored."""

    name = "fptrack-pages"
    # Error pages are pages too: they reach parse() instead of being filtered (3xx stay with the
    # redirect middleware, which ignores statuses listed here; 304 is no redirect: the answer to a conditional
    # request, crawler/conditional.py).
    handle_httpstatus_list: ClassVar[list[int]] = [304, *range(400, 600)]  # 304: a conditional re-crawl

    def __init__(
        self,
        *,
        start_urls: Sequence[str],
        depth: int,
        max_pages: int,
        extra_sites: Sequence[str] = (),
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        max_links: int | None = None,
        max_chars: int | None = None,
        max_bytes: int | None = None,
        file_limits: ContainerLimits | None = None,
        max_file_chars: int | None = None,
        take_page: Callable[[], bool] | None = None,
        seed: bool = True,
        render: RenderPlan | None = None,
        state: CrawlState | None = None,
        ocr: OcrPlan | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.start_urls = list(start_urls)
        self.depth = depth
        self.max_pages = max_pages
        # Grows when a start URL redirects to another site (example.com -> www.example.com); see
        # crawler.middlewares.StayOnStartSites, which reads and extends this set.
        self.allowed_sites: set[str] = {site_of(url) for url in self.start_urls} | set(extra_sites)
        self.include = [re.compile(pattern) for pattern in include]
        self.exclude = [re.compile(pattern) for pattern in exclude]
        self.pages_emitted = 0
        self.max_links = max_links
        self.max_chars = max_chars
        self.max_bytes = max_bytes
        self.file_limits = file_limits
        self.max_file_chars = max_file_chars
        self._parsing: DeferredSemaphore | None = None  # made on first use, inside the running reactor
        self.take_page = take_page
        self.seed = seed
        self.pages_taken = 0  # pages drawn from max_pages (emitted, or waiting on the browser)
        self.render = render or RenderPlan()  # default: never render (a spider built outside run_crawl)
        self.state = state
        self.ocr = ocr or OcrPlan(max_images=0)  # default: never (a spider built outside run_crawl)
        self._ocr_unavailable = 0  # image pages kept as they are: no tesseract
        # a site crawl skips known pages that cannot have changed (crawler.known); loaded in start()
        self.known = KnownPages()
        self._skipped: set[str] = set()
        # known copies met as links, pages with links read with a 200: what tells a copy that left its listing
        self._met_copies: set[str] = set()
        self._listings_read = 0
        self._unlinked_asked = False
        # per host: pages the browser had to render (and gave text), pages whose static text was enough
        self._rendered_hosts: Counter[str] = Counter()
        self._static_hosts: Counter[str] = Counter()
        # hosts of public shares followed to their file (crawler.leads): requests to them leave the sites
        self.share_sites: set[str] = set()
        if state is not None and state.resumed:
            self.pages_taken = self.pages_emitted = len(state.done)  # the earlier runs spent these
            self.allowed_sites |= state.sites()

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> PageSpider:
        spider: PageSpider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.on_idle, signal=signals.spider_idle)
        return spider

    def on_idle(self) -> None:
        """When the crawl has nothing left to fetch: fetch the known copies it never met as a link (they left
        their listing: a chapter taken down is usually taken off its table of contents too), once, at the
        depth limit (a conditional request, no links followed); their answers are observed as any fetch's
        (crawler/store.py: a 404 is a first sighting of the removal). Not in a distributed crawl (each
        process meets part of the links), a resumed one, or one that read no page with links (the site did
        not answer: nothing left any listing)."""
        if self._unlinked_asked:
            return
        self._unlinked_asked = True
        if self.take_page is not None or (self.state is not None and self.state.resumed):
            return
        if not self._listings_read or self.pages_taken >= self.max_pages:
            return
        unmet = sorted(self.known.copies - self._met_copies)[: self.max_pages - self.pages_taken]
        if not unmet:
            return
        self._inc("fptrack/unlinked_copies_fetched", len(unmet))
        for url in unmet:
            request = self._request(url, depth=self.depth)
            request.meta["depth"] = self.depth
            self.crawler.engine.crawl(request)
        raise DontCloseSpider

    async def start(self) -> AsyncIterator[Request]:
        await self._load_known_pages()
        for request in self._start_requests():
            yield request

    async def _load_known_pages(self) -> None:
        """Read the pages this site crawl knows (in a thread: the reactor stays free), once. A crawl that
        cannot read them fetches everything, as a first crawl does."""
        crawler = getattr(self, "crawler", None)
        hooks = crawler.settings.get(HOOKS_SETTING) if crawler is not None else None
        store = getattr(hooks, "store", None)
        sessions, job_id = getattr(store, "sessions", None), getattr(store, "job_id", None)
        if sessions is None or job_id is None:
            return  # not stored, or no job to tell a site's crawl by: every page is fetched
        from twisted.internet.threads import deferToThread

        sites = set(self.allowed_sites)
        try:
            known: KnownPages = await maybe_deferred_to_future(
                deferToThread(load_known_pages, sessions, sites, datetime.now(UTC), job_id=job_id)
            )
        except Exception as error:  # noqa: BLE001 - a slower crawl, not a failed one
            self.logger.warning("cannot read the pages this crawl knows (%s); fetching every page", error)
            return
        self.known = replace(known, settled=known.settled - set(self.start_urls))
        self._inc("fptrack/known_pages", known.total)

    def start_requests(self) -> Iterator[Request]:  # Scrapy < 2.13
        yield from self._start_requests()

    def _start_requests(self) -> Iterator[Request]:
        if not self.seed:
            return
        if self.state is not None and self.state.resumed:
            if self.take_page is None and self.pages_taken >= self.max_pages:
                return  # the earlier runs spent the budget: nothing more to fetch
            pending = self.state.pending()
            self._inc("fptrack/resume/pages_before", len(self.state.done))
            self._inc("fptrack/resume/requests_pending", len(pending))
            for url, depth, start in pending:
                request = self._request(url, start=start, depth=depth)
                # Scrapy takes these for start requests (depth 0); give them the depth and the priority its
                # depth middleware gave them (DEPTH_PRIORITY = 1, crawler.runner), so the crawl stays breadth
                # first
                request.meta["depth"] = depth
                request.priority = -depth
                yield request
            return
        if self.state is not None:
            self.state.record(((url, 0) for url in self.start_urls), start=True)
        for url in self.start_urls:
            yield self._request(url, start=True)

    def _request(self, url: str, *, start: bool = False, depth: int = 0, plain: bool = False) -> Request:
        meta: dict[str, Any] = {REQUESTED_URL: url, START_PAGE: start, PAGE_DEPTH: depth}
        host = site_of(url)
        # an earlier crawl found the site built by scripts (sites.render_direct); its known listings were read
        # without the browser and still are
        learned = host in self.known.render_hosts and url not in self.known.listings
        rendered, static = self._rendered_hosts[host], self._static_hosts[host]
        if not plain and self.render.renders_directly(rendered, static, learned=learned):
            # a site built by scripts: to the browser at once, not fetched plainly first (crawler.render)
            meta.update(self.render.direct_meta())
            return Request(url, callback=self.parse, errback=self.on_render_error, meta=meta)
        return Request(url, callback=self.parse, errback=self.on_error, meta=meta, dont_filter=plain)

    async def parse(self, response: Response, **kwargs: Any) -> AsyncIterator[CrawledPage | Request]:
        # a render of a static page: its static parse took the page from the budget; a direct render had none
        direct = bool(response.meta.get(RENDER_DIRECT))
        rendered = direct or response.meta.get(RENDER_META) is not None
        if (direct or not rendered) and not self._take_page():
            self._inc("fptrack/responses_over_budget")
            return
        if direct:
            self._inc("fptrack/render/direct")  # pages fetched by the browser alone
        parsed = await self._parse_in_thread(response, rendered_response(response) if rendered else response)
        if parsed.page.note:
            self._inc("fptrack/pages_with_notes")
        if parsed.page.note.startswith("download: ") or parsed.page.error.startswith("download: "):
            self._inc("fptrack/downloads_read" if parsed.page.text else "fptrack/downloads_unreadable")
        wants = self.render.wants(response, parsed.page)
        static_enough = await self._static_enough(response) if direct else None
        self._count_rendering(
            response, parsed.page, rendered=rendered, wants=wants, static_enough=static_enough
        )
        if wants:
            # built by scripts (or render_js=yes): the browser's rendering is the page (its budget is taken
            # already)
            self._inc("fptrack/render/requested")
            meta = {key: response.meta[key] for key in (REQUESTED_URL, START_PAGE) if key in response.meta}
            meta[PAGE_DEPTH] = self._depth(response.meta)
            yield self.render.request(
                response, parsed, meta, callback=self.parse, errback=self.on_render_error
            )
            return
        if rendered:
            self._inc("fptrack/render/pages")
        images = await self._chapter_images(response, parsed)
        if images is None:  # drawn as images, no OCR engine: kept as it is, and it tells nothing of a removal
            note = "; ".join(part for part in (f"{IMAGE_NOTE}{IMAGES_UNREAD_NOTE}", parsed.page.note) if part)
            parsed = ParsedResponse(page=replace(parsed.page, note=note[:2000]), links=parsed.links)
        elif images:  # a chapter drawn as images: the page waits for them (on_chapter_image)
            yield self._image_request(_ImagePage(parsed, dict(response.meta), images), 0)
            return
        for item in self._emit(parsed, response.meta):
            yield item

    async def _chapter_images(self, response: Response, parsed: ParsedResponse) -> tuple[str, ...] | None:
        """The images on the crawl's sites that hold the page's chapter (crawler.images), when its text is
        too short to be one; () for an ordinary page (one length check) or when OCR is off; None when the
        page has such images and no OCR engine is installed."""
        page = parsed.page
        if (
            not self.ocr.active
            or page.status != 200
            or page.error
            or not needs_ocr(page.text, min_chars=self.ocr.min_chars)
        ):
            return ()
        if page.note.startswith("download: ") or not hasattr(response, "text"):
            return ()
        work = partial(chapter_image_urls, response.text, response.url, max_images=self.ocr.max_images)
        urls = (
            work()
            if getattr(self, "crawler", None) is None
            else await maybe_deferred_to_future(_PARSE_THREADS.run(work))
        )
        urls = tuple(url for url in urls if site_of(url) in self.allowed_sites)
        if urls and tesseract_path(self.ocr.limits.binary) is None:
            self._ocr_unavailable += 1
            if self._ocr_unavailable == 1:
                self._note(
                    f"OCR: {self.ocr.limits.binary} is not installed; pages whose text is drawn as "
                    "images are kept as they are (apt-get install tesseract-ocr tesseract-ocr-chi-sim "
                    "tesseract-ocr-chi-tra)"
                )
            self._inc("fptrack/ocr/unavailable")
            return None
        return urls

    def _image_request(self, work: _ImagePage, index: int) -> Request:
        # dont_filter: two pages may share an image, and a filtered request would lose its page
        return Request(
            work.urls[index],
            callback=self.on_chapter_image,
            errback=self.on_chapter_image_error,
            meta={CHAPTER_IMAGE: (work, index)},
            dont_filter=True,
            priority=1,
        )

    async def on_chapter_image(self, response: Response) -> AsyncIterator[CrawledPage | Request]:
        """One image of a chapter page arrived: fetch the next, or read them all and emit the page."""
        work, index = response.meta[CHAPTER_IMAGE]
        if response.status == 200 and response.body:
            work.images.append((work.urls[index], bytes(response.body)))
        else:
            work.problems.append(f"image {work.urls[index]}: HTTP {response.status}")
        async for item in self._next_image(work, index):
            yield item

    async def on_chapter_image_error(self, failure: Failure) -> AsyncIterator[CrawledPage | Request]:
        request = failure.request  # type: ignore[attr-defined]
        work, index = request.meta[CHAPTER_IMAGE]
        received = request.meta.get(BYTES_RECEIVED, 0)
        error = failure.value if failure.value is not None else RuntimeError("unknown error")
        reason = describe_failure(error, max_bytes=self.max_bytes, received=received)
        work.problems.append(f"image {work.urls[index]}: {reason}")
        async for item in self._next_image(work, index):
            yield item

    async def _next_image(self, work: _ImagePage, index: int) -> AsyncIterator[CrawledPage | Request]:
        if index + 1 < len(work.urls):
            yield self._image_request(work, index + 1)
            return
        read = partial(read_images, work.images, limits=self.ocr.limits)
        reading = (
            read()
            if getattr(self, "crawler", None) is None
            else await maybe_deferred_to_future(_PARSE_THREADS.run(read))
        )
        self._inc("fptrack/ocr/pages")
        self._inc("fptrack/ocr/images_read", reading.images_read)
        page = work.parsed.page
        problems = (*work.problems, *reading.problems)
        summary = f"{IMAGE_NOTE}{reading.images_read} of {len(work.urls)} image(s) read by OCR"
        if reading.sampled:  # stopped on purpose at FPTRACK_OCR_MAX_CHARS: the rest is the same chapter
            summary += f", their first {self.ocr.limits.max_chars} characters or so"
        if problems or (reading.images_read < len(work.urls) and not reading.sampled):
            # its text tells nothing of a removal
            summary += f" ({IMAGES_UNREAD_NOTE} whole)"
        if reading.text:
            text = "\n".join(part for part in (page.text, reading.text) if part)
            page = replace(
                page,
                text=text,
                content_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                note="; ".join(part for part in (summary, *problems, page.note) if part)[:2000],
            )
        else:
            self._inc("fptrack/ocr/pages_unread")
            page = replace(page, note="; ".join((summary, *problems, page.note))[:2000].rstrip("; "))
        for item in self._emit(ParsedResponse(page=page, links=work.parsed.links), work.meta):
            yield item

    def _note(self, line: str) -> None:
        """One line of the crawl's summary (the ledger's notes, as a download's problems)."""
        crawler = getattr(self, "crawler", None)
        hooks = crawler.settings.get(HOOKS_SETTING) if crawler is not None else None
        ledger = getattr(hooks, "ledger", None)
        if ledger is not None:
            ledger.notes.append(line)
        self.logger.warning("%s", line)

    async def _static_enough(self, response: Response) -> bool | None:
        """For a page rendered at once: whether its own document, as the server sent it, had text enough
        without the browser; None when that tells nothing (the browser's guard did not keep it, after a failed
        hop say, or it is a listing)."""
        document = take_document(response.url)
        if document is None:
            return None
        static = (await self._parse_in_thread(response, response.replace(body=document))).page
        if len(static.text) < self.render.min_chars:
            return False
        return None if static.listing else static.status == 200

    def _count_rendering(
        self,
        response: Response,
        page: CrawledPage,
        *,
        rendered: bool,
        wants: bool,
        static_enough: bool | None = None,
    ) -> None:
        """Learn whether the page's host builds its pages by script (see :meth:`RenderPlan.renders_directly`):
        a rendered page with text counts for it, a static page with text enough against it, and so does a page
        rendered at once whose own document had text enough (``static_enough``). A listing read without the
        browser does not count against it: a site's entry page and tables of contents are plain HTML on sites
        whose every chapter is built by script, and every re-crawl fetches them again."""
        if page.status != 200 or not self.render.active:
            return
        host = site_of(response.meta.get(REQUESTED_URL, response.url))
        if rendered and static_enough:
            self._static_hosts[host] += 1
            self._inc(RENDER_ENOUGH + host)
            return
        if static_enough is None and response.meta.get(RENDER_DIRECT):
            return  # rendered at once, and its own document tells nothing
        if rendered and len(page.text) >= self.render.min_chars:
            self._rendered_hosts[host] += 1
            self._inc(RENDER_NEEDED + host)
        elif not rendered and not wants and not page.listing and len(page.text) >= self.render.min_chars:
            self._static_hosts[host] += 1
            self._inc(RENDER_ENOUGH + host)

    @staticmethod
    def _depth(meta: Mapping[str, Any]) -> int:
        return int(meta.get(PAGE_DEPTH, meta.get("depth", 0)))

    def _emit(self, parsed: ParsedResponse, meta: Mapping[str, Any]) -> Iterator[CrawledPage | Request]:
        """Hand the page on and follow its links (recorded in the crawl state first: once the page is stored,
        a resumed crawl will not fetch it again, so its links must be known by then)."""
        self.pages_emitted += 1
        if parsed.page.status == 200 and parsed.links:
            self._listings_read += 1
        depth = self._depth(meta)
        follow = self._links(parsed) if depth < self.depth else []
        if self.state is not None and follow:
            follow = self.state.record((url, depth + 1) for url in follow)
        yield parsed.page
        if self.take_page is None and self.pages_emitted >= self.max_pages:
            raise CloseSpider("max_pages")
        for url in follow:
            yield self._request(url, depth=depth + 1)
        if depth < self.depth:
            yield from self._share_requests(parsed.page, depth + 1)

    def _share_requests(self, page: CrawledPage, depth: int) -> Iterator[Request]:
        """A public share named on the page (蓝奏云: :data:`crawler.leads.FOLLOWED_PLATFORMS`) is walked to
        its file, which is read as a download recorded at the share's URL (on_share_page)."""
        for link in page.share_links:
            if link.platform in FOLLOWED_PLATFORMS and link.linked:
                self.share_sites.add(site_of(link.linked))
                self._inc("fptrack/shares/followed")
                yield Request(
                    link.linked,
                    callback=self.on_share_page,
                    errback=self.on_error,
                    meta={SHARE_WALK: (link.url, 0), REQUESTED_URL: link.url, PAGE_DEPTH: depth},
                )

    async def on_share_page(self, response: Response) -> AsyncIterator[CrawledPage | Request]:
        """One step of a share's walk: a page of the share host leads to the next (its frame, its download
        link), the file is parsed as any download under the share's URL; a walk that finds no file (a
        password, a login, a removed share) or takes more than :data:`SHARE_MAX_STEPS` steps is one line in
        the crawl's summary."""
        share, steps = response.meta[SHARE_WALK]
        if response.status == 200 and isinstance(response, HtmlResponse):
            step = share_download_step(response.text, response.url) if steps < SHARE_MAX_STEPS else None
            if step is None:
                self._inc("fptrack/shares/no_file")
                self._note(f"share {share}: no file reached from {response.url} (a password or a login?)")
                return
            meta = {key: response.meta[key] for key in (REQUESTED_URL, PAGE_DEPTH)}
            meta[SHARE_WALK] = (share, steps + 1)
            self.share_sites.add(site_of(step))
            yield Request(step, callback=self.on_share_page, errback=self.on_error, meta=meta)
            return
        self._inc("fptrack/shares/files")
        async for item in self.parse(response):
            yield item

    def _links(self, parsed: ParsedResponse) -> list[str]:
        """The page's links the crawl follows: on its sites and wanted by the include/exclude patterns."""
        if not parsed.links:
            return []
        follow, off_site = links_to_follow(parsed.links, frozenset(self.allowed_sites))
        if self.known.copies:
            self._met_copies.update(url for url in follow if url in self.known.copies)
        if off_site:
            self._inc("fptrack/links_off_site", off_site)
        wanted = [url for url in follow if self.wanted(url)]
        if len(wanted) < len(follow):
            self._inc("fptrack/links_excluded", len(follow) - len(wanted))
        fetched = [url for url in wanted if self.known.fetch(url)]
        if len(fetched) < len(wanted):
            # counted once per page, however many pages link to it
            skipped = {url for url in wanted if not self.known.fetch(url)} - self._skipped
            self._skipped |= skipped
            self._inc("fptrack/known_pages_skipped", len(skipped))
        return fetched

    async def _parse_in_thread(self, response: Response, source: Response) -> ParsedResponse:
        """Parse ``source`` (``response`` itself, or the browser's rendering of it) in a thread of its own."""
        work = partial(
            parse_response,
            source,
            requested_url=response.meta.get(REQUESTED_URL, response.url),
            fetched_at=datetime.now(UTC),
            max_links=self.max_links,
            max_chars=self.max_chars,
            file_limits=self.file_limits,
            max_file_chars=self.max_file_chars,
        )
        # built outside a crawl (unit tests): no reactor to hand off to
        if getattr(self, "crawler", None) is None:
            return work()
        if self._parsing is None:
            self._parsing = DeferredSemaphore(PARSE_THREADS)
        result: ParsedResponse = await maybe_deferred_to_future(self._parsing.run(_PARSE_THREADS.run, work))
        return result

    def _take_page(self) -> bool:
        """One page from the budget: this spider's own count, or the budget shared by a distributed crawl."""
        if self.take_page is not None:
            return self.take_page()
        if self.pages_taken >= self.max_pages:
            return False
        self.pages_taken += 1
        return True

    def wanted(self, url: str) -> bool:
        """The site's include/exclude patterns (``re.search``) on a link."""
        if self.include and not any(pattern.search(url) for pattern in self.include):
            return False
        return not any(pattern.search(url) for pattern in self.exclude)

    async def on_render_error(self, failure: Failure) -> AsyncIterator[CrawledPage | CrawlFailure | Request]:
        """A render that failed (timeout, browser crash, refused): the static page is kept, with its links."""
        request = getattr(failure, "request", None)
        if request is not None and request.meta.get(RENDER_DIRECT):
            # rendered at once and failed: fetch it plainly (which may still render it, the usual way)
            self._inc("fptrack/render/direct_failed")
            url = request.meta.get(REQUESTED_URL, request.url)
            start = bool(request.meta.get(START_PAGE))
            yield self._request(url, start=start, depth=self._depth(request.meta), plain=True)
            return
        static = request.meta.get(RENDER_META) if request is not None else None
        if request is None or not isinstance(static, ParsedResponse):
            async for item in self.on_error(failure):
                yield item
            return
        self._inc("fptrack/render/failed")
        self.logger.warning("rendering %s failed (%s); its static text is kept", request.url, failure.value)
        for item in self._emit(static, request.meta):
            yield item

    async def on_error(self, failure: Failure) -> AsyncIterator[CrawledPage | CrawlFailure | Request]:
        error = failure.value
        if isinstance(error, HttpError):  # a status the list above does not cover: still a page
            async for item in self.parse(error.response):
                yield item
            return
        request = getattr(failure, "request", None)
        url = request.meta.get(REQUESTED_URL, request.url) if request is not None else "?"
        crawler = getattr(self, "crawler", None)  # None when the spider is built outside a crawl (tests)
        timeout = crawler.settings.getfloat("DOWNLOAD_TIMEOUT") if crawler else None
        received = request.meta.get(BYTES_RECEIVED, 0) if request is not None else 0
        reason = (
            describe_failure(
                error,
                timeout=timeout,
                max_bytes=request.meta.get("download_maxsize", self.max_bytes) if request else self.max_bytes,
                received=received,
                file=request is not None and "download_maxsize" in request.meta,
            )
            if error is not None
            else "unknown error"
        )
        yield CrawlFailure(url=url, reason=reason)

    def _inc(self, key: str, count: int = 1) -> None:
        crawler = getattr(self, "crawler", None)
        if crawler is not None and crawler.stats is not None:
            crawler.stats.inc_value(key, count)


@dataclass
class _ImagePage:
    """A chapter page waiting for its images, fetched one after another (the site's pace) by the spider."""

    parsed: ParsedResponse
    meta: dict[str, Any]
    urls: tuple[str, ...]
    images: list[tuple[str, bytes]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class _ParseThreads:
    """:data:`PARSE_THREADS` daemon threads that parse pages, started on first use and kept for the process's
    life (idle on a queue between pages).

    Not Twisted's thread pool: the reactor joins that pool's threads when it stops, so a Ctrl+C would wait for
    the page being parsed; daemon threads are left behind instead, and a stopped reactor drops their result.
    Not a thread per page either, as before: ``Thread.start`` waits until the new thread runs, which on a busy
    interpreter (the store thread, the reactor) kept the reactor's thread waiting ~6 ms a page
    (``cProfile`` of a 1,000-page crawl: 6.4 s in ``Thread.start``), time in which nothing was downloaded."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._jobs: queue.SimpleQueue[tuple[Any, Deferred[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._started = 0

    def run(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Deferred[Any]:
        """``function(*args, **kwargs)`` in one of the threads, its result delivered on the reactor."""
        from twisted.internet import reactor

        result: Deferred[Any] = Deferred()
        with self._lock:
            while self._started < self._count:
                self._started += 1
                threading.Thread(
                    target=self._serve, name=f"fptrack-parse-{self._started}", daemon=True
                ).start()
        self._jobs.put((reactor, result, partial(function, *args, **kwargs)))
        return result

    def _serve(self) -> None:
        while True:
            reactor, result, call = self._jobs.get()
            try:
                value = call()
            except BaseException:  # noqa: BLE001 - handed to the callback's errback, as a thread pool would
                reactor.callFromThread(result.errback, Failure())  # type: ignore[no-untyped-call]
            else:
                reactor.callFromThread(result.callback, value)


_PARSE_THREADS = _ParseThreads(PARSE_THREADS)
