"""The private-address guard: a crawl never reaches private, loopback, link-local, multicast or reserved
addresses unless it was told it may.

A pirate site's page (or its DNS) can point a crawler at ``http://169.254.169.254/`` (a cloud metadata
service), ``http://10.0.0.5/admin`` or ``http://127.0.0.1:6379/``: classic server-side request forgery. Two
layers stop it:

1. :class:`PrivateAddressGuard`, a downloader middleware that runs first for every request, redirects and
   robots.txt included: it resolves the host (all addresses, IPv4 and IPv6) and refuses the request before any
   connection when one address is not public. It checks the destination itself, so it holds when an HTTP proxy
   is configured (the proxy, not this process, would connect). A refusal is an ``IgnoreRequest`` whose message
   says why; the spider records it as a failure of the crawl.
2. :class:`GuardedResolver`, installed as Twisted's resolver, checks again the address a connection is about
   to use: a DNS answer that changed between the two (DNS rebinding) is refused too.

Allowed: hosts and networks listed in ``FPTRACK_ALLOW_PRIVATE_HOSTS``, by ``fptrack crawl
--allow-private-host`` or by a site's ``allow_private`` setting, and the hosts of the configured proxies (the
operator's choice). An entry is ``host`` (any port), ``host:port`` (that port only: ``127.0.0.1:8000``), or an
address or network (``10.0.0.5``, ``10.0.0.0/8``, ``fd00::/8``), which allows every host name resolving into
it."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies

from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request
from scrapy.resolver import CachingThreadedResolver
from twisted.internet.error import DNSLookupError

from fptrack.core.settings import classify_allow_entry

__all__ = [
    "GUARD_REFUSAL",
    "POLICY_SETTING",
    "GuardedResolver",
    "PrivateAddressGuard",
    "PrivateAddressPolicy",
    "PrivateAddressRefused",
    "address_kind",
    "parse_address",
    "proxy_hosts",
    "resolve_all",
]

POLICY_SETTING = "FPTRACK_PRIVATE_ADDRESS_POLICY"
GUARD_REFUSAL = "refused by the private-address guard"
"""How every refusal of the guard begins (:meth:`PrivateAddressPolicy.refusal`): what a failure's reason is
matched on."""
_DEFAULT_PORTS = {"http": 80, "https": 443}
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class PrivateAddressRefused(IgnoreRequest):
    """A request refused by the guard; ``str()`` is the reason recorded with the crawl."""


class RefusedAddressError(DNSLookupError):
    """The resolver's refusal (raised where a connection would have been made)."""


def address_kind(address: IPAddress) -> str | None:
    """Why ``address`` is not a public destination (``'loopback'``, ``'private'``...), or None when it is."""
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        return address_kind(mapped)
    for kind, flag in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
    ):
        if flag:
            return kind
    if not address.is_global:
        return "non-public"  # shared address space (100.64.0.0/10) and the like
    return None


def parse_address(host: str) -> IPAddress | None:
    """``host`` as an IP address (IPv6 may come in brackets), or ``None`` when it is a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


@dataclass(frozen=True)
class PrivateAddressPolicy:
    """Which non-public destinations a crawl may reach (see the module docstring for the entry syntax)."""

    hosts: frozenset[str] = frozenset()  # "host" or "host:port", lower case
    networks: tuple[IPNetwork, ...] = ()
    proxy_hosts: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_entries(cls, entries: Iterable[str], *, proxies: Iterable[str] = ()) -> PrivateAddressPolicy:
        """Build a policy; raises ``ValueError`` naming an entry that is not a host, host:port or network."""
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip().lower()
            if not entry:
                continue
            kind, value = classify_allow_entry(entry)
            if kind == "network":
                networks.append(ipaddress.ip_network(value, strict=False))
            else:
                hosts.add(value)
        return cls(frozenset(hosts), tuple(networks), frozenset(h.lower() for h in proxies if h))

    def allows_host(self, host: str, port: int | None) -> bool:
        """True when the URL's host (and port) is listed as allowed."""
        host = host.lower().strip("[]")
        shown = f"[{host}]" if ":" in host else host
        if host in self.hosts or (port is not None and f"{shown}:{port}" in self.hosts):
            return True
        address = parse_address(host)
        return address is not None and self.allows_address(address)

    def allows_any_port_of(self, host: str) -> bool:
        host = host.lower().strip("[]")
        shown = f"[{host}]" if ":" in host else host
        return host in self.proxy_hosts or any(
            h in (host, shown) or h.rsplit(":", 1)[0] == shown for h in self.hosts
        )

    def allows_address(self, address: IPAddress) -> bool:
        return any(address.version == network.version and address in network for network in self.networks)

    def refusal(self, host: str, port: int | None, addresses: Sequence[IPAddress]) -> str | None:
        """The reason to refuse ``host:port`` resolving to ``addresses``, or None when it may be fetched."""
        if self.allows_host(host, port):
            return None
        for address in addresses:
            kind = address_kind(address)
            if kind is not None and not self.allows_address(address):
                shown = host if parse_address(host) is not None else f"{host} ({address})"
                bracketed = f"[{host}]" if ":" in host else host
                where = f"{bracketed}:{port}" if port is not None else bracketed
                return (
                    f"{GUARD_REFUSAL}: {shown} is a {kind} address "
                    f"(allow it with --allow-private-host {where}, the site's allow_private setting "
                    "or FPTRACK_ALLOW_PRIVATE_HOSTS)"
                )
        return None


