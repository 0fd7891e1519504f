"""Main-text extraction: keep a page's body text (a chapter, an article), drop its chrome.

Pure function, lxml only. The method is a line-level take on text-density / link-density block scoring
(Sun, Song and Liao, "DOM Based Content Extraction via Text Density", SIGIR 2011; Kohlschütter et al.,
"Boilerplate Detection using Shallow Text Features", WSDM 2010), adapted to Chinese pirate-site templates:

1. Parse leniently; drop scripts, styles, forms' widgets, iframes, comments and hidden elements (inline
   ``display:none`` / ``visibility:hidden`` / ``font-size:0``, the ``hidden`` attribute, and the same
   declarations in the page's ``<style>`` rules for simple selectors, see :func:`hidden_selectors`). A
   document nested deeper than libxml2 parses (2,048 levels) is flattened below :data:`FLATTEN_DEPTH` levels
   and parsed again; a start tag longer than :data:`MAX_TAG_CHARS` keeps its first attributes
   (:func:`shorten_huge_tags`).
2. Cut the page into *lines*: runs of text between block boundaries and ``<br>``. For each line count its
   visible characters, the characters inside links and the characters inside "chrome" elements
   (``<nav>``, ``<footer>``, ``<aside>``, or an id/class such as ``nav``, ``footer``, ``ad``, ``gg``,
   ``copyright`` without a positive hint such as ``content`` or ``chapter``).
3. Weigh each line: prose (sentence punctuation, or at least 15 characters) weighs its non-link character
   count; short unpunctuated labels weigh 0.3 per character and count as neither prose nor chrome;
   chrome lines (link density > 0.5, inside a chrome element, a site address, a site notice such as a
   copyright, or a short line made mostly of promotion phrases, see :func:`_is_promotion`) weigh their length
   as chrome. One promotion word inside a story sentence ("小区的广告大屏") does not make it chrome.
4. Sum, over every block's subtree, the prose weight P and the chrome weight C, and take the block with
   the largest P * P / (P + C): prose mass times prose purity (the text-density idea at block level).
   Growing past the body text adds chrome and lowers purity; a promotion line inside the body text costs
   little against its paragraphs. Then walk down while one child holds all of the block's prose, or at
   least 70 % of it with no look-alike sibling (same tag and class) holding the rest: a wrapper that adds
   only a heading, a "next chapter" bar, a sidebar blurb or a comment thread is not kept, while a chapter
   cut into several ``div.part`` siblings stays whole. The walk also stops at a chain of paragraphs each
   opening a ``<div>`` that is never closed (every paragraph nested in the one before, see
   :func:`_is_paragraph_chain`): walking down it would drop one paragraph per level.
5. The text is the block's lines in document order, minus chrome lines, minus a first line that repeats the
   chapter heading; paragraphs joined by ``"\\n"``. Inside kept lines, site addresses spliced into a sentence
   (``ｗww．ｕｕkａnｓhu．coｍ``) and reader notices (``章节错误,点此举报``, ``本章未完，点击下一页继续阅读``)
   are cut out as substrings.

Whitespace is tidied (runs of spaces, ``&nbsp;``, full-width spaces and line breaks inside a paragraph become
one space; ends are stripped); apart from the cuts above nothing is changed, because match offsets refer to
this text.

Work is linear in the page size: links are resolved once per distinct ``href`` and at most ``max_links`` are
kept; ``max_chars`` cuts the text at a paragraph boundary. What was cut or flattened is said in ``notes``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import urldefrag, urljoin, urlsplit

import lxml.etree

__all__ = [
    "FLATTEN_DEPTH",
    "MAX_TAG_CHARS",
    "ExtractedText",
    "cap_text",
    "extract_main_text",
    "hidden_selectors",
    "shorten_huge_tags",
    "tidy_whitespace",
]


@dataclass(frozen=True)
class ExtractedText:
    """``title`` from ``<title>`` (else the first ``<h1>``); ``links`` are absolute http(s) URLs of every
    ``<a href>`` on the page (fragments removed, duplicates dropped, document order, at most ``max_links``);
    ``notes`` say what was cut or repaired (links over the cap, text over the cap, nesting flattened), one
    line each; ``error`` why the text is empty when the document could not be parsed."""

    title: str
    text: str
    links: tuple[str, ...]
    notes: tuple[str, ...] = ()
    error: str = ""  # why a document that is not empty gave nothing (nesting too deep even to flatten)


_DROP_TAGS = frozenset(
    {
        "script", "style", "noscript", "template", "iframe", "frame", "frameset", "object", "embed",
        "applet", "svg", "math", "canvas", "select", "option", "button", "input", "textarea", "head",
        "audio", "video", "map", "link", "meta",
    }
)  # fmt: skip
_BLOCK_TAGS = frozenset(
    {
        "html", "body", "div", "p", "section", "article", "main", "aside", "header", "footer", "nav",
        "ul", "ol", "li", "dl", "dt", "dd", "table", "thead", "tbody", "tfoot", "tr", "td", "th",
        "caption", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "center", "form",
        "fieldset", "legend", "hr", "figure", "figcaption", "details", "summary", "address", "menu",
        "dir", "listing", "plaintext", "xmp",
    }
)  # fmt: skip
_CHROME_TAGS = frozenset({"nav", "footer", "aside", "menu"})

# Class/id tokens that mark chrome. Whole tokens only ("ad" must not match "reader" or "header").
_NEGATIVE_TOKEN = re.compile(
    r"^(?:ads?|adv\w*|advert\w*|adsense|gg|guanggao|banner\w*|sponsor\w*|promo\w*|nav\w*|navbar|menu\w*|"
    r"foot|footer\w*|copyright|copy|sidebar|side|comments?|share\w*|social|breadcrumbs?|crumbs?|"
    r"pager|pagination|paging|related|recommend\w*|tuijian|popup|modal|cookies?|toolbar|topbar|"
    r"login|search|header|masthead|bottem|bottom|links?|friendlinks?|tags?)\d*$"
)
_POSITIVE_TOKEN = re.compile(
    r"^(?:content|contents|chapter\w*|article\w*|text|txt|booktext|bookcontent|htmlcontent|chaptercontent|"
    r"body|entry|post|story|novel|read\w*|nr|nr1|main|zw|zhengwen)\d*$"
)
_TOKEN_SPLIT = re.compile(r"[\s_\-]+|(?<=[a-z])(?=[A-Z])")
_HIDDEN_STYLE = re.compile(
    r"display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0*(?:\.0*)?(?:px|pt|em|rem|%)?\s*(?:!important\s*)?(?:;|$)",
    re.IGNORECASE,
)
# A simple selector: an optional tag, then any number of .class / #id parts (no combinators, attributes,
# pseudo-classes).
_SIMPLE_SELECTOR = re.compile(r"^([a-zA-Z][a-zA-Z0-9]*|\*)?((?:[.#][\w-]+)*)$")
_SELECTOR_PART = re.compile(r"([.#])([\w-]+)")
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)

_SENTENCE_PUNCTUATION = re.compile(r"[，。！？；：、…,.!?;:\u201c\u201d\u300c\u300d]")
_SITE_ADDRESS = re.compile(
    r"https?://|www\.|[a-z0-9-]+\.(?:com|net|org|cc|la|info|co|me|tw|cn|xyz|top|vip|io)\b", re.IGNORECASE
)
# Simplified characters of the phrases below whose Traditional form differs (pirate copies are served in
# both scripts): each phrase is matched in either, character by character.
_TRADITIONAL = dict(
    zip(
        "记联系长网传转权备证节机阅读书签荐页录报费无弹请广访浏览体验户说载点击继续车进键场发资内",
        "記聯繫長網傳轉權備證節機閱讀書籤薦頁錄報費無彈請廣訪瀏覽體驗戶說載點擊繼續車進鍵場發資內",
        strict=True,
    )
)


def _either_script(pattern: str) -> str:
    """``pattern`` with each simplified character of :data:`_TRADITIONAL` also matching its traditional
    form (the patterns it is used on have no character classes of their own)."""
    return "".join(f"[{ch}{_TRADITIONAL[ch]}]" if ch in _TRADITIONAL else ch for ch in pattern)


# What a site says about itself in a footer or a "bookmark us" line, never a story: one of these makes a short
# line chrome.
_SITE_NOTICE = re.compile(
    _either_script(
        r"copyright|©|all rights reserved|版权所有|icp\s*(?:备|证)|首发域名|记住本站|收藏本站|联系站长|"
        r"网友上传|转载至本站|本站(?:内容|所有|立场)"
    ),
    re.IGNORECASE,
)
# Promotion and navigation lines are made of these phrases, but a story sentence may use any of them ("小区的
# 广告大屏", "翻到下一页", "派出所备案"), so one alone does not make a line chrome (see _is_promotion).
# "本站" after 原/根/基/日/资 is part of another word ("他原本站在门口").
_PROMO_WORDS = (
    r"备案|icp|(?<!原|根|基|日|资)本站|最新章节|手机阅读|手机版|加入书签|推荐本书|投推荐票|上一章|下一章|上一页|"
    r"下一页|章节目录|返回目录|返回书页|章节报错|免费阅读|最快更新|无弹窗|请收藏|广告"
)
# Filler of the same lines ("天才一秒记住", "请访问", "手机用户请浏览", "按回车键返回书目"): it counts towards
# how much of a line the promotion covers, never as a promotion phrase by itself.
_PROMO_FILLER = (
    r"天才一秒|一秒记住|请记住|地址|网址|域名|网站|访问|浏览|阅读|体验|手机|用户|小说|全文|全本|更新|下载|"
    r"客户端|百度|搜索|书友|书架|书签|书目|收藏|推荐|免费|最新|最快|章节|本书|点击|继续|方便|弹窗|首页|目录|"
    r"小提示|提示|回车|enter|返回|进入|键|按|请"
)
_PROMO = re.compile(_either_script(rf"(?P<word>{_PROMO_WORDS})|(?P<filler>{_PROMO_FILLER})"), re.IGNORECASE)
# A line where this finds nothing has no promotion phrase for _PROMO to count (most lines of a story)
_PROMO_WORD = re.compile(_either_script(_PROMO_WORDS), re.IGNORECASE)
_PROMO_REST_MIN = 6  # a line with at least this many letters besides a promotion phrase is read as a sentence


def _either_width(word: str, spaced: bool = False) -> str:
    """A pattern for ``word`` in half-width or full-width letters, any case (``com`` matches ``ｃoＭ``), with
    a space allowed between letters when ``spaced``."""
    return (r"\s?" if spaced else "").join(
        f"[{ch.lower()}{ch.upper()}{chr(ord(ch.lower()) + 0xFEE0)}{chr(ord(ch.upper()) + 0xFEE0)}]"
        for ch in word
    )


# Reader notices pirate sites splice into the text, cut out wherever they are (with the punctuation they
# bring).
_NOTICE = re.compile(
    r"[(（【\[]?\s*(?:章节错误\s*[,，]?\s*点此举报(?:\s*[(（]\s*免注册\s*[)）])?|本章未完\s*[,，]?\s*点击下一页继续阅读|"
    r"(?:请)?(?:加入书签|投推荐票)(?:\s*[,，、/|]\s*(?:加入书签|投推荐票|方便阅读|投票推荐))*)\s*[)）】\]]?\s*[。.!！]?"
)
# A site address spliced into a sentence, half-width or full-width letters and dots: ``www`` and spaces
# between the parts (``ｗ ww ． xxx ． ｃom``), or a bare ``name.tld`` without spaces.
_ALNUM = "a-zA-Z0-9ａ-ｚＡ-Ｚ０-９"
_W = _either_width("w")
_DOT = r"\s*[.．。]\s*"
_TLDS = ("com", "net", "org", "cc", "la", "info", "co", "me", "tw", "cn", "xyz", "top", "vip", "io")
_TLD = "|".join(_either_width(tld) for tld in _TLDS)
_SPACED_TLD = "|".join(_either_width(tld, spaced=True) for tld in _TLDS)
_SCHEME = rf"(?:(?:{_either_width('https')}|{_either_width('http')})\s*[:：]\s*[/／]\s*[/／]\s*)?"
_SPLICED_ADDRESS = re.compile(
    rf"[(（【\[]?\s*(?:"
    rf"{_SCHEME}{_W}\s?{_W}\s?{_W}{_DOT}(?:[{_ALNUM}](?:\s?[{_ALNUM}\-－]){{0,62}}{_DOT})+(?:{_SPACED_TLD})"
    rf"|{_SCHEME}[{_ALNUM}][{_ALNUM}\-－]{{0,62}}(?:[.．][{_ALNUM}][{_ALNUM}\-－]{{0,62}})*[.．](?:{_TLD})"
    rf")(?![{_ALNUM}])\s*[)）】\]]?"
)
_ADDRESS_DOTS = re.compile(r"[.．。]")
# Every character an address and its brackets can hold (see _SPLICED_ADDRESS): a match lies inside one run of
# them, so only the runs holding both a letter or digit and a dot are searched (_cut_addresses).
_ADDRESS_RUN = re.compile(rf"[(（【\[)）】\]\s{_ALNUM}\-－.．。:：/／]{{4,}}")
_ADDRESS_LETTER = re.compile(rf"[{_ALNUM}]")
_NOTICE_WORDS = ("章节错误", "本章未完", "加入书签", "投推荐票")  # every _NOTICE match holds one
_NOTICE_WORD = re.compile("|".join(map(re.escape, _NOTICE_WORDS)))
_LONG_PROSE_CHARS = 30
_BOILERPLATE_LINE_MAX = 80  # longer lines are prose that happens to contain such a phrase
_PROSE_MIN_CHARS = 15
_DOMINANT_SHARE = 0.7
_WHITESPACE = re.compile(r"\s+")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>", re.IGNORECASE)
_INVALID_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def tidy_whitespace(text: str) -> str:
    """Collapse every run of whitespace (ASCII, ``&nbsp;``, full-width space, newlines) to one space."""
    return _WHITESPACE.sub(" ", text).strip()


@dataclass
class _Block:
    parent: int  # index of the enclosing block, -1 for the root
    signature: tuple[str, str, str] = ("", "", "")  # see _signature
    children: list[int] = field(default_factory=list)
    prose: float = 0.0  # summed weight of the prose lines in the subtree
    chrome: float = 0.0  # summed length of the chrome lines in the subtree
    own_prose: float = 0.0  # weight of the prose lines directly in this block, not inside a child block

    @property
    def score(self) -> float:
        """Prose mass times prose purity, P * P / (P + C): the most prose with the least chrome."""
        return self.prose * self.prose / (self.prose + self.chrome) if self.prose else 0.0


@dataclass
class _Line:
    block: int
    parts: list[str] = field(default_factory=list)
    chars: int = 0
    link_chars: int = 0
    chrome_chars: int = 0
    text: str = ""
    weight: float = 0.0
    is_chrome: bool = False
    is_prose: bool = False


FLATTEN_DEPTH = 500  # a document libxml2 cannot parse keeps its outer levels; deeper elements are unwrapped
_MAX_PARSE_DEPTH = 2048  # libxml2's limit, even with XML_PARSE_HUGE


def extract_main_text(
    html: str, base_url: str = "", *, max_links: int | None = None, max_chars: int | None = None
) -> ExtractedText:
    """Title, main text and links of an HTML document (see the module docstring for the method).

    ``max_links`` caps the links returned (the first ones in document order); ``max_chars`` caps the text
    (:func:`cap_text`). Never raises on malformed markup: an empty or unparsable document gives empty
    strings, and ``notes`` says why when it was not simply empty.
    """
    notes: list[str] = []
    root = _parse(html, notes)
    if root is None:
        return ExtractedText(title="", text="", links=(), error="; ".join(notes))
    links = _links(root, base_url, max_links, notes)
    title = _title(root)
    _drop_invisible(root, hidden_selectors(root))
    blocks, lines = _segment(root)
    del root  # the tree is the largest thing alive here; the lines hold all that is still needed
    text = _main_text(blocks, lines, _headings(title, lines))
    if max_chars is not None:
        text, cut = cap_text(text, max_chars)
        notes.extend(cut)
    return ExtractedText(title=title, text=text, links=links, notes=tuple(notes))


def cap_text(text: str, max_chars: int) -> tuple[str, tuple[str, ...]]:
    """``text`` cut to at most ``max_chars`` characters at a paragraph boundary (inside the first paragraph
    only when that one alone is longer), and the note saying so (none when nothing was cut)."""
    if len(text) <= max_chars:
        return text, ()
    cut = text.rfind("\n", 0, max_chars + 1)
    # a paragraph cut inside keeps no trailing space
    kept = text[:cut] if cut > 0 else text[:max_chars].rstrip()
    return kept, (f"text cut to {len(kept)} of {len(text)} characters (over the {max_chars}-character cap)",)


def _parse(html: str, notes: list[str]) -> lxml.etree._Element | None:
    # lxml refuses str input with an XML encoding declaration, and control characters upset libxml2.
    cleaned = _INVALID_XML_CHARS.sub("", _XML_DECLARATION.sub("", html, count=1))
    if not cleaned.strip():
        return None
    cleaned = shorten_huge_tags(cleaned, notes)
    try:
        root, too_deep = _parse_html(cleaned)
        if not too_deep:
            return root
        # libxml2 stops building the tree at 2,048 levels and silently drops everything below: the text of a
        # copy wrapped in thousands of <div>s would vanish. Unwrap the deep levels and parse again.
        root, too_deep = _parse_html(_flatten(cleaned, FLATTEN_DEPTH))
    except _ParserGaveUp as error:
        notes.append(f"the HTML parser gave up ({error}); page not parsed")
        return None
    if too_deep:
        notes.append(f"nesting deeper than {_MAX_PARSE_DEPTH} levels could not be flattened; page not parsed")
        return None
    notes.append(f"nesting deeper than {_MAX_PARSE_DEPTH} levels flattened below level {FLATTEN_DEPTH}")
    return root


class _ParserGaveUp(Exception):
    """libxml2 stopped with an error of its own (out of memory, most likely), not a recoverable syntax
    error."""


def _parse_html(markup: str) -> tuple[lxml.etree._Element | None, bool]:
    """The document and whether libxml2 gave up on its depth."""
    # lxml.etree's elements, not lxml.html's: the tree is the same, but lxml.html looks up a Python class for
    # every element it hands out (a tenth of the extraction's time), and nothing here needs its methods
    parser = lxml.etree.HTMLParser(remove_comments=True, remove_pis=True, recover=True, huge_tree=True)
    try:
        root = lxml.etree.fromstring(markup, parser)
        if root is None:  # what lxml.html.document_fromstring says of it
            raise lxml.etree.ParserError("Document is empty")
    except ValueError:
        return None, False
    except lxml.etree.LxmlError as error:  # libxml2 out of memory reports "unknown error"
        raise _ParserGaveUp(str(error) or type(error).__name__) from None
    too_deep = any(
        entry.type_name == "ERR_RESOURCE_LIMIT" or "Excessive depth" in entry.message
        for entry in parser.error_log
    )
    return root, too_deep


MAX_TAG_CHARS = 16_384  # a start tag longer than this keeps its first attributes only
_MAX_ATTRIBUTES = 256
_TAG_START = re.compile(r"<([a-zA-Z][a-zA-Z0-9:-]*)")
_ATTRIBUTE = re.compile(r"""\s+[^\s=/>"'<]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?""")


