"""The jobs layer: what drives the crawler and the compare (crawl jobs, monitored sites and their schedules,
settling, takedown re-checks, the Celery tasks). ``crawler`` holds the Scrapy parts only; nothing below this
layer imports it."""
