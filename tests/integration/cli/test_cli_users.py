"""``fptrack users`` and ``fptrack review`` as a user meets them: the real CLI in a subprocess (and click's
CliRunner where a hidden prompt needs a terminal), one-line errors, exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Match, ReviewDecision, User
from tests.support.admin_seed import seed
from tests.support.cli import assert_clean_error, fptrack
from tests.support.env import clean_environ

PASSWORD = "correct horse battery staple"


def _settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data")


def _users(tmp_path: Path) -> dict[str, User]:
    engine = create_engine_for(_settings(tmp_path))
    try:
        with Session(engine) as session:
            return {user.username: user for user in session.scalars(select(User))}
    finally:
        engine.dispose()


@pytest.fixture
def initialised(tmp_path: Path) -> Path:
    assert fptrack(tmp_path, "init").returncode == 0
    return tmp_path


def _stdin(tmp_path: Path, *args: str, password: str = PASSWORD):  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    environ = clean_environ()
    environ["FPTRACK_DATA_DIR"] = str(tmp_path / "data")
    return subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args, "--password-stdin"],
        input=password + "\n",
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_users_commands_have_help(tmp_path: Path) -> None:
    for command in (
        ["users", "--help"],
        ["users", "add", "--help"],
        ["users", "list", "--help"],
        ["users", "passwd", "--help"],
        ["users", "remove", "--help"],
        ["review", "--help"],
    ):
        result = fptrack(tmp_path, *command)
        assert result.returncode == 0 and "Usage: " in result.stdout, (command, result.stderr)


def test_first_admin_then_list_passwd_remove(initialised: Path) -> None:
    assert fptrack(initialised, "users", "list").stdout.startswith("no accounts yet")
    added = _stdin(initialised, "users", "add", "Ada", "--role", "admin")
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == "added ada (admin)"
    assert _stdin(initialised, "users", "add", "rita", "--role", "reviewer").returncode == 0
    users = _users(initialised)
    assert {name: user.role for name, user in users.items()} == {"ada": "admin", "rita": "reviewer"}
    assert check_password_hash(users["ada"].password_hash, PASSWORD)

    listing = fptrack(initialised, "users", "list").stdout.splitlines()
    assert listing[0].split() == ["username", "role", "active", "created", "last", "login"]
    assert listing[2].split()[:3] == ["ada", "admin", "yes"] and listing[2].endswith("never")

    changed = _stdin(initialised, "users", "passwd", "rita", password="a new long password")
    assert changed.returncode == 0 and "their open sessions have ended" in changed.stdout
    assert check_password_hash(_users(initialised)["rita"].password_hash, "a new long password")

    assert fptrack(initialised, "users", "remove", "rita").stdout.strip() == "removed rita (reviewer)"
    assert set(_users(initialised)) == {"ada"}


def test_user_errors_are_one_line(initialised: Path) -> None:
    assert _stdin(initialised, "users", "add", "ada", "--role", "admin").returncode == 0
    assert_clean_error(
        _stdin(initialised, "users", "add", "ADA", "--role", "viewer"), "user 'ada' already exists"
    )
    assert_clean_error(
        _stdin(initialised, "users", "add", "bob", "--role", "viewer", password="short"), "at least 10"
    )
    assert_clean_error(_stdin(initialised, "users", "add", "bad name", "--role", "viewer"), "is not valid")
    assert_clean_error(_stdin(initialised, "users", "passwd", "nobody"), "there is no user 'nobody'")
    assert_clean_error(fptrack(initialised, "users", "remove", "nobody"), "there is no user 'nobody'")
    assert_clean_error(fptrack(initialised, "users", "remove", "ada"), "last admin")
    bad_role = _stdin(initialised, "users", "add", "bob", "--role", "root")
    assert bad_role.returncode == 2 and "'root' is not one of" in bad_role.stderr
    for result in (
        _stdin(initialised, "users", "add", "ada", "--role", "admin"),
        fptrack(initialised, "users", "remove", "nobody"),
    ):
        assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1


def test_users_need_an_initialised_database(tmp_path: Path) -> None:
    assert_clean_error(fptrack(tmp_path, "users", "list"), "fptrack init")


def test_password_prompt_asks_twice(initialised: Path) -> None:
    runner = CliRunner()
    env = {"FPTRACK_DATA_DIR": str(initialised / "data"), "FPTRACK_DATABASE_URL": ""}
    mismatch = runner.invoke(
        main, ["users", "add", "kim", "--role", "viewer"], input=f"{PASSWORD}\nother one!!\n", env=env
    )
    assert mismatch.exit_code != 0 and "kim" not in _users(initialised)
    result = runner.invoke(
        main, ["users", "add", "kim", "--role", "viewer"], input=f"{PASSWORD}\n{PASSWORD}\n", env=env
    )
    assert result.exit_code == 0, result.output
    assert "Repeat for confirmation" in result.output and PASSWORD not in result.output
    assert check_password_hash(_users(initialised)["kim"].password_hash, PASSWORD)


def test_review_from_the_command_line(initialised: Path) -> None:
    engine = create_engine_for(_settings(initialised))
    try:
        with Session(engine, expire_on_commit=False) as session:
            match_id = seed(session).hostile_match_id
    finally:
        engine.dispose()
    assert _stdin(initialised, "users", "add", "rita", "--role", "reviewer").returncode == 0
    assert _stdin(initialised, "users", "add", "vera", "--role", "viewer").returncode == 0

    confirmed = fptrack(
        initialised, "review", str(match_id), "confirm", "--reason", "整章照搬", "--as", "Rita"
    )
    assert confirmed.returncode == 0, confirmed.stderr
    assert confirmed.stdout.strip() == f"match {match_id}: flagged -> confirmed (by rita)"
    dismissed = fptrack(initialised, "review", str(match_id), "dismiss")
    assert dismissed.returncode == 0 and "confirmed -> dismissed (by cli:" in dismissed.stdout
    assert "already dismissed" in fptrack(initialised, "review", str(match_id), "dismiss").stdout

    assert_clean_error(
        fptrack(initialised, "review", str(match_id), "confirm", "--as", "vera"), "needs the reviewer role"
    )
    assert_clean_error(
        fptrack(initialised, "review", str(match_id), "confirm", "--as", "ghost"), "no active user 'ghost'"
    )
    assert_clean_error(fptrack(initialised, "review", "999999", "confirm"), "no match with id 999999")
    assert fptrack(initialised, "review", "9" * 30, "confirm").returncode == 2  # out of range: a usage error
    assert fptrack(initialised, "review", str(match_id), "license").returncode == 2

    engine = create_engine_for(_settings(initialised))
    try:
        with Session(engine) as session:
            assert session.scalar(select(Match.status).where(Match.id == match_id)) == "dismissed"
            rows = session.execute(
                select(ReviewDecision.decision, ReviewDecision.reviewer, ReviewDecision.note)
                .where(ReviewDecision.match_id == match_id)
                .order_by(ReviewDecision.id)
            ).all()
    finally:
        engine.dispose()
    assert rows[0] == ("confirmed", "rita", "整章照搬")
    assert rows[1][0] == "dismissed" and rows[1][1].startswith("cli:") and len(rows) == 2


def test_serve_debug_only_on_loopback(initialised: Path) -> None:
    result = fptrack(initialised, "serve", "--debug", "--host", "0.0.0.0")
    assert_clean_error(result, "Werkzeug debugger", "refused on 0.0.0.0")
    assert fptrack(initialised, "serve", "--debug", "--production").returncode == 2
    assert fptrack(initialised, "serve", "--workers", "2").returncode == 2


def test_api_tokens_from_the_command_line(initialised: Path) -> None:
    assert _stdin(initialised, "users", "add", "rita", "--role", "reviewer").returncode == 0
    runner = (
        CliRunner(mix_stderr=False)
        if "mix_stderr" in CliRunner.__init__.__code__.co_varnames
        else CliRunner()
    )
    data_dir = str(initialised / "data")
    created = runner.invoke(main, ["--data-dir", data_dir, "users", "token", "rita", "--name", "ci"])
    assert created.exit_code == 0, created.output
    token = created.stdout.strip()
    assert token.startswith("fpt_") and "shown only now" in created.stderr
    listing = runner.invoke(main, ["--data-dir", data_dir, "users", "tokens"]).stdout
    assert "rita" in listing and token[:12] in listing and token not in listing and "never" in listing
    revoked = runner.invoke(main, ["--data-dir", data_dir, "users", "revoke-token", "1"])
    assert revoked.exit_code == 0 and "revoked token 1" in revoked.stdout
    assert "yes" in runner.invoke(main, ["--data-dir", data_dir, "users", "tokens", "rita"]).stdout
    assert_clean_error(fptrack(initialised, "users", "token", "ghost"), "no active user 'ghost'")
    assert_clean_error(fptrack(initialised, "users", "revoke-token", "42"), "no API token with id 42")