def shorten_huge_tags(markup: str, notes: list[str] | None = None) -> str:
    """``markup`` with every start tag longer than :data:`MAX_TAG_CHARS` cut to its first well-formed
    attributes (at most 256, all within that length).

    libxml2 checks each attribute of an element against all the ones before it: a tag of a million attributes
    would take hours to parse. Linear: the markup is cut at each ``>``, and only pieces longer than the limit
    are looked at (a ``>`` inside a quoted value ends a piece early, which only keeps more)."""
    pieces = markup.split(">")
    shortened = 0
    for number, piece in enumerate(pieces):
        if len(piece) <= MAX_TAG_CHARS:
            continue
        start = piece.rfind("<")
        tag = _TAG_START.match(piece, start) if start >= 0 and len(piece) - start > MAX_TAG_CHARS else None
        if tag is None:
            continue
        head = piece[tag.end() : tag.end() + MAX_TAG_CHARS]
        attributes = [match.group(0) for _, match in zip(range(_MAX_ATTRIBUTES), _ATTRIBUTE.finditer(head))]
        pieces[number] = piece[: tag.end()] + "".join(attributes)  # each whole: no quote left open
        shortened += 1
    if not shortened:
        return markup
    if notes is not None:
        notes.append(
            f"{shortened} start tag(s) longer than {MAX_TAG_CHARS} characters cut to their first attributes"
        )
    return ">".join(pieces)


