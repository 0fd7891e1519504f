"""``fptrack demo``: the product end to end on the embedded default, in about a minute.

1. Registers two short works written for this project (``cli/demo_data``).
2. Builds a small pirate site: copies of their chapters as pirates publish them (UTF-8 with ads spliced in,
   GBK, Traditional script served as Big5, same-sound character swaps, edited text, an excerpt quoted inside
   a news article) next to pages that must NOT match (an unregistered story, unrelated news, a page quoting
   one short sentence), and serves it on 127.0.0.1.
3. Crawls it, fingerprints and compares every page, and prints the matches.

The command runs each step as ``python -m fptrack.cli ...`` on a data folder of its own, as a user would.
"""

from __future__ import annotations

import html
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click

from fptrack.cli.common import CliContext, friendly_errors, pass_context
from fptrack.core.settings import Settings

__all__ = [
    "DEMO_DATA",
    "DemoPage",
    "build_demo_site",
    "demo",
    "demo_chapters",
    "homophone_swaps",
    "random_edits",
    "run_demo",
    "serve_pages",
]

DEMO_DATA = Path(__file__).with_name("demo_data")
REGISTERED = ("lighthouse.txt", "alley.txt")


@dataclass(frozen=True)
class DemoPage:
    path: str
    body: bytes
    content_type: str
    expect: str  # "copy of <work file>#<chapter>", "excerpt of ...", or "clean"


def demo_chapters(name: str) -> list[str]:
    from fptrack.compare.chapters import split_chapters

    text = (DEMO_DATA / name).read_text("utf-8")
    return [text[c.start : c.end] for c in split_chapters(text) if c.index > 0]


def _page(title: str, paragraphs: list[str], *, charset: str = "utf-8", nav: str = "", ad: str = "") -> str:
    body = "".join(f"<p>{html.escape(p)}</p>\n" for p in paragraphs if p.strip())
    return (
        f'<!DOCTYPE html><html><head><meta charset="{charset}"><title>{html.escape(title)} - '
        "免费小说网</title></head>"
        f'<body><div class="nav">{nav}</div>'
        f'<div class="ad">{html.escape(ad)}</div>'
        f'<div id="content"><h1>{html.escape(title)}</h1>\n{body}</div>'
        '<div class="footer">本站所有小说均来自网络，版权归原作者所有 | '
        "联系我们 | 免责声明</div></body></html>"
    )


def homophone_swaps(text: str, rate: float, rng: random.Random) -> str:
    """Replace a share of the characters by other characters with the same pinyin (a pirate's dodge)."""
    from pypinyin import Style, lazy_pinyin

    pool = "".join(
        (DEMO_DATA / n).read_text("utf-8") for n in sorted(p.name for p in DEMO_DATA.glob("*.txt"))
    )
    by_sound: dict[str, list[str]] = {}
    for ch in sorted(set(pool)):
        if "\u4e00" <= ch <= "\u9fff":
            by_sound.setdefault(lazy_pinyin(ch, style=Style.NORMAL)[0], []).append(ch)
    out = []
    for ch in text:
        if "\u4e00" <= ch <= "\u9fff" and rng.random() < rate:
            others = [c for c in by_sound.get(lazy_pinyin(ch, style=Style.NORMAL)[0], []) if c != ch]
            out.append(rng.choice(others) if others else ch)
        else:
            out.append(ch)
    return "".join(out)


def random_edits(text: str, rate: float, rng: random.Random) -> str:
    """Random deletions and replacements of a share of the characters."""
    filler = "的了在是我有他这中大来上个国到说们为子和你地出道也时年"
    out = []
    for ch in text:
        roll = rng.random()
        if roll < rate / 2:
            continue
        out.append(rng.choice(filler) if roll < rate else ch)
    return "".join(out)


