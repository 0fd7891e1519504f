"""A plain HTTP client for one-off fetches outside Scrapy (takedown re-checks), behind the same
private-address guard and politeness as a crawl.

Not Scrapy, whose reactor runs once per process: a re-check fetches a few known URLs, no links, inside a
Celery task or a CLI command. What the crawl gets from Scrapy is done here with the crawler's own parts:

- the guard: the host is resolved once (every address, IPv4 and IPv6), :meth:`PrivateAddressPolicy.refusal`
  decides, and the connection goes to the address that was checked (pinned: a DNS answer that changes between
  the check and the connection, DNS rebinding, cannot redirect it). Every redirect hop is checked again;
- politeness: robots.txt (:mod:`crawler.robots`, as the crawl reads it) when the site obeys it; every request
  takes a turn of the site's shared pace (:class:`storage.pacing.Pacer`, the one crawls take theirs from),
  at most the site's rate and ``1 / delay`` for the site's delay or a robots ``Crawl-delay``, whichever is
  stricter; ``FPTRACK_USER_AGENT``, the crawl timeout and the body size cap;
- a site that asks to slow down (429, or 503 with ``Retry-After``) is held for everyone who fetches from it
  and the fetch is a :class:`RateLimited` failure (for a re-check: "could not tell", never "gone").

Limits: HTTP proxies from the environment are not used (a re-check connects directly); bodies are not
decompressed (``Accept-Encoding: identity`` is sent).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from fptrack.core.settings import Settings
from fptrack.crawler.guard import IPAddress, PrivateAddressPolicy
from fptrack.crawler.robots import RobotsRules
from fptrack.storage.pacing import BACKOFF_SECONDS, Pacer, retry_after_seconds
from fptrack.storage.sites import site_of

__all__ = ["FetchFailure", "FetchResult", "GuardedFetcher", "NoSuchHost", "RateLimited"]

MAX_REDIRECTS = 10
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDIRECTS = (301, 302, 303, 307, 308)


class FetchFailure(Exception):
    """A fetch that got no usable response; ``str()`` is the one-line reason recorded with the check."""


class NoSuchHost(FetchFailure):
    """The host name does not exist (DNS says so, not a temporary failure): for a re-check, the page is
    gone."""


class RateLimited(FetchFailure):
    """The site answered 429 (or 503 with ``Retry-After``): it was held (nothing more is sent to it before
    the window ends, by any process sharing the pace) and the page could not be judged this time."""

    def __init__(self, message: str, *, status: int, retry_after: float) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


@dataclass(frozen=True)
class FetchResult:
    """The final response of a fetch (after redirects)."""

    url: str  # the URL as requested
    final_url: str
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


@dataclass
class _SitePoliteness:
    key: str
    robots: RobotsRules | None
    delay: float


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        if error.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
            raise NoSuchHost(f"DNS lookup failed (no such host {host})") from None
        raise FetchFailure(f"DNS lookup of {host} failed: {error.strerror or error}") from None
    except UnicodeError:
        raise NoSuchHost(f"DNS lookup failed (bad host name {host!r})") from None
    found: dict[str, IPAddress] = {}
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]
        try:
            found.setdefault(text, ipaddress.ip_address(text))
        except ValueError:
            continue
    if not found:
        raise NoSuchHost(f"DNS lookup failed (no address for {host})")
    return list(found.values())


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to ``address``, whatever ``host`` resolves to now (the ``Host`` header stays
    ``host``)."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """As :class:`_PinnedHTTP`, over TLS, the certificate checked against ``host`` (SNI too)."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)  # type: ignore[attr-defined]