_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9:-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>")
_VOID_TAGS = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)


def _flatten(markup: str, max_depth: int) -> str:
    """``markup`` with every element opened below ``max_depth`` levels unwrapped (its tags removed, its text
    kept; a block element leaves a ``<br>``, one per run of them without text between, so its text stays a
    line of its own). A tag scanner, not a parser: implicitly closed elements (``<p>``, ``<li>`` without end
    tags) count as open, which only unwraps more."""
    out: list[str] = []
    stack: list[tuple[str, bool]] = []  # (tag, kept)
    kept_depth = 0
    position = 0

    def unwrapped(name: str) -> str:
        # one <br> for a run of unwrapped blocks with no text between them: a million nested <div>s are one
        # line
        return "<br>" if name in _BLOCK_TAGS and (not out or out[-1] != "<br>") else ""

    for match in _TAG.finditer(markup):
        closing, name = match.group(1), match.group(2).lower()
        if position < match.start():
            out.append(markup[position : match.start()])
        position = match.end()
        if name in _VOID_TAGS or match.group(3).rstrip().endswith("/"):
            out.append(match.group(0))
            continue
        if not closing:
            # links keep their element a little deeper: a page of unclosed <div>s, each with its link, keeps
            # them
            kept = kept_depth < max_depth or (name == "a" and kept_depth < max_depth + 64)
            kept_depth += kept
            stack.append((name, kept))
            out.append(match.group(0) if kept else unwrapped(name))
            continue
        for depth in range(len(stack) - 1, max(-1, len(stack) - 64), -1):  # its opening tag, if near the top
            if stack[depth][0] == name:
                kept = stack[depth][1]
                kept_depth -= sum(entry[1] for entry in stack[depth:])
                del stack[depth:]
                out.append(match.group(0) if kept else unwrapped(name))
                break
    out.append(markup[position:])
    return "".join(out)


