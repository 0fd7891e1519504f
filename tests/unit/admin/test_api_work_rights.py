"""``GET /api/works/<id>`` carries the work's rights (author, owner, registration number, authorised original)
and its proofs' kinds and hashes, never their bytes; the OpenAPI document describes them (and stays valid)."""

from __future__ import annotations

from flask import Flask
from openapi_spec_validator import validate
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.services.rights import add_proof, save_work_rights
from fptrack.storage.models import Work
from tests.support.admin_seed import Seeded
from tests.unit.admin.test_api import _bearer, _token


def test_a_works_json_carries_its_rights_and_proofs(
    app: Flask, settings: Settings, session: Session, seeded: Seeded
) -> None:
    work = session.get(Work, seeded.work_id)
    assert work is not None
    save_work_rights(session, work.id, author="李四", owner_name="青石文化", registration_number="2026-A-1")
    add_proof(session, "certificate.pdf", b"%PDF secret bytes", kind="ownership_certificate", work=work)
    session.commit()
    client = app.test_client()
    headers = _bearer(_token(settings, "vera", "viewer"))
    body = client.get(f"/api/works/{seeded.work_id}", headers=headers).get_json()
    rights = body["rights"]
    assert (rights["author"], rights["owner_name"], rights["registration_number"]) == (
        "李四",
        "青石文化",
        "2026-A-1",
    )
    [proof] = rights["proofs"]
    assert (proof["kind"], proof["filename"], proof["bytes"]) == (
        "ownership_certificate",
        "certificate.pdf",
        17,
    )
    assert "secret" not in str(body)
    document = client.get("/api/openapi.json", headers=headers).get_json()
    validate(document)
    assert "rights" in document["components"]["schemas"]["WorkDetail"]["required"]
