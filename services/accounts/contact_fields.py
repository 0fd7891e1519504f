"""What a person types for a notice's sender and a host's contacts, checked where it comes in (the admin's
forms, the command line) and once more before a notice is sent (a value stored before these checks).

A sender's name and email and a contact's name and email end up in the email's ``From``, ``Reply-To`` and
``To`` headers: a line break there would start a header of the typer's choosing (or, as Python's email
package refuses it, crash the send), and a comma in a recipient's address sends the notice to two. So a
one-line field holds no control character, and an email address is one bare ``local@domain`` with none of
the characters that separate or quote addresses. A postal address and a note may span lines.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from fptrack.core.errors import FptrackError

__all__ = [
    "EMAIL_FIELDS",
    "MULTILINE_FIELDS",
    "InvalidField",
    "check_email",
    "check_fields",
    "check_one_line",
]

EMAIL_FIELDS = frozenset({"email", "recipient", "recipient_address"})
"""Fields that hold one email address."""
MULTILINE_FIELDS = frozenset({"address", "note"})
"""Fields that may span lines (a postal address, a note): neither goes into a header."""

# one addr-spec, nothing that separates (",;"), quotes or brackets addresses ('"<>()[]\\'), no spaces
_BARE_ADDRESS = re.compile(r"[^\s,;<>()\[\]\\\"@:]+@[^\s,;<>()\[\]\\\"@:]+\.[^\s,;<>()\[\]\\\"@:.]+")


class InvalidField(FptrackError, ValueError):
    """A field that may not be stored or sent as typed; the message names the field and what is wrong, on one
    line."""


def _shown(value: str) -> str:
    return repr(value[:60] + ("…" if len(value) > 60 else ""))


def _has_control(value: str, *, allow_line_breaks: bool) -> bool:
    allowed = "\t\r\n" if allow_line_breaks else "\t"
    return any(unicodedata.category(char) in ("Cc", "Zl", "Zp") and char not in allowed for char in value)


def check_one_line(field: str, value: str) -> str:
    """``value`` unchanged, or :class:`InvalidField` if it holds a line break or another control character."""
    if _has_control(value, allow_line_breaks=False):
        raise InvalidField(
            f"{field} must be one line, without line breaks or control characters: {_shown(value)}"
        )
    return value


def check_email(field: str, value: str) -> str:
    """``value`` stripped if it is one bare email address (``abuse@hosting.example``), else
    :class:`InvalidField` saying so: not two (``a@x.example, b@y.example``), not a name with an address."""
    address = value.strip()
    if not _BARE_ADDRESS.fullmatch(address) or _has_control(address, allow_line_breaks=False):
        raise InvalidField(
            f"{field} must be one email address such as abuse@hosting.example (no commas, spaces, names or "
            f"line breaks), not {_shown(value)}"
        )
    return address


def check_fields(fields: Mapping[str, str | None]) -> None:
    """Check every field of a sender or a contact that is given (not None, not empty): email fields with
    :func:`check_email`, postal addresses and notes for control characters other than line breaks, every
    other field with :func:`check_one_line`. Raises :class:`InvalidField` for the first one that fails."""
    for field, value in fields.items():
        if not value:
            continue
        if field in EMAIL_FIELDS:
            check_email(field, value)
        elif field in MULTILINE_FIELDS:
            if _has_control(value, allow_line_breaks=True):
                raise InvalidField(f"{field} holds a control character: {_shown(value)}")
        else:
            check_one_line(field, value)
