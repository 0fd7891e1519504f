"""A pirate network (:class:`compare.networks.Network`) drawn as a graph of its sites, as inline SVG.

Each site is a labelled node (its name, else its host), each linked pair of sites an edge as thick as the
pages they share (the close near-duplicate pages that made the network). The layout is Fruchterman and
Reingold's force-directed placement ("Graph drawing by force-directed placement", Software: Practice and
Experience 21(11), 1991): nodes repel as k²/d, linked nodes attract as d²/k, moves are capped by a
temperature that cools to zero. It starts from the nodes on a circle in site-id order with a seeded jitter,
so the same network is drawn the same way on every request and every machine.

Why inline SVG drawn here: the admin runs no JavaScript (its Content-Security-Policy forbids scripts and
inline styles, so the SVG uses presentation attributes only). Site names are user data: lxml escapes them as
text, and characters XML cannot hold are dropped. The viewBox is 480 units wide and scales to its column:
17-unit labels stay above 12 px down to a 364 px column (a 390 px window). Every drawing sits beside a table
of its links for screen readers.
"""

from __future__ import annotations

import math
import random
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from flask_babel import gettext
from lxml import etree
from markupsafe import Markup

from fptrack.compare.networks import Network, NetworkSite

__all__ = ["MAX_DRAWN_SITES", "force_layout", "network_svg", "site_label"]

MAX_DRAWN_SITES = 40
"""Larger networks are listed, not drawn: 40 labelled nodes already crowd a 480-unit column."""
WIDTH = 480
FONT_SIZE = 17
LABEL_MAX_WIDTH = 170  # units; a longer name is cut with an ellipsis (whole in the node's title)
NODE_RADIUS = 9
SOURCE_RADIUS = 12
MARGIN = 22
SIDE_MARGIN = 48  # nodes keep this far from the sides: most labels then fit centred under their node
LAYOUT_SEED = 37
ITERATIONS = 120
_SVG = "http://www.w3.org/2000/svg"
_FONT = "'WenQuanYi Micro Hei', 'Noto Sans CJK SC', 'DejaVu Sans', sans-serif"  # as admin/charts.py
_NODE_FILL, _SOURCE_FILL, _EDGE, _TEXT = "#2563eb", "#b42318", "#8d97ab", "#1f2430"
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def force_layout(
    nodes: Sequence[int],
    edges: Sequence[tuple[int, int, int]],
    *,
    width: float,
    height: float,
    seed: int = LAYOUT_SEED,
    iterations: int = ITERATIONS,
) -> dict[int, tuple[float, float]]:
    """Positions in ``[0, width] x [0, height]`` of ``nodes`` (ids) linked by ``edges`` ``(a, b, strength)``.

    Fruchterman-Reingold (module docstring) with k = sqrt(area / n), a linear cooling from width / 10, and
    the attraction of an edge weighted from 0.5 to 1 by its strength relative to the strongest; nodes move
    freely (no walls to pile up against) and the result is stretched to fill the box. Deterministic: a pure
    function of its arguments (cached)."""
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"force_layout: duplicate node ids in {list(nodes)}")
    known = set(nodes)
    for a, b, _ in edges:
        if a not in known or b not in known:
            raise ValueError(f"force_layout: edge ({a}, {b}) names a node that is not in the graph")
    if width <= 0 or height <= 0:
        raise ValueError(f"force_layout: the box must have a positive size, not {width} x {height}")
    return dict(_layout(tuple(nodes), tuple(edges), float(width), float(height), seed, iterations))


@lru_cache(maxsize=256)
def _layout(
    nodes: tuple[int, ...],
    edges: tuple[tuple[int, int, int], ...],
    width: float,
    height: float,
    seed: int,
    iterations: int,
) -> tuple[tuple[int, tuple[float, float]], ...]:
    n = len(nodes)
    if n == 0:
        return ()
    if n == 1:
        return ((nodes[0], (width / 2, height / 2)),)
    rng = random.Random(seed)
    index = {node: i for i, node in enumerate(nodes)}
    radius = min(width, height) / 3
    xs = [width / 2 + radius * math.cos(2 * math.pi * i / n) + rng.uniform(-1, 1) for i in range(n)]
    ys = [height / 2 + radius * math.sin(2 * math.pi * i / n) + rng.uniform(-1, 1) for i in range(n)]
    strongest = max((s for _, _, s in edges), default=1) or 1
    springs = [(index[a], index[b], 0.5 + 0.5 * s / strongest) for a, b, s in edges if a != b]
    k = math.sqrt(width * height / n)
    start = width / 10
    for step in range(iterations):
        dx = [0.0] * n
        dy = [0.0] * n
        for i in range(n):
            for j in range(i + 1, n):
                ex, ey = xs[i] - xs[j], ys[i] - ys[j]
                distance = max(math.hypot(ex, ey), 0.01)
                push = k * k / distance / distance
                dx[i] += ex * push
                dy[i] += ey * push
                dx[j] -= ex * push
                dy[j] -= ey * push
        for i, j, weight in springs:
            ex, ey = xs[i] - xs[j], ys[i] - ys[j]
            pull = math.hypot(ex, ey) / k * weight
            dx[i] -= ex * pull
            dy[i] -= ey * pull
            dx[j] += ex * pull
            dy[j] += ey * pull
        temperature = start * (1 - step / iterations)
        for i in range(n):
            length = max(math.hypot(dx[i], dy[i]), 0.01)
            move = min(length, temperature) / length
            xs[i] += dx[i] * move
            ys[i] += dy[i] * move
    return tuple(
        (node, (_stretch(xs[i], xs, width), _stretch(ys[i], ys, height))) for i, node in enumerate(nodes)
    )


