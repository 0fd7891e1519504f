"""The private-address policy: which addresses are refused, which entries allow what; the resolver layer."""

from __future__ import annotations

import ipaddress
import re

import pytest

from fptrack.core.settings import ConfigurationError, Settings, classify_allow_entry
from fptrack.crawler.guard import GuardedResolver, PrivateAddressPolicy, RefusedAddressError, address_kind


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("100.64.0.1", "non-public"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("93.184.216.34", None),
        ("2606:4700::1111", None),
    ],
)
def test_address_kinds(address: str, kind: str | None) -> None:
    assert address_kind(ipaddress.ip_address(address)) == kind


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


def test_entries_allow_a_host_a_host_and_port_or_a_network() -> None:
    policy = PrivateAddressPolicy.from_entries(["intranet.test", "127.0.0.1:8000", "10.0.0.0/8", "[::1]:81"])
    assert policy.refusal("intranet.test", 1234, [_ip("192.168.0.9")]) is None
    assert policy.refusal("127.0.0.1", 8000, [_ip("127.0.0.1")]) is None
    assert policy.refusal("127.0.0.1", 8001, [_ip("127.0.0.1")]) is not None  # another port
    assert policy.refusal("localhost", 8000, [_ip("127.0.0.1")]) is not None  # a name is not its address
    assert policy.refusal("db.test", 5432, [_ip("10.9.8.7")]) is None  # resolves into an allowed network
    assert policy.refusal("::1", 81, [_ip("::1")]) is None
    assert policy.refusal("::1", 82, [_ip("::1")]) is not None
    # one private address among public ones is enough to refuse
    assert policy.refusal("mixed.test", 80, [_ip("93.184.216.34"), _ip("192.168.1.1")]) is not None
    assert policy.refusal("public.test", 80, [_ip("93.184.216.34")]) is None


def test_the_reason_names_the_address_and_how_to_allow_it() -> None:
    reason = PrivateAddressPolicy().refusal("evil.test", 80, [_ip("169.254.169.254")])
    assert reason == (
        "refused by the private-address guard: evil.test (169.254.169.254) is a link-local address "
        "(allow it with --allow-private-host evil.test:80, the site's allow_private setting or "
        "FPTRACK_ALLOW_PRIVATE_HOSTS)"
    )


@pytest.mark.parametrize(
    ("entry", "normalised"),
    [
        ("Example.Test", ("host", "example.test")),
        ("127.0.0.1:8000", ("host", "127.0.0.1:8000")),
        ("10.0.0.0/8", ("network", "10.0.0.0/8")),
        ("10.1.2.3", ("network", "10.1.2.3/32")),
        ("[::1]:80", ("host", "[::1]:80")),
        ("::1", ("network", "::1/128")),
    ],
)
def test_allow_entries_are_normalised(entry: str, normalised: tuple[str, str]) -> None:
    assert classify_allow_entry(entry) == normalised


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"FPTRACK_ALLOW_PRIVATE_HOSTS": "10.0.0.0/33"},
            "FPTRACK_ALLOW_PRIVATE_HOSTS: '10.0.0.0/33' is not an address",
        ),
        (
            {"FPTRACK_ALLOW_PRIVATE_HOSTS": "host:99999"},
            "FPTRACK_ALLOW_PRIVATE_HOSTS: 'host:99999' has a bad port",
        ),
        (
            {"FPTRACK_ALLOW_PRIVATE_HOSTS": "http://x/y"},
            "FPTRACK_ALLOW_PRIVATE_HOSTS: 'http://x/y' is not an address",
        ),
        (
            {"FPTRACK_CRAWL_CONCURRENCY": "0"},
            "FPTRACK_CRAWL_CONCURRENCY=0 is out of range: expected an integer >= 1",
        ),
        ({"FPTRACK_CRAWL_MAX_BYTES": "0"}, "FPTRACK_CRAWL_MAX_BYTES=0 is out of range"),
        (
            {"FPTRACK_CRAWL_MAX_LINKS": "0"},
            "FPTRACK_CRAWL_MAX_LINKS=0 is out of range: expected an integer >= 1",
        ),
        (
            {"FPTRACK_MAX_PAGE_CHARS": "0"},
            "FPTRACK_MAX_PAGE_CHARS=0 is out of range: expected a number of characters >= 1",
        ),
        ({"FPTRACK_CRAWL_CONCURRENCY_PER_SITE": "0"}, "FPTRACK_CRAWL_CONCURRENCY_PER_SITE=0 is out of range"),
        ({"FPTRACK_CRAWL_DELAY": "-1"}, "FPTRACK_CRAWL_DELAY=-1 is out of range"),
        ({"FPTRACK_CRAWL_TIMEOUT": "0"}, "FPTRACK_CRAWL_TIMEOUT=0 is out of range"),
        ({"FPTRACK_CRAWL_OBEY_ROBOTS": "maybe"}, "FPTRACK_CRAWL_OBEY_ROBOTS='maybe' is not a boolean"),
    ],
)
def test_crawl_settings_are_validated_at_start(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        Settings.from_env(env)


def test_polite_defaults() -> None:
    settings = Settings.from_env({})
    assert (settings.crawl_max_links, settings.max_page_chars) == (5000, 300_000)
    assert settings.crawl_obey_robots is True and settings.crawl_autothrottle is True
    assert settings.allow_private_hosts == ()
    assert Settings.from_env(
        {"FPTRACK_ALLOW_PRIVATE_HOSTS": "127.0.0.1:80, 10.0.0.0/8"}
    ).allow_private_hosts == (
        "127.0.0.1:80",
        "10.0.0.0/8",
    )


def test_the_resolver_refuses_a_private_answer_for_a_host_not_allowed() -> None:
    resolver = GuardedResolver.__new__(GuardedResolver)
    resolver.policy = PrivateAddressPolicy.from_entries(["allowed.test:8000"], proxies=["proxy.test"])
    assert resolver._check("93.184.216.34", "public.test") == "93.184.216.34"
    assert resolver._check("10.0.0.1", "allowed.test") == "10.0.0.1"
    assert resolver._check("10.0.0.2", "proxy.test") == "10.0.0.2"  # the operator's proxy
    with pytest.raises(RefusedAddressError, match="rebound.test resolved to 127.0.0.1, a loopback address"):
        resolver._check("127.0.0.1", "rebound.test")
