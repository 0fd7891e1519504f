"""The private-address guard on real crawls. Traffic goes to 127.0.0.1 only: the refused destinations are
either loopback ports of this machine or, for the other private ranges, requested with ``http_proxy`` pointing
at a loopback listener, so that even a broken guard could not send anything beyond this machine."""

from __future__ import annotations

import os

import pytest

from testbed.sites import Page, Redirect, chapter_page, serve_site
from tests.integration.crawler.harness import PARAGRAPHS, crawl_in_child
from tests.support.proxy import loopback_proxy

pytestmark = pytest.mark.slow
GUARD = "refused by the private-address guard"


def test_a_loopback_site_is_refused_unless_allowed() -> None:
    with serve_site({"/": chapter_page("第一章", PARAGRAPHS)}) as site:
        refused = crawl_in_child([site + "/"], depth=0, allow=[])
        assert site.requests == []  # not even robots.txt
        allowed = crawl_in_child([site + "/"], depth=0, allow=[site.key])
    assert refused.stats["pages_seen"] == 0
    [(url, reason)] = refused.stats["failures"]
    assert url == site + "/" and reason.startswith(GUARD)
    assert f"127.0.0.1 is a loopback address (allow it with --allow-private-host {site.key}" in reason
    assert refused.stats["counters"]["fptrack/refused_private_address"] == 1
    assert allowed.page(site + "/")["text"].split("\n") == PARAGRAPHS


def test_a_redirect_from_an_allowed_site_to_another_loopback_port_is_refused() -> None:
    inner = {"/admin": Page.html("<p>内部管理页面，不该被抓取。</p>")}
    with serve_site(inner) as private, serve_site({"/": Redirect(private + "/admin")}) as site:
        result = crawl_in_child([site + "/"], depth=1, allow=[site.key])
    assert private.requests == []
    [(url, reason)] = result.stats["failures"]
    assert url == site + "/"
    assert reason.startswith(GUARD) and private.key in reason


def test_a_host_name_is_checked_after_dns_resolution() -> None:
    # localhost resolves (from /etc/hosts) to a loopback address; only 127.0.0.1:<port> itself is allowed
    with serve_site({"/": chapter_page("第一章", PARAGRAPHS)}) as site:
        port = site.rsplit(":", 1)[1]
        result = crawl_in_child([f"http://localhost:{port}/"], depth=0, allow=[site.key])
    assert site.requests == []
    [(_, reason)] = result.stats["failures"]
    assert reason.startswith(f"{GUARD}: localhost (") and "is a loopback address" in reason


def test_with_an_http_proxy_refused_destinations_never_reach_the_proxy() -> None:
    refused = [
        "http://10.255.255.1/",  # private
        "http://169.254.0.1/latest/meta-data/",  # link-local
        "http://240.0.0.1/",  # reserved
        "http://224.0.0.1/",  # multicast
        "http://0.0.0.0/",  # unspecified (connects to this machine)
        "http://[fe80::1]/",  # IPv6 link-local
        "http://[::ffff:127.0.0.1]/",  # IPv4-mapped loopback
    ]
    with serve_site({}) as site, loopback_proxy() as proxy:
        env = {
            k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "no_proxy")
        }
        env.update(http_proxy=f"http://127.0.0.1:{proxy.port}", no_proxy="")
        control = site + "/via-proxy.html"  # allowed: proves the proxy is in effect for this crawl
        result = crawl_in_child(
            [control, *refused], depth=0, allow=[site.key], env=env, settings={"crawl_obey_robots": False}
        )
    assert site.requests == []  # the allowed page went through the proxy, not directly
    assert proxy.received == [f"GET {control} HTTP/1.1"]
    failures = dict(map(tuple, result.stats["failures"]))
    assert sorted(failures) == sorted(refused)
    assert all(reason.startswith(GUARD) for reason in failures.values()), failures
    assert result.stats["pages_seen"] == 1