def _stretch(value: float, values: Sequence[float], size: float) -> float:
    low, high = min(values), max(values)
    return size / 2 if high - low < 1e-9 else (value - low) / (high - low) * size


def site_label(site: NetworkSite) -> str:
    """What a node is called: the site's name, else its host."""
    return _xml_text(site.name.strip() or site.host)


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("", text)


def _text_width(text: str) -> float:
    """Width in units at :data:`FONT_SIZE`, on the wide side: wide (CJK) characters one em, others 0.7 em."""
    return sum(1.0 if unicodedata.east_asian_width(c) in "WF" else 0.7 for c in text) * FONT_SIZE


def _shortened(text: str) -> str:
    if _text_width(text) <= LABEL_MAX_WIDTH:
        return text
    while text and _text_width(text + "…") > LABEL_MAX_WIDTH:
        text = text[:-1]
    return text + "…"


def graph_height(sites: int) -> int:
    """The viewBox height for a network of ``sites`` sites: taller as it grows, so labels keep apart."""
    return 360 + 20 * max(0, sites - 8)


def network_svg(network: Network) -> Markup:
    """The network as an ``<svg>`` element to put inline in a page, in the request's language (titles)."""
    sites = sorted(network.sites, key=lambda site: site.site_id)
    height = graph_height(len(sites))
    inner_height = height - 2 * MARGIN - FONT_SIZE - NODE_RADIUS  # room for the bottom row's labels
    positions = {
        node: (SIDE_MARGIN + x, MARGIN + y)
        for node, (x, y) in force_layout(
            [site.site_id for site in sites],
            network.links,
            width=WIDTH - 2 * SIDE_MARGIN,
            height=inner_height,
        ).items()
    }
    labels = {site.site_id: site_label(site) for site in sites}
    svg = etree.Element(
        f"{{{_SVG}}}svg",
        nsmap={None: _SVG},
        attrib={
            "viewBox": f"0 0 {WIDTH} {height}",
            "width": "100%",
            "class": "network-graph",
            "role": "img",
            "aria-label": gettext(
                "Network %(id)d drawn as a graph: %(sites)d sites, %(links)d links; the links are in the "
                "table beside it.",
                id=network.id,
                sites=len(sites),
                links=len(network.links),
            ),
            "font-family": _FONT,
            "font-size": str(FONT_SIZE),
        },
    )
    strongest = max((count for _, _, count in network.links), default=1) or 1
    for a, b, count in network.links:
        (x1, y1), (x2, y2) = positions[a], positions[b]
        line = etree.SubElement(
            svg,
            f"{{{_SVG}}}line",
            attrib={
                "x1": _number(x1),
                "y1": _number(y1),
                "x2": _number(x2),
                "y2": _number(y2),
                "stroke": _EDGE,
                "stroke-width": _number(1.5 + 4.5 * count / strongest),
                "stroke-linecap": "round",
                "class": "link",
            },
        )
        _title(
            line,
            gettext("%(a)s – %(b)s: %(count)d shared pages", a=labels[a], b=labels[b], count=count),
        )
    for site in sites:
        x, y = positions[site.site_id]
        source = site.site_id == network.source.site_id
        group = etree.SubElement(svg, f"{{{_SVG}}}g", attrib={"class": "node"})
        title = gettext(
            "%(name)s (%(host)s): %(shared)d shared pages, %(pages)d pages compared",
            name=labels[site.site_id],
            host=_xml_text(site.host),
            shared=site.shared_pages,
            pages=site.pages,
        )
        _title(group, title + (gettext("; the likely source") if source else ""))
        etree.SubElement(
            group,
            f"{{{_SVG}}}circle",
            attrib={
                "cx": _number(x),
                "cy": _number(y),
                "r": str(SOURCE_RADIUS if source else NODE_RADIUS),
                "fill": _SOURCE_FILL if source else _NODE_FILL,
                "stroke": "#ffffff",
                "stroke-width": "2",
            },
        )
        text = _shortened(labels[site.site_id])
        half = _text_width(text) / 2
        label = etree.SubElement(
            group,
            f"{{{_SVG}}}text",
            attrib={
                "x": _number(min(WIDTH - 4 - half, max(4 + half, x))),
                "y": _number(y + SOURCE_RADIUS + FONT_SIZE),
                "text-anchor": "middle",
                "fill": _TEXT,
                # a white halo keeps the label readable where lines cross it
                "stroke": "#ffffff",
                "stroke-width": "4",
                "stroke-linejoin": "round",
                "paint-order": "stroke",
                "class": "site-name",
            },
        )
        label.text = text
    return Markup(etree.tostring(svg, encoding="unicode"))


def _title(parent: etree._Element, text: str) -> None:
    etree.SubElement(parent, f"{{{_SVG}}}title").text = text


def _number(value: float) -> str:
    return f"{value:.1f}"