_string_content = lxml.etree.XPath("string()", smart_strings=False)  # an element's text, its descendants' too


def _title(root: lxml.etree._Element) -> str:
    for path in ("//title", "//h1"):
        for element in root.xpath(path):
            title = tidy_whitespace(_string_content(element))
            if title:
                return title
    return ""


def _links(
    root: lxml.etree._Element, base_url: str, max_links: int | None, notes: list[str]
) -> tuple[str, ...]:
    """One pass over the anchors; each distinct ``href`` is resolved once (URL joining dominates the cost),
    and the pass stops at ``max_links`` links."""
    base = base_url
    for element in root.iter("base"):
        href = (element.get("href") or "").strip()
        if href:
            base = urljoin(base_url, href)
            break
    origin = _origin(base)
    hrefs: set[str] = set()
    seen: dict[str, None] = {}
    for anchor in root.iter("a"):
        href = (anchor.get("href") or "").strip()
        if not href or href[0] == "#" or href in hrefs:
            continue
        hrefs.add(href)
        absolute = _absolute(base, origin, href)
        if absolute is not None and absolute not in seen:
            if max_links is not None and len(seen) >= max_links:
                notes.append(f"links cut to the first {max_links} (more on the page)")
                break
            seen[absolute] = None
    return tuple(seen)


