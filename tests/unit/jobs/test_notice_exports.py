"""A notice as a Lumen database submission (jobs/delivery.lumen_json, lumen_files) by Lumen's published
schema (doc/api_documentation.mkd of berkmancenter/lumendatabase: notice, Work, CopyrightedUrl, InfringingUrl,
EntityNoticeRole, Entity, FileUpload), and its URLs grouped per work as search engines' bulk removal forms
take them; through the functions and ``fptrack notices export``, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.jobs.delivery import lumen_files, lumen_json, urls_by_work
from fptrack.jobs.notices import draft_notice
from fptrack.services.rights import save_work_rights
from fptrack.storage.models import Match
from tests.support.admin_seed import Seeded, seed
from tests.unit.jobs.test_notices import HOST, _sender

# the fields Lumen's notice API takes, per object
NOTICE_FIELDS = {
    "title", "type", "subject", "body", "date_sent", "language", "date_received", "source", "topic_ids",
    "tag_list", "regulation_list", "jurisidiction_list", "jurisdiction_list", "action_taken", "url_count",
    "request_type", "mark_registration_number", "works_attributes", "entity_notice_roles_attributes",
    "file_uploads_attributes",
}  # fmt: skip
TYPES = {"CourtOrder", "DataProtection", "Defamation", "DMCA", "LawEnforcementRequest", "Other",
         "PrivateInformation", "Trademark"}  # fmt: skip
WORK_FIELDS = {"copyrighted_urls_attributes", "kind", "description", "infringing_urls_attributes"}
ROLE_NAMES = {"principal", "agent", "recipient", "sender", "target", "issuing_court", "plaintiff",
              "defendant", "submitter"}  # fmt: skip
ENTITY_FIELDS = {"name", "kind", "address_line_1", "address_line_2", "city", "state", "zip", "country_code",
                 "phone", "email", "url"}  # fmt: skip
ORIGINAL = "https://books.shanzhong.example/shanzhong-gushi/"


def _check_schema(document: dict[str, Any]) -> dict[str, Any]:
    assert set(document) == {"notice"}
    notice = document["notice"]
    assert set(notice) <= NOTICE_FIELDS, set(notice) - NOTICE_FIELDS
    assert notice["title"] and notice["type"] in TYPES
    for work in notice["works_attributes"]:
        assert set(work) <= WORK_FIELDS and work["kind"]
        for key in ("copyrighted_urls_attributes", "infringing_urls_attributes"):
            assert all(set(url) == {"url"} for url in work[key])
    for role in notice["entity_notice_roles_attributes"]:
        assert set(role) == {"name", "entity_attributes"} and role["name"] in ROLE_NAMES
        assert set(role["entity_attributes"]) <= ENTITY_FIELDS and role["entity_attributes"]["name"]
        assert role["entity_attributes"]["kind"] in ("organization", "individual")
    for upload in notice["file_uploads_attributes"]:
        assert set(upload) == {"kind", "file"} and upload["kind"] in ("original", "supporting")
    return dict(notice)


@pytest.fixture
def seeded(session: Session) -> Seeded:
    ids = seed(session)
    hostile = session.get(Match, ids.hostile_match_id)
    assert hostile is not None
    hostile.status = "confirmed"
    session.commit()
    return ids


def test_lumen_by_its_schema_per_work_with_files(
    session: Session, settings: Settings, seeded: Seeded
) -> None:
    _sender(session)
    save_work_rights(session, seeded.work_id, original_url=ORIGINAL, author="李四")
    notice = draft_notice(session, actor="t", host=HOST, bundle_settings=settings, language="en")
    lumen = _check_schema(lumen_json(notice, country_code="cn"))
    assert lumen["type"] == "DMCA" and lumen["jurisdiction_list"] == "US" and lumen["language"] == "en"
    assert "body_sha256" not in lumen and notice.text_sha256 in lumen["body"]
    assert (
        "+86" not in lumen["body"] and "北京市" not in lumen["body"]
    )  # no telephone, no address in the body
    works = {work["description"]: work for work in lumen["works_attributes"]}
    assert len(works) == 2  # one per registered work, not per chapter
    mine = works['"山中故事" by 李四']
    assert mine["kind"] == "Book" and mine["copyrighted_urls_attributes"] == [{"url": ORIGINAL}]
    hostile = next(item.url for item in notice.items if item.match_id == seeded.hostile_match_id)
    assert mine["infringing_urls_attributes"] == [{"url": hostile}]
    principals = [
        r["entity_attributes"] for r in lumen["entity_notice_roles_attributes"] if r["name"] == "principal"
    ]
    assert principals and all(p["country_code"] == "CN" for p in principals)
    files = lumen_files(notice)
    assert lumen["file_uploads_attributes"] == [{"kind": kind, "file": name} for kind, name, _ in files]
    assert files[0][:2] == ("original", f"notice-{notice.id}.txt") and files[0][2] == notice.text.encode()
    assert [kind for kind, _, _ in files[1:]] == ["supporting"] * len(notice.items)
    with pytest.raises(ValueError, match="two letters"):
        lumen_json(notice, country_code="China")


def test_a_chinese_notice_is_not_a_dmca_notice(session: Session, settings: Settings, seeded: Seeded) -> None:
    _sender(session, language="zh")
    notice = draft_notice(session, actor="t", host=HOST, bundle_settings=settings, language="zh")
    lumen = _check_schema(lumen_json(notice))
    assert lumen["type"] == "Other" and lumen["jurisdiction_list"] == "CN"
    assert "信息网络传播权保护条例" in lumen["body"]


def test_urls_grouped_per_work_with_the_authorised_original(
    session: Session, settings: Settings, seeded: Seeded, tmp_path: Path
) -> None:
    _sender(session)
    save_work_rights(session, seeded.work_id, original_url=ORIGINAL)
    notice = draft_notice(session, actor="t", host=HOST, bundle_settings=settings)
    session.commit()
    hostile = next(item.url for item in notice.items if item.match_id == seeded.hostile_match_id)
    blocks = urls_by_work(notice).split("\n\n")
    assert blocks[0].splitlines() == ["# 山中故事", f"# authorised original: {ORIGINAL}", hostile]
    assert (
        blocks[1].splitlines()[0].startswith("# Other")
        and blocks[1].splitlines()[1] == f"http://{HOST}/other.html"
    )
    rows = list(csv.DictReader(io.StringIO(urls_by_work(notice, csv_format=True))))
    assert (rows[0]["work"], rows[0]["authorised_url"], rows[0]["infringing_url"]) == (
        "山中故事",
        ORIGINAL,
        hostile,
    )
    assert len(rows) == 2 and rows[1]["authorised_url"] == ""

    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    runner = CliRunner()
    grouped = runner.invoke(main, ["notices", "export", str(notice.id), "--format", "urls-by-work"], env=env)
    assert grouped.exit_code == 0 and grouped.output == urls_by_work(notice)
    files = tmp_path / "lumen"
    exported = runner.invoke(
        main, ["notices", "export", str(notice.id), "--files", str(files), "--country", "CN"], env=env
    )
    assert exported.exit_code == 0, exported.output
    document = json.loads(exported.stdout)
    _check_schema(document)
    named = [upload["file"] for upload in document["notice"]["file_uploads_attributes"]]
    assert sorted(path.name for path in files.iterdir()) == sorted(named)
    refused = runner.invoke(main, ["notices", "export", str(notice.id), "--country", "XYZ"], env=env)
    assert refused.exit_code == 1 and "two letters" in refused.output
