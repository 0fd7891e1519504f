"""The live pirate web of benchmarks.monitoring.freshness: a deterministic timeline, the rate-limited site's
Retry-After window, and real fetches with urllib against its loopback servers. Generated text (no corpus)."""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request

import pytest

from benchmarks.monitoring._live_web import NOTICE, RETRY_AFTER, LiveWeb, Site, Text, build_live_web

_POOL = "天地玄黄宇宙洪荒日月盈昃辰宿列张寒来暑往秋收冬藏闰余成岁律吕调阳云腾致雨露结为霜金生丽水玉出昆冈"


def _texts(prefix: str, count: int, seed: int) -> list[Text]:
    rng = random.Random(seed)
    return [
        Text(f"{prefix}:{n}", f"第{n}章 标题{n}",
             tuple("".join(rng.choice(_POOL) for _ in range(40)) + "。" for _ in range(5)))
        for n in range(1, count + 1)
    ]  # fmt: skip


def _web(seed: int = 19, duration: float = 1200.0) -> LiveWeb:
    return build_live_web(
        {"书": _texts("book", 30, 1)},
        _texts("innocent", 10, 2),
        duration=duration,
        schedule=120,
        period=120,
        per_site=20,
        innocent_per_site=4,
        seed=seed,
    )


def _events(web: LiveWeb) -> list[tuple[str, str, str, list[tuple[float, str]]]]:
    return [(c.site, c.path, c.text.key, c.events) for c in web.copies()]


def test_the_timeline_is_the_same_for_a_seed_and_holds_every_kind_of_change() -> None:
    first, again, other = _web(), _web(), _web(seed=20)
    assert _events(first) == _events(again)
    assert _events(first) != _events(other)
    states = {state for c in first.copies() for _, state in c.events}
    assert {"up", "gone", "notice", "moved301", "moved404"} <= states
    # the mirror publishes the first site's chapters on the same timeline, at its own URLs
    mirror, original = first.sites["mirror-a"].copies, first.sites["plain-a"].copies
    assert [(c.text.key, c.events) for c in mirror] == [(c.text.key, c.events) for c in original]
    assert {c.path for c in mirror}.isdisjoint({c.path for c in original})
    # removals leave two re-check periods before the end; the script site only ever shows the notice
    for copy in first.copies():
        for removal in copy.removals():
            assert removal["at"] <= 1200 - 2 * 120 - 30
    assert all(s != "gone" for c in first.sites["script"].copies for _, s in c.events)
    # a short run (the benchmark's --quick) still removes copies both ways
    quick = build_live_web({"书": _texts("book", 30, 1)}, _texts("innocent", 10, 2), duration=300,
                           schedule=60, period=60, per_site=8, innocent_per_site=3)  # fmt: skip
    assert {"gone", "notice", "moved301", "moved404"} <= {s for c in quick.copies() for _, s in c.events}


def test_up_intervals_follow_the_events() -> None:
    copy = next(c for c in _web().copies() if [s for _, s in c.events] == ["up", "gone", "up"])
    (start, _), (removed, _), (back, _) = copy.events
    assert copy.intervals(1200, ("up",)) == [(start, removed), (back, 1200)]
    assert copy.removals() == [{"path": copy.path, "at": removed, "kind": "gone", "back": back}]


def test_the_rate_limited_site_opens_a_retry_after_window_and_counts_what_arrives_inside() -> None:
    web = _web()
    site: Site = web.sites["limited"]
    now = 1000.0
    assert site.respond("/", {}, now).status == 200
    assert site.respond("/", {}, now + 0.3).status == 200
    third = site.respond("/", {}, now + 0.6)  # a third request within one second
    assert third.status == 429 and third.headers["Retry-After"] == str(RETRY_AFTER)
    inside = site.respond("/", {}, now + 3.0)
    assert inside.status == 429 and inside.headers["Retry-After"] == "3"
    assert site.respond("/", {}, now + 5.7).status == 200  # the window is over
    assert site.respond("/", {}, now + 7.0).status == 200  # one a second is fine
    assert site.respond("/", {}, now + 8.0).status == 200
    assert [r.inside_window for r in site.requests] == [False, False, False, True, False, False, False]
    # the other sites never limit
    plain = web.sites["plain-a"]
    assert {plain.respond("/", {}, now + i * 0.01).status for i in range(10)} == {200}


def _get(url: str) -> tuple[int, str, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode("utf-8", "replace"), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace"), dict(error.headers)


def test_served_sites_change_with_the_clock() -> None:
    web = _web()
    web.serve()
    try:
        site = web.sites["plain-a"]
        copy = next(c for c in site.copies if [s for _, s in c.events][:2] == ["up", "notice"])
        appeared, removed = copy.events[0][0], copy.events[1][0]
        web.start(t0=time.time() - appeared - 1)  # one second after the copy appeared
        status, home, _ = _get(site.base + "/")
        assert status == 200 and site.toc_path(1) in home
        status, toc, _ = _get(site.base + site.toc_path(1))
        assert copy.path in toc
        status, page, headers = _get(site.base + copy.path)
        assert status == 200 and copy.text.paragraphs[0] in page and "ETag" in headers
        # later: the chapter is replaced by the notice, still 200 and still listed
        web.start(t0=time.time() - removed - 1)
        status, page, _ = _get(site.base + copy.path)
        assert status == 200 and NOTICE[0] in page and copy.text.paragraphs[0] not in page
        # a page the web never had, and the script site's JSON behind a chapter
        assert _get(site.base + "/nowhere.html")[0] == 404
        script = web.sites["script"].copies[0]
        web.start(t0=time.time() - script.events[0][0] - 1)
        status, body, _ = _get(web.sites["script"].base + script.endpoint)
        assert status == 200 and json.loads(body)["paragraphs"] == list(script.text.paragraphs)
        status, html, _ = _get(web.sites["script"].base + script.path)
        assert status == 200 and script.text.paragraphs[0] not in html
        logged = [(r.site, r.path, r.status) for r in web.requests()]
        assert ("plain-a", "/nowhere.html", 404) in logged and len(logged) == 7
    finally:
        web.stop()


@pytest.mark.parametrize("how", ["moved301", "moved404"])
def test_the_mover_serves_a_moved_chapter_at_its_new_url(how: str) -> None:
    web = _web()
    web.serve()
    try:
        site = web.sites["mover"]
        copy = next(c for c in site.copies if c.events[-1][1] == how)
        web.start(t0=time.time() - copy.events[-1][0] - 1)
        status, _, _ = _get(site.base + copy.new_path)
        assert status == 200
        status, toc, _ = _get(site.base + site.toc_path(copy.book))
        assert copy.new_path in toc and copy.path + '"' not in toc
        status, _, _ = _get(site.base + copy.path)  # urllib follows the 301
        assert status == (200 if how == "moved301" else 404)
    finally:
        web.stop()