# A path from the root that urljoin keeps as it is: no "." or ".." segment, no empty one, no parameters, query
# or fragment, nothing urlsplit strips (tabs, line breaks). Segments are separated by one "/" each, so a
# failed match backtracks linearly.
_SEGMENT = r"[A-Za-z0-9_~-][A-Za-z0-9_~.-]*"
_PLAIN_PATH = re.compile(rf"/(?:{_SEGMENT}(?:/{_SEGMENT})*/?)?")


def _origin(base: str) -> str:
    """``scheme://host`` of an http(s) ``base`` URL with a host (what ``urljoin`` puts before a path from the
    root, the scheme in lower case), else ``''``."""
    try:
        parts = urlsplit(base)
    except ValueError:
        return ""
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else ""


def _absolute(base: str, origin: str, href: str) -> str | None:
    """``href`` resolved against ``base``, without its fragment; None unless it is an http(s) URL. A plain
    path from the root (most links of a site) is put after ``origin`` (:func:`_origin` of ``base``), which
    is what ``urljoin`` gives, at a fraction of its cost."""
    if origin and _PLAIN_PATH.fullmatch(href):
        return origin + href
    try:
        absolute = urldefrag(urljoin(base, href)).url
        scheme = urlsplit(absolute).scheme.lower()
    except ValueError:  # malformed (e.g. an invalid IPv6 literal)
        return None
    return absolute if scheme in ("http", "https") else None


def hidden_selectors(root: lxml.etree._Element) -> list[tuple[str, frozenset[str], str]]:
    """The simple selectors that the page's ``<style>`` rules hide (``display:none``, ``visibility:hidden``,
    ``font-size:0``), as (tag or ``''``, classes, id or ``''``).

    A small matcher, on purpose: selectors with combinators (``div .x``, ``a > b``), attributes,
    pseudo-classes or inside ``@media`` / other at-rules are ignored, as are external style sheets and rules a
    later rule overrides; inline styles are checked on each element separately."""
    found: list[tuple[str, frozenset[str], str]] = []
    for style in root.iter("style"):
        css = _CSS_COMMENT.sub("", style.text or "")
        depth, start, at_rule = 0, 0, False
        for position, char in enumerate(css):
            if char == "{":
                if depth == 0:
                    selectors, start = (
                        css[start:position].rsplit(";", 1)[-1],
                        position + 1,
                    )  # after an @import;
                    at_rule = selectors.lstrip().startswith("@")
                depth += 1
            elif char == "}" and depth:
                depth -= 1
                if depth == 0:
                    if not at_rule and _HIDDEN_STYLE.search(css[start:position]):
                        found.extend(_simple_selectors(selectors))
                    start = position + 1
    return found


