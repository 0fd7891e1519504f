"""robots.txt, read one way by crawls, re-checks and discovery probes: Protego, the parser Scrapy uses by
default (Google's rules: ``*`` wildcards, ``$`` anchors, the longest matching rule wins and ``Allow`` wins a
tie, the ``fptrack`` group else ``*``).

The crawl gets it through Scrapy's ``ROBOTSTXT_PARSER`` (:class:`ScrapyRobotParser`), the plain client of
re-checks and probes (:mod:`crawler.guarded_http`) through :class:`RobotsRules`: both decode the file and
match URLs with the same code, so a re-check never fetches what the crawl refused."""

from __future__ import annotations

from protego import Protego

__all__ = ["USER_AGENT", "RobotsRules", "ScrapyRobotParser"]

USER_AGENT = "fptrack"
"""The product token the groups of a robots.txt are matched against (Scrapy's ``ROBOTSTXT_USER_AGENT``)."""


class RobotsRules:
    """The rules of one site's robots.txt."""

    def __init__(self, body: bytes) -> None:
        # decoded as Scrapy decodes it: UTF-8 (a BOM dropped), undecodable bytes ignored
        self._parser = Protego.parse(body.decode("utf-8-sig", errors="ignore"))

    @classmethod
    def allow_all(cls) -> RobotsRules:
        """The rules of a site whose robots.txt is missing or unreachable: everything is allowed."""
        return cls(b"")

    def allows(self, url: str, user_agent: str = USER_AGENT) -> bool:
        """Whether ``user_agent`` may fetch the absolute ``url``."""
        return bool(self._parser.can_fetch(url, user_agent))

    def crawl_delay(self, user_agent: str = USER_AGENT) -> float | None:
        """The group's ``Crawl-delay`` in seconds, or ``None`` when it sets none."""
        delay = self._parser.crawl_delay(user_agent)
        return None if delay is None else float(delay)


class ScrapyRobotParser:
    """Scrapy's robots.txt parser interface (``ROBOTSTXT_PARSER``) over :class:`RobotsRules`."""

    def __init__(self, body: bytes) -> None:
        self.rules = RobotsRules(body)

    @classmethod
    def from_crawler(cls, crawler: object, robotstxt_body: bytes) -> ScrapyRobotParser:
        return cls(robotstxt_body)

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        return self.rules.allows(_text(url), _text(user_agent))

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        return self.rules.crawl_delay(_text(user_agent))


def _text(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value