def build_demo_site(seed: int = 7) -> list[DemoPage]:
    """The demo pirate site: page path -> bytes, with what each page is expected to be."""
    import opencc

    rng = random.Random(seed)
    light, alley = demo_chapters("lighthouse.txt"), demo_chapters("alley.txt")
    other = demo_chapters("rainy_night.txt")
    news = (DEMO_DATA / "library_news.txt").read_text("utf-8").split("\n")
    nav = " ".join(
        f'<a href="{href}">{label}</a>'
        for href, label in [
            ("/", "首页"),
            ("/book/1/1.html", "灯塔守望人"),
            ("/book/2/1.html", "青石巷"),
            ("/book/3/1.html", "雨夜来客"),
            ("/news/1.html", "新闻"),
            ("/news/2.html", "图书馆"),
            ("/blog/quote.html", "书评"),
            ("/book/1/2.html", "第二章"),
            ("/book/1/3.html", "第三章"),
            ("/book/2/2.html", "第二回"),
            ("/book/2/3.html", "第三回"),
        ]
    )
    ad = "小^说^无广告的~顶点*小说~网 最新章节免费阅读"
    t2s = opencc.OpenCC("s2t")

    def lines(chapter: str) -> list[str]:
        return chapter.split("\n")

    spliced = [
        line + ("【免费小说网 www.example-pirate.test 首发】" if i % 2 else "")
        for i, line in enumerate(lines(light[0]))
    ]
    excerpt = alley[2][60:330]
    pages = [
        DemoPage(
            "/",
            _page("首页", ["热门小说 免费阅读 每日更新"], nav=nav).encode(),
            "text/html; charset=utf-8",
            "clean",
        ),
        DemoPage(
            "/book/1/1.html",
            _page("灯塔守望人 第一章", spliced, nav=nav, ad=ad).encode(),
            "text/html; charset=utf-8",
            "copy lighthouse.txt#1 (ads spliced in)",
        ),
        DemoPage(
            "/book/1/2.html",
            _page("灯塔守望人 第二章", lines(light[1]), charset="gbk", nav=nav, ad=ad).encode(
                "gbk", "xmlcharrefreplace"
            ),
            "text/html",
            "copy lighthouse.txt#2 (GBK, charset only in <meta>)",
        ),
        DemoPage(
            "/book/1/3.html",
            _page(
                t2s.convert("灯塔守望人 第三章"),
                [t2s.convert(x) for x in lines(light[2])],
                charset="big5",
                nav=nav,
            ).encode("big5", "xmlcharrefreplace"),
            "text/html; charset=big5",
            "copy lighthouse.txt#3 (Traditional script, Big5)",
        ),
        DemoPage(
            "/book/2/1.html",
            _page("青石巷 第一回", lines(homophone_swaps(alley[0], 0.2, rng)), nav=nav, ad=ad).encode(),
            "text/html; charset=utf-8",
            "copy alley.txt#1 (20% same-sound character swaps)",
        ),
        DemoPage(
            "/book/2/2.html",
            _page("青石巷 第二回", lines(random_edits(alley[1], 0.1, rng)), nav=nav).encode(),
            "text/html; charset=utf-8",
            "copy alley.txt#2 (10% of characters edited)",
        ),
        DemoPage(
            "/book/2/3.html",
            b"<html><head><title>404</title></head><body>Not found</body></html>",
            "text/html; charset=utf-8",
            "clean (404)",
        ),
        DemoPage(
            "/news/1.html",
            _page(
                "老城区的手艺人", news[:1] + ["有网友转发了下面这段文字：", excerpt] + news[2:3], nav=nav
            ).encode(),
            "text/html; charset=utf-8",
            "excerpt alley.txt#3 (quoted inside a news story)",
        ),
        DemoPage(
            "/book/3/1.html",
            _page("雨夜来客 第一章", lines(other[0]), nav=nav, ad=ad).encode(),
            "text/html; charset=utf-8",
            "clean (a story that is not registered)",
        ),
        DemoPage(
            "/news/2.html",
            _page(news[0], news[1:], nav=nav).encode(),
            "text/html; charset=utf-8",
            "clean (unrelated news)",
        ),
        DemoPage(
            "/blog/quote.html",
            _page(
                "读书笔记", ["最近读到一句话很喜欢：" + light[2][200:228], "推荐大家去读原著。"], nav=nav
            ).encode(),
            "text/html; charset=utf-8",
            "clean (quotes under 50 characters)",
        ),
    ]
    return pages


