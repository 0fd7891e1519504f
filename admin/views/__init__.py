"""The admin's blueprints: dashboard, works, matches (HTML) and the JSON API."""

from admin.views.api import api
from admin.views.dashboard import dashboard
from admin.views.matches import matches
from admin.views.works import works

__all__ = ["BLUEPRINTS", "api", "dashboard", "matches", "works"]

BLUEPRINTS = (dashboard, works, matches, api)
