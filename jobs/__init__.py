"""The jobs layer: what drives the crawler and the compare. ``crawler`` holds the Scrapy parts only and
``compare`` the comparison; nothing below this layer imports it, and it never shells out to a layer above.

Its modules, one line each:

- :mod:`jobs.bootstrap`: the set-up of every process (table cache, chapter index, sessions, warm-up);
- :mod:`jobs.crawls`: one crawl job, from start URLs to settled verdicts (``fptrack crawl``, site crawls);
- :mod:`jobs.stage_process`: the embedded crawl's compare stage, in a process pool of its own;
- :mod:`jobs.settling`: a crawl's sites settled once their pages are compared (templates, split chapters);
- :mod:`jobs.retroactive`: a new work indexed and the pages crawled before it compared again;
- :mod:`jobs.sweep`: what was stored and left unfinished, found and handed on again;
- :mod:`jobs.sites`: the monitored sites, their settings and schedules, and which are due;
- :mod:`jobs.site_runs`: one crawl per site at a time (claims), dead crawls reaped, a crawl's own process;
- :mod:`jobs.site_crawl`: one site's crawl in this process, and that process's entry (``python -m ...``);
- :mod:`jobs.rechecks`: takedown re-checks, fetching flagged and confirmed copies again;
- :mod:`jobs.discovery`: pirate sites nobody listed, proposed, probed and queued for a decision;
- :mod:`jobs.search_providers`: the web search APIs discovery asks;
- :mod:`jobs.notices`: the life of a takedown notice, its senders and the hosts' contacts;
- :mod:`jobs.notice_render`: what a notice says (Chinese and English) and which legal element it lacks;
- :mod:`jobs.delivery`: a notice sent by email through the SMTP relay, and the platforms' bulk formats;
- :mod:`jobs.tasks`: the Celery tasks, thin, on the app of :mod:`taskqueue`.
"""

PAGES_PER_TASK = 32
"""Pages per ``process_pages`` task (:mod:`jobs.tasks`), and per batch the embedded crawl's compare process is
sent: one transaction, one candidate query per code kind for all of them."""
