"""The admin's blueprints: login, health, dashboard, works, matches, takedowns, leads, reports, notices and
senders, crawls, sites, users (HTML) and the JSON API."""

from fptrack.admin.views import (
    api,
    auth,
    crawls,
    dashboard,
    health,
    leads,
    matches,
    notices,
    reports,
    sites,
    takedowns,
    users,
    works,
)

__all__ = ["BLUEPRINTS"]

BLUEPRINTS = (
    auth.blueprint,
    health.blueprint,
    dashboard.blueprint,
    works.blueprint,
    matches.blueprint,
    takedowns.blueprint,
    leads.blueprint,
    reports.blueprint,
    notices.blueprint,
    notices.senders_blueprint,
    crawls.blueprint,
    sites.blueprint,
    users.blueprint,
    api.blueprint,
)
