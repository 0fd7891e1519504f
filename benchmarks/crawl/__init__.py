"""Benchmarks of crawling itself: rendering in Chromium, a huge page, one crawl shared by processes."""
