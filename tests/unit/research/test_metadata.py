"""research.metadata: page metadata read from HTML, its MinHash signature, the seed's combined similarity."""

from __future__ import annotations

import numpy as np
import pytest

from fptrack.research.metadata import (
    COMBINED_MU,
    PageMetadata,
    combined_similarity,
    metadata_features,
    metadata_from_html,
    metadata_signature,
    metadata_similarity,
)
from fptrack.research.minhash import MinHashParams

PAGE = """<html><head><meta name="Keywords" content="西游记, 孙悟空，花果山、 美猴王">
<meta property="article:tag" content="名著"></head><body>
<nav><a href="/">首页</a><a href="/news/">新闻</a></nav>
<p>正文<a href="http://ref.example.cn/a/1.html">参考</a><a rel="tag" href="/tag/x">神话</a>
<a href="mailto:x@example.com">信</a><a href="/related/42.html/">相关</a></p></body></html>"""


def test_metadata_from_html_reads_keywords_tags_and_links() -> None:
    meta = metadata_from_html(PAGE, "http://www.origin.example.com/a/1.html")
    assert meta.keywords == {"西游记", "孙悟空", "花果山", "美猴王"}
    assert meta.tags == {"名著", "神话"}
    assert "http://ref.example.cn/a/1.html" in meta.links
    assert "http://www.origin.example.com/related/42.html/" in meta.links
    features = metadata_features(meta)
    assert "kw:孙悟空" in features and "tag:神话" in features
    assert "link:ref.example.cn/a/1.html" in features  # another host: host and path
    assert "link:/related/42.html" in features  # own host: the path only, trailing slash dropped
    assert not any(f.startswith("link:mailto") or "x@example.com" in f for f in features)


def test_a_mirror_rewriting_its_internal_links_keeps_the_same_link_features() -> None:
    origin = metadata_from_html(PAGE, "http://www.origin.example.com/a/1.html")
    mirror = metadata_from_html(PAGE, "https://mirror.example.net/copy/9.html")
    assert metadata_features(origin) == metadata_features(mirror)
    assert metadata_similarity(metadata_signature(origin), metadata_signature(mirror)) == 1.0


def test_signature_estimates_the_jaccard_of_the_feature_sets() -> None:
    shared = {f"共同{i}" for i in range(60)}
    a = PageMetadata(keywords=frozenset(shared | {f"甲{i}" for i in range(60)}))
    b = PageMetadata(keywords=frozenset(shared | {f"乙{i}" for i in range(60)}))
    params = MinHashParams(num_perm=256, bands=64, rows=4)
    estimate = metadata_similarity(metadata_signature(a, params), metadata_signature(b, params))
    assert estimate == pytest.approx(60 / 180, abs=0.1)  # exact Jaccard 1/3; sd ~0.03 at 256 permutations
    c = PageMetadata(keywords=frozenset(f"丙{i}" for i in range(120)))
    assert metadata_similarity(metadata_signature(a, params), metadata_signature(c, params)) < 0.05


def test_kinds_never_meet_and_empty_metadata_is_like_nothing() -> None:
    as_keyword = metadata_signature(PageMetadata(keywords=frozenset({"武侠"})))
    as_tag = metadata_signature(PageMetadata(tags=frozenset({"武侠"})))
    assert metadata_similarity(as_keyword, as_tag) < 0.1
    empty = metadata_signature(PageMetadata())
    assert metadata_similarity(empty, empty) == 0.0
    assert metadata_similarity(empty, as_keyword) == 0.0
    assert metadata_from_html("   ", "http://a.example/") == PageMetadata(url="http://a.example/")
    assert metadata_from_html("<!-- only a comment -->", "http://a.example/") == PageMetadata(
        url="http://a.example/"
    )
    assert np.array_equal(
        empty, metadata_signature(metadata_from_html("<p>no meta</p>", "http://a.example/"))
    )


def test_combined_similarity_is_the_seed_formula() -> None:
    assert combined_similarity(0, 1.0) == pytest.approx(1.0)
    assert combined_similarity(0, 0.0) == pytest.approx(COMBINED_MU)
    assert combined_similarity(3, 0.5, mu=0.8) == pytest.approx(0.8 / 4 + 0.2 * 0.5)
    # the content decides: identical content with unrelated metadata beats distant content with equal metadata
    assert combined_similarity(0, 0.0) > combined_similarity(6, 1.0)
    for bad in ((-1, 0.5, 0.85), (0, 1.5, 0.85), (0, 0.5, 1.2)):
        with pytest.raises(ValueError):
            combined_similarity(*bad)  # type: ignore[arg-type]
