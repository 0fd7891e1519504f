import random

from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.compare.scoring import DEFAULT_RULE, decide
from fptrack.compare.verify import align
from fptrack.fingerprint.contract import AlignParams
from fptrack.fingerprint.features import char_shingle_hashes
from fptrack.fingerprint.pinyin import UNKNOWN_INITIAL, pinyin_initials

CJK = (
    "天地玄黄宇宙洪荒日月盈昃辰宿列张寒来暑往秋收冬藏"
    "闰余成岁律吕调阳云腾致雨露结为霜金生丽水玉出昆冈剑号巨阙珠称夜光"
)


def _random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(CJK) for _ in range(n))


def test_kgram_hashes_the_alignment_uses_are_equal_iff_kgrams_equal() -> None:
    text = "甲乙丙丁甲乙丙丁戊"
    hashes = char_shingle_hashes(text, 4)
    assert len(hashes) == len(text) - 3
    assert hashes[0] == hashes[4] and len(set(hashes.tolist())) == 5


@settings(max_examples=60)
@given(st.integers(0, 10_000), st.integers(60, 400), st.integers(0, 300), st.integers(0, 300))
def test_a_copied_passage_is_found_where_it_is(seed: int, length: int, before: int, after: int) -> None:
    rng = random.Random(seed)
    chapter = _random_text(rng, 800)
    start = rng.randrange(0, 800 - length + 1)
    passage = chapter[start : start + length]
    page = "新闻" * (before // 2) + passage + "广告" * (after // 2)
    alignment = align(page, chapter)
    assert len(alignment.runs) >= 1
    p_start, p_end, c_start, c_end = max(alignment.runs, key=lambda r: r[1] - r[0])
    offset = len("新闻" * (before // 2))
    assert abs(p_start - offset) <= 2 and abs(p_end - (offset + length)) <= 2
    assert abs(c_start - start) <= 2 and abs(c_end - (start + length)) <= 2


def test_unrelated_texts_do_not_align() -> None:
    rng = random.Random(3)
    alignment = align(_random_text(rng, 2000), _random_text(rng, 2000))
    assert alignment.runs == ()
    assert not decide(alignment).flagged


def test_pinyin_channel_survives_same_sound_swaps() -> None:
    rng = random.Random(5)
    chapter = _random_text(rng, 600)
    initials = "".join(rng.choice("abcdfghjklmnpqrstwxyz") for _ in chapter)
    # every 4th character swapped for another with the same initial: the character channel breaks everywhere
    page = "".join("某" if i % 4 == 0 else ch for i, ch in enumerate(chapter))
    assert align(page, chapter).runs == ()
    alignment = align(page, chapter, initials, initials)
    assert alignment.chapter_coverage > 0.95
    assert decide(alignment).flagged


def test_short_quotation_is_not_piracy() -> None:
    rng = random.Random(9)
    chapter = _random_text(rng, 3000)
    page = (
        _random_text(rng, 500) + chapter[1000 : 1000 + DEFAULT_RULE.min_copied - 5] + _random_text(rng, 500)
    )
    decision = decide(align(page, chapter))
    assert not decision.flagged


def test_long_excerpt_of_a_long_chapter_is_piracy() -> None:
    rng = random.Random(10)
    chapter = _random_text(rng, 8000)
    page = _random_text(rng, 1500) + chapter[3000:3700] + _random_text(rng, 1500)
    decision = decide(align(page, chapter))
    assert decision.flagged and decision.copied_chars >= 690
    assert decision.score < 0.2  # the score says which share of the chapter was taken


def test_a_template_with_other_numbers_is_not_one_run() -> None:
    """Market reports on one template share their fixed words; the numbers between them differ: no copy."""
    rng = random.Random(3)

    def report() -> str:
        parts = []
        for index in ("上证50etf", "上证180etf", "深证100etf", "中小板etf", "上证红利etf", "创业板etf"):
            parts.append(
                f"{index}{rng.choice(('上涨', '跌'))}{rng.randint(10, 999):03d}报{rng.randint(1000, 9999)}元"
            )
        return "".join(parts)

    page, chapter = report(), report()
    # merged over numbers
    assert len(align(page, chapter, params=AlignParams(max_gap_digit_share=1.0)).runs) == 1
    assert align(page, chapter).runs == ()
    assert align(page, page).page_covered == len(page)  # the same report, numbers and all, is one run


def test_placeholder_initials_are_no_evidence() -> None:
    """Kana have no pinyin: unrelated kana texts share every run of placeholder initials, never a copied
    run."""
    page, chapter = "あいうえおかきくけこ" * 8, "さしすせそたちつてと" * 8
    initials = pinyin_initials(page)
    assert set(initials) == {UNKNOWN_INITIAL} and set(pinyin_initials(chapter)) == {UNKNOWN_INITIAL}
    assert align(page, chapter, initials, pinyin_initials(chapter)).runs == ()
    # the same text is still found through its characters
    assert align(page, page, initials, initials).page_covered == len(page)


def test_anchors_split_between_two_distant_diagonals_still_align() -> None:
    """Generated kana prose repeats its words all over both texts: a run's anchors can fall evenly on two
    distant diagonals, leaving none near their median (this raised on an empty selection, then, taking both
    diagonals, gave a 44-character run a 659-character chapter range and half a chapter's coverage)."""
    from testbed.kana import kana_prose

    slack = AlignParams().diagonal_slack
    for seed in range(12, 20):
        page = kana_prose(random.Random(seed), 1800)
        chapter = kana_prose(random.Random(1000 + seed), 2000)
        alignment = align(page, chapter, pinyin_initials(page), pinyin_initials(chapter))
        for p0, p1, c0, c1 in alignment.runs:
            assert 0 <= c0 <= c1 <= len(chapter)
            assert c1 - c0 <= (p1 - p0) + 2 * max(slack, 0.2 * (p1 - p0))  # one diagonal, within its slack
        assert decide(alignment).flagged is False