def _simple_selectors(text: str) -> list[tuple[str, frozenset[str], str]]:
    found = []
    for selector in text.split(","):
        match = _SIMPLE_SELECTOR.match(selector.strip())
        if not match or not selector.strip():
            continue
        tag = (match.group(1) or "").lower().replace("*", "")
        parts = _SELECTOR_PART.findall(match.group(2))
        ids = [name for kind, name in parts if kind == "#"]
        if len(ids) > 1 or (not tag and not parts) or tag in ("html", "body"):
            continue
        found.append((tag, frozenset(name for kind, name in parts if kind == "."), ids[0] if ids else ""))
    return found


def _matches(
    element: lxml.etree._Element, tag: str, selectors: list[tuple[str, frozenset[str], str]]
) -> bool:
    classes = frozenset((element.get("class") or "").split())
    identifier = element.get("id") or ""
    return any(
        (not want_tag or want_tag == tag)
        and want_classes <= classes
        and (not want_id or want_id == identifier)
        for want_tag, want_classes, want_id in selectors
    )


def _drop_invisible(root: lxml.etree._Element, hidden: list[tuple[str, frozenset[str], str]]) -> None:
    doomed = []
    for element in root.iter():
        tag = element.tag
        if not isinstance(tag, str):
            doomed.append(element)  # comments, processing instructions, entities
        elif tag.lower() in _DROP_TAGS or element.get("hidden") is not None or _hides(element, hidden):
            doomed.append(element)
    for element in doomed:
        if element.getparent() is not None:
            _drop_tree(element)


def _hides(element: lxml.etree._Element, hidden: list[tuple[str, frozenset[str], str]]) -> bool:
    """Whether the element's inline style, or one of the page's rules (``hidden``), hides it."""
    style = element.get("style")  # most elements have none: no search of an empty string
    if style and _HIDDEN_STYLE.search(style):
        return True
    return bool(hidden) and _matches(element, str(element.tag).lower(), hidden)


def _drop_tree(element: lxml.etree._Element) -> None:
    """Remove ``element`` and its subtree, keeping its tail text (lxml.html's ``drop_tree``)."""
    parent = element.getparent()
    if element.tail:
        previous = element.getprevious()
        if previous is None:
            parent.text = (parent.text or "") + element.tail
        else:
            previous.tail = (previous.tail or "") + element.tail
    parent.remove(element)


def _is_chrome_element(tag: str, identifier: str, classes: str) -> bool:
    if tag in _CHROME_TAGS:
        return True
    tokens: list[str] = []
    for value in (identifier, classes):
        if value:
            tokens.extend(t.lower() for t in _TOKEN_SPLIT.split(value) if t)
    if not tokens:
        return False
    if any(_POSITIVE_TOKEN.match(t) for t in tokens):
        return False
    return any(_NEGATIVE_TOKEN.match(t) for t in tokens)


class _Kind(NamedTuple):
    """What an element's start changes in the segmentation (and its end undoes)."""

    block: bool
    link: bool
    chrome: bool
    pre: bool
    line_break: bool
    signature: tuple[str, str, str]


@lru_cache(maxsize=4096)
def _kind(tag: str, identifier: str, classes: str) -> _Kind:
    """An element's :class:`_Kind` from its tag (lower case), id and class: pages repeat these (every
    ``<p>`` of a chapter alike), so each is worked out once."""
    block = tag in _BLOCK_TAGS
    return _Kind(
        block=block,
        link=tag == "a",
        chrome=_is_chrome_element(tag, identifier, classes),
        pre=tag in ("pre", "listing", "plaintext", "xmp", "textarea"),
        line_break=tag == "br",
        signature=_signature(tag, identifier, classes) if block else ("", "", ""),
    )


class _Segmenter:
    """Cuts the document into lines, each owned by its nearest enclosing block."""

    def __init__(self) -> None:
        self.blocks: list[_Block] = []
        self.lines: list[_Line] = []
        self.block_stack: list[int] = []
        self.link_depth = 0
        self.chrome_depth = 0
        self.pre_depth = 0
        self.current: _Line | None = None

    def open_block(self, signature: tuple[str, str, str] = ("", "", "")) -> None:
        self.break_line()
        parent = self.block_stack[-1] if self.block_stack else -1
        self.blocks.append(_Block(parent=parent, signature=signature))
        index = len(self.blocks) - 1
        if parent >= 0:
            self.blocks[parent].children.append(index)
        self.block_stack.append(index)

    def close_block(self) -> None:
        self.break_line()
        if len(self.block_stack) > 1:
            self.block_stack.pop()

    def break_line(self) -> None:
        if self.current is not None and self.current.chars:
            self.lines.append(self.current)
        self.current = None

    def add_text(self, text: str | None) -> None:
        if not text:
            return
        if self.pre_depth:
            pieces = text.split("\n")
            for number, piece in enumerate(pieces):
                if number:
                    self.break_line()
                self._add_piece(piece)
        else:
            self._add_piece(text)

    def _add_piece(self, text: str) -> None:
        if not text:
            return
        if self.current is None:
            self.current = _Line(block=self.block_stack[-1])
        visible = _visible_chars(text)
        self.current.parts.append(text)
        self.current.chars += visible
        if self.link_depth:
            self.current.link_chars += visible
        if self.chrome_depth:
            self.current.chrome_chars += visible


