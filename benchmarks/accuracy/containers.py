"""Downloads: whole books as files, archives, e-books and PDFs crawled by the real ``fptrack``
(docs/downloads.md).

    python -m benchmarks.accuracy.containers --quick   # books of 12 chapters, a few minutes
    python -m benchmarks.accuracy.containers           # books of 40 chapters
    python -m benchmarks.accuracy.containers --quick --ocr-max-chars 0   # image pages read whole
    python -m benchmarks.accuracy.containers --quick --ocr-levers        # only the OCR levers' table

1. Books are made of ../shared/corpus chapters (the Simplified ``tennessine`` copies): two registered novels
   (三国演义, 水浒传) and one never registered (西游记), each ``第N回`` heading followed by its chapter.
2. Each book is served on 127.0.0.1 in every kind a download site hands it out: a whole-book .txt in GB18030,
   in Big5 (Traditional, OpenCC), in UTF-16 (BOM, no charset), a single chapter as .txt, a zip with GBK member
   names, a 7z, a stored RAR5, a .tar.gz, an EPUB, a MOBI, an AZW3 (KF8), a DOCX and a PDF (WeasyPrint's
   text layer); beside them the hostile files (a member expanding to 512 MiB, zips nested five deep, a
   truncated EPUB, random bytes named .zip).
   Kind ``images``: the first chapters of each book as reader pages whose text is drawn as two images
   (图片章节: Pillow and the set-up's CJK font, 20, 24 or 28 pixel characters, PNG, JPEG or WebP, 0.2 % of the
   pixels noise), read by OCR (Tesseract, fingerprint/ocr.py).
3. In a temporary data folder the command line runs as a user's would: ``fptrack init``, ``works add``,
   ``crawl <site> --depth 1``, ``matches --format json``.
4. Figures: per kind, file recall (files of a registered book with a match of its work) and chapter recall
   (chapters the files hold that are matched on them); false matches (matches on the unregistered book's files
   and on the hostile ones); CPU seconds per MB of file read by ``fingerprint.containers.read_download``; for
   each hostile file, in a fresh process, the seconds and the peak RSS added by reading it; the CPU seconds
   Tesseract spends per image page and per 1,000 characters (one page of each registered book, in this
   process), reading as the crawl does (``FPTRACK_OCR_MAX_CHARS``, or ``--ocr-max-chars``).
5. ``--ocr-levers``: on the first 1,000 characters of those timed pages' chapters drawn as one image (24
   pixel characters, slight noise), Tesseract's CPU and how much of what it read is right
   (characters of the read text found in order in the chapter, after NFKC) for each lever tried: page
   segmentation, threads, the inverted-line retry, the dictionary, binarisation, downscaling, a horizontal
   squeeze, and reading only the first N characters (the product's ``max_chars``).

Targets (issue 35): every kind >= 0.95 file and chapter recall, 0 false matches, the 512 MiB member <= 2 s and
<= 200 MB of RSS, OCR <= 2 s of CPU per image page. No corpus text is written into the repository: the data
folder is temporary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.corpus import iter_chapters, require_corpus
from benchmarks.harness import ROOT, arguments, emit, machine, print_table, progress
from fptrack.core.settings import Settings
from fptrack.fingerprint.ocr import OcrLimits, read_images
from testbed.downloads import (
    docx_of,
    epub_of,
    mobi_of,
    nested_zip,
    pdf_of,
    random_bytes,
    rar_of,
    sevenz_of,
    tar_of,
    zip_bomb,
    zip_of,
)
from testbed.images import chapter_png
from testbed.sites import Page, serve_site, to_traditional

BENCHMARK = "containers"
REGISTERED = {"sanguoyanyi": "三国演义", "shuihuzhuan": "水浒传"}
UNREGISTERED = {"xiyouji": "西游记"}
SOURCE = "tennessine"
KINDS = (
    "txt-gb18030",
    "txt-big5",
    "txt-utf16",
    "chapter-txt",
    "zip-gbk",
    "7z",
    "rar",
    "tar.gz",
    "epub",
    "docx",
    "pdf",
    "mobi",
    "azw3",
)
IMAGE_KIND = "images"
LEVER_CHARS = 1_000  # characters of each timed chapter drawn as the image every OCR lever reads
IMAGE_FORMATS = (("PNG", "png", "image/png"), ("JPEG", "jpg", "image/jpeg"), ("WEBP", "webp", "image/webp"))
TYPES = {
    "txt-gb18030": "text/plain; charset=gbk",
    "txt-big5": "text/plain",
    "txt-utf16": "text/plain",
    "chapter-txt": "application/octet-stream",
    "zip-gbk": "application/zip",
    "7z": "application/x-7z-compressed",
    "rar": "application/vnd.rar",
    "tar.gz": "application/gzip",
    "epub": "application/epub+zip",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pdf": "application/pdf",
    "mobi": "application/x-mobipocket-ebook",
    "azw3": "application/vnd.amazon.ebook",
}


def _books(chapters: int) -> dict[str, list[tuple[str, str]]]:
    """work id -> its first ``chapters`` chapters as (heading, text)."""
    found: dict[str, list[tuple[str, str]]] = defaultdict(list)
    wanted = {**REGISTERED, **UNREGISTERED}
    for chapter in iter_chapters(f"*__{SOURCE}.jsonl"):
        if chapter.work_id in wanted and 1 <= chapter.chapter <= chapters:
            lines = (line.strip(" \t\u3000") for line in chapter.text.splitlines())
            found[chapter.work_id].append((chapter.title, "\n".join(line for line in lines if line)))
    return dict(found)


def _book_text(title: str, chapters: list[tuple[str, str]]) -> str:
    return title + "\n" + "\n".join(f"{heading}\n{text}" for heading, text in chapters) + "\n"


def _file(kind: str, title: str, chapters: list[tuple[str, str]]) -> bytes:
    text = _book_text(title, chapters)
    if kind == "txt-gb18030":
        return text.encode("gb18030")
    if kind == "txt-big5":
        return to_traditional(text).encode("big5", "replace")
    if kind == "txt-utf16":
        return text.encode("utf-16")
    if kind == "chapter-txt":
        heading, body = chapters[len(chapters) // 2]
        return f"{heading}\n{body}".encode("utf-16")
    if kind == "zip-gbk":
        return zip_of({f"{title}/{title}全本.txt": text.encode("gb18030")}, gbk_names=True)
    if kind == "7z":
        return sevenz_of({f"{title}/全本.txt": text.encode("utf-8")})
    if kind == "rar":
        return rar_of({f"{title}/全本.txt": text.encode("gb18030")})
    if kind == "tar.gz":
        return tar_of({f"{title}/全本.txt": text.encode("utf-8")})
    if kind == "epub":
        return epub_of(chapters)
    if kind == "docx":
        return docx_of(text)
    if kind == "pdf":
        return pdf_of(text)
    if kind in ("mobi", "azw3"):
        return mobi_of(chapters, kf8=kind == "azw3")
    raise ValueError(kind)


def _image_pages(
    work_id: str, chapters: list[tuple[str, str]], count: int
) -> tuple[dict[str, Page], dict[str, int], dict[str, list[tuple[str, bytes]]]]:
    """The first ``count`` chapters as reader pages whose text is two images: the pages and their images,
    each page's chapter index, and each page's images as (name, bytes)."""
    pages: dict[str, Page] = {}
    index_of: dict[str, int] = {}
    images_of: dict[str, list[tuple[str, bytes]]] = {}
    for number, (heading, text) in enumerate(chapters[:count], start=1):
        lines = text.splitlines()
        halves = ["\n".join(lines[: len(lines) // 2]), "\n".join(lines[len(lines) // 2 :])]
        fmt, ext, mime = IMAGE_FORMATS[number % len(IMAGE_FORMATS)]
        path = f"/{work_id}/{IMAGE_KIND}/{number}.html"
        images = []
        for part, half in enumerate(halves):
            data = chapter_png(half, size=(20, 24, 28)[number % 3], noise=0.002, seed=number, fmt=fmt)
            image_path = f"/{work_id}/{IMAGE_KIND}/{number}-{part}.{ext}"
            pages[image_path] = Page(data, content_type=mime)
            images.append((image_path, data))
        tags = "".join(f'<img src="{name}" alt="">' for name, _ in images)
        pages[path] = Page.html(
            f"<html><head><title>{heading}</title></head><body><h1>{heading}</h1>"
            f'<div id="chaptercontent">{tags}</div><p><a href="/">目录</a></p></body></html>'
        )
        index_of[path] = number
        images_of[path] = images
    return pages, index_of, images_of


def _children_cpu() -> float:
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _ocr_cpu(
    images_of: dict[str, list[tuple[str, bytes]]], texts: dict[str, str], max_chars: int
) -> dict[str, float]:
    """CPU seconds Tesseract spends on one image page read as the crawl reads it (``max_chars``), and per
    1,000 characters read."""
    spent, chars, held = 0.0, 0, 0
    for path, images in images_of.items():
        before = _children_cpu()
        reading = read_images(images, limits=OcrLimits(max_chars=max_chars))
        spent += _children_cpu() - before
        chars += len("".join(reading.text.split()))
        held += len("".join(texts[path].split()))
    pages = max(1, len(images_of))
    return {
        "pages": len(images_of),
        "max_chars": max_chars,
        "cpu_seconds_per_page": round(spent / pages, 2),
        "cpu_seconds_per_1000_chars": round(spent / max(1, chars) * 1000, 2),
        "chars_read_per_page": chars // pages,
        "chars_per_page": held // pages,
    }


def _read_right(read: str, chapter: str) -> float:
    """The share of the characters read that are the chapter's, in order (NFKC, white space dropped)."""
    import difflib
    import unicodedata

    a, b = ("".join(unicodedata.normalize("NFKC", t).split()) for t in (read, chapter))
    matched = sum(
        block.size for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    )
    return matched / max(1, len(a))


