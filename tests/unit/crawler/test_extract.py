

def test_chapter_swallowed_by_an_unclosed_navigation_div_is_kept() -> None:
    # Broken markup: the menu's <div class="nav"> is never closed, so the chapter ends up inside it.
    prose = [
        "初夏的一个下午，一个扎着马尾辫的姑娘抱着一个纸盒走进了铺子，说盒子里是她外婆留下的一件旧旗袍。",
        "陈师傅打开纸盒愣住了，那是一件墨绿色的真丝旗袍，襟上绣着几枝白玉兰，针脚细密，一看就是老手艺。",
    ]
    html = (
        '<html><body><div class="nav"><ul><li><a href="/">首页</a></li><li><a href="/x/">玄幻小说</a></li></ul>'
        "<div class='read'><p>" + "<p>".join(prose) + "<div><a href='/prev'>上一章</a></div></body></html>"
    )
    text = extract_main_text(html).text
    assert text.split("\n") == prose
