"""The admin's blueprints: dashboard, works, matches (HTML) and the JSON API."""

from admin.views import api, dashboard, matches, works

__all__ = ["BLUEPRINTS"]

BLUEPRINTS = (dashboard.blueprint, works.blueprint, matches.blueprint, api.blueprint)