def proxy_hosts(extra: Iterable[str] = ()) -> frozenset[str]:
    """Host names of the proxies configured in the environment (``http_proxy``...) and of ``extra`` URLs."""
    urls = [*getproxies().values(), *extra]
    return frozenset(
        (urlsplit(url if "//" in url else f"//{url}").hostname or "").lower() for url in urls if url
    ) - {""}


def _policy(settings: Any) -> PrivateAddressPolicy:
    policy = settings.get(POLICY_SETTING)
    if not isinstance(policy, PrivateAddressPolicy):
        raise TypeError(
            f"the {POLICY_SETTING} setting must hold a PrivateAddressPolicy (run crawls with run_crawl)"
        )
    return policy


class PrivateAddressGuard:
    """Downloader middleware: refuse, before any connection, a request whose destination is not public."""

    def __init__(self, crawler: Crawler, policy: PrivateAddressPolicy) -> None:
        self.crawler = crawler
        self.policy = policy
        self._resolved: dict[tuple[str, int], list[IPAddress]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PrivateAddressGuard:
        return cls(crawler, _policy(crawler.settings))

    async def process_request(self, request: Request, spider: object = None) -> None:
        parts = urlsplit(request.url)
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            self._refuse(f"refused by the private-address guard: {scheme}: URLs are never fetched")
        host = (parts.hostname or "").lower()
        try:
            port = parts.port or _DEFAULT_PORTS[scheme]
        except ValueError:
            self._refuse(f"refused by the private-address guard: bad port in {request.url}")
        if not host or self.policy.allows_host(host, port):
            return
        literal = parse_address(host)
        addresses = [literal] if literal is not None else await self._resolve(host, port)
        reason = self.policy.refusal(host, port, addresses)
        if reason is not None:
            self._refuse(reason)

    async def _resolve(self, host: str, port: int) -> list[IPAddress]:
        key = (host, port)
        if key not in self._resolved:
            from scrapy.utils.defer import maybe_deferred_to_future
            from twisted.internet.threads import deferToThread

            self._resolved[key] = await maybe_deferred_to_future(deferToThread(resolve_all, host, port))
        return self._resolved[key]

    def _refuse(self, reason: str) -> Any:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value("fptrack/refused_private_address")
        raise PrivateAddressRefused(reason)


def resolve_all(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to; [] when it does not resolve (the download then fails on its
    own)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    found: dict[str, IPAddress] = {}
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]
        address = parse_address(text)
        if address is not None:
            found.setdefault(text, address)
    return list(found.values())


class GuardedResolver(CachingThreadedResolver):
    """Scrapy's caching resolver, refusing a non-public answer for a host the policy does not allow (the
    second layer: the address checked here is the one the connection uses)."""

    policy: PrivateAddressPolicy = PrivateAddressPolicy()

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> GuardedResolver:
        resolver = super().from_crawler(crawler, reactor)
        resolver.policy = _policy(crawler.settings)
        return resolver

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> Any:
        deferred = super().getHostByName(name, timeout)
        deferred.addCallback(self._check, name)
        return deferred

    def _check(self, result: str, name: str) -> str:
        if self.policy.allows_any_port_of(name):
            return result
        address = parse_address(result)
        if (
            address is not None
            and address_kind(address) is not None
            and not self.policy.allows_address(address)
        ):
            raise RefusedAddressError(
                f"refused by the private-address guard: {name} resolved to {result}, a "
                f"{address_kind(address)} address"
            )
        return result
