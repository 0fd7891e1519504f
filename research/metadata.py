"""Page metadata as a MinHash signature, and the seed's combined content + metadata similarity.

The simhash-optimization seed (ALGORITHMS.md 5) judges two documents by their content *and* by their "other
information" (keywords, tags, references), the latter a set compared by MinHash:

    sim(A, B) = mu / (Hamming(A, B) + 1) + (1 - mu) * MinHash(meta_A, meta_B),   mu in [0.8, 0.9]

(the ``+ 1`` keeps identical contents finite; with mu near 0.85 the content decides, the metadata tips cases
where the Hamming distance alone is ambiguous).

For a web page the "other information" is what its HTML declares about it: the ``<meta name="keywords">``
list, its tags (``rel="tag"`` links, ``article:tag`` meta properties) and its outgoing links (every ``<a
href>``: navigation included, as a page declares them; nothing here knows which part is the template). Each
becomes one feature string with its kind as a prefix, so a keyword never meets a tag of the same spelling.
Links are reduced to what survives re-hosting: a link to another host keeps host and path; a link into the
page's own host keeps only its path, because a mirror rewrites its internal links to its own domain while the
pages they point to stay the same.

Not on the product path: ``benchmarks/mirror_similarity.py`` (archived at commit e5e83a4c52) measured
content-only, metadata-only and combined similarity on generated mirror sites, and docs/fingerprints.md says
what it found and why the page path does not use it (pages store no metadata).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import numpy as np

from fptrack.fingerprint.features import hash_strings
from fptrack.research.minhash import MinHashParams, estimate_jaccard, minhash_signature

__all__ = [
    "COMBINED_MU",
    "METADATA_MINHASH",
    "PageMetadata",
    "combined_similarity",
    "metadata_features",
    "metadata_from_html",
    "metadata_signature",
    "metadata_similarity",
]

METADATA_MINHASH = MinHashParams()
"""128 permutations, one-permutation hashing: the module's defaults (ALGORITHMS.md 5)."""

COMBINED_MU = 0.85
"""The seed's weight of the content term (it gives 0.8 to 0.9; the middle, not tuned)."""


@dataclass(frozen=True)
class PageMetadata:
    """What a page declares about itself: keywords, tags, outgoing links (absolute URLs), and its own URL (to
    tell internal links from external ones)."""

    url: str = ""
    keywords: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    links: frozenset[str] = frozenset()


def _clean(term: str) -> str:
    return " ".join(term.split()).casefold()


def _link_feature(link: str, own_host: str) -> str | None:
    parts = urlsplit(link)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    host = parts.netloc.casefold().removeprefix("www.")
    path = (parts.path or "/").rstrip("/") or "/"
    if parts.query:
        path += "?" + parts.query
    return f"link:{path}" if host == own_host else f"link:{host}{path}"


def metadata_features(meta: PageMetadata) -> list[str]:
    """The sorted, distinct feature strings of ``meta`` (``kw:``, ``tag:``, ``link:`` prefixes)."""
    own_host = urlsplit(meta.url).netloc.casefold().removeprefix("www.")
    features = {f"kw:{_clean(k)}" for k in meta.keywords if _clean(k)}
    features |= {f"tag:{_clean(t)}" for t in meta.tags if _clean(t)}
    for link in meta.links:
        feature = _link_feature(link, own_host)
        if feature is not None:
            features.add(feature)
    return sorted(features)


def metadata_signature(meta: PageMetadata, params: MinHashParams = METADATA_MINHASH) -> np.ndarray:
    """The MinHash signature of ``meta``'s feature set (all 2^64 - 1 for a page that declares nothing, which
    matches only another such page: ``metadata_similarity`` scores that 0)."""
    return minhash_signature(hash_strings(metadata_features(meta)), params)


_EMPTY = np.uint64(np.iinfo(np.uint64).max)


def metadata_similarity(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """Estimated Jaccard similarity of two metadata signatures; 0 when either page declared nothing (two pages
    without metadata are not alike by their metadata)."""
    if bool(np.all(sig_a == _EMPTY)) or bool(np.all(sig_b == _EMPTY)):
        return 0.0
    return estimate_jaccard(sig_a, sig_b)


def combined_similarity(hamming_distance: int, metadata_jaccard: float, mu: float = COMBINED_MU) -> float:
    """The seed's ``mu / (hamming + 1) + (1 - mu) * metadata_jaccard``, in [0, 1]."""
    if hamming_distance < 0:
        raise ValueError(f"a Hamming distance is >= 0, got {hamming_distance}")
    if not 0.0 <= mu <= 1.0:
        raise ValueError(f"mu must be in [0, 1], got {mu}")
    if not 0.0 <= metadata_jaccard <= 1.0:
        raise ValueError(f"a Jaccard similarity is in [0, 1], got {metadata_jaccard}")
    return mu / (hamming_distance + 1) + (1.0 - mu) * metadata_jaccard


def _split_keywords(content: str) -> Iterable[str]:
    for part in content.replace("，", ",").replace("、", ",").replace(";", ",").split(","):
        if part.strip():
            yield part.strip()


def metadata_from_html(html: str, url: str) -> PageMetadata:
    """Read keywords (``<meta name="keywords">``), tags (``rel="tag"`` links, ``<meta
    property="article:tag">``) and the outgoing links (``<a href>``, made absolute against ``url``) of a page.
    A page with nothing parsable declares nothing (empty metadata), never an exception."""
    import lxml.etree
    import lxml.html

    if not html.strip():
        return PageMetadata(url=url)
    try:
        root = lxml.html.document_fromstring(html)
    except (lxml.etree.ParserError, ValueError):  # nothing parsable (a lone comment, an encoding declaration)
        return PageMetadata(url=url)
    keywords: set[str] = set()
    for content in root.xpath('//meta[translate(@name, "KEYWORDS", "keywords")="keywords"]/@content'):
        keywords.update(_split_keywords(str(content)))
    tags = {str(t).strip() for t in root.xpath('//meta[@property="article:tag"]/@content') if str(t).strip()}
    tags |= {a.text_content().strip() for a in root.xpath('//a[contains(concat(" ", @rel, " "), " tag ")]')}
    links = {urljoin(url, str(h).strip()) for h in root.xpath("//a/@href") if str(h).strip()}
    return PageMetadata(
        url=url, keywords=frozenset(keywords), tags=frozenset(t for t in tags if t), links=frozenset(links)
    )
