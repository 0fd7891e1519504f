"""crawler.leads.find_share_links: cloud-drive share links in a page, plain and disguised."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.crawler.leads import find_share_links, might_hold_share_links

ALNUM = string.ascii_letters + string.digits


def _one(markup: str) -> tuple[str, str, str]:
    links = find_share_links(markup)
    assert len(links) == 1, links
    return links[0].platform, links[0].share_id, links[0].code


def test_the_real_shapes_of_each_platform() -> None:
    assert _one('<a href="https://pan.baidu.com/s/1AbCdEfGhIjKlMnOp?pwd=x7k2">下载</a>') == (
        "baidu",
        "1AbCdEfGhIjKlMnOp",
        "x7k2",
    )
    assert _one("链接: https://pan.baidu.com/share/init?surl=Qwerty12345 提取码: aaaa") == (
        "baidu",
        "1Qwerty12345",
        "aaaa",
    )
    assert _one("https://www.aliyundrive.com/s/Ab1Cd2Ef3Gh 提取码: 3x9k") == ("aliyun", "Ab1Cd2Ef3Gh", "3x9k")
    assert _one("https://www.alipan.com/s/Ab1Cd2Ef3Gh") == ("aliyun", "Ab1Cd2Ef3Gh", "")
    assert _one("夸克网盘：https://pan.quark.cn/s/0123456789ab") == ("quark", "0123456789ab", "")
    assert _one("https://www.123684.com/s/abcd-EfGhI.html 提取码:1234") == ("123pan", "abcd-EfGhI", "1234")
    assert _one("https://www.123pan.com/s/abcd-EfGhI?pwd=5678") == ("123pan", "abcd-EfGhI", "5678")
    assert _one("https://wwi.lanzoux.com/iAbCd0123ef\n密码:6m1g") == ("lanzou", "iAbCd0123ef", "6m1g")
    assert _one("https://user.lanzoui.com/b0e9c4bsj") == ("lanzou", "b0e9c4bsj", "")
    assert _one("HTTPS://PAN.BAIDU.COM/s/1AbCdEfGh 提取码 ab12") == ("baidu", "1AbCdEfGh", "ab12")
    assert _one("Pan.Quark.cn/s/0123456789ab") == ("quark", "0123456789ab", "")


def test_one_share_named_twice_is_one_link_with_the_code_from_either_mention() -> None:
    markup = (
        '<p><a href="https://pan.baidu.com/s/1ZyXwVuTsRq">《青山记》全本</a></p>'
        "<p>备用：pan.baidu.com/s/1ZyXwVuTsRq 提取码：ab12</p>"
    )
    links = find_share_links(markup)
    assert [(x.share_id, x.code) for x in links] == [("1ZyXwVuTsRq", "ab12")]
    assert "青山记" in links[0].context


def test_a_code_belongs_to_the_link_before_it() -> None:
    links = find_share_links("pan.quark.cn/s/aaaaaaaaaaaa 下一个 pan.quark.cn/s/bbbbbbbbbbbb 提取码:zz99")
    assert [(x.share_id, x.code) for x in links] == [("aaaaaaaaaaaa", ""), ("bbbbbbbbbbbb", "zz99")]


def test_pages_without_share_links_give_none() -> None:
    assert find_share_links("<p>第一章 青山</p><a href='https://www.baidu.com/s?wd=青山'>搜</a>") == ()
    assert find_share_links("百度一下，点这里：pan 和 quark 都不是链接") == ()
    assert find_share_links("") == ()
    # the cheap test passes over prose, full-width punctuation and digits that spell no marker
    assert not might_hold_share_links("<p>　　第１２章　青山！？（上）</p>" * 50)
    assert might_hold_share_links("ｐａｎ．ｂａｉｄｕ") and might_hold_share_links("LANZOUX")


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


DOTS = st.sampled_from([".", " . ", "．", "。", "点", " 点 ", "[.]", "(.)", " dot ", "[dot]"])
SLASHES = st.sampled_from(["/", " / ", "／"])
CODE_LABELS = st.sampled_from(["提取码:", "提取码：", "提取碼 ", "密码:", "密码 : ", "pwd=", "访问码："])
GAPS = st.sampled_from([" ", "\n", "  \n", "<br>", "</p><p>", "，", " 复制这段内容后打开 "])
HOSTS = st.sampled_from(
    [
        ("baidu", ["pan", "baidu", "com"], "s", "1"),
        ("aliyun", ["www", "alipan", "com"], "s", ""),
        ("aliyun", ["www", "aliyundrive", "com"], "s", ""),
        ("quark", ["pan", "quark", "cn"], "s", ""),
        ("123pan", ["www", "123pan", "com"], "s", ""),
        ("123pan", ["www", "123865", "com"], "s", ""),
        ("lanzou", ["wwx", "lanzoux", "com"], "", "i"),
        ("lanzou", ["abc", "lanzouw", "com"], "", "i"),
    ]
)
PROSE = st.text(alphabet="青山记全本下载资源分享楼主好人一生平安，。！", max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    host=HOSTS,
    tail=st.text(alphabet=ALNUM, min_size=8, max_size=20),
    code=st.text(alphabet=ALNUM, min_size=4, max_size=4),
    dot=DOTS,
    slash=SLASHES,
    label=CODE_LABELS,
    gap=GAPS,
    scheme=st.sampled_from(["", "https://", "http://", "https：//", "https : //"]),
    wide=st.booleans(),
    before=PROSE,
    after=PROSE,
)
def test_disguised_links_are_read_with_their_code(
    host: tuple[str, list[str], str, str],
    tail: str,
    code: str,
    dot: str,
    slash: str,
    label: str,
    gap: str,
    scheme: str,
    wide: bool,
    before: str,
    after: str,
) -> None:
    platform, labels, segment, prefix = host
    share_id = prefix + tail
    path = slash.join([*([segment] if segment else []), share_id])
    link = scheme + dot.join(labels) + slash + path
    if wide:
        link = _fullwidth(link)
    markup = f"<p>{before} {link}{gap}{label}{code} {after}</p>"
    links = find_share_links(markup)
    assert [(x.platform, x.share_id, x.code) for x in links] == [(platform, share_id, code)]


def test_a_share_keeps_the_url_as_linked_to_follow_it_by() -> None:
    (public, plain) = find_share_links(
        "<a href='http://pirate.lanzoux.com/iAbC123d'>全本</a> 密码:ab12 备用 www.lanzoui.com/iZyx987w"
    )
    assert (public.url, public.linked, public.code) == (
        "https://www.lanzoux.com/iAbC123d",
        "http://pirate.lanzoux.com/iAbC123d",
        "ab12",
    )
    assert plain.linked == "https://www.lanzoui.com/iZyx987w"


def test_the_walk_from_a_share_page_to_its_file() -> None:
    from fptrack.crawler.leads import share_download_step

    base = "http://pirate.lanzoux.com/iAbC123d"
    frame = "<div><iframe class='ifr2' src='/fn?AbC&amp;x=1' frameborder=0></iframe></div>"
    assert share_download_step(frame, base) == "http://pirate.lanzoux.com/fn?AbC&x=1"
    button = (
        "<a href='#'>下载</a><a href='javascript:go()'>下载</a>"
        "<a class='btn' href='/file/?s=1'>普通<b>下载</b></a>"
    )
    assert share_download_step(button, base) == "http://pirate.lanzoux.com/file/?s=1"
    assert (
        share_download_step("<a href='/dl/1' title='Download'>⇩</a>", base)
        == "http://pirate.lanzoux.com/dl/1"
    )
    # a password form, a removed share, a frame only inside a script: no step
    assert share_download_step("<form><input name='pwd'><div id='sub'>提交</div></form>", base) is None
    assert share_download_step("<p>文件取消分享了</p><a href='/'>首页</a>", base) is None
    assert share_download_step("<script>x = '<iframe src=\"/fn?a\">'</script>", base) is None


MARKER_LETTERS = list("baidulnzquarkpyvem123684 第章") + list(_fullwidth("baidulanzquark123"))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(MARKER_LETTERS)))
def test_the_cheap_test_misses_no_page_that_folding_it_whole_would_pass(text: str) -> None:
    # the cheap test folds only the stretches around full-width runs: whatever folding the whole page finds
    import unicodedata

    from fptrack.crawler.leads import _MARKERS

    if _MARKERS.search(unicodedata.normalize("NFKC", text).lower()) is not None:
        assert might_hold_share_links(text)