@contextmanager
def serve_pages(pages: list[DemoPage], port: int = 0) -> Iterator[str]:
    """Serve ``pages`` on 127.0.0.1 in a background thread; yields the base URL."""
    by_path = {p.path: p for p in pages}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = by_path.get(self.path.split("?", 1)[0])
            status = 200 if page is not None and "404" not in page.expect else 404
            body = page.body if page is not None else b"<html><body>Not found</body></html>"
            self.send_response(status)
            self.send_header("Content-Type", page.content_type if page else "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


DEMO_MARKER = "fptrack-demo.marker"
"""The file that says a folder was made by the demo: the only folder whose database the demo ever resets."""


def prepare_demo_dir(data_dir: Path) -> None:
    """Make ``data_dir`` ready for a fresh demo run, deleting only what an earlier demo run created.

    A folder the demo did not create (no :data:`DEMO_MARKER` in it) and that holds anything is refused with a
    ``click.ClickException``: the demo never touches a user's data.
    """
    marker = data_dir / DEMO_MARKER
    if data_dir.exists() and not marker.exists() and any(data_dir.iterdir()):
        raise click.ClickException(
            f"{data_dir} exists and was not made by the demo; the demo never touches other data: "
            "give it an empty or new folder with `fptrack demo --dir PATH`"
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text("made by `fptrack demo`; its database is reset at every demo run\n", encoding="utf-8")
    for suffix in ("", "-wal", "-shm"):
        (data_dir / f"fptrack.db{suffix}").unlink(missing_ok=True)


def run_demo(settings: Settings, *, data_dir: Path, port: int = 0, keep_serving: bool = False) -> None:
    import subprocess
    import sys

    prepare_demo_dir(data_dir)
    env = {**__import__("os").environ, "FPTRACK_DATA_DIR": str(data_dir)}
    env.pop("FPTRACK_DATABASE_URL", None)
    env.pop("FPTRACK_BROKER_URL", None)

    def fptrack(*args: str) -> None:
        click.echo(click.style("\n$ fptrack " + " ".join(args), fg="cyan", bold=True))
        completed = subprocess.run([sys.executable, "-m", "fptrack.cli", *args], env=env, check=False)
        if completed.returncode not in (0, 3):
            raise click.ClickException(
                f"`fptrack {' '.join(args)}` failed with exit status {completed.returncode}"
            )

    click.echo(
        click.style("fptrack demo", bold=True) + f": embedded database in {data_dir}/, tasks in-process"
    )
    pages = build_demo_site()
    with serve_pages(pages, port) as base_url:
        click.echo(f"\nA small pirate site is being served at {base_url}/ :")
        for page in pages:
            click.echo(f"  {page.path:<18} {page.expect}")
        fptrack("init")
        fptrack("works", "add", *(str(DEMO_DATA / name) for name in REGISTERED))
        # the demo site lives on 127.0.0.1, which crawls refuse unless told: allow this one site, nothing else
        own_site = base_url.split("://", 1)[1]
        fptrack(
            "crawl",
            f"{base_url}/",
            "--depth",
            "2",
            "--max-pages",
            "50",
            "--quiet",
            "--allow-private-host",
            own_site,
        )
        fptrack("matches")
        fptrack("check", f"{base_url}/news/1.html", "--allow-private-host", own_site)
        click.echo(
            "\nReview the evidence in the admin web app:\n"
            f"  fptrack --data-dir {data_dir} users add admin --role admin    once: choose a password\n"
            f"  fptrack --data-dir {data_dir} serve    then open http://127.0.0.1:5000/ and log in\n"
            f"Machine-readable matches: fptrack --data-dir {data_dir} matches --format json"
        )
        if keep_serving:
            click.echo(f"\nThe pirate site stays up at {base_url}/ until Ctrl+C.")
            threading.Event().wait()


@click.command()
@click.option(
    "--dir",
    "demo_dir",
    default=Path("fptrack-demo"),
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The demo's own data folder (made by the demo; never FPTRACK_DATA_DIR or --data-dir).",
)
@click.option("--port", default=0, type=int, help="Port of the demo pirate site (default: any free port).")
@click.option("--keep-serving", is_flag=True, help="Keep the demo site up until Ctrl+C.")
@pass_context
@friendly_errors
def demo(context: CliContext, demo_dir: Path, port: int, keep_serving: bool) -> None:
    """Show the whole product end to end in a minute.

    On the embedded default: register sample works, serve a small pirate site on 127.0.0.1, crawl it, and
    print the matches. Uses a folder of its own (--dir, ./fptrack-demo by default), which it resets at every
    run; it refuses a folder it did not make, so your data (FPTRACK_DATA_DIR, --data-dir) is never touched."""
    run_demo(context.settings, data_dir=demo_dir, port=port, keep_serving=keep_serving)