class GuardedFetcher:
    """Fetch URLs one at a time, guarded and polite (see the module docstring).

    ``policy`` says which private hosts may be reached; ``politeness(site_key)`` gives a site's ``(delay,
    obey_robots)``. ``pacer`` is the shared pace per site (``storage.pacing.Pacer(sessions, settings)``, so
    that re-checks and crawls together keep each site's rate); without one, a pace kept in this fetcher
    alone. ``sleep`` and ``clock`` are injectable so tests need not wait (they drive that private pace)."""

    def __init__(
        self,
        settings: Settings,
        policy: PrivateAddressPolicy,
        politeness: Callable[[str], tuple[float, bool]],
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        pacer: Pacer | None = None,
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.politeness = politeness
        self.sleep = sleep
        self.clock = clock
        self.pacer = pacer if pacer is not None else Pacer(None, settings, clock=clock, sleep=sleep)
        self._sites: dict[str, _SitePoliteness] = {}

    def fetch(self, url: str) -> FetchResult:
        """GET ``url``, following redirects (each hop guarded and allowed by robots.txt);
        :class:`FetchFailure` (or :class:`NoSuchHost`) with the reason when there is no response to judge."""
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            self._check_robots(current)
            status, headers, body = self._request(current)
            location = headers.get("location")
            if status in _REDIRECTS and location:
                current = urljoin(current, location)
                continue
            return FetchResult(url=url, final_url=current, status=status, headers=headers, body=body)
        raise FetchFailure(f"more than {MAX_REDIRECTS} redirects")

    # ------------------------------------------------------------------------------------------ politeness

    def _site(self, url: str) -> _SitePoliteness:
        key = site_of(url)
        site = self._sites.get(key)
        if site is None:
            delay, obey_robots = self.politeness(key)
            site = _SitePoliteness(key=key, robots=None, delay=delay)
            self._sites[key] = site
            if obey_robots:
                site.robots = self._robots(url, site)
                crawl_delay = site.robots.crawl_delay()
                if crawl_delay:
                    site.delay = max(site.delay, float(crawl_delay))
        return site

    def _robots(self, url: str, site: _SitePoliteness) -> RobotsRules:
        """The site's robots.txt, read as the crawl reads it (:mod:`crawler.robots`): missing or unreachable
        allows everything."""
        parts = urlsplit(url)
        try:
            status, _, body = self._request(f"{parts.scheme}://{parts.netloc}/robots.txt", site)
        except FetchFailure:
            return RobotsRules.allow_all()
        return RobotsRules(body) if status == 200 else RobotsRules.allow_all()

    def _check_robots(self, url: str) -> None:
        site = self._site(url)
        if site.robots is not None and not site.robots.allows(url):
            raise FetchFailure(f"forbidden by robots.txt: {url}")

    def _wait_turn(self, site: _SitePoliteness) -> None:
        self.pacer.wait_turn(site.key, 1.0 / site.delay if site.delay > 0 else None)

    def _check_rate_limit(self, site: _SitePoliteness, status: int, headers: dict[str, str]) -> None:
        """A 429, or a 503 with ``Retry-After``: hold the site for everyone and fail this fetch."""
        retry_after = retry_after_seconds(headers.get("retry-after"))
        if not (status == 429 or (status == 503 and retry_after is not None)):
            return
        held = self.pacer.hold(site.key, retry_after if retry_after is not None else BACKOFF_SECONDS)
        raise RateLimited(
            f"HTTP {status}: the site asks to slow down (held {held:g} s)", status=status, retry_after=held
        )

    # --------------------------------------------------------------------------------------------- requests

    def _destination(self, url: str) -> tuple[str, str, int, str]:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            raise FetchFailure(f"refused by the private-address guard: {scheme}: URLs are never fetched")
        host = (parts.hostname or "").lower()
        if not host:
            raise FetchFailure(f"no host in {url}")
        try:
            port = parts.port or _DEFAULT_PORTS[scheme]
        except ValueError:
            raise FetchFailure(f"refused by the private-address guard: bad port in {url}") from None
        try:
            addresses = [ipaddress.ip_address(host.strip("[]"))]
        except ValueError:
            addresses = _resolve(host, port)
        reason = self.policy.refusal(host, port, addresses)
        if reason is not None:
            raise FetchFailure(reason)
        return scheme, host, port, str(addresses[0])

    def _request(self, url: str, site: _SitePoliteness | None = None) -> tuple[int, dict[str, str], bytes]:
        scheme, host, port, address = self._destination(url)
        site = site or self._site(url)
        self._wait_turn(site)
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection_type = _PinnedHTTPS if scheme == "https" else _PinnedHTTP
        connection = connection_type(host, port, address, self.settings.crawl_timeout)
        limit = self.settings.crawl_max_body_bytes
        cap = "FPTRACK_CRAWL_MAX_BYTES"
        try:
            connection.request(
                "GET",
                target,
                headers={
                    "User-Agent": self.settings.user_agent,
                    "Accept-Encoding": "identity",
                    "Accept": "*/*",
                },
            )
            response = connection.getresponse()
            headers = {name.lower(): value for name, value in response.getheaders()}
            from fptrack.crawler.parse import is_download  # Scrapy's Response: only once a page is read

            if is_download(url, headers.get("content-type", ""), headers.get("content-disposition", "")):
                limit, cap = self.settings.download_max_bytes, "FPTRACK_DOWNLOAD_MAX_BYTES"
            announced = headers.get("content-length", "").strip()
            if announced.isdigit() and int(announced) > limit:
                raise FetchFailure(
                    f"response larger than the download size cap ({cap}): {announced} bytes announced"
                )
            body = response.read(limit + 1)
        except ConnectionRefusedError:
            raise FetchFailure("connection refused") from None
        except TimeoutError:
            raise FetchFailure(f"timed out after {self.settings.crawl_timeout:g} s") from None
        except ssl.SSLError as error:
            raise FetchFailure(f"TLS error: {error.reason or error}") from None
        except (OSError, http.client.HTTPException) as error:
            raise FetchFailure(f"connection lost: {type(error).__name__}: {error}") from None
        finally:
            connection.close()
        self._check_rate_limit(site, response.status, headers)
        if len(body) > limit:
            raise FetchFailure(f"response larger than the download size cap ({cap})")
        return response.status, headers, body
