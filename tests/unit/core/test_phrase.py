"""core.phrase: a sentence that is its English text and can be said again from its template."""

from __future__ import annotations

import pytest

from fptrack.core.phrase import Phrase

CHINESE = {
    "the text lacks %(statement)s": "正文缺少%(statement)s",
    "the good-faith statement": "善意声明",
    "no evidence bundle for %(url)s": "%(url)s 没有证据包",
}


def test_a_phrase_is_its_english_text() -> None:
    phrase = Phrase("no evidence bundle for %(url)s", url="http://a.example/1")
    assert phrase == "no evidence bundle for http://a.example/1" and isinstance(phrase, str)
    assert phrase.template == "no evidence bundle for %(url)s" and dict(phrase.params) == {
        "url": "http://a.example/1"
    }
    assert Phrase("50% done, no parameters") == "50% done, no parameters"
    with pytest.raises(TypeError):
        phrase.params["url"] = "changed"  # type: ignore[index]


def test_a_phrase_is_said_in_another_language_with_its_phrase_parameters() -> None:
    phrase = Phrase("the text lacks %(statement)s", statement=Phrase("the good-faith statement"))
    assert phrase == "the text lacks the good-faith statement"
    assert phrase.say(CHINESE.__getitem__) == "正文缺少善意声明"
    assert phrase.say(lambda template: template) == phrase  # untranslated: the English again


def test_say_marks_each_plain_parameter() -> None:
    phrase = Phrase("no evidence bundle for %(url)s", url="<b>")
    marked = phrase.say(CHINESE.__getitem__, lambda name, value: f"[{name}:{value}]")
    assert marked == "[url:<b>] 没有证据包"
