"""The networks page draws each network as an SVG graph of its sites (``admin/network_graph.py``): one node
per site, labelled by name, one edge per linked pair, hostile names escaped, the same drawing every time;
through Flask's test client on SQLite and PostgreSQL."""

from __future__ import annotations

import math
import re

import pytest
from flask import Flask
from flask.testing import FlaskClient
from lxml import etree
from sqlalchemy.orm import Session

from fptrack.admin.i18n import LANGUAGE_COOKIE
from fptrack.admin.network_graph import _layout, force_layout
from fptrack.core.settings import Settings
from fptrack.storage.models import Site, SitePair
from tests.support.accounts import add_account, log_in

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert(1)</script>"&\x01'
NAMES = {"a.example": HOSTILE, "b.example": "笔趣阁镜像", "c.example": "", "d.example": "Mirror D"}
# (site, site, close pages): four linked pairs; the last pair shares too few pages to link (min 3)
PAIRS = [("a.example", "b.example", 5), ("a.example", "c.example", 4), ("b.example", "c.example", 3)]
PAIRS += [("c.example", "d.example", 9), ("b.example", "d.example", 1)]


@pytest.fixture
def client(app: Flask, settings: Settings, session: Session) -> FlaskClient:
    sites = {host: Site(host=f"{host}:8080", name=name) for host, name in NAMES.items()}
    session.add_all(sites.values())
    session.flush()
    for one, other, close in PAIRS:
        a, b = sorted((sites[one].id, sites[other].id))
        session.add(SitePair(site_a=a, site_b=b, shared_pages=close, close_pages=close, a_first=close))
    session.commit()
    add_account(settings, "vera", "viewer")
    client = app.test_client()
    log_in(client, "vera")
    return client


def _graphs(page: str) -> list[etree._Element]:
    return [etree.fromstring(svg) for svg in re.findall(r"<svg .*?</svg>", page, flags=re.DOTALL)]


def test_each_network_is_drawn_with_a_node_per_site_and_an_edge_per_linked_pair(client: FlaskClient) -> None:
    page = client.get("/networks").get_data(as_text=True)
    [graph] = _graphs(page)
    assert graph.get("viewBox", "").startswith("0 0 480 ") and graph.get("width") == "100%"
    labels = [text.text for text in graph.iter(f"{SVG}text")]
    # names, not host:port; a site without a name by its host; the hostile name as text (control char dropped)
    assert sorted(labels) == sorted(["<script>alert…", "笔趣阁镜像", "c.example:8080", "Mirror D"])
    node_titles = [str(node.findtext(f"{SVG}title")) for node in graph.iter(f"{SVG}g")]
    assert any(title.startswith('<script>alert(1)</script>"& (a.example:8080)') for title in node_titles)
    assert len(list(graph.iter(f"{SVG}circle"))) == 4
    lines = list(graph.iter(f"{SVG}line"))
    assert len(lines) == 4  # b-d shares one page: no edge
    titles = [line.findtext(f"{SVG}title") for line in lines]
    assert "Mirror D" in " ".join(str(t) for t in titles) and all("shared pages" in str(t) for t in titles)
    widths = sorted(float(line.get("stroke-width", 0)) for line in lines)
    assert widths[-1] == 6.0 and widths[0] < widths[-1]  # the strongest link is the thickest
    # escaped in the page itself, not only well-formed: no markup from a site name reaches the document
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    links = re.search(r'<table class="compact" id="links-\d+">.*?</table>', page, flags=re.DOTALL)
    assert links is not None and links.group(0).count("<tr>") == 1 + 4
    # the same drawing every time (the page around it holds a CSRF token, signed with the time)
    again = client.get("/networks").get_data(as_text=True)
    assert re.findall(r"<svg.*?</svg>", again, flags=re.DOTALL) == re.findall(
        r"<svg.*?</svg>", page, flags=re.DOTALL
    )


def test_the_graph_speaks_the_page_language(client: FlaskClient) -> None:
    client.set_cookie(LANGUAGE_COOKIE, "zh")
    page = client.get("/networks").get_data(as_text=True)
    [graph] = _graphs(page)
    assert "网络" in graph.get("aria-label", "")
    assert "共享" in str(next(graph.iter(f"{SVG}line")).findtext(f"{SVG}title"))
    assert "shared pages" not in page


def test_the_layout_is_deterministic_inside_its_box_and_keeps_nodes_apart() -> None:
    nodes = list(range(1, 13))
    edges = [(i, i + 1, i) for i in range(1, 12)] + [(1, 12, 3), (3, 9, 7)]
    first = force_layout(nodes, edges, width=436, height=500)
    _layout.cache_clear()  # computed again, not read from the cache
    assert force_layout(nodes, edges, width=436, height=500) == first
    assert all(0 <= x <= 436 and 0 <= y <= 500 for x, y in first.values())
    assert min(math.dist(first[a], first[b]) for a in nodes for b in nodes if a < b) > 30


def test_the_layout_refuses_edges_to_unknown_nodes() -> None:
    with pytest.raises(ValueError, match=r"edge \(1, 9\) names a node that is not in the graph"):
        force_layout([1, 2], [(1, 9, 1)], width=100, height=100)
