"""Main-text extraction on varied chapter templates and hostile markup."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.crawler.extract import cap_text, extract_main_text, tidy_whitespace
from testbed.sites import TEMPLATES, render_chapter

# Written for these tests: a short made-up scene.
PARAGRAPHS = [
    "雨停了以后，院子里的石板路泛着光，小满提着灯笼去后门看那只受伤的猫。",
    "猫缩在柴堆里，见了灯光也不跑，只是轻轻地叫了一声。",
    "“别怕。”她蹲下来，把带来的半碗米饭放在地上。",
    "第二天一早，柴堆边只剩下空碗，墙头上却多了几个小小的泥脚印。",
]
CHROME = [
    "首页",
    "玄幻小说",
    "排行榜单",
    "上一章",
    "章节目录",
    "加入书签",
    "本站所有小说为转载作品",
    "Copyright",
    "下载客户端",
    "www.shuyou-example.com",
    "推荐：另一本书",
    "热门书一",
    "京ICP备",
    "document.write",
    "color:red",
    "注释不应出现",
    "书友小说网 >",
]


@pytest.mark.parametrize("template", TEMPLATES)
def test_templates_keep_the_body_and_drop_the_chrome(template: str) -> None:
    html = render_chapter("第九章 猫", PARAGRAPHS, template=template).decode("utf-8")
    result = extract_main_text(html, "http://novel.test/book/1/9.html")
    lines = result.text.split("\n")
    body = [line for line in lines if line in PARAGRAPHS]
    assert body == PARAGRAPHS, result.text
    extra = [line for line in lines if line not in PARAGRAPHS]
    assert all(len(line) <= len("第九章 猫") for line in extra), extra  # at most the chapter heading
    for fragment in CHROME:
        assert fragment not in result.text, fragment
    assert result.title == "第九章 猫_某书_书友小说网"


def test_br_separated_lines_with_nbsp_and_full_width_indents() -> None:
    html = (
        "<html><body><div class='nav'><a href='/'>首页</a><a href='/a'>分类</a></div><div id='content'>"
        "&nbsp;&nbsp;&nbsp;&nbsp;第一段，开头是四个不换行空格。<br/><br/>"
        "\u3000\u3000第二段，开头是两个全角空格。<br>\n\t<br>"
        "   第三段  中间有   多个空格。  </div></body></html>"
    )
    assert extract_main_text(html).text == (
        "第一段，开头是四个不换行空格。\n第二段，开头是两个全角空格。\n第三段 中间有 多个空格。"
    )


def test_text_split_over_sibling_divs_with_an_ad_between() -> None:
    html = (
        "<body><ul class='menu'><li><a href='/'>首页</a></li><li><a href='/b'>书库</a></li></ul>"
        "<div class='wrap'><div class='part'>" + PARAGRAPHS[0] + "<br>" + PARAGRAPHS[1] + "</div>"
        "<div><a href='/vip'>开通会员，畅读全站小说！</a></div>"
        "<div class='part'>" + PARAGRAPHS[2] + "</div><div class='part'>" + PARAGRAPHS[3] + "</div></div>"
        "<div class='foot'>联系我们 | 免责声明</div></body>"
    )
    assert extract_main_text(html).text.split("\n") == PARAGRAPHS


def test_ad_div_and_script_inside_the_content_are_dropped() -> None:
    html = (
        "<div id='content'>" + PARAGRAPHS[0] + "<br>"
        "<div class='ads'>点击领取新人红包，看书不花钱</div>"
        "<script>var s = '<p>脚本里的假正文，不应出现。</p>'; document.write(s);</script>"
        "<style>#content p { display: none }</style><!-- 这是注释，也不应出现 -->"
        + PARAGRAPHS[1]
        + "<span style='display:none'>隐藏的水印文字</span><br>"
        + PARAGRAPHS[2]
        + "</div>"
    )
    text = extract_main_text(html).text
    assert text.split("\n") == PARAGRAPHS[:3]


def test_paragraphs_in_p_elements_with_inline_markup() -> None:
    html = "<article>" + "".join(f"<p><b>{p[:3]}</b><em>{p[3:]}</em></p>" for p in PARAGRAPHS) + "</article>"
    assert extract_main_text(html).text.split("\n") == PARAGRAPHS


def test_a_link_inside_a_paragraph_does_not_drop_it() -> None:
    html = f"<div id='content'><p>{PARAGRAPHS[0]}<a href='/n'>注</a>{PARAGRAPHS[1]}</p></div>"
    assert extract_main_text(html).text == PARAGRAPHS[0] + "注" + PARAGRAPHS[1]


def test_short_dialogue_lines_inside_the_body_are_kept() -> None:
    html = "<div id='content'>" + PARAGRAPHS[0] + "<br>“嗯。”<br>“走吧”<br>" + PARAGRAPHS[1] + "</div>"
    assert extract_main_text(html).text.split("\n") == [PARAGRAPHS[0], "“嗯。”", "“走吧”", PARAGRAPHS[1]]


def test_pre_keeps_its_line_breaks() -> None:
    html = "<pre>" + "\n".join(PARAGRAPHS) + "\n\n</pre>"
    assert extract_main_text(html).text.split("\n") == PARAGRAPHS


def test_chapter_index_pages_have_no_text_but_all_links() -> None:
    items = "".join(f"<dd><a href='/book/1/{i}.html'>第{i}章 标题{i}</a></dd>" for i in range(1, 40))
    html = f"<html><head><title>某书最新章节列表</title></head><body><dl>{items}</dl></body></html>"
    result = extract_main_text(html, "http://novel.test/book/1/")
    assert result.text == ""
    assert result.title == "某书最新章节列表"
    assert len(result.links) == 39 and result.links[0] == "http://novel.test/book/1/1.html"


def test_links_are_absolute_http_deduplicated_and_fragment_free() -> None:
    html = (
        "<base href='http://novel.test/book/'>"
        "<a href='1.html'>一</a><a href='1.html#top'>一</a><a href='#comments'>评论</a>"
        "<a href='javascript:void(0)'>js</a><a href='mailto:a@b.c'>信</a><a href=' /2.html '>二</a>"
        "<a href='https://other.test/x'>外站</a><a href='http://[::1'>坏</a><a>无</a>"
    )
    assert extract_main_text(html, "http://ignored.test/").links == (
        "http://novel.test/book/1.html",
        "http://novel.test/2.html",
        "https://other.test/x",
    )


def test_title_falls_back_to_the_first_heading() -> None:
    html = "<html><head><title>  </title></head><body><h1> 第三章\n 归来 </h1><p>" + PARAGRAPHS[0] + "</p>"
    assert extract_main_text(html).title == "第三章 归来"


@pytest.mark.parametrize(
    "html",
    [
        "",
        "   \n ",
        "<html></html>",
        "<html><body></body></html>",
        "<!-- only a comment -->",
        "<script>alert(1)</script>",
        "\x00\x01\x02",
        "<<<>>><</>",
        "<?xml version='1.0' encoding='gbk'?><html><body><p>有XML声明的页面。</p></body></html>",
        "<div>" * 5000 + "很深的嵌套，也要能取出来。" + "</div>" * 5000,
        "<table><tr><td>表格<td>里的<tr><td>残缺</table></td></p></div>",
        "<p>" + "字" * 200_000 + "</p>",
    ],
)
def test_hostile_or_empty_documents_never_raise(html: str) -> None:
    result = extract_main_text(html, "http://novel.test/")
    assert isinstance(result.text, str)
    assert "\n\n" not in result.text and result.text == result.text.strip()


def test_xml_declaration_and_deep_nesting_still_give_text() -> None:
    declared = "<?xml version='1.0' encoding='gbk'?><html><body><p>有XML声明的页面。</p></body></html>"
    assert extract_main_text(declared).text == "有XML声明的页面。"
    # libxml2 stops nesting elements at depth ~2000 (text deeper than that is lost); 1000 is far beyond
    # any real template.
    deep = "<div>" * 1000 + "很深的嵌套，也要能取出来。" + "</div>" * 1000
    assert extract_main_text(deep).text == "很深的嵌套，也要能取出来。"


def test_whitespace_tidying_only() -> None:
    # No normalisation beyond whitespace: punctuation, width and script are kept as they are.
    line = "ＡＢＣ，半角,全角，繁體字與简体字！？"
    assert extract_main_text(f"<p>{line}</p>").text == line
    assert tidy_whitespace("\u3000\u3000甲\xa0\xa0乙\n\t丙 ") == "甲 乙 丙"


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "<div>",
                    "</div>",
                    "<p>",
                    "</p>",
                    "<br>",
                    "<a href='/x'>",
                    "</a>",
                    "<script>",
                    "</script>",
                    "<!--",
                    "-->",
                    "&nbsp;",
                    "\u3000",
                    "<",
                    ">",
                    "&",
                    "\n",
                    "<li>",
                    "<div class='ad'>",
                    "<title>",
                    "</title>",
                ]
            ),
            st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30),
        ),
        max_size=40,
    )
)
def test_arbitrary_markup_gives_tidy_text(pieces: list[str]) -> None:
    result = extract_main_text("".join(pieces), "http://novel.test/")
    for line in result.text.split("\n") if result.text else []:
        assert line and line == tidy_whitespace(line)
    assert all(link.startswith("http") and "#" not in link for link in result.links)


_BODY = "<br>".join(PARAGRAPHS)


@pytest.mark.parametrize(
    "html",
    [
        pytest.param(
            "<table><tr><td><a href=/>首页</a> | <a href=/l>书库</a></td></tr><tr><td width=20%>"
            "<a href=/a>玄幻</a><br><a href=/b>武侠</a></td><td>" + _BODY + "</td></tr>"
            "<tr><td colspan=2>联系站长：admin@example.com 本站内容来自网络</td></tr></table>",
            id="table-layout",
        ),
        pytest.param(
            "<div class=left><h3>作品简介</h3>"
            "<p>一个关于小镇少女和流浪猫的温暖故事，讲述了成长与陪伴。</p></div>"
            "<div class=right><div id=txt>" + _BODY + "</div></div>",
            id="sidebar-blurb",
        ),
        pytest.param(
            "<div id=content>" + _BODY + "</div><div id=pl>"
            "<div class=item><span>书友甲：</span>写得真好，期待更新！"
            "</div><div class=item><span>书友乙：</span>猫太可爱了，作者加油。</div></div>",
            id="comment-thread",
        ),
        pytest.param(
            "<div><div><a href=/>首页</a><a href=/x>排行</a><a href=/y>完本</a></div><div>" + _BODY + "</div>"
            "<div>关于我们 联系方式</div></div>",
            id="no-class-hints",
        ),
        pytest.param(
            "<div id=content1>"
            + PARAGRAPHS[0]
            + "</div><div class=gg>广告</div><div id=content2>"
            + "<br>".join(PARAGRAPHS[1:])
            + "</div>",
            id="uneven-numbered-parts",
        ),
    ],
)
def test_more_layouts(html: str) -> None:
    assert extract_main_text(html).text.split("\n") == PARAGRAPHS


def test_promotion_line_inside_a_short_body_does_not_lose_the_body() -> None:
    html = (
        "<div id=content>天才一秒记住本站地址：www.example-novel.com。最快更新！无弹窗！<br>"
        + PARAGRAPHS[0]
        + "</div>"
        "<div class=footer>Copyright 2024 示例 All Rights Reserved.</div>"
    )
    assert extract_main_text(html).text == PARAGRAPHS[0]


def test_chapter_swallowed_by_an_unclosed_navigation_div_is_kept() -> None:
    # Broken markup: the menu's <div class="nav"> is never closed, so the chapter ends up inside it.
    prose = [
        "初夏的一个下午，一个扎着马尾辫的姑娘抱着一个纸盒走进了铺子，说盒子里是她外婆留下的一件旧旗袍。",
        "陈师傅打开纸盒愣住了，那是一件墨绿色的真丝旗袍，襟上绣着几枝白玉兰，针脚细密，一看就是老手艺。",
    ]
    html = (
        '<html><body><div class="nav"><ul><li><a href="/">首页</a></li>'
        '<li><a href="/x/">玄幻小说</a></li></ul>'
        "<div class='read'><p>" + "<p>".join(prose) + "<div><a href='/prev'>上一章</a></div></body></html>"
    )
    text = extract_main_text(html).text
    assert text.split("\n") == prose


# ------------------------------------------------------------------------------- fixes seen on pirate pages


def _pirate(body: str, *, style: str = "", title: str = "第九章 猫_某书_笔趣阁") -> str:
    """A biquge-like chapter page around ``body`` (the inside of ``div#content``)."""
    return (
        f"<html><head><title>{title}</title><style>body{{font-size:16px}}{style}</style></head><body>"
        "<div class='nav'><a href='/'>首页</a> <a href='/xuanhuan/'>玄幻小说</a> "
        "<a href='/top/'>排行榜单</a></div>"
        "<div class='bookname'><h1>第九章 猫</h1><div class='bottem1'><a href='/1/8.html'>上一章</a> "
        "<a href='/1/'>章节目录</a> <a href='/1/10.html'>下一章</a></div></div>"
        f"<div id='content'>{body}</div>"
        "<div class='footer'>Copyright © 2024 笔趣阁 All Rights Reserved.</div></body></html>"
    )


def _br(lines: list[str]) -> str:
    return "<br /><br />".join("&nbsp;&nbsp;&nbsp;&nbsp;" + line for line in lines)


@pytest.mark.parametrize("heading", ["第九章 猫", "第九章　猫", "第九章猫", "  第九章 猫  "])
def test_the_chapter_heading_repeated_at_the_top_of_the_body_is_left_out(heading: str) -> None:
    result = extract_main_text(_pirate(_br([heading, *PARAGRAPHS])))
    assert result.text.split("\n") == PARAGRAPHS


def test_a_heading_like_line_inside_the_body_stays() -> None:
    lines = [PARAGRAPHS[0], "第九章 猫", *PARAGRAPHS[1:]]
    assert extract_main_text(_pirate(_br(lines))).text.split("\n") == lines


@pytest.mark.parametrize(
    "notice",
    [
        "章节错误,点此举报(免注册)",
        "章节错误，点此举报（免注册）",
        "本章未完，点击下一页继续阅读",
        "加入书签",
        "投推荐票",
        "请加入书签，方便阅读",
        "投推荐票 加入书签",
        "【章节错误,点此举报】",
    ],
)
def test_reader_notices_are_dropped_as_lines_and_as_splices(notice: str) -> None:
    as_line = extract_main_text(_pirate(_br([*PARAGRAPHS[:2], notice, *PARAGRAPHS[2:]])))
    assert as_line.text.split("\n") == PARAGRAPHS
    spliced = [PARAGRAPHS[0] + notice, *PARAGRAPHS[1:]]  # glued to the end of a paragraph
    assert extract_main_text(_pirate(_br(spliced))).text.split("\n") == PARAGRAPHS


@pytest.mark.parametrize(
    "ad",
    [
        "ｗww．ｕｕkａnｓhu．coｍ",
        "www.uukanshu.com",
        "ｗ ｗ ｗ ． ｕ ｕ ｋ ａ ｎ ｓ ｈ ｕ ． ｃ ｏ ｍ",
        "www . biquge . la",
        "（www．biquge．info）",
        "http://www.xbiquge.cc",
        "m.biquge.com",
    ],
)
def test_an_address_spliced_mid_sentence_is_cut_out_and_the_sentence_kept(ad: str) -> None:
    cut = 12
    spliced = [PARAGRAPHS[0][:cut] + ad + PARAGRAPHS[0][cut:], *PARAGRAPHS[1:]]
    assert extract_main_text(_pirate(_br(spliced))).text.split("\n") == PARAGRAPHS


def test_a_promotion_line_around_an_address_is_still_dropped_whole() -> None:
    lines = ["天才一秒记住本站地址：ｗww．ｕｕkａnｓhu．coｍ。手机版阅读网址：m.uukanshu.com", *PARAGRAPHS]
    assert extract_main_text(_pirate(_br(lines))).text.split("\n") == PARAGRAPHS


def test_prose_with_decimal_numbers_and_dots_is_not_mistaken_for_an_address() -> None:
    lines = [
        "他跑完了3.5公里，又看了看表：9.58秒……不，是九点五十八分。",
        "It was 5 a.m. on the coast.",
        *PARAGRAPHS,
    ]
    assert extract_main_text(_pirate(_br(lines))).text.split("\n") == lines


@pytest.mark.parametrize(
    ("style", "markup"),
    [
        (".hd{display:none}", "<span class='hd'>{}</span>"),
        (".hd { display : none !important }", "<span class='x hd y'>{}</span>"),
        ("#n1{visibility:hidden}", "<i id='n1'>{}</i>"),
        ("span.tiny{font-size:0}", "<span class='tiny'>{}</span>"),
        (".a.b{font-size:0px;color:#fff}", "<em class='b a'>{}</em>"),
        ("p,.hd,font{display:none}", "<font>{}</font>"),
        ("/* hide */ .hd{display:none}", "<span class='hd'>{}</span>"),
        ("@import url(x.css);.hd{display:none}", "<span class='hd'>{}</span>"),
    ],
)
def test_elements_hidden_by_style_rules_stay_out_of_the_text(style: str, markup: str) -> None:
    spliced = [p[:6] + markup.format("盗版噪声") + p[6:] for p in PARAGRAPHS]
    result = extract_main_text(_pirate(_br(spliced), style=style))
    assert result.text.split("\n") == PARAGRAPHS


@pytest.mark.parametrize(
    ("style", "markup"),
    [
        ("div .hd{display:none}", "<span class='hd'>{}</span>"),  # descendant combinator: not handled
        ("@media print{.hd{display:none}}", "<span class='hd'>{}</span>"),  # print only: visible on screen
        (".hd{font-size:0.9em}", "<span class='hd'>{}</span>"),  # small, not hidden
        (".hd{display:none}", "<span class='hdx'>{}</span>"),  # another class
    ],
)
def test_rules_the_small_matcher_does_not_apply_leave_the_text(style: str, markup: str) -> None:
    spliced = [p[:6] + markup.format("可见") + p[6:] for p in PARAGRAPHS]
    result = extract_main_text(_pirate(_br(spliced), style=style))
    assert result.text.split("\n") == [p[:6] + "可见" + p[6:] for p in PARAGRAPHS]


def test_inline_font_size_zero_is_hidden_too() -> None:
    spliced = [p[:6] + "<span style='font-size: 0'>噪声</span>" + p[6:] for p in PARAGRAPHS]
    assert extract_main_text(_pirate(_br(spliced))).text.split("\n") == PARAGRAPHS


# ------------------------------------------------------------------------------- bounds: depth, links, size


@pytest.mark.parametrize("levels", [2046, 3000, 10000])
def test_text_nested_deeper_than_libxml2_parses_is_found_after_flattening(levels: int) -> None:
    inner = "".join(f"<p>{p}</p>" for p in PARAGRAPHS)
    nav = "<div class='nav'><a href='/'>首页</a><a href='/top/'>排行榜单</a></div>"
    html = f"<html><body>{nav}{'<div>' * levels}{inner}{'</div>' * levels}</body></html>"
    result = extract_main_text(html)
    assert result.text.split("\n") == PARAGRAPHS
    assert result.notes == ("nesting deeper than 2048 levels flattened below level 500",)


def test_unclosed_nesting_keeps_every_link_and_line() -> None:
    html = (
        "<html><body>"
        + "".join(f"<div><a href='/c/{n}.html'>第{n}章</a>" for n in range(5000))
        + "</body></html>"
    )
    result = extract_main_text(html, "http://novel.test/")
    assert len(result.links) == 5000
    assert result.links[-1] == "http://novel.test/c/4999.html"


def test_links_stop_at_the_cap_in_document_order_and_say_so() -> None:
    anchors = "".join(f"<a href='/c/{n % 30}.html'>第{n}章</a>" for n in range(100))  # 30 distinct, repeated
    result = extract_main_text(f"<html><body>{anchors}</body></html>", "http://novel.test/", max_links=10)
    assert result.links == tuple(f"http://novel.test/c/{n}.html" for n in range(10))
    assert result.notes == ("links cut to the first 10 (more on the page)",)
    uncut = extract_main_text(f"<html><body>{anchors}</body></html>", "http://novel.test/", max_links=30)
    assert len(uncut.links) == 30 and uncut.notes == ()


def test_text_over_the_cap_is_cut_at_a_paragraph_boundary() -> None:
    html = _pirate(_br(PARAGRAPHS))
    full = extract_main_text(html).text
    cap = len(full) - len(PARAGRAPHS[-1])  # the last paragraph (and its newline) does not fit
    result = extract_main_text(html, max_chars=cap)
    assert result.text.split("\n") == PARAGRAPHS[:-1]
    assert result.notes == (
        f"text cut to {len(result.text)} of {len(full)} characters (over the {cap}-character cap)",
    )
    assert extract_main_text(html, max_chars=len(full)).notes == ()


def test_a_single_paragraph_over_the_cap_is_cut_inside() -> None:
    assert cap_text("一二三四五六", 4) == (
        "一二三四",
        ("text cut to 4 of 6 characters (over the 4-character cap)",),
    )


# ----------------------------------------------------------------------------- promotion lines vs story prose

_AD_WORD_SENTENCE = "他抬头看见小区的广告大屏上正放着新闻，心里一沉。"


def test_a_story_sentence_with_the_word_ad_in_it_is_kept() -> None:
    lines = [PARAGRAPHS[0], _AD_WORD_SENTENCE, *PARAGRAPHS[1:], "广告大屏又亮了，这回放的是一段寻人启事。"]
    assert extract_main_text(_pirate(_br(lines))).text.split("\n") == lines


@pytest.mark.parametrize(
    "sentence",
    [
        "她在图书馆里免费阅读了一整个下午，直到闭馆的铃声响起。",
        "他点开下一章，发现主角还是没有醒过来。",
        "他翻到下一页，愣住了。",
        "这家网站号称最快更新，其实常常断更。",
        "老张去派出所备案的时候，天已经黑了。",
        "他原本站在门口，听见声音才回头。",
        "她刷到了那本书的最新章节，一口气看完才睡。",
        "他把手机版的地图放大，才找到那条小巷。",
        "“请收藏好这封信，”外婆说，“将来会有用的。”",
        "他抬頭看見小區的廣告大屏上正放着新聞，心裡一沉。",  # Traditional, as Big5 pages serve it
    ],
)
def test_a_story_sentence_with_one_promotion_word_is_kept(sentence: str) -> None:
    lines = [PARAGRAPHS[0], sentence, *PARAGRAPHS[1:]]
    assert extract_main_text(_pirate(_br(lines))).text.split("\n") == lines


@pytest.mark.parametrize(
    "ad",
    [
        "本站无弹窗广告，请收藏本站",
        "【广告】最快更新请访问…",
        "免费阅读最新章节 请收藏",
        "最新章节！",
        "上一章 章节目录 下一章",
        "广告",
        "请收藏本站，最快更新无弹窗。",
        "小提示：按 回车[Enter]键 返回书目，按 ←键 返回上一页， 按 →键 进入下一页。",
        "Copyright © 2024 笔趣阁 All Rights Reserved.",
        "本站所有小说为转载作品，所有章节均由网友上传，转载至本站只是为了宣传本书让更多读者欣赏。",
        "本站無彈窗廣告，請收藏本站",
        "免費閱讀最新章節 請收藏",
    ],
)
def test_promotion_and_site_notice_lines_in_the_text_are_still_dropped(ad: str) -> None:
    lines = [*PARAGRAPHS[:2], ad, *PARAGRAPHS[2:]]
    assert extract_main_text(_pirate(_br(lines))).text.split("\n") == PARAGRAPHS


def test_a_sentence_with_a_spliced_address_and_an_ad_word_keeps_the_sentence() -> None:
    # The address is cut out; what is left is a story sentence, not a promotion line around an address.
    spliced = _AD_WORD_SENTENCE[:8] + "www.biquge.la" + _AD_WORD_SENTENCE[8:]
    lines = [PARAGRAPHS[0], spliced, *PARAGRAPHS[1:]]
    assert extract_main_text(_pirate(_br(lines))).text.split("\n") == [
        PARAGRAPHS[0],
        _AD_WORD_SENTENCE,
        *PARAGRAPHS[1:],
    ]


# Pieces spliced addresses and notices are made of, and the prose around them: what the search for addresses
# only in runs of address characters (extract._cut_addresses) must cut exactly as the whole-text search did.
_ADDRESS_PIECES = st.sampled_from(
    [
        "www",
        "ｗｗｗ",
        "w w w",
        "http://",
        "ｈｔｔｐｓ：／／",
        ".",
        "．",
        "。",
        " ",
        "\u3000",
        "-",
        "－",
        "biquge",
        "ｂｉｑｕｇｅ",
        "a",
        "7",
        "com",
        "ｃｏｍ",
        "c o m",
        "la",
        "net",
        "(",
        "（",
        "【",
        ")",
        "）",
        "】",
        "[",
        "]",
        ":",
        "/",
        "他推开木门",
        "海风",
        "，",
        "！",
        "第12章",
        "加入书签",
        "投推荐票",
        "章节错误，点此举报",
        "本章未完，点击下一页继续阅读",
        "www.biquge.la",
        "ｗｗｗ．ｂｉｑｕｇｅ．ｃｏｍ",
        "w w w . b i q u g e . c o m",
        "m.xyz.net",
        "biquge.la",
        "http://www.abc.com",
        "（ｗｗｗ．ｘｓ．ｃｃ）",
        "ｗ ww ． xxx ． ｃom",
    ]
)


@given(st.lists(_ADDRESS_PIECES, max_size=40).map("".join))
@settings(max_examples=400)
def test_addresses_are_cut_as_the_whole_text_search_cuts_them(text: str) -> None:
    from fptrack.crawler import extract

    assert extract._cut_addresses(text) == extract._SPLICED_ADDRESS.sub("", text)
    cut = extract._SPLICED_ADDRESS.sub("", text)
    whole = extract._NOTICE.sub("", cut)
    assert extract._cut_spliced(text) == (text if whole == text else tidy_whitespace(whole))


# Promotion words, their filler, the characters that make "本站" part of another word, and prose: lines that
# extract._is_promotion, which first looks for any promotion word, must judge as counting every match does.
_PROMOTION_PIECES = st.sampled_from(
    [
        "最新章节",
        "最新",
        "章节",
        "章节目录",
        "本站",
        "原本站",
        "日",
        "本书",
        "推荐本书",
        "下一页",
        "下一頁",
        "下一章",
        "手机阅读",
        "手機閱讀",
        "阅读",
        "请收藏",
        "请",
        "广告",
        "廣告",
        "ICP",
        "备案",
        "天才一秒记住",
        "网址",
        "回车",
        "他推开木门",
        "海风吹过",
        "，",
        "。",
        "！",
        " ",
        "7",
        "ａ",
    ]
)


def _promotion_by_counting(text: str) -> bool:
    """extract._is_promotion without its look for a promotion word: every match of _PROMO counted."""
    from fptrack.crawler import extract

    if extract._SITE_NOTICE.search(text):
        return True
    hits = covered = 0
    for match in extract._PROMO.finditer(text):
        hits += match.lastgroup == "word"
        covered += sum(map(str.isalpha, match.group()))
    if not hits:
        return False
    rest = sum(map(str.isalpha, text)) - covered
    return rest < extract._PROMO_REST_MIN or (hits >= 2 and covered >= rest)


@given(st.lists(_PROMOTION_PIECES, max_size=16).map("".join))
@settings(max_examples=400)
def test_promotion_lines_are_judged_as_counting_every_match_judges_them(text: str) -> None:
    from fptrack.crawler import extract

    assert extract._is_promotion(text) == _promotion_by_counting(text)


# Pieces of links and the pages they are on: what extract._absolute, which puts a plain path from the root
# after the page's origin without urljoin, must resolve as urljoin does.
_HREF_PIECES = st.sampled_from(
    [
        "/",
        "//",
        ".",
        "..",
        "a",
        "Z9",
        "-",
        "_",
        "~",
        "%20",
        "?q=1",
        "#top",
        ";p",
        ":",
        "\t",
        " ",
        "é",
        "http:",
        "x.html",
    ]
)
_BASES = st.sampled_from(
    [
        "http://127.0.0.1:8000/book/1.html",
        "HTTPS://User@Example.COM/a/./b/c.html?x=1#f",
        "http://example.com",
        "http://example.com?q",
        "http://ex\tample.com/a/",
        "ftp://example.com/a/b",
        "mailto:someone@example.com",
        "",
        "/relative/only.html",
        "http://[::1/broken",
    ]
)


def _absolute_by_urljoin(base: str, href: str) -> str | None:
    from urllib.parse import urldefrag, urljoin, urlsplit

    try:
        absolute = urldefrag(urljoin(base, href)).url
        scheme = urlsplit(absolute).scheme.lower()
    except ValueError:
        return None
    return absolute if scheme in ("http", "https") else None


@given(_BASES, st.lists(_HREF_PIECES, min_size=1, max_size=12).map("".join))
@settings(max_examples=600)
def test_links_resolve_as_urljoin_resolves_them(base: str, href: str) -> None:
    from fptrack.crawler import extract

    assert extract._absolute(base, extract._origin(base), href) == _absolute_by_urljoin(base, href)