def _tesseract_as(images: list[tuple[str, bytes]], arguments: list[str], prepare: Any, threads: bool) -> str:
    """An experiment, not the product's reading: each image made grey (and ``prepare``d), read whole by one
    ``tesseract`` call with ``arguments``."""
    import io

    from PIL import Image

    from fptrack.fingerprint.ocr import tidy_ocr_text

    env = dict(os.environ) if threads else {**os.environ, "OMP_THREAD_LIMIT": "1"}
    if threads:
        env.pop("OMP_THREAD_LIMIT", None)
    texts = []
    for _, data in images:
        grey = prepare(Image.open(io.BytesIO(data)).convert("L"))
        out = io.BytesIO()
        grey.save(out, format="PNG")
        done = subprocess.run(
            ["tesseract", "stdin", "stdout", "-l", "chi_sim", *arguments],
            input=out.getvalue(),
            capture_output=True,
            env=env,
            check=True,
        )
        texts.append(tidy_ocr_text(done.stdout.decode("utf-8", "replace")))
    return "\n".join(texts)


def _ocr_levers(images_of: dict[str, list[tuple[str, bytes]]], texts: dict[str, str]) -> list[dict[str, Any]]:
    """Each lever's CPU per page, characters read per page and the share of them right (see the docstring)."""
    from PIL import Image

    def scaled(x: float, y: float) -> Any:
        return lambda im: im.resize((round(im.width * x), round(im.height * y)), Image.Resampling.LANCZOS)

    same = lambda im: im
    experiments: dict[str, Any] = {
        "psm 6, 1 thread (the product, read whole)": lambda imgs: read_images(imgs).text,
        "psm 3 (automatic layout)": lambda imgs: _tesseract_as(imgs, ["--psm", "3"], same, False),
        "OpenMP threads not limited (CPU of all)": lambda imgs: _tesseract_as(
            imgs, ["--psm", "6"], same, True
        ),
        "no inverted-line retry (invert_threshold=0)": lambda imgs: _tesseract_as(
            imgs, ["--psm", "6", "-c", "invert_threshold=0"], same, False
        ),
        "no dictionary (load_*_dawg=0)": lambda imgs: _tesseract_as(
            imgs, ["--psm", "6", "-c", "load_system_dawg=0", "-c", "load_freq_dawg=0"], same, False
        ),
        "binarised at 160": lambda imgs: _tesseract_as(
            imgs, ["--psm", "6"], lambda im: im.point(lambda p: 255 if p > 160 else 0), False
        ),
        "downscaled to 0.75": lambda imgs: _tesseract_as(imgs, ["--psm", "6"], scaled(0.75, 0.75), False),
        "squeezed to 0.8 wide": lambda imgs: _tesseract_as(imgs, ["--psm", "6"], scaled(0.8, 1.0), False),
    }
    for budget in (300, 600):
        experiments[f"first {budget} characters (max_chars)"] = lambda imgs, b=budget: (
            read_images(imgs, limits=OcrLimits(max_chars=b)).text
        )
    rows = []
    for name, read in experiments.items():
        progress(f"OCR lever: {name}")
        spent, chars, right = 0.0, 0, []
        for path, images in images_of.items():
            before = _children_cpu()
            text = read(images)
            spent += _children_cpu() - before
            chars += len("".join(text.split()))
            right.append(_read_right(text, texts[path]))
        pages = max(1, len(images_of))
        rows.append(
            {
                "lever": name,
                "cpu_seconds_per_page": round(spent / pages, 2),
                "chars_read_per_page": chars // pages,
                "cpu_ms_per_char": round(spent / max(1, chars) * 1000, 2),
                "read_right": round(sum(right) / pages, 3),
            }
        )
    return rows


