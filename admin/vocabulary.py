"""The words the database holds and the admin's pages show (statuses, roles, outcomes, sort keys), each a
msgid of the admin's catalog, and ``label``, which shows one in the page's language (``admin.i18n``)."""

from __future__ import annotations

from flask_babel import gettext

__all__ = ["LANGUAGES", "N_", "VOCABULARY", "kind_label", "label"]


def N_(message: str) -> str:
    return message


# The words the database holds and the pages show (statuses, roles, outcomes, sort keys): each is a msgid, so
# the ``label`` filter translates them; a value not listed here is shown as it is.
VOCABULARY = frozenset(
    {
        N_("flagged"),
        N_("confirmed"),
        N_("dismissed"),
        N_("licensed"),
        N_("queued"),
        N_("running"),
        N_("finished"),
        N_("failed"),
        N_("cancelled"),
        N_("interrupted"),
        N_("present"),
        N_("gone"),
        N_("removed"),
        N_("error"),
        N_("crawl"),
        N_("recheck"),
        N_("viewer"),
        N_("reviewer"),
        N_("admin"),
        N_("date"),
        N_("score"),
        N_("work"),
        N_("site"),
        N_("status"),
        N_("day"),
        N_("week"),
        N_("open"),
        N_("closed"),
        N_("draft"),
        N_("sent"),
        N_("acknowledged"),
        N_("escalated"),
        N_("withdrawn"),
        N_("copy_gone"),
        N_("done"),
        N_("new"),
        # notice kinds, host contact kinds, crawl triggers, a site's render_js (admin/templates/notice*.html,
        # senders.html, crawl.html, site.html)
        N_("notice"),
        N_("reminder"),
        N_("escalation"),
        N_("hosting"),
        N_("cdn"),
        N_("registrar"),
        N_("designated_agent"),
        N_("other"),
        N_("schedule"),
        N_("cli"),
        N_("auto"),
        N_("yes"),
        N_("no"),
        # a notice's events (jobs.notices._event)
        N_("drafted"),
        N_("send_failed"),
        N_("item_gone"),
        N_("item_back"),
        N_("no_upstream"),
        N_("bounced"),
        N_("Bad Request"),
        N_("Unauthorized"),
        N_("Forbidden"),
        N_("Not Found"),
        N_("Method Not Allowed"),
        N_("Conflict"),
        N_("Request Entity Too Large"),
        N_("Too Many Requests"),
        N_("Internal Server Error"),
        N_("Bad Gateway"),
        N_("Service Unavailable"),
    }
)


def label(value: object) -> str:
    """A stored word (a status, a role...) in the page's language."""
    text = "" if value is None else str(value)
    return gettext(text) if text in VOCABULARY else text


# The languages a translation is found in (compare.meaning.detect_language), by code.
LANGUAGES = {
    "en": N_("English"),
    "vi": N_("Vietnamese"),
    "id": N_("Indonesian"),
    "th": N_("Thai"),
    "ko": N_("Korean"),
    "ja": N_("Japanese"),
    "ru": N_("Russian"),
    "ar": N_("Arabic"),
    "zh": N_("Chinese"),
}


def kind_label(kind: object) -> str:
    """A meaning match's kind (``Match.kind``) in the page's language: ``rewrite`` a 洗稿 rewrite,
    ``translation:en`` a translation into English; empty for an exact copy (None), a kind not known as it
    is."""
    text = "" if kind is None else str(kind)
    if text == "rewrite":
        return str(gettext("Rewrite"))
    if text.startswith("translation:"):
        code = text.partition(":")[2]
        name = gettext(LANGUAGES[code]) if code in LANGUAGES else code
        return str(gettext("Translation (%(language)s)", language=name))
    return text
