"""The OpenAPI 3.1 description of the admin's JSON API, served at ``/api/openapi.json``.

The document is data: ``admin/openapi.json`` beside this module (shipped in the package), edited by hand next
to the views it describes (``admin.views.api``). The one part owned by the models is filled in here: the
takedown states of ``MatchDetail`` are :data:`storage.models.TAKEDOWN_OUTCOMES` plus ``unchecked``.
``tests/unit/admin/test_api.py`` validates the result with openapi-spec-validator and checks that every
``/api`` route of the app is described and every described path exists."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files
from typing import Any

from fptrack.storage.models import TAKEDOWN_OUTCOMES

__all__ = ["openapi_document"]

_DOCUMENT = "openapi.json"


@lru_cache(maxsize=1)
def _document_text() -> str:
    return files("fptrack.admin").joinpath(_DOCUMENT).read_text(encoding="utf-8")


def openapi_document() -> dict[str, Any]:
    """The document as a fresh dict (callers may change their copy)."""
    document: dict[str, Any] = json.loads(_document_text())
    detail = document["components"]["schemas"]["MatchDetail"]["allOf"][1]
    detail["properties"]["takedown"]["properties"]["state"]["enum"] = [*TAKEDOWN_OUTCOMES, "unchecked"]
    return document
