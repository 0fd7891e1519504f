"""Benchmarks of the whole crawl-to-match pipeline: throughput against bare Scrapy, capacity per page."""
