"""A chapter split over pages chained by "下一页" links, as pirate sites serve long chapters (``7.html`` ->
``7_2.html`` -> ``7_3.html``), for the multi-page tests (crawler/multipage.py, compare/multipage.py)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from testbed.sites import Page

__all__ = ["CONTINUED", "demo_chapter_slices", "part_paths", "split_chapter_pages"]

CONTINUED = "本章未完，请点击下一页继续阅读。"


def part_paths(first: str, count: int) -> list[str]:
    """``/book/7.html``, 3 -> ``['/book/7.html', '/book/7_2.html', '/book/7_3.html']``."""
    stem, _, ext = first.rpartition(".")
    return [first] + [f"{stem}_{n}.{ext}" for n in range(2, count + 1)]


def split_chapter_pages(first: str, title: str, parts: Sequence[str]) -> dict[str, Page]:
    """One page per part; each but the last links its next part with "下一页" (and says the chapter goes on),
    each but the first links back with "上一页"; every page also has "上一章"/"下一章" links, which must never
    chain."""
    paths = part_paths(first, len(parts))
    pages = {}
    for number, (path, text) in enumerate(zip(paths, parts, strict=True)):
        back = f"<a href='{paths[number - 1]}'>上一页</a>" if number else ""
        more = f"<a href='{paths[number + 1]}'>下一页</a>" if number + 1 < len(parts) else ""
        body = f"<p>{html.escape(text)}</p>" + (f"<p>{CONTINUED}</p>" if more else "")
        pages[path] = Page.html(
            f"<!DOCTYPE html><html><head><title>{html.escape(title)}</title></head><body><div class='nav'><a "
            f"href='/'>首页</a></div><h1>{html.escape(title)}（{number + 1}/{len(parts)}）</h1>"
            f"<div id='content'>{body}</div>"
            f"<div class='page'>{back} <a href='/book/6.html'>上一章</a> <a href='/book/'>目录</a> "
            f"<a href='/book/8.html'>下一章</a> {more}</div></body></html>"
        )
    return pages


def demo_chapter_slices() -> list[str]:
    """Three consecutive slices of the first chapter of the demo's ``lighthouse.txt``, 42 characters each:
    under the 50 of a quotation, so that only the parts joined are a copy."""
    # imported here: the crawler's unit tests use this module without loading the command line's package
    from fptrack.cli.demo import demo_chapters

    chapter = demo_chapters("lighthouse.txt")[0]
    return [chapter[20:62], chapter[62:104], chapter[104:146]]
