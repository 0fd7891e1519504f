"""A finished English sentence that keeps the template and parameters it was made from, so that a layer which
knows the reader's language (the admin) can say it again in that language, while the layers that make it
(jobs, services) import no translation machinery and the command line prints it as it is."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Self

__all__ = ["Phrase"]


class Phrase(str):
    """``Phrase("no work named for %(url)s", url=url)``: a ``str`` whose value is the English sentence
    (``template % params``), with ``.template`` (the msgid a catalog translates) and ``.params`` (read-only).
    A parameter may itself be a phrase (a label inside a sentence); :meth:`say` translates it too."""

    template: str
    params: Mapping[str, object]

    def __new__(cls, template: str, /, **params: object) -> Self:
        phrase = super().__new__(cls, template % params if params else template)
        phrase.template = template
        phrase.params = MappingProxyType(params)
        return phrase

    def say(
        self, translate: Callable[[str], str], mark: Callable[[str, object], object] | None = None
    ) -> str:
        """The sentence in the reader's language: ``translate(template) % params`` (``translate`` a gettext),
        each parameter first passed through ``mark(name, value)`` when given (the admin escapes and marks up
        URLs and commands for HTML), each phrase parameter said the same way."""
        params = {
            name: value.say(translate, mark)
            if isinstance(value, Phrase)
            else mark(name, value)
            if mark
            else value
            for name, value in self.params.items()
        }
        template = translate(self.template)
        return template % params if params else template
