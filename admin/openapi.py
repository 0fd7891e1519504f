"""The OpenAPI 3.1 description of the admin's JSON API, served at ``/api/openapi.json``.

Written by hand next to the views it describes (``admin.views.api``); ``tests/unit/admin/test_api.py`` validates
it with openapi-spec-validator and checks that every ``/api`` route of the app is described and every
described path exists.
"""

from __future__ import annotations

from typing import Any

from fptrack.storage.models import TAKEDOWN_OUTCOMES

__all__ = ["openapi_document"]

_STRING = {"type": "string"}
_INT = {"type": "integer"}
_TIME = {"type": "string", "format": "date-time"}
_STATUS = {"type": "string", "enum": ["flagged", "licensed", "confirmed", "dismissed"]}
_DECISION = {"type": "string", "enum": ["confirmed", "dismissed", "flagged"]}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or list(properties)}


def _items(schema: dict[str, Any]) -> dict[str, Any]:
    return _object({"items": {"type": "array", "items": schema}})


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERRORS = {
    "400": {"$ref": "#/components/responses/BadRequest"},
    "401": {"$ref": "#/components/responses/Unauthorized"},
    "503": {"$ref": "#/components/responses/Unavailable"},
}
_WRITE_ERRORS = {
    **_ERRORS,
    "403": {"$ref": "#/components/responses/Forbidden"},
    "404": {"$ref": "#/components/responses/NotFound"},
}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


_FILTERS = [
    _query("status", _STATUS, "only matches with this review status"),
    _query("work", {"type": "integer", "minimum": 1}, "only matches of this work id"),
    _query("site", _STRING, "only matches on this site (page host, exact)"),
    _query("q", {"type": "string", "maxLength": 300}, "a piece of the page URL (case-insensitive)"),
    _query("from", {"type": "string", "format": "date"}, "first seen on or after this day (UTC)"),
    _query("to", {"type": "string", "format": "date"}, "first seen on or before this day (UTC)"),
    _query("min_score", {"type": "number", "minimum": 0, "maximum": 1}, "score at least"),
    _query("max_score", {"type": "number", "minimum": 0, "maximum": 1}, "score at most"),
    _query("sort", {"type": "string", "enum": ["date", "score", "work", "site", "status"]}, "sort key (date)"),
    _query("order", {"type": "string", "enum": ["desc", "asc"]}, "sort order (desc)"),
]


def _id(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}