def _visible_chars(text: str) -> int:
    """How many characters of ``text`` are not whitespace (``str.isspace``, what ``str.split`` drops)."""
    return len("".join(text.split()))


def _signature(tag: str, identifier: str, classes: str) -> tuple[str, str, str]:
    """Tag, class and id without digits: the parts of one text cut into siblings share it
    (``div.part``, ``#content1``/``#content2``); a comment list beside the text does not."""
    return (tag, " ".join(classes.split()), re.sub(r"\d+", "", identifier))


def _segment(root: lxml.etree._Element) -> tuple[list[_Block], list[_Line]]:
    seg = _Segmenter()
    seg.open_block()  # the document itself
    # Per element, what its start event changed, so the end event can undo exactly that.
    opened: list[_Kind] = []
    for event, element in lxml.etree.iterwalk(root, events=("start", "end")):
        if event == "start":
            tag = element.tag
            kind = _kind(
                tag.lower() if isinstance(tag, str) else "",
                element.get("id") or "",
                element.get("class") or "",
            )
            opened.append(kind)
            if kind.line_break:
                seg.break_line()
            if kind.block:
                seg.open_block(kind.signature)
            seg.link_depth += kind.link
            seg.chrome_depth += kind.chrome
            seg.pre_depth += kind.pre
            seg.add_text(element.text)
        else:
            kind = opened.pop()
            seg.link_depth -= kind.link
            seg.chrome_depth -= kind.chrome
            seg.pre_depth -= kind.pre
            if kind.block:
                seg.close_block()
            if element is not root:
                seg.add_text(element.tail)
    seg.break_line()
    return seg.blocks, seg.lines


def _weigh(line: _Line) -> None:
    raw = tidy_whitespace("".join(line.parts))
    line.text = _cut_spliced(raw)
    if line.text != raw:  # what was cut is chrome, the rest is judged on its own
        removed = _visible_chars(raw) - _visible_chars(line.text)
        line.chars = max(0, line.chars - removed)
        line.link_chars = min(line.link_chars, line.chars)
        line.chrome_chars = min(line.chrome_chars, line.chars)
        if not _SENTENCE_PUNCTUATION.sub("", line.text).strip() or (
            len(raw) <= _BOILERPLATE_LINE_MAX and _is_promotion(line.text)
        ):  # nothing but the address or notice and its punctuation, or a promotion line around the address
            line.text, line.is_chrome, line.weight = raw, True, -float(max(line.chars, 1) + removed)
            return
    non_link = line.chars - line.link_chars
    boilerplate = len(line.text) <= _BOILERPLATE_LINE_MAX and (
        _SITE_ADDRESS.search(line.text) is not None or _is_promotion(line.text)
    )
    # A long sentence-bearing paragraph is never a menu, even inside an element classed as one: broken pages
    # leave a navigation <div> unclosed and the chapter ends up inside it.
    long_prose = non_link >= _LONG_PROSE_CHARS and _SENTENCE_PUNCTUATION.search(line.text) is not None
    in_chrome = line.chrome_chars * 2 > line.chars and not long_prose
    line.is_chrome = line.link_chars * 2 > line.chars or in_chrome or boilerplate
    if line.is_chrome:
        line.weight = -float(line.chars)
        return
    line.is_prose = non_link >= _PROSE_MIN_CHARS or _SENTENCE_PUNCTUATION.search(line.text) is not None
    line.weight = float(non_link) if line.is_prose else 0.3 * non_link


def _is_promotion(text: str) -> bool:
    """Whether ``text`` (a line not longer than :data:`_BOILERPLATE_LINE_MAX`) is a site notice or a
    promotion / navigation line rather than a sentence of the story.

    A site notice (copyright, ICP number, "remember this site") is enough. Otherwise the line needs a
    promotion phrase and must be dominated by promotion: what is left of its letters (digits and punctuation
    do not count) after taking out the promotion phrases and their filler is shorter than
    :data:`_PROMO_REST_MIN`, or, with two phrases or more, not longer than what they cover. A sentence that
    merely uses one such word ("他抬头看见小区的广告大屏上正放着新闻，心里一沉。") keeps enough letters of its
    own to stay; a short line such as "“广告？”" does not, a loss accepted to keep "【广告】" and "最新章节！"
    out."""
    if _SITE_NOTICE.search(text):
        return True
    if not _PROMO_WORD.search(text):
        return False
    hits = covered = 0
    for match in _PROMO.finditer(text):
        hits += match.lastgroup == "word"
        covered += sum(map(str.isalpha, match.group()))
    if not hits:
        return False
    rest = sum(map(str.isalpha, text)) - covered
    return rest < _PROMO_REST_MIN or (hits >= 2 and covered >= rest)


def _cut_spliced(text: str) -> str:
    """``text`` without the site addresses and reader notices spliced into it (see the module docstring)."""
    if not text:
        return text
    spliced = _cut_addresses(text)
    cut = _NOTICE.sub("", spliced) if _NOTICE_WORD.search(spliced) else spliced
    return text if cut == text else tidy_whitespace(cut)


