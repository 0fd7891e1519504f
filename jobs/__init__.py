"""The jobs layer: what drives the crawler and the compare. ``crawler`` holds the Scrapy parts only and
``compare`` the comparison; nothing below this layer imports it, and it never shells out to a layer above.

- :mod:`jobs.crawls`: one crawl job, from start URLs to settled verdicts (``fptrack crawl``, site crawls);
- :mod:`jobs.sites`: the monitored sites, their settings and schedules, and which are due;
- :mod:`jobs.site_runs`: the claims that keep one crawl per site at a time, the reaping of crawls that died,
  and a site's crawl started in a process of its own;
- :mod:`jobs.site_crawl`: one site's crawl in this process (``run_site``) and that process's entry
  (``python -m fptrack.jobs.site_crawl NAME``);
- :mod:`jobs.pipeline`: settling sites, retroactive detection, the sweep of what was left behind;
- :mod:`jobs.rechecks`: takedown re-checks;
- :mod:`jobs.tasks`: the Celery tasks, thin, on the app of :mod:`taskqueue`.
"""

PAGES_PER_TASK = 32
"""Pages per ``process_pages`` task (:mod:`jobs.tasks`), and per batch the embedded crawl's compare process is
sent: one transaction, one candidate query per code kind for all of them."""
