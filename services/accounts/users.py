"""Accounts of the admin: create, authenticate, change password, remove, list; and the login rate limit.

Services over a SQLAlchemy session, no Flask: the web app and ``fptrack users`` call the same functions. Bad
input raises :class:`ValueError` (or :class:`LookupError` for an unknown account) with a message a person can
act on; the caller commits.

Passwords are hashed with scrypt through ``werkzeug.security.generate_password_hash`` (salted, memory-hard;
the parameters are stored in the hash, so raising them later still verifies old hashes). Usernames are
case-insensitive: stored lower-case.

Rate limit: every failed login is a row (username, client address, time). Before checking a password,
:func:`login_allowed` looks at the failures of the last :data:`FAILURE_WINDOW` for that username: the attempt
is refused without looking at the password when this address failed for it :data:`MAX_FAILURES_PER_PAIR`
times, or when failures for it came from :data:`MAX_ADDRESSES_PER_USERNAME` different addresses (guessing
spread over many machines), unless the browser is a *known device* for the username (it logged in as that
user before, which the admin proves with a signed cookie): then only its own address's failures count, so a
stranger's guesses from elsewhere cannot lock the owner out. No count over one address alone refuses
anybody: behind a proxy that was not declared every user shares one address, and a limit per address would
let one person's typos, or one attacker, lock every account out. The counter lives in the database rather
than in process memory so that every gunicorn worker and every machine of a deployment share it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from fptrack.storage.models import USER_ROLES, ApiToken, LoginFailure, User, utcnow

__all__ = [
    "FAILURE_WINDOW",
    "MAX_ADDRESSES_PER_USERNAME",
    "MAX_FAILURES_PER_PAIR",
    "MIN_PASSWORD_LENGTH",
    "ROLES",
    "Account",
    "LoginRefused",
    "authenticate",
    "change_password",
    "create_user",
    "end_sessions",
    "find_active_user",
    "get_account",
    "has_role",
    "hash_password",
    "list_users",
    "login_allowed",
    "normalise_username",
    "record_login_failure",
    "remove_user",
]

ROLES = USER_ROLES
MIN_PASSWORD_LENGTH = 10
MAX_PASSWORD_LENGTH = 1024
PASSWORD_METHOD = "scrypt"
FAILURE_WINDOW = timedelta(minutes=15)
MAX_FAILURES_PER_PAIR = 5  # failures for one username from one address
MAX_ADDRESSES_PER_USERNAME = 5  # addresses that failed for one username

_USERNAME = re.compile(r"[a-z0-9][a-z0-9_.@-]{0,149}")


# Verified against when the username is unknown, so that an unknown name costs as much time as a known one.
@functools.cache
def _dummy_hash() -> str:
    """A hash to check unknown names against (made on first use: scrypt costs a quarter second, which every
    command of the CLI would otherwise pay at import)."""
    return generate_password_hash("not a password of anyone", method=PASSWORD_METHOD)


@dataclass(frozen=True)
class Account:
    """What callers may see of a user: never the password hash."""

    id: int
    username: str
    role: str
    active: bool
    created_at: datetime
    last_login_at: datetime | None

    @classmethod
    def of(cls, user: User) -> Account:
        return cls(user.id, user.username, user.role, user.active, user.created_at, user.last_login_at)


class LoginRefused(Exception):
    """Too many failed logins for this username or from this address; ``retry_after`` in seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many failed logins; try again in {max(1, retry_after // 60)} minute(s)")
        self.retry_after = retry_after


def has_role(role: str, needed: str) -> bool:
    """True when ``role`` can do what ``needed`` can (admin > reviewer > viewer)."""
    if needed not in ROLES:
        raise ValueError(f"unknown role {needed!r}; expected one of {', '.join(ROLES)}")
    return role in ROLES and ROLES.index(role) >= ROLES.index(needed)


def normalise_username(username: str) -> str:
    name = username.strip().lower()
    if not _USERNAME.fullmatch(name):
        raise ValueError(
            f"username {username!r} is not valid: 1 to 150 characters, letters, digits and . _ @ -, "
            "starting with a letter or digit"
        )
    return name


def _check_role(role: str) -> str:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    return role


def hash_password(password: str) -> str:
    """A salted scrypt hash of ``password``; ValueError if it is too short or too long."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ValueError(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise ValueError(f"the password must have at most {MAX_PASSWORD_LENGTH} characters")
    return generate_password_hash(password, method=PASSWORD_METHOD)


def _get(session: Session, username: str) -> User:
    name = normalise_username(username)
    user = session.scalar(select(User).where(User.username == name))
    if user is None:
        raise LookupError(f"there is no user {name!r}")
    return user


def create_user(session: Session, username: str, password: str, role: str) -> Account:
    name = normalise_username(username)
    _check_role(role)
    password_hash = hash_password(password)
    if session.scalar(select(User.id).where(User.username == name)) is not None:
        raise ValueError(f"user {name!r} already exists")
    user = User(username=name, password_hash=password_hash, role=role, active=True)
    session.add(user)
    session.flush()
    return Account.of(user)


def change_password(session: Session, username: str, password: str) -> Account:
    """Set a new password. Every session of the user opened with the old one stops working (the password
    hash is part of each session's token, ``admin.security``), and so does every API token of the user: a
    password changed because it leaked must not leave a door open."""
    user = _get(session, username)
    user.password_hash = hash_password(password)
    session.execute(
        update(ApiToken)
        .where(ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    session.flush()
    return Account.of(user)


def end_sessions(session: Session, user_id: int) -> None:
    """End every session of the user (a logout: each browser, each copied cookie); API tokens stay."""
    session.execute(update(User).where(User.id == user_id).values(session_version=User.session_version + 1))


def remove_user(session: Session, username: str) -> Account:
    """Delete the account (its review decisions keep its name). The last active admin cannot be removed."""
    user = _get(session, username)
    if user.role == "admin" and user.active:
        admins = session.scalar(
            select(func.count()).select_from(User).where(User.role == "admin", User.active.is_(True))
        )
        if (admins or 0) <= 1:
            raise ValueError(f"{user.username!r} is the last admin; add another admin before removing it")
    account = Account.of(user)
    session.delete(user)
    session.flush()
    return account


def get_account(session: Session, username: str) -> Account:
    """The account named ``username``; LookupError if there is none."""
    return Account.of(_get(session, username))


def list_users(session: Session) -> list[Account]:
    return [Account.of(user) for user in session.scalars(select(User).order_by(User.username))]


def find_active_user(
    session: Session, user_id: int | None = None, username: str | None = None
) -> User | None:
    """The active user with this id or username, or None."""
    query = select(User).where(User.active.is_(True))
    if user_id is not None:
        query = query.where(User.id == user_id)
    elif username is not None:
        try:
            query = query.where(User.username == normalise_username(username))
        except ValueError:
            return None
    else:
        return None
    return session.scalar(query)


def login_allowed(
    session: Session,
    username: str,
    client: str,
    now: datetime | None = None,
    *,
    known_device: bool = False,
) -> None:
    """Raise :class:`LoginRefused` if this username failed too often lately from this address, or (unless
    the attempt comes from a ``known_device`` of the username) from too many addresses."""
    now = now or utcnow()
    since = now - FAILURE_WINDOW
    name, address = username.strip().lower()[:150], client[:64]
    rows = session.execute(
        select(LoginFailure.client, LoginFailure.failed_at).where(
            LoginFailure.username == name, LoginFailure.failed_at >= since
        )
    ).all()
    from_here = [failed_at for where, failed_at in rows if where == address]
    addresses = {where for where, _ in rows}
    if len(from_here) >= MAX_FAILURES_PER_PAIR:
        blocking = from_here
    elif len(addresses) >= MAX_ADDRESSES_PER_USERNAME and not known_device:
        blocking = [failed_at for _, failed_at in rows]
    else:
        return
    oldest = min(blocking)
    if oldest.tzinfo is None:  # SQLite hands back naive UTC datetimes
        oldest = oldest.replace(tzinfo=now.tzinfo)
    raise LoginRefused(max(1, int((oldest + FAILURE_WINDOW - now).total_seconds()) + 1))


def record_login_failure(session: Session, username: str, client: str, now: datetime | None = None) -> None:
    now = now or utcnow()
    session.execute(delete(LoginFailure).where(LoginFailure.failed_at < now - 4 * FAILURE_WINDOW))
    session.add(LoginFailure(username=username.strip().lower()[:150], client=client[:64], failed_at=now))
    session.flush()


def authenticate(
    session: Session, username: str, password: str, client: str = "", *, known_device: bool = False
) -> User | None:
    """The active user whose password this is, or None (and the failure is counted).

    Raises :class:`LoginRefused` when the rate limit is reached (:func:`login_allowed`), before the password
    is looked at. On success the user's failures from this address are forgotten and ``last_login_at`` is
    set.
    """
    login_allowed(session, username, client, known_device=known_device)
    user = find_active_user(session, username=username)
    if user is None:
        check_password_hash(_dummy_hash(), password)  # same cost as a real check: no timing oracle on names
        record_login_failure(session, username, client)
        return None
    if not check_password_hash(user.password_hash, password):
        record_login_failure(session, username, client)
        return None
    session.execute(
        delete(LoginFailure).where(LoginFailure.username == user.username, LoginFailure.client == client[:64])
    )
    user.last_login_at = utcnow()
    session.flush()
    return user