def _hostile(chapters: list[tuple[str, str]]) -> dict[str, bytes]:
    text = _book_text("书", chapters).encode("utf-8")
    return {
        "bomb-512mib.zip": zip_bomb(512),
        "nested-5.zip": nested_zip(text, 5),
        "truncated.epub": epub_of(chapters)[: len(epub_of(chapters)) // 2],
        "random.zip": random_bytes(200_000, seed=7),
    }


def _run(
    data_dir: Path, *args: str, timeout: float = 3600, ocr_max_chars: int | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("FPTRACK_") or key == "FPTRACK_CORPUS"
    }
    env.update(
        FPTRACK_DATA_DIR=str(data_dir),
        FPTRACK_DATABASE_URL=f"sqlite:///{data_dir / 'fptrack.db'}",
        FPTRACK_CRAWL_TIMEOUT="60",
    )
    if ocr_max_chars is not None:
        env["FPTRACK_OCR_MAX_CHARS"] = str(ocr_max_chars)
    done = subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args],
        cwd=ROOT.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"fptrack {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return done


_READ_IN_CHILD = """
import sys, time
from fptrack.fingerprint.containers import read_download

def peak_mb():  # this process's own high-water mark (ru_maxrss keeps the parent's across exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0

data = open(sys.argv[1], "rb").read()
before = peak_mb()
started, cpu = time.monotonic(), time.process_time()
reading = read_download(data)
after = peak_mb()
print(time.monotonic() - started, time.process_time() - cpu, after - before, after,
      len(reading.documents), "|".join(reading.problems))
"""


