"""The account service (``services.accounts.users``) and the review service (``services.review``) on SQLite
and PostgreSQL: password hashing, authentication, the login rate limit, roles and clear errors."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash

from fptrack.services.accounts.users import (
    FAILURE_WINDOW,
    MAX_ADDRESSES_PER_USERNAME,
    MAX_FAILURES_PER_PAIR,
    LoginRefused,
    authenticate,
    change_password,
    create_user,
    get_account,
    has_role,
    hash_password,
    list_users,
    login_allowed,
    normalise_username,
    record_login_failure,
    remove_user,
)
from fptrack.services.review import record_decision
from fptrack.storage.models import LoginFailure, ReviewDecision, User, utcnow
from tests.support.admin_seed import seed

PASSWORD = "correct horse battery staple"


def test_passwords_are_salted_scrypt_hashes() -> None:
    first, second = hash_password(PASSWORD), hash_password(PASSWORD)
    assert first.startswith("scrypt:") and second.startswith("scrypt:")
    assert first != second  # salted
    assert PASSWORD not in first
    assert check_password_hash(first, PASSWORD) and not check_password_hash(first, PASSWORD + "!")
    with pytest.raises(ValueError, match="at least 10 characters"):
        hash_password("short")
    with pytest.raises(ValueError, match="at most 1024"):
        hash_password("x" * 1025)


@pytest.mark.parametrize("name", ["", " ", "-lead", "a b", "名字", "x" * 151, "semi;colon", "a/b"])
def test_bad_usernames_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="is not valid"):
        normalise_username(name)


def test_usernames_are_case_insensitive() -> None:
    assert normalise_username("  Alice.Liu@Example ") == "alice.liu@example"


def test_roles_are_ordered() -> None:
    assert has_role("admin", "reviewer") and has_role("reviewer", "viewer") and has_role("viewer", "viewer")
    assert (
        not has_role("viewer", "reviewer")
        and not has_role("reviewer", "admin")
        and not has_role("", "viewer")
    )
    with pytest.raises(ValueError, match="unknown role"):
        has_role("admin", "root")


def test_create_list_authenticate_change_remove(session: Session) -> None:
    account = create_user(session, "Alice", PASSWORD, "admin")
    create_user(session, "bob", PASSWORD, "viewer")
    session.commit()
    assert (account.username, account.role, account.active, account.last_login_at) == (
        "alice",
        "admin",
        True,
        None,
    )
    assert [a.username for a in list_users(session)] == ["alice", "bob"]
    stored = session.scalar(select(User.password_hash).where(User.username == "alice"))
    assert stored is not None and stored.startswith("scrypt:") and PASSWORD not in stored

    with pytest.raises(ValueError, match="already exists"):
        create_user(session, "ALICE", PASSWORD, "viewer")
    with pytest.raises(ValueError, match="unknown role 'root'"):
        create_user(session, "carol", PASSWORD, "root")

    assert authenticate(session, "alice", "wrong password", "192.0.2.1") is None
    user = authenticate(session, "alice", PASSWORD, "192.0.2.1")
    assert user is not None and user.last_login_at is not None
    session.commit()
    # a success forgets this address's failures for the name
    assert session.scalars(select(LoginFailure).where(LoginFailure.username == "alice")).all() == []

    change_password(session, "alice", "another long password")
    assert authenticate(session, "alice", PASSWORD) is None
    assert authenticate(session, "alice", "another long password") is not None

    with pytest.raises(ValueError, match="last admin"):
        remove_user(session, "alice")
    assert remove_user(session, "bob").username == "bob"
    with pytest.raises(LookupError, match="no user 'bob'"):
        get_account(session, "bob")
    with pytest.raises(LookupError, match="no user 'nobody'"):
        change_password(session, "nobody", PASSWORD)


def test_inactive_accounts_cannot_log_in(session: Session) -> None:
    create_user(session, "dora", PASSWORD, "reviewer")
    session.scalars(select(User)).one().active = False
    session.flush()
    assert authenticate(session, "dora", PASSWORD) is None


def test_the_role_is_checked_by_the_database_too(session: Session) -> None:
    session.add(User(username="eve", password_hash="x", role="root", active=True))
    with pytest.raises(IntegrityError):
        session.flush()
    session.rollback()


def test_rate_limit_window(session: Session) -> None:
    create_user(session, "fay", PASSWORD, "viewer")
    start = utcnow() - timedelta(minutes=1)
    for number in range(MAX_ADDRESSES_PER_USERNAME):
        record_login_failure(session, "Fay", f"198.51.100.{number}", now=start)
    session.commit()
    with pytest.raises(LoginRefused) as refused:
        login_allowed(session, "fay", "203.0.113.5")  # guessing from many addresses closes every address
    assert 0 < refused.value.retry_after <= FAILURE_WINDOW.total_seconds()
    with pytest.raises(LoginRefused):
        authenticate(session, "fay", PASSWORD, "203.0.113.5")  # refused before the password is looked at
    login_allowed(session, "fay", "203.0.113.5", now=start + FAILURE_WINDOW + timedelta(seconds=1))
    # old failures are pruned as new ones arrive
    record_login_failure(session, "someone", "198.51.100.2", now=start + 5 * FAILURE_WINDOW)
    assert session.scalars(select(LoginFailure.username)).all() == ["someone"]


def test_failures_from_one_address_close_that_username_there_only(session: Session) -> None:
    create_user(session, "gil", PASSWORD, "viewer")
    create_user(session, "hal", PASSWORD, "viewer")
    for _ in range(MAX_FAILURES_PER_PAIR - 1):
        record_login_failure(session, "gil", "192.0.2.7")
    login_allowed(session, "gil", "192.0.2.7")  # one failure short: still allowed
    record_login_failure(session, "gil", "192.0.2.7")
    with pytest.raises(LoginRefused):
        login_allowed(session, "gil", "192.0.2.7")
    login_allowed(session, "gil", "192.0.2.8")  # another address is not refused
    login_allowed(session, "hal", "192.0.2.7")  # nor another username from the same address
    # any number of failures for other names from one address refuses nobody else (a shared proxy address)
    for number in range(50):
        record_login_failure(session, f"nobody{number}", "192.0.2.7")
    login_allowed(session, "hal", "192.0.2.7")


def test_review_decisions_record_who_when_and_why(session: Session) -> None:
    seeded = seed(session)
    match_id = seeded.hostile_match_id
    outcome = record_decision(session, match_id, "confirmed", "rita", "  whole chapter  ")
    session.commit()
    assert (outcome.previous_status, outcome.status, outcome.recorded) == ("flagged", "confirmed", True)
    again = record_decision(session, match_id, "confirmed", "rita")
    assert not again.recorded
    noted = record_decision(session, match_id, "confirmed", "sam", "checked twice")
    assert noted.recorded
    rows = session.execute(
        select(
            ReviewDecision.decision, ReviewDecision.reviewer, ReviewDecision.note, ReviewDecision.decided_at
        )
        .where(ReviewDecision.match_id == match_id)
        .order_by(ReviewDecision.id)
    ).all()
    assert [tuple(row[:3]) for row in rows] == [
        ("confirmed", "rita", "whole chapter"),
        ("confirmed", "sam", "checked twice"),
    ]
    assert all(row[3] is not None for row in rows)
    with pytest.raises(ValueError, match="not 'licensed'"):
        record_decision(session, match_id, "licensed", "rita")
    with pytest.raises(ValueError, match="needs a reviewer"):
        record_decision(session, match_id, "dismissed", " ")
    with pytest.raises(ValueError, match="at most 2000"):
        record_decision(session, match_id, "dismissed", "rita", "x" * 2001)
    with pytest.raises(LookupError, match="no match with id 999999"):
        record_decision(session, 999999, "dismissed", "rita")