def _cut_addresses(text: str) -> str:
    """``_SPLICED_ADDRESS.sub("", text)``, searching only where an address can be. The pattern begins with
    optional parts, so the regular expression engine would try it at every character of a page (a fifth of
    the parse's time on Chinese chapters); an address and its brackets are made of :data:`_ADDRESS_RUN`'s
    characters only and hold a letter or digit and a dot, and its end looks at nothing but letters and digits,
    so each such run is cut on its own, with the same result."""
    pieces: list[str] = []
    last = 0
    for run in _ADDRESS_RUN.finditer(text):
        chars = run.group()
        if not (_ADDRESS_DOTS.search(chars) and _ADDRESS_LETTER.search(chars)):
            continue
        cut = _SPLICED_ADDRESS.sub("", chars)
        if cut != chars:
            pieces += (text[last : run.start()], cut)
            last = run.end()
    return "".join((*pieces, text[last:])) if pieces else text


def _headings(title: str, lines: list[_Line]) -> set[str]:
    """The ``<title>``'s first part (``第九章 猫`` of ``第九章 猫_某书_书友网``), whitespace removed: a
    heading the body may repeat at its top (:func:`_main_text` adds the lines just before the body block, such
    as its ``<h1>``)."""
    found = {_squeeze(part) for part in _TITLE_SEPARATORS.split(title)[:1]}
    found.discard("")
    return found


_TITLE_SEPARATORS = re.compile(r"\s*[_|｜\-–—]\s*|\s+-\s+")
_HEADING_MAX_CHARS = 40


def _squeeze(text: str) -> str:
    return "".join(text.split())


def _main_text(blocks: list[_Block], lines: list[_Line], headings: set[str]) -> str:
    if not lines:
        return ""
    for line in lines:
        _weigh(line)
        block = blocks[line.block]
        if line.is_prose:
            block.own_prose += line.weight
            block.prose += line.weight
        elif line.is_chrome:
            block.chrome -= line.weight
    # Then each block's sums into its parent's, children first (a block's parent was opened before it). The
    # weights are whole numbers, so the sums do not depend on the order they are added in.
    for block in reversed(blocks):
        if block.parent >= 0:
            blocks[block.parent].prose += block.prose
            blocks[block.parent].chrome += block.chrome
    candidates = [i for i, block in enumerate(blocks) if block.prose > 0]
    if not candidates:
        return ""
    best = max(candidates, key=lambda i: blocks[i].score)
    best = _narrow(blocks, best)
    inside = _subtree(blocks, best)
    kept = [line.text for line in lines if line.block in inside and not line.is_chrome and line.text]
    # The chapter heading repeated at the top of the body (as a line of the text block, not as its <h1>) is
    # not the body: drop it when it equals the title's first part or a heading line just before the block.
    headings = headings | {_squeeze(line.text) for line in lines[: _first_line(lines, inside)][-3:]}
    while kept and len(kept[0]) <= _HEADING_MAX_CHARS and _squeeze(kept[0]) in headings and len(kept) > 1:
        kept.pop(0)
    return "\n".join(kept)


def _first_line(lines: list[_Line], inside: set[int]) -> int:
    return next((number for number, line in enumerate(lines) if line.block in inside), len(lines))


def _narrow(blocks: list[_Block], best: int) -> int:
    """Walk down from ``best`` while one child holds all of its prose, or most of it
    (:data:`_DOMINANT_SHARE`) with no look-alike sibling holding the rest (a sidebar blurb or a comment
    thread beside the chapter is dropped; a chapter cut into ``div.part`` siblings is kept whole), unless
    the block is a level of a paragraph chain (:func:`_is_paragraph_chain`)."""
    while True:
        block = blocks[best]
        holders = [c for c in block.children if blocks[c].prose > 0]
        if not holders:
            return best
        largest = max(holders, key=lambda c: blocks[c].prose)
        share = blocks[largest].prose / block.prose
        if share >= 1 - 1e-9:
            best = largest
            continue
        signature = blocks[largest].signature
        look_alike = any(blocks[c].signature == signature for c in holders if c != largest)
        if share >= _DOMINANT_SHARE and not look_alike and not _is_paragraph_chain(blocks, best, largest):
            best = largest
            continue
        return best


def _is_paragraph_chain(blocks: list[_Block], parent: int, child: int) -> bool:
    """Whether ``parent`` and ``child`` are two levels of a chapter whose paragraphs each open a block that
    is never closed (``<div>para1<div>para2<div>para3...``): the parser nests every paragraph inside the one
    before, so each level holds one paragraph of its own and a child holding all the rest. Walking down
    such a chain peels off one paragraph per level and would keep only the last few; the chain's top is the
    chapter.

    Both levels must have prose of their own (a real sentence at the parent, some prose at the child) and
    the child must hold more below it. A wrapper with a stray sentence of its own (a book blurb, an
    author's line) above a content block that holds its text directly or in ``<p>`` children is not a
    chain, so the walk still leaves that sentence out."""
    below = blocks[child]
    return (
        blocks[parent].own_prose >= _PROSE_MIN_CHARS
        and below.own_prose > 0
        and below.prose - below.own_prose > 1e-9
    )


def _subtree(blocks: list[_Block], top: int) -> set[int]:
    members = {top}
    pending = [top]
    while pending:
        for child in blocks[pending.pop()].children:
            members.add(child)
            pending.append(child)
    return members
