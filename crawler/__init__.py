"""The crawler: Scrapy spiders and pipelines that fetch pages and hand them over as :class:`CrawledPage`.

Public surface: :func:`run_crawl` (once per process, see its docstring), the values it produces, and the
pure main-text extractor :func:`extract_main_text`.
"""

from fptrack.crawler.extract import ExtractedText, extract_main_text
from fptrack.crawler.pages import CrawledPage, CrawlError, CrawlProgress, CrawlStats
from fptrack.crawler.runner import run_crawl

__all__ = [
    "CrawlError",
    "CrawlProgress",
    "CrawlStats",
    "CrawledPage",
    "ExtractedText",
    "extract_main_text",
    "run_crawl",
]
