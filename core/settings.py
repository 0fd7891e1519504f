"""The settings object: every connection URL and tunable, read once from the environment.

No module reads the environment at import time; entry points (the CLI, the Celery worker, tests) build a
:class:`Settings` with :meth:`Settings.from_env` and pass it to the factories that need it.

Every variable, with its default and meaning:

- ``FPTRACK_DATA_DIR`` (default ``./fptrack-data``): local folder for the embedded database
- ``FPTRACK_CACHE_DIR`` (default ``$XDG_CACHE_HOME/fptrack`` or ``~/.cache/fptrack``): tables worth keeping
  between processes (the normaliser's per-character table, the schema's head revision); empty: none
- ``FPTRACK_DATABASE_URL`` (default ``sqlite:///<data dir>/fptrack.db``): SQLAlchemy URL; ``postgresql://``
  uses psycopg 3
- ``FPTRACK_READ_DATABASE_URL`` (default unset: the primary): a PostgreSQL streaming replica of
  ``FPTRACK_DATABASE_URL`` that the admin's read-only pages read from (``admin.views.read_sessions``,
  docs/capacity.md); refused with SQLite
- ``FPTRACK_BROKER_URL`` (default unset): Celery broker (``redis://``, ``amqp://``); unset runs tasks
  in-process
- ``FPTRACK_RESULT_BACKEND`` (default unset): Celery result backend (defaults to the broker for ``redis://``)
- ``FPTRACK_MAINTAIN_EVERY`` (default ``3600``): seconds between scheduled upkeep runs
  (``fptrack worker --beat``)
- ``FPTRACK_SWEEP_EVERY`` (default ``300``): seconds between sweeps for pages and works left behind
  (``fptrack worker --beat``)
- ``FPTRACK_SWEEP_AFTER`` (default ``600``): a page stored (a work registered) this many seconds ago and still
  not compared (indexed) is handed on again
- ``FPTRACK_NO_WORKER_SECONDS`` (default ``20``): a crawl whose queued pages see no progress this long asks
  the workers, and fails when none consumes the queue
- ``FPTRACK_STALL_SECONDS`` (default ``60``): a crawl whose queued pages see no progress this long hands them
  on again (a worker died)
- ``FPTRACK_TASK_QUEUE`` (default ``fptrack``): Celery queue of the fingerprint stage (separate environments
  sharing a broker)
- ``FPTRACK_SIMHASH_K`` (default ``3``): Hamming distance under which two 64-bit Simhashes are near-duplicates
- ``FPTRACK_SIMHASH_BLOCKS`` (default ``4``): blocks of the permuted-prefix index (must exceed k)
- ``FPTRACK_SIMHASH_HOT_MU`` (default ``2.0``): a bucket over (1 + mu) x the mean bucket size is re-split
  (``storage.hot_buckets.split_hot_buckets``)
- ``FPTRACK_SIMHASH_HOT_MIN_SIZE`` (default ``1024``): buckets smaller than this are never re-split
  (docs/storage.md has the measurement)
- ``FPTRACK_PAGE_SAMPLE_WINDOW`` (default ``64``): a crawled page keeps, for the look-ups of newly
  registered works, the minimum winnowing hash of every window of this many k-grams (16-4096): any passage of
  ``window + k - 1`` characters it shares with a work is found (``storage.fingerprints.page_sample``)
- ``FPTRACK_RETAIN_GONE_DAYS`` (default ``30``; ``0``: never): a page that has answered gone (404, 410,
  451) at every fetch for that long (``pages.gone_since``) loses its fingerprints (``fptrack maintain``); its
  row, matches and evidence stay
- ``FPTRACK_RETAIN_UNSEEN_DAYS`` (default ``365``; ``0``: never): a page no crawl or re-check has fetched for
  that long loses its fingerprints the same way (``storage.housekeeping.retire_page_fingerprints``)
- ``FPTRACK_CHAPTER_INDEX`` (default ``memory``): where crawl-time compare finds the registered chapters
  holding a page's codes: ``memory`` (each process keeps them as arrays, refreshed when the registry changes:
  ``compare.chapter_index``) or ``database`` (a ``code_index`` query per batch)
- ``FPTRACK_CRAWL_CONCURRENCY`` (default ``8``): concurrent requests of one crawl (>= 1)
- ``FPTRACK_COMPARE_PROCESS`` (default ``true``): with no broker, a crawl compares its pages in a child
  process of its own, on another core (``jobs.stage_process``); ``false`` keeps them in the crawl's process
  (a one-core machine)
- ``FPTRACK_CRAWL_CONCURRENCY_PER_SITE`` (default ``2``): concurrent requests to one site (>= 1; a site's
  ``concurrency`` setting wins)
- ``FPTRACK_CRAWL_DELAY`` (default ``0``): seconds at least between two requests to one site (a site's
  ``delay`` setting wins)
- ``FPTRACK_CRAWL_AUTOTHROTTLE`` (default ``true``): Scrapy's AutoThrottle: slow down as a site answers slower
- ``FPTRACK_CRAWL_TIMEOUT`` (default ``20``): seconds before a request is abandoned (> 0)
- ``FPTRACK_CRAWL_MAX_BYTES`` (default ``10485760``): response bodies larger than this are abandoned (reported
  as failures; >= 1)
- ``FPTRACK_CRAWL_MAX_LINKS`` (default ``5000``): links taken from one page at most (the first in document
  order; >= 1)
- ``FPTRACK_MAX_PAGE_CHARS`` (default ``300000``): characters of extracted text kept per page at most, cut at
  a paragraph boundary and recorded in ``pages.note`` (>= 1)
- ``FPTRACK_CRAWL_OBEY_ROBOTS`` (default ``true``): crawls obey robots.txt (a site's ``obey_robots`` setting
  wins)
- ``FPTRACK_ALLOW_PRIVATE_HOSTS`` (default unset): comma-separated hosts (``host``, ``host:port``) or networks
  (``10.0.0.0/8``) a crawl may reach although they are private, loopback, link-local... (``crawler.guard``)
- ``FPTRACK_CHROMIUM`` (default unset): the browser that renders pages built by scripts (a path or a command);
  unset: ``chromium`` on the PATH (Debian's package; never downloaded)
- ``FPTRACK_RENDER_TIMEOUT`` (default ``20``): seconds a rendered page may take to load (> 0); a page that
  does not keeps its static text
- ``FPTRACK_RENDER_IDLE_WAIT`` (default ``3``): seconds at most, after the load event, waiting for a rendered
  page's requests to end (>= 0)
- ``FPTRACK_RENDER_PAGES`` (default ``2``): browser pages rendering at a time in one crawl (>= 1)
- ``FPTRACK_RENDER_MIN_CHARS`` (default ``50``): with ``render_js=auto``, a page with scripts and less main
  text than this is rendered (>= 1)
- ``FPTRACK_USER_AGENT`` (default ``fptrack/<version> (+content fingerprint tracker)``): crawler user agent
- ``FPTRACK_SCHEDULE_EVERY`` (default ``30``): seconds between two looks for due site crawls
  (``fptrack worker --beat``)
- ``FPTRACK_CRAWL_STALE_SECONDS`` (default ``120``): a site crawl whose process gave no sign of life this long
  is marked failed (it died); the same for a takedown re-check run's claim
- ``FPTRACK_RECHECK_EVERY`` (default ``86400``): seconds between two runs of the takedown re-checks
  (``fptrack worker --beat``)
- ``FPTRACK_RECHECK_AFTER`` (default ``72000``): a flagged or confirmed match not re-checked for this many
  seconds is due (20 h: a daily run takes every match)
- ``FPTRACK_RECHECK_LIMIT`` (default ``2000``): matches re-checked at most per run, the longest unchecked
  first
- ``FPTRACK_CRAWL_REDIS_URL`` (default the broker URL when it is ``redis://``): Redis holding the shared
  frontier of distributed crawls (``fptrack crawl --distributed``, a site's ``distributed`` setting;
  ``crawler.distributed``)
- ``FPTRACK_ADMIN_HOSTS`` (default ``localhost,127.0.0.1,::1``): host names the admin answers to (``Host``
  header, and ``Origin``/``Referer`` of every POST)
- ``FPTRACK_ADMIN_SECURE_COOKIES`` (default auto): ``true``: the session cookie is ``Secure`` (HTTPS only);
  auto = true unless every admin host is loopback
- ``FPTRACK_ADMIN_TRUSTED_PROXIES`` (default unset): addresses or networks (``10.0.0.0/8``) of the reverse
  proxies in front of the admin
- ``FPTRACK_ADMIN_TRUSTED_USER_HEADER`` (default unset): a header (e.g. ``X-Forwarded-User``) naming the
  logged-in account, believed only from a trusted proxy
- ``FPTRACK_SIGNING_KEY_FILE`` (default ``<data dir>/signing-key.pem``): the installation's Ed25519 key that
  signs evidence bundles (PEM, PKCS#8), generated there with mode 0600 on first use (docs/evidence.md)
- ``FPTRACK_TSA_URL`` (default unset): an RFC 3161 time-stamping authority (``http(s)://``) that timestamps
  every evidence bundle; unset, bundles say "not timestamped"
- ``FPTRACK_NETWORKS`` (default ``true``): every compared page gets a page Simhash and its near duplicates on
  other sites are counted per pair of sites (``compare.networks``, ``fptrack networks``)
- ``FPTRACK_NETWORK_MIN_SHARED`` (default ``3``) / ``FPTRACK_NETWORK_MIN_SHARE`` (default ``0.5``): two sites
  are one network when at least this many of their pages, and this share of the smaller site's pages, are
  close (page Simhashes within 2 bits; docs/discovery.md has the measurement)
- ``FPTRACK_NETWORK_PAIRS_PER_SITE`` (default ``1``) / ``FPTRACK_NETWORK_MAX_PAIRS`` (default ``16``): the
  near duplicates a page records, per other site and in all (close ones first, then by site): the networks
  need evidence that two sites share texts, not every stored copy of a chapter
- ``FPTRACK_DISCOVERY_EVERY`` (default ``0``: off): seconds between scheduled discovery runs
  (``fptrack worker --beat``; ``fptrack discover`` runs it by hand)
- ``FPTRACK_DISCOVERY_PROBE_PAGES`` (default ``5``): pages fetched at most when probing a candidate site
- ``FPTRACK_DISCOVERY_AUTO_MONITOR`` (default unset: never): a candidate whose probe scores at least this
  (share of probed pages that copy registered chapters, 0-1) becomes a monitored site without a person's
  accept
- ``FPTRACK_DISCOVERY_SCHEDULE`` (default ``1d``): the crawl schedule of a site made from an accepted
  candidate
- ``FPTRACK_SEARCH_PROVIDERS`` (default unset: none): search providers discovery queries, comma-separated:
  ``bing`` (Bing Web Search API v7), ``google`` (Programmable Search JSON API), ``serpapi`` (SerpAPI, Baidu)
- ``FPTRACK_SEARCH_RESULTS`` (default ``10``): results asked for per query
- ``FPTRACK_SEARCH_BING_KEY``, ``FPTRACK_SEARCH_BING_ENDPOINT``; ``FPTRACK_SEARCH_GOOGLE_KEY``,
  ``FPTRACK_SEARCH_GOOGLE_CX``, ``FPTRACK_SEARCH_GOOGLE_ENDPOINT``; ``FPTRACK_SEARCH_SERPAPI_KEY``,
  ``FPTRACK_SEARCH_SERPAPI_ENDPOINT``: each provider's API key (and search engine id) and its endpoint
  (defaults: the providers' public endpoints)
- ``FPTRACK_SMTP_HOST`` (default unset): the SMTP relay that takedown notices are sent through
  (``fptrack notices send``, jobs/delivery.py); unset: notices are drafted and exported, not sent
- ``FPTRACK_SMTP_PORT`` (default ``587``): its port
- ``FPTRACK_SMTP_USER`` / ``FPTRACK_SMTP_PASSWORD`` (default unset): its login, when it asks for one
- ``FPTRACK_SMTP_STARTTLS`` (default ``true``): upgrade the connection with STARTTLS before logging in or
  sending (``false`` only for a relay on loopback or a trusted network)
- ``FPTRACK_SMTP_FROM`` (default the sender's email): the ``From`` address of notices (the sender's email is
  always the ``Reply-To``)
- ``FPTRACK_NOTICE_ESCALATE_AFTER`` (default ``7``): days a copy may stay up after a notice before a second
  notice to the same recipient, then one to the host's next contact upstream (``fptrack notices follow-up``)
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from fptrack.core.errors import FptrackError

__all__ = [
    "CHAPTER_INDEX_MODES",
    "LOOPBACK_HOSTS",
    "ConfigurationError",
    "Settings",
    "classify_allow_entry",
    "is_loopback_host",
]

_SUPPORTED_BACKENDS = ("sqlite", "postgresql")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
CHAPTER_INDEX_MODES = ("memory", "database")


class ConfigurationError(FptrackError, ValueError):
    """A setting is missing or malformed; the message names the variable and says what is expected."""


def normalise_database_url(raw: str, *, variable: str = "FPTRACK_DATABASE_URL") -> str:
    """Validate a database URL and pin PostgreSQL to the psycopg 3 driver.

    Raises :class:`ConfigurationError` for anything that is not a SQLite or PostgreSQL URL.
    """
    try:
        url: URL = make_url(raw)
    except ArgumentError:
        raise ConfigurationError(
            f"{variable}={raw!r} is not a database URL; expected e.g. "
            "sqlite:///fptrack-data/fptrack.db or postgresql://user@127.0.0.1:5432/fptrack"
        ) from None
    backend = url.get_backend_name()
    if backend not in _SUPPORTED_BACKENDS:
        raise ConfigurationError(
            f"{variable}={raw!r}: unsupported database {backend!r}; fptrack runs on sqlite or postgresql"
        )
    if backend == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
        if not url.database:
            raise ConfigurationError(f"{variable}={raw!r} names no database (add /<dbname> at the end)")
    return url.render_as_string(hide_password=False)


@dataclass(frozen=True)
class Settings:
    """Everything configurable, in one frozen object."""

    data_dir: Path = field(default_factory=lambda: Path("fptrack-data"))
    cache_dir: Path | None = None
    database_url: str = ""
    read_database_url: str | None = None
    broker_url: str | None = None
    result_backend: str | None = None
    task_queue: str = "fptrack"
    maintain_every: int = 3600
    sweep_every: int = 300
    sweep_after: int = 600
    no_worker_seconds: float = 20.0
    stall_seconds: float = 60.0
    simhash_k: int = 3
    simhash_blocks: int = 4
    simhash_hot_mu: float = 2.0
    simhash_hot_min_size: int = 1024
    chapter_index: str = "memory"
    page_sample_window: int = 64
    retain_gone_days: float = 30.0
    retain_unseen_days: float = 365.0
    crawl_concurrency: int = 8
    compare_process: bool = True
    crawl_concurrency_per_site: int = 2
    crawl_delay: float = 0.0
    crawl_autothrottle: bool = True
    crawl_timeout: float = 20.0
    crawl_max_body_bytes: int = 10 * 1024 * 1024
    crawl_max_links: int = 5000
    max_page_chars: int = 300_000
    crawl_obey_robots: bool = True
    allow_private_hosts: tuple[str, ...] = ()
    chromium: str = ""
    render_timeout: float = 20.0
    render_idle_wait: float = 3.0
    render_pages: int = 2
    render_min_chars: int = 50
    user_agent: str = "fptrack/0.1 (+content fingerprint tracker)"
    schedule_every: float = 30.0
    crawl_stale_seconds: float = 120.0
    recheck_every: float = 60.0
    recheck_after: float = 72000.0
    recheck_limit: int = 2000
    recheck_young_every: float = 3600.0
    recheck_young_for: float = 86400.0
    recheck_confirm_after: float = 120.0
    site_rate: float = 1.0
    retry_after_max: float = 3600.0
    schedule_backoff_max: float = 4.0
    crawl_redis_url: str | None = None
    admin_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    admin_secure_cookies: bool | None = None
    admin_trusted_proxies: tuple[str, ...] = ()
    admin_trusted_user_header: str | None = None
    signing_key_file: Path | None = None
    tsa_url: str | None = None
    # pirate networks and discovery (compare.networks, jobs.discovery, jobs.search_providers)
    networks: bool = True
    network_min_shared: int = 3
    network_min_share: float = 0.5
    network_pairs_per_site: int = 1
    network_max_pairs: int = 16
    discovery_every: float = 0.0
    discovery_probe_pages: int = 5
    discovery_auto_monitor_score: float | None = None
    discovery_schedule: str = "1d"
    search_providers: tuple[str, ...] = ()
    search_results: int = 10
    search_bing_key: str = ""
    search_bing_endpoint: str = "https://api.bing.microsoft.com/v7.0/search"
    search_google_key: str = ""
    search_google_cx: str = ""
    search_google_endpoint: str = "https://www.googleapis.com/customsearch/v1"
    search_serpapi_key: str = ""
    search_serpapi_endpoint: str = "https://serpapi.com/search.json"
    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_user: str | None = None
    smtp_password: str | None = field(default=None, repr=False)  # never in a log line
    smtp_starttls: bool = True
    smtp_from: str = ""
    notice_escalate_after: float = 7.0

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
        self._check_crawl_settings()
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

    def _check_crawl_settings(self) -> None:
        """Crawl tunables that would hang a crawl (0 concurrency) or switch a cap off (0 bytes) are
        refused."""
        checks: list[tuple[str, float, float, str]] = [
            ("FPTRACK_CRAWL_CONCURRENCY", self.crawl_concurrency, 1, "an integer >= 1"),
            ("FPTRACK_CRAWL_CONCURRENCY_PER_SITE", self.crawl_concurrency_per_site, 1, "an integer >= 1"),
            ("FPTRACK_CRAWL_MAX_BYTES", self.crawl_max_body_bytes, 1, "a number of bytes >= 1"),
            ("FPTRACK_CRAWL_MAX_LINKS", self.crawl_max_links, 1, "an integer >= 1"),
            ("FPTRACK_MAX_PAGE_CHARS", self.max_page_chars, 1, "a number of characters >= 1"),
            ("FPTRACK_CRAWL_DELAY", self.crawl_delay, 0, "a number of seconds >= 0"),
            ("FPTRACK_SCHEDULE_EVERY", self.schedule_every, 1, "a number of seconds >= 1"),
            ("FPTRACK_CRAWL_STALE_SECONDS", self.crawl_stale_seconds, 5, "a number of seconds >= 5"),
            ("FPTRACK_RECHECK_EVERY", self.recheck_every, 1, "a number of seconds >= 1"),
            ("FPTRACK_RECHECK_AFTER", self.recheck_after, 0, "a number of seconds >= 0"),
            ("FPTRACK_RECHECK_LIMIT", self.recheck_limit, 1, "an integer >= 1"),
            ("FPTRACK_RECHECK_YOUNG_EVERY", self.recheck_young_every, 1, "a number of seconds >= 1"),
            ("FPTRACK_RECHECK_YOUNG_FOR", self.recheck_young_for, 0, "a number of seconds >= 0"),
            ("FPTRACK_RECHECK_CONFIRM_AFTER", self.recheck_confirm_after, 0, "a number of seconds >= 0"),
            ("FPTRACK_RETRY_AFTER_MAX", self.retry_after_max, 1, "a number of seconds >= 1"),
            ("FPTRACK_SCHEDULE_BACKOFF_MAX", self.schedule_backoff_max, 1, "a factor >= 1"),
            ("FPTRACK_RENDER_IDLE_WAIT", self.render_idle_wait, 0, "a number of seconds >= 0"),
            ("FPTRACK_RENDER_PAGES", self.render_pages, 1, "an integer >= 1"),
            ("FPTRACK_RENDER_MIN_CHARS", self.render_min_chars, 1, "an integer >= 1"),
            ("FPTRACK_RETAIN_GONE_DAYS", self.retain_gone_days, 0, "a number of days >= 0 (0: never)"),
            ("FPTRACK_RETAIN_UNSEEN_DAYS", self.retain_unseen_days, 0, "a number of days >= 0 (0: never)"),
            ("FPTRACK_NETWORK_MIN_SHARED", self.network_min_shared, 1, "an integer >= 1"),
            ("FPTRACK_NETWORK_MIN_SHARE", self.network_min_share, 0, "a share between 0 and 1"),
            ("FPTRACK_NETWORK_PAIRS_PER_SITE", self.network_pairs_per_site, 1, "an integer >= 1"),
            ("FPTRACK_NETWORK_MAX_PAIRS", self.network_max_pairs, 1, "an integer >= 1"),
            ("FPTRACK_DISCOVERY_EVERY", self.discovery_every, 0, "a number of seconds >= 0 (0: off)"),
            ("FPTRACK_DISCOVERY_PROBE_PAGES", self.discovery_probe_pages, 1, "an integer >= 1"),
            ("FPTRACK_SEARCH_RESULTS", self.search_results, 1, "an integer >= 1"),
            ("FPTRACK_SMTP_PORT", self.smtp_port, 1, "a port number >= 1"),
            ("FPTRACK_NOTICE_ESCALATE_AFTER", self.notice_escalate_after, 0, "a number of days >= 0"),
        ]
        for name, value, minimum, expected in checks:
            if value < minimum:
                raise ConfigurationError(f"{name}={value:g} is out of range: expected {expected}")
        if not self.crawl_timeout > 0:
            raise ConfigurationError(
                f"FPTRACK_CRAWL_TIMEOUT={self.crawl_timeout:g} is out of range: expected seconds > 0"
            )
        if not self.site_rate > 0:
            raise ConfigurationError(
                f"FPTRACK_SITE_RATE={self.site_rate:g} is out of range: expected requests per second > 0"
            )
        if not self.render_timeout > 0:
            raise ConfigurationError(
                f"FPTRACK_RENDER_TIMEOUT={self.render_timeout:g} is out of range: expected seconds > 0"
            )
        entries = []
        for entry in self.allow_private_hosts:
            try:
                entries.append(classify_allow_entry(entry)[1])
            except ValueError as error:
                raise ConfigurationError(f"FPTRACK_ALLOW_PRIVATE_HOSTS: {error}") from None
        object.__setattr__(self, "allow_private_hosts", tuple(dict.fromkeys(entries)))

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
    def tasks_in_process(self) -> bool:
        """True when no broker is configured: Celery tasks run eagerly in the calling process."""
        return not self.broker_url

    def with_overrides(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        data_dir = Path(env.get("FPTRACK_DATA_DIR") or "fptrack-data")
        if "FPTRACK_CACHE_DIR" in env:
            cache_dir = Path(env["FPTRACK_CACHE_DIR"]) if env["FPTRACK_CACHE_DIR"] else None
        else:
            cache_root = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            cache_dir = Path(cache_root) / "fptrack"
        return cls(
            data_dir=data_dir,
            cache_dir=cache_dir,
            database_url=env.get("FPTRACK_DATABASE_URL", ""),
            read_database_url=(env.get("FPTRACK_READ_DATABASE_URL") or "").strip() or None,
            broker_url=env.get("FPTRACK_BROKER_URL") or None,
            result_backend=env.get("FPTRACK_RESULT_BACKEND") or None,
            task_queue=env.get("FPTRACK_TASK_QUEUE") or "fptrack",
            maintain_every=_int(env, "FPTRACK_MAINTAIN_EVERY", 3600),
            sweep_every=_int(env, "FPTRACK_SWEEP_EVERY", 300),
            sweep_after=_int(env, "FPTRACK_SWEEP_AFTER", 600),
            no_worker_seconds=_float(env, "FPTRACK_NO_WORKER_SECONDS", 20.0),
            stall_seconds=_float(env, "FPTRACK_STALL_SECONDS", 60.0),
            simhash_k=_int(env, "FPTRACK_SIMHASH_K", 3),
            simhash_blocks=_int(env, "FPTRACK_SIMHASH_BLOCKS", 4),
            simhash_hot_mu=_float(env, "FPTRACK_SIMHASH_HOT_MU", 2.0),
            simhash_hot_min_size=_int(env, "FPTRACK_SIMHASH_HOT_MIN_SIZE", 1024),
            chapter_index=(env.get("FPTRACK_CHAPTER_INDEX") or "memory").strip().lower(),
            page_sample_window=_int(env, "FPTRACK_PAGE_SAMPLE_WINDOW", 64),
            retain_gone_days=_float(env, "FPTRACK_RETAIN_GONE_DAYS", 30.0),
            retain_unseen_days=_float(env, "FPTRACK_RETAIN_UNSEEN_DAYS", 365.0),
            crawl_concurrency=_int(env, "FPTRACK_CRAWL_CONCURRENCY", 8),
            compare_process=_bool(env, "FPTRACK_COMPARE_PROCESS", True),
            crawl_concurrency_per_site=_int(env, "FPTRACK_CRAWL_CONCURRENCY_PER_SITE", 2),
            crawl_delay=_float(env, "FPTRACK_CRAWL_DELAY", 0.0),
            crawl_autothrottle=_bool(env, "FPTRACK_CRAWL_AUTOTHROTTLE", True),
            crawl_timeout=_float(env, "FPTRACK_CRAWL_TIMEOUT", 20.0),
            crawl_max_body_bytes=_int(env, "FPTRACK_CRAWL_MAX_BYTES", 10 * 1024 * 1024),
            crawl_max_links=_int(env, "FPTRACK_CRAWL_MAX_LINKS", 5000),
            max_page_chars=_int(env, "FPTRACK_MAX_PAGE_CHARS", 300_000),
            crawl_obey_robots=_bool(env, "FPTRACK_CRAWL_OBEY_ROBOTS", True),
            allow_private_hosts=_list(env, "FPTRACK_ALLOW_PRIVATE_HOSTS"),
            chromium=(env.get("FPTRACK_CHROMIUM") or "").strip(),
            render_timeout=_float(env, "FPTRACK_RENDER_TIMEOUT", 20.0),
            render_idle_wait=_float(env, "FPTRACK_RENDER_IDLE_WAIT", 3.0),
            render_pages=_int(env, "FPTRACK_RENDER_PAGES", 2),
            render_min_chars=_int(env, "FPTRACK_RENDER_MIN_CHARS", 50),
            user_agent=env.get("FPTRACK_USER_AGENT") or cls.user_agent,
            schedule_every=_float(env, "FPTRACK_SCHEDULE_EVERY", 30.0),
            crawl_stale_seconds=_float(env, "FPTRACK_CRAWL_STALE_SECONDS", 120.0),
            recheck_every=_float(env, "FPTRACK_RECHECK_EVERY", 60.0),
            recheck_after=_float(env, "FPTRACK_RECHECK_AFTER", 72000.0),
            recheck_limit=_int(env, "FPTRACK_RECHECK_LIMIT", 2000),
            recheck_young_every=_float(env, "FPTRACK_RECHECK_YOUNG_EVERY", 3600.0),
            recheck_young_for=_float(env, "FPTRACK_RECHECK_YOUNG_FOR", 86400.0),
            recheck_confirm_after=_float(env, "FPTRACK_RECHECK_CONFIRM_AFTER", 120.0),
            site_rate=_float(env, "FPTRACK_SITE_RATE", 1.0),
            retry_after_max=_float(env, "FPTRACK_RETRY_AFTER_MAX", 3600.0),
            schedule_backoff_max=_float(env, "FPTRACK_SCHEDULE_BACKOFF_MAX", 4.0),
            crawl_redis_url=(env.get("FPTRACK_CRAWL_REDIS_URL") or "").strip() or None,
            admin_hosts=_list(env, "FPTRACK_ADMIN_HOSTS") or LOOPBACK_HOSTS,
            admin_secure_cookies=_optional_bool(env, "FPTRACK_ADMIN_SECURE_COOKIES"),
            admin_trusted_proxies=_list(env, "FPTRACK_ADMIN_TRUSTED_PROXIES"),
            admin_trusted_user_header=(env.get("FPTRACK_ADMIN_TRUSTED_USER_HEADER") or "").strip() or None,
            signing_key_file=_optional_path(env, "FPTRACK_SIGNING_KEY_FILE"),
            tsa_url=(env.get("FPTRACK_TSA_URL") or "").strip() or None,
            networks=_bool(env, "FPTRACK_NETWORKS", True),
            network_min_shared=_int(env, "FPTRACK_NETWORK_MIN_SHARED", 3),
            network_min_share=_float(env, "FPTRACK_NETWORK_MIN_SHARE", 0.5),
            network_pairs_per_site=_int(env, "FPTRACK_NETWORK_PAIRS_PER_SITE", 1),
            network_max_pairs=_int(env, "FPTRACK_NETWORK_MAX_PAIRS", 16),
            discovery_every=_float(env, "FPTRACK_DISCOVERY_EVERY", 0.0),
            discovery_probe_pages=_int(env, "FPTRACK_DISCOVERY_PROBE_PAGES", 5),
            discovery_auto_monitor_score=(
                _float(env, "FPTRACK_DISCOVERY_AUTO_MONITOR", 0.0)
                if env.get("FPTRACK_DISCOVERY_AUTO_MONITOR")
                else None
            ),
            discovery_schedule=(env.get("FPTRACK_DISCOVERY_SCHEDULE") or "1d").strip(),
            search_providers=tuple(p.lower() for p in _list(env, "FPTRACK_SEARCH_PROVIDERS")),
            search_results=_int(env, "FPTRACK_SEARCH_RESULTS", 10),
            search_bing_key=(env.get("FPTRACK_SEARCH_BING_KEY") or "").strip(),
            search_bing_endpoint=(
                env.get("FPTRACK_SEARCH_BING_ENDPOINT") or cls.search_bing_endpoint
            ).strip(),
            search_google_key=(env.get("FPTRACK_SEARCH_GOOGLE_KEY") or "").strip(),
            search_google_cx=(env.get("FPTRACK_SEARCH_GOOGLE_CX") or "").strip(),
            search_google_endpoint=(
                env.get("FPTRACK_SEARCH_GOOGLE_ENDPOINT") or cls.search_google_endpoint
            ).strip(),
            search_serpapi_key=(env.get("FPTRACK_SEARCH_SERPAPI_KEY") or "").strip(),
            search_serpapi_endpoint=(
                env.get("FPTRACK_SEARCH_SERPAPI_ENDPOINT") or cls.search_serpapi_endpoint
            ).strip(),
            smtp_host=(env.get("FPTRACK_SMTP_HOST") or "").strip() or None,
            smtp_port=_int(env, "FPTRACK_SMTP_PORT", 587),
            smtp_user=env.get("FPTRACK_SMTP_USER") or None,
            smtp_password=env.get("FPTRACK_SMTP_PASSWORD") or None,
            smtp_starttls=_bool(env, "FPTRACK_SMTP_STARTTLS", True),
            smtp_from=(env.get("FPTRACK_SMTP_FROM") or "").strip(),
            notice_escalate_after=_float(env, "FPTRACK_NOTICE_ESCALATE_AFTER", 7.0),
        )


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


def _optional_path(env: Mapping[str, str], name: str) -> Path | None:
    value = (env.get(name) or "").strip()
    return Path(value) if value else None


def _list(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in (env.get(name) or "").split(",") if item.strip())


def _optional_bool(env: Mapping[str, str], name: str) -> bool | None:
    if (env.get(name) or "").strip().lower() in ("", "auto"):
        return None
    return _bool(env, name, False)


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not an integer") from None


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw in (None, ""):
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name}={raw!r} is not a boolean (use true or false)")


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw in (None, ""):
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a number") from None
