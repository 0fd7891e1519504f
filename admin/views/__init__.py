"""The admin's blueprints: dashboard, works, matches, crawls (HTML) and the JSON API."""

from admin.views import api, crawls, dashboard, matches, works

__all__ = ["BLUEPRINTS"]

BLUEPRINTS = (dashboard.blueprint, works.blueprint, matches.blueprint, crawls.blueprint, api.blueprint)