def openapi_document() -> dict[str, Any]:
    schemas: dict[str, Any] = {
        "Error": _object({"error": _STRING}),
        "Match": _object(
            {
                "id": _INT,
                "page_url": _STRING,
                "work_id": _INT,
                "work_title": _STRING,
                "chapter_index": _INT,
                "chapter_title": _STRING,
                "score": {"type": "number"},
                "methods": {"type": "array", "items": _STRING},
                "spans": {
                    "type": "array",
                    "description": "[page_start, page_end, work_start, work_end], characters of the original texts",
                    "items": {"type": "array", "items": _INT, "minItems": 4, "maxItems": 4},
                },
                "first_seen": _TIME,
                "status": _STATUS,
            }
        ),
        "MatchDetail": {
            "allOf": [
                _ref("Match"),
                _object(
                    {
                        "page_note": {"type": "string", "description": "what was cut or repaired on the page"},
                        "parts": {
                            "type": "array",
                            "description": "a chapter split over pages: the passages on its later parts",
                            "items": _object(
                                {
                                    "page_id": _INT,
                                    "url": _STRING,
                                    "part": _INT,
                                    "spans": {
                                        "type": "array",
                                        "items": {"type": "array", "items": _INT, "minItems": 4, "maxItems": 4},
                                    },
                                }
                            ),
                        },
                        "takedown": _object(
                            {
                                "state": {"type": "string", "enum": [*TAKEDOWN_OUTCOMES, "unchecked"]},
                                "rechecked_at": {"oneOf": [_TIME, {"type": "null"}]},
                                "taken_down_at": {"oneOf": [_TIME, {"type": "null"}]},
                            }
                        ),
                    }
                ),
            ]
        },
        "MatchPage": _object(
            {"items": {"type": "array", "items": _ref("Match")}, "page": _INT, "per_page": _INT, "total": _INT, "pages": _INT}
        ),
        "HistoryEntry": _object(
            {
                "kind": {"type": "string", "enum": ["decision", "note"]},
                "at": _TIME,
                "who": _STRING,
                "text": _STRING,
                "status": {"oneOf": [_STATUS, {"type": "null"}]},
            }
        ),
        "Decision": _object(
            {"id": _INT, "previous_status": _STATUS, "status": _DECISION, "recorded": {"type": "boolean"}}
        ),
        "Note": _object({"id": _INT, "match_id": _INT, "author": _STRING, "text": _STRING}),
        "Work": _object(
            {"id": _INT, "title": _STRING, "source_name": _STRING, "chapters": _INT, "matches": _INT, "created_at": _TIME}
        ),
        "WorkDetail": _object(
            {
                "id": _INT,
                "title": _STRING,
                "source_name": _STRING,
                "matches": _INT,
                "created_at": _TIME,
                "chapters": {
                    "type": "array",
                    "items": _object({"id": _INT, "index": _INT, "title": _STRING, "length": _INT, "matches": _INT}),
                },
            }
        ),
        "Crawl": _object(
            {
                "id": _INT,
                "site": _STRING,
                "start_urls": {"type": "array", "items": _STRING},
                "depth": _INT,
                "max_pages": _INT,
                "status": _STRING,
                "started_at": _TIME,
                "finished_at": {"oneOf": [_TIME, {"type": "null"}]},
                "pages_seen": _INT,
                "pages_failed": _INT,
                "pages_matched": _INT,
                "error": _STRING,
            }
        ),
        "Site": _object(
            {
                "id": _INT,
                "name": _STRING,
                "host": _STRING,
                "enabled": {"type": "boolean"},
                "schedule": {"type": "string", "description": "seconds between crawls or a cron expression; '' = manual"},
                "next_crawl_at": {"oneOf": [_TIME, {"type": "null"}]},
                "last_crawled_at": {"oneOf": [_TIME, {"type": "null"}]},
                "last_status": _STRING,
                "last_error": _STRING,
                "running": {"type": "boolean"},
            }
        ),
        "Takedown": _object(
            {
                "id": {**_INT, "description": "the match id"},
                "page_url": _STRING,
                "work_id": _INT,
                "work_title": _STRING,
                "status": _STATUS,
                "state": {"type": "string", "enum": ["present", "gone", "removed", "error", "unchecked"]},
                "first_seen": _TIME,
                "rechecked_at": {"oneOf": [_TIME, {"type": "null"}]},
                "taken_down_at": {"oneOf": [_TIME, {"type": "null"}]},
                "time_to_takedown_seconds": {"oneOf": [{"type": "number"}, {"type": "null"}]},
            }
        ),
        "TakedownStats": _object(
            {
                "key": _STRING,
                "matches": _INT,
                "checked": _INT,
                "taken_down": _INT,
                "rate": {"oneOf": [{"type": "number"}, {"type": "null"}]},
                "median_seconds": {"oneOf": [{"type": "number"}, {"type": "null"}]},
                "p90_seconds": {"oneOf": [{"type": "number"}, {"type": "null"}]},
            }
        ),
        "Stats": _object(
            {
                "works": _INT,
                "chapters": _INT,
                "pages": _INT,
                "matches": _INT,
                "matches_by_status": {"type": "object", "additionalProperties": _INT},
                "top_hosts": {"type": "array", "items": _object({"host": _STRING, "matches": _INT})},
            }
        ),
        "RollupRow": _object(
            {
                "key": _STRING,
                "flagged": _INT,
                "confirmed": _INT,
                "dismissed": _INT,
                "licensed": _INT,
                "pages": _INT,
                "total": _INT,
            }
        ),
        "Dashboard": {
            "type": "object",
            "description": "the dashboard's figures (see /api/dashboard)",
            "additionalProperties": True,
        },
    }
    error = _json(_ref("Error"), "")
    responses = {
        "BadRequest": {**error, "description": "a bad filter, body or field"},
        "Unauthorized": {**error, "description": "no session and no valid API token"},
        "Forbidden": {**error, "description": "the account's role is too low"},
        "NotFound": {**error, "description": "no such id"},
        "Conflict": {**error, "description": "the list changed since the client counted it"},
        "Unavailable": {**error, "description": "the database is not ready or not reachable"},
    }
    review_body = {
        "required": True,
        "content": {
            "application/json": {
                "schema": _object({"status": _DECISION, "reason": {"type": "string", "maxLength": 2000}}, ["status"])
            }
        },
    }
    paths: dict[str, Any] = {
        "/api/matches": {
            "get": {
                "summary": "The matches, filtered, sorted and paginated",
                "operationId": "listMatches",
                "parameters": [
                    *_FILTERS,
                    _query("page", {"type": "integer", "minimum": 1}, "page number (1)"),
                    _query("per_page", {"type": "integer", "minimum": 1}, "matches per page (50, at most 500)"),
                ],
                "responses": {"200": _json(_ref("MatchPage"), "one page of matches"), **_ERRORS},
            }
        },
        "/api/matches/{match_id}": {
            "get": {
                "summary": "One match",
                "operationId": "getMatch",
                "parameters": [_id("match_id")],
                "responses": {"200": _json(_ref("MatchDetail"), "the match, with its page note, parts and takedown state"), **_WRITE_ERRORS},
            }
        },
        "/api/matches/{match_id}/history": {
            "get": {
                "summary": "The decisions and notes on a match, oldest first",
                "operationId": "getMatchHistory",
                "parameters": [_id("match_id")],
                "responses": {"200": _json(_items(_ref("HistoryEntry")), "the history"), **_WRITE_ERRORS},
            }
        },
        "/api/matches/{match_id}/review": {
            "post": {
                "summary": "Confirm, dismiss or reopen a match (reviewer)",
                "operationId": "reviewMatch",
                "parameters": [_id("match_id")],
                "requestBody": review_body,
                "responses": {"200": _json(_ref("Decision"), "the decision"), **_WRITE_ERRORS},
            }
        },
        "/api/matches/{match_id}/notes": {
            "post": {
                "summary": "Add a note to a match (reviewer)",
                "operationId": "addNote",
                "parameters": [_id("match_id")],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": _object({"text": {"type": "string", "maxLength": 2000}})}
                    },
                },
                "responses": {"201": _json(_ref("Note"), "the note"), **_WRITE_ERRORS},
            }
        },
        "/api/matches/review": {
            "post": {
                "summary": "One decision on many matches of a filtered list (reviewer; at most 1000)",
                "operationId": "bulkReview",
                "parameters": _FILTERS,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["status"],
                                "properties": {
                                    "status": _DECISION,
                                    "reason": {"type": "string", "maxLength": 2000},
                                    "ids": {"type": "array", "items": _INT, "maxItems": 1000},
                                    "all": {"type": "boolean"},
                                    "expected": {"type": "integer", "description": "with all: the list's size"},
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "200": _json(_items(_ref("Decision")), "the decisions"),
                    "409": {"$ref": "#/components/responses/Conflict"},
                    **_WRITE_ERRORS,
                },
            }
        },
        "/api/works": {
            "get": {
                "summary": "The registered works",
                "operationId": "listWorks",
                "responses": {"200": _json(_items(_ref("Work")), "the works"), **_ERRORS},
            }
        },
        "/api/works/{work_id}": {
            "get": {
                "summary": "One work with its chapters",
                "operationId": "getWork",
                "parameters": [_id("work_id")],
                "responses": {"200": _json(_ref("WorkDetail"), "the work"), **_WRITE_ERRORS},
            }
        },
        "/api/crawls": {
            "get": {
                "summary": "The latest 200 crawl runs",
                "operationId": "listCrawls",
                "responses": {"200": _json(_items(_ref("Crawl")), "the crawls"), **_ERRORS},
            }
        },
        "/api/sites": {
            "get": {
                "summary": "The monitored sites with their schedule and latest crawl",
                "operationId": "listSites",
                "responses": {"200": _json(_items(_ref("Site")), "the sites"), **_ERRORS},
            }
        },
        "/api/takedowns": {
            "get": {
                "summary": "Matches followed for takedown (flagged and confirmed), their latest re-check, oldest first",
                "operationId": "listTakedowns",
                "parameters": [
                    _query("state", {"type": "string", "enum": ["present", "gone", "removed", "error", "unchecked", "down"]},
                           "only this state (down: gone or removed now)"),
                    _query("work", _INT, "only this work id"),
                    _query("domain", _STRING, "only pages on this host"),
                    _query("page", {"type": "integer", "minimum": 1}, "page number (1)"),
                    _query("per_page", {"type": "integer", "minimum": 1}, "items per page"),
                ],
                "responses": {
                    "200": _json(_object({"items": {"type": "array", "items": _ref("Takedown")}, "page": _INT,
                                          "per_page": _INT}), "a page of matches"),
                    **_ERRORS,
                },
            }
        },
        "/api/takedowns/stats": {
            "get": {
                "summary": "Takedown rate and time to takedown, overall or per site or work",
                "operationId": "getTakedownStats",
                "parameters": [_query("by", {"type": "string", "enum": ["all", "host", "work"]}, "grouping (all)")],
                "responses": {
                    "200": _json(_object({"by": _STRING, "items": {"type": "array", "items": _ref("TakedownStats")}}),
                                 "rows"),
                    **_ERRORS,
                },
            }
        },
        "/api/stats": {
            "get": {
                "summary": "Counts",
                "operationId": "getStats",
                "responses": {"200": _json(_ref("Stats"), "the counts"), **_ERRORS},
            }
        },
        "/api/reports/rollup": {
            "get": {
                "summary": "Match counts per work, site or day, by status",
                "operationId": "getRollup",
                "parameters": [_query("by", {"type": "string", "enum": ["work", "host", "day"]}, "grouping (work)")],
                "responses": {
                    "200": _json(_object({"by": _STRING, "items": {"type": "array", "items": _ref("RollupRow")}}), "rows"),
                    **_ERRORS,
                },
            }
        },
        "/api/openapi.json": {
            "get": {
                "summary": "This description",
                "operationId": "getOpenApi",
                "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1"), **_ERRORS},
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fptrack admin API",
            "version": "1",
            "description": (
                "The matches fptrack found and their review. Authenticate with an API token "
                "(`fptrack users token USERNAME`, sent as `Authorization: Bearer ...`) or the admin's login "
                "session (state changes then need the X-CSRFToken header). Errors are `{\"error\": \"...\"}`."
            ),
        },
        "servers": [{"url": "/"}],
        "security": [{"bearerAuth": []}, {"sessionCookie": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": responses,
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "description": "an API token"},
                "sessionCookie": {"type": "apiKey", "in": "cookie", "name": "fptrack_admin"},
            },
        },
    }