def _hostile_costs(files: dict[str, bytes], folder: Path) -> list[dict[str, Any]]:
    rows = []
    for name, data in files.items():
        path = folder / name
        path.write_bytes(data)
        out = subprocess.run(
            [sys.executable, "-c", _READ_IN_CHILD, str(path)],
            cwd=ROOT.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split(" ", 5)
        rows.append(
            {
                "file": name,
                "bytes": len(data),
                "seconds": round(float(out[0]), 3),
                "cpu_seconds": round(float(out[1]), 3),
                "peak_rss_added_mb": round(float(out[2]), 1),
                "peak_rss_mb": round(float(out[3]), 1),
                "texts": int(out[4]),
                "problem": out[5].strip()[:120],
            }
        )
    return rows


def _page_notes(data_dir: Path, base: str) -> dict[str, str]:
    """path -> the stored page's error, else its note and text length."""
    import sqlite3

    with sqlite3.connect(data_dir / "fptrack.db") as db:
        rows = db.execute("SELECT url, error, note FROM pages").fetchall()
    return {str(url).removeprefix(base): str(error or note or "") for url, error, note in rows}


def _cpu_per_mb(files: dict[str, tuple[str, bytes]]) -> dict[str, float]:
    from fptrack.fingerprint.containers import read_download

    spent: dict[str, float] = defaultdict(float)
    size: dict[str, int] = defaultdict(int)
    for kind, data in files.values():
        started = time.process_time()
        read_download(data)
        spent[kind] += time.process_time() - started
        size[kind] += len(data)
    return {kind: round(spent[kind] / (size[kind] / 1e6), 3) for kind in spent}


def main() -> None:
    parser = arguments(__doc__, "books of 12 chapters (the full run: 40)")
    default_chars = Settings.from_env({}).ocr_max_chars
    parser.add_argument(
        "--ocr-max-chars",
        type=int,
        default=default_chars,
        metavar="N",
        help=f"FPTRACK_OCR_MAX_CHARS for the crawl and the OCR CPU figure ({default_chars}; 0: read whole)",
    )
    parser.add_argument("--ocr-levers", action="store_true", help="print only the OCR levers' table")
    args = parser.parse_args()
    require_corpus(BENCHMARK)
    per_book = 12 if args.quick else 40
    books = _books(per_book)
    progress(f"books of {per_book} chapters: {', '.join(f'{w} ({len(c)})' for w, c in books.items())}")
    titles = {**REGISTERED, **UNREGISTERED}
    files: dict[str, tuple[str, bytes]] = {}  # path -> (kind, bytes)
    truth: dict[str, set[tuple[str, int]]] = {}  # path -> (work title, chapter index) the file holds
    negatives: set[str] = set()
    for work_id, chapters in books.items():
        for kind in KINDS:
            path = f"/{work_id}/{kind}.{kind.split('-')[0]}"
            files[path] = (kind, _file(kind, titles[work_id], chapters))
            if work_id in REGISTERED:
                indexes = [len(chapters) // 2 + 1] if kind == "chapter-txt" else range(1, len(chapters) + 1)
                truth[path] = {(titles[work_id], index) for index in indexes}
            else:
                negatives.add(path)
    image_pages: dict[str, Page] = {}
    timed: dict[str, list[tuple[str, bytes]]] = {}  # one image page of each registered book: its OCR CPU
    chapter_text: dict[str, str] = {}
    for work_id, chapters in books.items():
        served, index_of, images_of = _image_pages(work_id, chapters, 2 if args.quick else 4)
        image_pages.update(served)
        for path, index in index_of.items():
            files[path] = (IMAGE_KIND, b"")
            chapter_text[path] = chapters[index - 1][1]
            if work_id in REGISTERED:
                truth[path] = {(titles[work_id], index)}
            else:
                negatives.add(path)
        first = next(iter(images_of))
        if work_id in REGISTERED:
            timed[first] = images_of[first]
    if args.ocr_levers:
        # each timed page's first 1,000 characters as one image: every lever reads the same, in minutes
        heads = {path: chapter_text[path][:LEVER_CHARS] for path in timed}
        images = {
            path: [(f"{path}.png", chapter_png(head, size=24, noise=0.002, seed=1))]
            for path, head in heads.items()
        }
        levers = _ocr_levers(images, heads)
        print_table(
            f"OCR levers (Tesseract, {len(timed)} image pages of registered books)",
            ["lever", "CPU s/page", "chars read/page", "CPU ms/char", "read right"],
            [list(row.values()) for row in levers],
        )
        emit({"benchmark": BENCHMARK, "quick": bool(args.quick), "ocr_levers": levers, "machine": machine()})
        return
    hostile = _hostile(books["sanguoyanyi"])
    links = "".join(f'<li><a href="{p}">{p}</a></li>' for p in [*files, *(f"/bad/{n}" for n in hostile)])
    pages = {"/": Page.html(f"<html><body><ul>{links}</ul></body></html>")}
    pages.update(
        {p: Page(data, content_type=TYPES[kind]) for p, (kind, data) in files.items() if kind != IMAGE_KIND}
    )
    pages.update(image_pages)
    pages.update({f"/bad/{n}": Page(data, content_type="application/zip") for n, data in hostile.items()})

    with tempfile.TemporaryDirectory(prefix="fptrack-containers-") as folder:
        data_dir = Path(folder)
        _run(data_dir, "init")
        for work_id in REGISTERED:
            work_file = data_dir / f"{work_id}.txt"
            work_file.write_text(_book_text(titles[work_id], books[work_id]), encoding="utf-8")
            _run(data_dir, "works", "add", str(work_file), "--title", titles[work_id])
        with serve_site(pages) as base:
            progress(f"crawling {len(pages)} URLs on {base}")
            started = time.monotonic()
            crawl = _run(
                data_dir,
                *("crawl", base + "/", "--allow-private-host", base.key, "--depth", "1"),
                ocr_max_chars=args.ocr_max_chars,
            )
            crawl_seconds = time.monotonic() - started
        matches = [
            json.loads(line) for line in _run(data_dir, "matches", "--format", "json").stdout.splitlines()
        ]
        found: dict[str, set[tuple[str, int]]] = defaultdict(set)
        for match in matches:
            found[match["page_url"].removeprefix(base)].add((match["work_title"], match["chapter_index"]))
        hostile_rows = _hostile_costs(hostile, data_dir)
        stored = _page_notes(data_dir, base)

    by_kind: dict[str, dict[str, Any]] = {}
    for kind in (*KINDS, IMAGE_KIND):
        paths = [p for p in truth if files[p][0] == kind]
        held = sum(len(truth[p]) for p in paths)
        hit_files = sum(1 for p in paths if truth[p] & found.get(p, set()))
        hit_chapters = sum(len(truth[p] & found.get(p, set())) for p in paths)
        wrong = sum(len(found.get(p, set()) - truth[p]) for p in paths)
        by_kind[kind] = {
            "files": len(paths),
            "file_recall": round(hit_files / len(paths), 3),
            "chapters": held,
            "chapter_recall": round(hit_chapters / held, 3),
            "wrong_chapters": wrong,
        }
    false_matches = sum(len(found.get(p, set())) for p in negatives) + sum(
        len(found.get(f"/bad/{n}", set())) for n in hostile
    )
    cpu = _cpu_per_mb({p: entry for p, entry in files.items() if entry[0] != IMAGE_KIND})
    progress(f"OCR CPU on {len(timed)} image pages")
    ocr = _ocr_cpu(timed, chapter_text, args.ocr_max_chars)
    print_table(
        "Downloads: recall by kind",
        ["kind", "files", "file recall", "chapters", "chapter recall", "wrong chapters", "CPU s/MB read"],
        [
            [
                *(k, v["files"], v["file_recall"], v["chapters"], v["chapter_recall"], v["wrong_chapters"]),
                cpu.get(k, "OCR: below"),
            ]
            for k, v in by_kind.items()
        ],
    )
    print(
        f"\nfalse matches on the unregistered book's {len(negatives)} files and {len(hostile)} hostile "
        f"files: "
        f"{false_matches}"
    )
    print(
        f"OCR (Tesseract, {ocr['pages']} image pages of {ocr['chars_per_page']} characters on average, "
        f"max_chars {ocr['max_chars']}: {ocr['chars_read_per_page']} read): "
        f"{ocr['cpu_seconds_per_page']} s of CPU per page, {ocr['cpu_seconds_per_1000_chars']} s per 1,000 "
        "characters read"
    )
    print_table(
        "Hostile files (read in a fresh process)",
        ["file", "bytes", "seconds", "CPU s", "peak RSS added MB", "peak RSS MB", "texts", "problem"],
        [
            [
                r["file"],
                r["bytes"],
                r["seconds"],
                r["cpu_seconds"],
                r["peak_rss_added_mb"],
                r["peak_rss_mb"],
                r["texts"],
                r["problem"],
            ]
            for r in hostile_rows
        ],
    )
    missed = [p for p in truth if not truth[p] <= found.get(p, set())]
    print_table(
        "Files with chapters not found (the page's error or note)",
        ["file", "found", "held", "page"],
        [
            [p, len(truth[p] & found.get(p, set())), len(truth[p]), stored.get(p, "not stored")[:100]]
            for p in missed
        ],
    )
    summary = [line.strip() for line in crawl.stdout.splitlines() if line.startswith("crawled ")]
    print(f"\ncrawl: {summary[0] if summary else '?'} ({crawl_seconds:.1f} s)")
    emit(
        {
            "benchmark": BENCHMARK,
            "quick": bool(args.quick),
            "chapters_per_book": per_book,
            "by_kind": by_kind,
            "false_matches": false_matches,
            "cpu_seconds_per_mb": cpu,
            "ocr": ocr,
            "hostile": hostile_rows,
            "crawl_seconds": round(crawl_seconds, 1),
            "machine": machine(),
        }
    )


if __name__ == "__main__":
    main()
