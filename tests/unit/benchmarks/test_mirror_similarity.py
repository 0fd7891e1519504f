"""The generated mirror sites of benchmarks/mirror_similarity.py: each article on distinct hosts, mirrors that
keep what a re-hosting keeps, and scores that tell mirrors from neighbours where they should. Random text (no
corpus)."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np

from benchmarks.mirror_similarity import _best, build, combined, score
from fptrack.research.metadata import metadata_features, metadata_from_html

_POOL = (
    "天地玄黄宇宙洪荒日月盈昃辰宿列张寒来暑往秋收冬藏"
    "闰余成岁律吕调阳云腾致雨露结为霜金生丽水玉出昆冈剑号巨阙珠称夜光"
)


def _news(count: int) -> list[tuple[str, str]]:
    rng = random.Random(3)
    categories = ("体育", "财经", "科技")
    out = []
    for i in range(count):
        lines = [
            "".join(rng.choice(_POOL) for _ in range(rng.randint(60, 160))) for _ in range(rng.randint(3, 6))
        ]
        out.append((categories[i % 3], "\n".join(lines)))
    return out


def test_mirrors_rehost_each_article_on_other_hosts_with_its_links_and_keywords() -> None:
    pages = build(seed=1, articles=12, mirrors=2, news=_news(30))
    by_article = defaultdict(list)
    for page in pages:
        by_article[page.article].append(page)
    assert len(by_article) == 12
    for copies in by_article.values():
        assert len({p.site for p in copies}) == 3  # the origin and two mirrors, each on its own host
        features = [set(metadata_features(metadata_from_html(p.html, p.url))) for p in copies]
        shared = set.intersection(*features)
        # the article's references and its related articles (internal links rewritten per host) survive
        assert sum(f.startswith("link:") and ".example.cn/" in f for f in shared) >= 2
        assert sum(f.startswith("link:/") for f in shared) >= 1
        assert any(f.startswith("kw:") for f in shared)


def test_scores_put_rehosted_pairs_closer_than_unrelated_ones() -> None:
    pages = build(seed=2, articles=15, mirrors=2, news=_news(30))
    s = score(pages)
    assert int(s.same.sum()) == 15 * 3  # three pairs per article
    assert np.median(s.hamming[s.same]) < np.median(s.hamming[~s.same]) - 10
    assert np.mean(s.jaccard[s.same]) > np.mean(s.jaccard[~s.same])
    assert np.all((combined(s) >= 0) & (combined(s) <= 1))
    threshold = -_best(-s.hamming, s.same, -np.arange(0, 33))
    flagged = s.hamming <= threshold
    assert flagged[s.same].mean() >= 0.9 and (flagged & ~s.same).sum() <= 2
