"""A public cloud-drive share host on loopback that behaves like 蓝奏云 (lanzou), for the tests of following
a share link to its file (docs/leads.md).

A 蓝奏云 share serves its file to anyone, without a login: the share page (``/<id>``: the file's name and
size, and the download box in a frame, ``<iframe class="ifr2" src="/fn?...">``), the frame's page (a
"普通下载" button: the real one asks ``/ajaxm.php`` for the link by script; here the button is a plain link,
which a crawler that runs no script needs), then ``/file/?...`` redirecting to the file, sent as an
attachment. A share with a password shows a password form instead of the frame (no file without it).

The pages are served by :func:`testbed.sites.serve_site` used as the crawl's **HTTP proxy**
(``http_proxy=http://127.0.0.1:<port>``): the crawl asks it for ``http://<user>.lanzoux.com/<id>`` and it
answers by the path, so the share keeps its real host name in the pirate page, in the crawl and in the
recorded lead, and nothing leaves the machine."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from testbed.sites import Page, Redirect

__all__ = ["SHARE_HOST", "lanzou_share"]

SHARE_HOST = "pirate.lanzoux.com"
"""The host name the pirate pages link to (``http://pirate.lanzoux.com/<id>``): the crawl must be allowed to
reach it (``--allow-private-host``), since on loopback it resolves nowhere."""


def lanzou_share(
    share_id: str, filename: str, data: bytes, *, password: str = ""
) -> Mapping[str, Page | Redirect]:
    """The pages of one public share of ``data`` named ``filename`` (paths on the share host); with a
    ``password`` the share page holds the password form and no frame."""
    size = f"{len(data) / 1024:.1f} K"
    title = f"<title>{escape(filename)} - 蓝奏云</title>"
    if password:
        share_page = (
            f"<html><head>{title}</head><body><div class='passwddiv'>请输入密码"
            "<input type='text' id='pwd' name='pwd'><div class='passwddiv-btn' id='sub'>提交</div>"
            "</div></body></html>"
        )
        return {f"/{share_id}": Page.html(share_page)}
    share_page = (
        f"<html><head>{title}</head><body><div class='d'><div class='b'>{escape(filename)}</div>"
        f"<table><tr><td>文件大小：{size}</td></tr></table>"
        f"<iframe class='ifr2' name='1' src='/fn?{share_id}FRAME' frameborder='0' scrolling='no'></iframe>"
        "</div><div class='report'><a href='/report'>举报文件</a></div></body></html>"
    )
    frame = (
        "<html><body><div class='load'><div id='tourl'>"
        f"<a href='/file/?{share_id}SIGN' target='_blank'><span class='txt'>普通下载</span></a>"
        "</div></div></body></html>"
    )
    attachment = {"Content-Disposition": f"attachment; filename*=UTF-8''{_quoted(filename)}"}
    return {
        f"/{share_id}": Page.html(share_page),
        "/fn": Page.html(frame),
        "/file/": Redirect(f"/dl/{share_id}"),
        f"/dl/{share_id}": Page(data, content_type="application/octet-stream", headers=attachment),
    }


def _quoted(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")
