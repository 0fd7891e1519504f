"""``/networks``: the pirate networks (groups of sites serving the same texts, :mod:`compare.networks`) and
the candidate sites discovery proposed (:mod:`jobs.discovery`). Everyone may read; deciding a candidate
(monitor it, reject it, mark it licensed) is an admin's, as managing sites is."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext
from flask_login import current_user

from fptrack.admin.network_graph import MAX_DRAWN_SITES, network_svg, site_label
from fptrack.admin.security import requires_role
from fptrack.admin.views.context import admin_state, db_session
from fptrack.admin.views.read_sessions import read_session
from fptrack.compare.networks import find_networks
from fptrack.jobs.discovery import (
    CandidateError,
    accept_candidate,
    license_candidate,
    list_candidates,
    reject_candidate,
)
from fptrack.jobs.sites import SiteError
from fptrack.storage.models import DiscoveryCandidate

__all__ = ["blueprint"]

blueprint = Blueprint("networks", __name__, url_prefix="/networks")
CANDIDATE_LIMIT = 500
DRAWN_NETWORKS = 20  # the largest networks are drawn as graphs; every network is in the table


@blueprint.get("")
def index() -> ResponseReturnValue:
    session = read_session()
    networks = find_networks(session, admin_state().settings)
    candidates = list_candidates(session)[:CANDIDATE_LIMIT]
    graphs = {
        network.id: network_svg(network)
        for network in networks[:DRAWN_NETWORKS]
        if len(network.sites) <= MAX_DRAWN_SITES
    }
    return render_template(
        "networks.html",
        networks=networks,
        graphs=graphs,
        labels={site.site_id: site_label(site) for network in networks for site in network.sites},
        candidates=candidates,
        limit=CANDIDATE_LIMIT,
        drawn_limit=DRAWN_NETWORKS,
        max_drawn_sites=MAX_DRAWN_SITES,
    )


@blueprint.post("/candidates/<int:candidate_id>/<decision>")
@requires_role("admin")
def decide(candidate_id: int, decision: str) -> ResponseReturnValue:
    session = db_session()
    if (
        decision not in ("accept", "reject", "licensed")
        or session.get(DiscoveryCandidate, candidate_id) is None
    ):
        abort(404)
    by = str(getattr(current_user, "username", ""))
    try:
        if decision == "accept":
            site = accept_candidate(session, candidate_id, admin_state().settings, by=by)
            message = gettext("Monitoring %(name)s (%(host)s).", name=site.name, host=site.host)
        elif decision == "reject":
            message = gettext("Rejected %(host)s.", host=reject_candidate(session, candidate_id, by=by).host)
        else:
            message = gettext(
                "%(host)s is licensed.", host=license_candidate(session, candidate_id, by=by).host
            )
    except (CandidateError, SiteError) as error:
        session.rollback()
        flash(str(error))
        return redirect(url_for("networks.index"), code=303)
    session.commit()
    flash(message)
    return redirect(url_for("networks.index"), code=303)
