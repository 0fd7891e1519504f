"""A host contact of kind designated_agent (the DMCA agent a US service provider designates under 17 U.S.C.
512(c)(2), as the Copyright Office's directory lists it): accepted by ``fptrack contacts add`` and the
service, and addressed as such by the notice, in English and in Chinese, text and HTML."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.jobs.notice_render import render_html
from fptrack.jobs.notices import add_contact, draft_notice, list_contacts
from fptrack.storage.models import Match, utcnow
from tests.support.admin_seed import Seeded, seed
from tests.unit.jobs.test_notices import HOST, _sender

AS_SUCH = {
    "en": "(designated agent to receive notifications of claimed infringement, 17 U.S.C. 512(c)(2))",
    "zh": "（服务提供者依美国版权法第 512 条指定的侵权通知接收代理人）",
}


@pytest.fixture
def seeded(session: Session) -> Seeded:
    ids = seed(session)
    session.get(Match, ids.hostile_match_id).status = "confirmed"  # type: ignore[union-attr]
    session.commit()
    return ids


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_notice_addresses_the_designated_agent_as_such(
    session: Session, settings: Settings, seeded: Seeded, language: str
) -> None:
    _sender(session, language=language)
    add_contact(session, HOST, "dmca@host.example", kind="designated_agent", name="Host Inc.")
    notice = draft_notice(session, actor="t", host=HOST, bundle_settings=settings, language=language)
    assert notice.recipient_kind == "designated_agent"
    to = next(line for line in notice.text.splitlines() if line.startswith(("To: ", "致：")))
    assert to.endswith(f"Host Inc. <dmca@host.example> {AS_SUCH[language]}".replace(" （", "（"))
    assert AS_SUCH[language].strip("()（）") in render_html(notice, utcnow())


def test_a_site_contact_is_not_called_an_agent(session: Session, settings: Settings, seeded: Seeded) -> None:
    _sender(session)
    add_contact(session, HOST, "abuse@pirate.example")
    notice = draft_notice(session, actor="t", host=HOST, bundle_settings=settings)
    assert "designated agent" not in notice.text


def test_the_cli_adds_a_designated_agent(session: Session, settings: Settings, seeded: Seeded) -> None:
    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    added = CliRunner().invoke(
        main, ["contacts", "add", HOST, "dmca@host.example", "--kind", "designated_agent"], env=env
    )
    assert added.exit_code == 0, added.output
    session.expire_all()
    assert [(c.kind, c.email) for c in list_contacts(session, HOST)] == [
        ("designated_agent", "dmca@host.example")
    ]
