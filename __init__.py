"""fptrack: crawl the web, fingerprint every page, and find the pirated copies of registered texts.

The repository's top-level folders are the subpackages of this one package (``fptrack.crawler``,
``fptrack.storage``, ...): installed, the project claims the single name ``fptrack``. Their layers and the
path of a page and of a work through them: ``docs/architecture.md``.
"""

__version__ = "0.1.0"
