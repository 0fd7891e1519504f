"""The crawl keeps Scrapy's logger at the level its output prints (crawler.runner): no per-request records
made only to be dropped, and every record a handler would print still made."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from fptrack.crawler.runner import _scrapy_logs_at_printed_level


@pytest.fixture
def scrapy_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("scrapy")
    level = logger.level
    logger.setLevel(logging.DEBUG)  # as Scrapy's logging set-up leaves it
    try:
        yield logger
    finally:
        logger.setLevel(level)


def _handlers(*levels: int) -> list[logging.Handler]:
    handlers: list[logging.Handler] = []
    for level in levels:
        handler = logging.NullHandler()
        handler.setLevel(level)
        handlers.append(handler)
    return handlers


def test_scrapy_logs_at_the_lowest_level_printed(scrapy_logger: logging.Logger) -> None:
    _scrapy_logs_at_printed_level(_handlers(logging.WARNING, logging.ERROR))
    engine = logging.getLogger("scrapy.core.engine")
    assert not engine.isEnabledFor(logging.DEBUG) and not engine.isEnabledFor(logging.INFO)
    assert engine.isEnabledFor(logging.WARNING)


def test_a_verbose_or_capturing_handler_keeps_scrapy_debug(scrapy_logger: logging.Logger) -> None:
    _scrapy_logs_at_printed_level(_handlers(logging.WARNING, logging.NOTSET))  # e.g. pytest's capture
    assert logging.getLogger("scrapy.core.engine").isEnabledFor(logging.DEBUG)
    _scrapy_logs_at_printed_level(_handlers(logging.INFO))  # fptrack crawl -v
    assert logging.getLogger("scrapy.core.engine").isEnabledFor(logging.INFO)
