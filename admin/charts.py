"""The dashboard's charts: SVG drawn on the server by pygal, served as images.

Why server-side SVG: the admin runs no JavaScript at all (its Content-Security-Policy forbids scripts), and an
SVG image needs none. pygal always writes its style sheet into the SVG and a script for tooltips; the script
is removed here (the tree is edited before serialising), and the chart routes send a policy of their own that
allows the SVG's inline style and nothing else (``CHART_CONTENT_SECURITY_POLICY``). Shown through ``<img>``,
an SVG cannot run scripts or load anything anyway. Labels (work titles, host names: crawled, hostile) are text
nodes that lxml escapes. Every chart sits next to a table with the same numbers, for screen readers and for
anyone who wants the figures.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from datetime import date

import pygal
from lxml import etree
from pygal.style import Style

from fptrack.analytics.rollups import STATUSES, KeyCount, PeriodCount

__all__ = [
    "BAR_LABEL_CHARS",
    "CHART_CONTENT_SECURITY_POLICY",
    "STATUS_COLOURS",
    "bar_label",
    "bars_svg",
    "time_series_svg",
]

# Importing pygal appends to sys.meta_path an old-style importer (find_module only, no find_spec) that maps
# its external ``pygal.maps.*`` plugins; code that walks sys.meta_path calling find_spec (pytest's importlib
# import mode, importlib.util users) then fails with AttributeError. We use no map plugin: take it off again.
sys.meta_path[:] = [finder for finder in sys.meta_path if type(finder).__name__ != "PluginImportFixer"]

CHART_CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'"
# one colour per status, the same on every chart (and in admin.css)
STATUS_COLOURS = {"flagged": "#d97706", "confirmed": "#b42318", "dismissed": "#8d97ab", "licensed": "#15803d"}
_FONT = "'WenQuanYi Micro Hei', 'Noto Sans CJK SC', 'DejaVu Sans', sans-serif"
_STYLE = Style(
    background="#ffffff",
    plot_background="#ffffff",
    foreground="#1f2430",
    foreground_strong="#1f2430",
    foreground_subtle="#5b6475",
    font_family=_FONT,
    label_font_family=_FONT,
    major_label_font_family=_FONT,
    legend_font_family=_FONT,
    title_font_family=_FONT,
    colors=tuple(STATUS_COLOURS[s] for s in STATUSES),
    transition="0s",
    # pygal's 10-unit axis labels came out about 8 px once the 760-unit chart was scaled into its column:
    # 14 units stays at least 11 px down to a 600 px wide chart
    label_font_size=14,
    major_label_font_size=14,
    legend_font_size=14,
    title_font_size=17,
    tooltip_font_size=14,
)


def _config(**options: object) -> dict[str, object]:
    return {
        "style": _STYLE,
        "js": [],
        "disable_xml_declaration": True,
        "width": 760,
        "height": 320,
        "legend_at_bottom": True,
        "legend_at_bottom_columns": len(STATUSES),
        "print_values": False,
        "show_y_guides": True,
        "stack_from_top": False,
        **options,
    }


def _render(chart: pygal.graph.graph.Graph) -> bytes:
    tree = chart.render_tree()
    for script in tree.iter("{http://www.w3.org/2000/svg}script", "script"):
        parent = script.getparent()
        if parent is not None:
            parent.remove(script)
    svg: bytes = etree.tostring(tree, encoding="utf-8")
    return svg


def _whole_numbers(largest: int) -> dict[str, object]:
    """Counts are whole: below ten, one axis label per unit instead of pygal's 0.1 steps."""
    return {"y_labels": list(range(largest + 1))} if largest < 10 else {}


def time_series_svg(
    periods: Sequence[PeriodCount],
    *,
    per: str,
    title: str | None = None,
    status_names: Mapping[str, str] | None = None,
) -> bytes:
    """Stacked bars of the matches first seen per day or week, one colour per status (``status_names``: the
    legend's words for them, in the page's language)."""
    largest = max((p.total for p in periods), default=0)
    chart = pygal.StackedBar(
        **_config(
            x_label_rotation=30, show_minor_x_labels=False, truncate_label=-1, **_whole_numbers(largest)
        )
    )
    chart.title = title or f"Matches first seen per {per}"
    labels = [_label(p.start, per) for p in periods]
    chart.x_labels = labels
    # about a dozen labels on the axis, whatever the number of bars
    step = max(1, len(labels) // 12)
    chart.x_labels_major = labels[::step]
    for status in STATUSES:
        chart.add((status_names or {}).get(status, status), [p.by_status.get(status, 0) for p in periods])
    return _render(chart)


def bars_svg(title: str, rows: Sequence[KeyCount], *, status_names: Mapping[str, str] | None = None) -> bytes:
    """Horizontal stacked bars, one per work or host, largest on top."""
    largest = max((row.total for row in rows), default=0)
    chart = pygal.HorizontalStackedBar(
        **_config(height=max(200, 60 + 28 * len(rows)), truncate_label=-1, **_whole_numbers(largest))
    )
    chart.title = title
    ordered = list(reversed(rows))  # pygal draws the first label at the bottom
    chart.x_labels = [bar_label(row.label) for row in ordered]
    for status in STATUSES:
        chart.add((status_names or {}).get(status, status), [row.by_status.get(status, 0) for row in ordered])
    return _render(chart)


BAR_LABEL_CHARS = 32
"""A bar's label is cut to this many characters (with an ellipsis): pygal gives the labels the width the
longest one needs, so one 90-character host left the bars no room (the table beside the chart names it
whole)."""


def bar_label(label: str) -> str:
    """``label`` cut to :data:`BAR_LABEL_CHARS` characters, an ellipsis standing for the rest."""
    return label if len(label) <= BAR_LABEL_CHARS else label[: BAR_LABEL_CHARS - 1] + "…"


def _label(day: date, per: str) -> str:
    return f"{day:%G-W%V}" if per == "week" else day.isoformat()
