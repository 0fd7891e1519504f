"""API tokens: bearer credentials for clients of the admin's JSON API (scripts, other services).

A token acts as its user, with that user's role, on ``/api`` only (never on the HTML pages). It is shown once,
when created (``fptrack users token USERNAME``); the database keeps its SHA-256 (a token is 256 random bits,
so a fast hash is enough: there is nothing to brute-force) and its first characters, to tell tokens apart.
A token stops working when it is revoked, when its user is deactivated, or when its user is removed. Services
over a SQLAlchemy session, no Flask; the caller commits.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.services.accounts.users import normalise_username
from fptrack.storage.models import ApiToken, User, utcnow

__all__ = [
    "TOKEN_PREFIX",
    "NewToken",
    "TokenInfo",
    "authenticate_token",
    "create_token",
    "list_tokens",
    "revoke_token",
]

TOKEN_PREFIX = "fpt_"
SHOWN_PREFIX_LENGTH = 12
MAX_TOKEN_LENGTH = 200
# last_used_at is written at most this often per token: not one write per API call
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class TokenInfo:
    id: int
    username: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool


@dataclass(frozen=True)
class NewToken:
    info: TokenInfo
    token: str  # shown once, never stored


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _info(row: ApiToken, username: str) -> TokenInfo:
    return TokenInfo(
        row.id, username, row.name, row.prefix, row.created_at, row.last_used_at, row.revoked_at is not None
    )


def create_token(session: Session, username: str, name: str = "") -> NewToken:
    """A new token for the active user ``username``; LookupError if there is none."""
    user = session.scalar(
        select(User).where(User.username == normalise_username(username), User.active.is_(True))
    )
    if user is None:
        raise LookupError(f"there is no active user {username!r}")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(
        user_id=user.id,
        name=name.strip()[:200],
        prefix=token[:SHOWN_PREFIX_LENGTH],
        token_sha256=_digest(token),
    )
    session.add(row)
    session.flush()
    return NewToken(_info(row, user.username), token)


def authenticate_token(session: Session, token: str, now: datetime | None = None) -> User | None:
    """The active user of an unrevoked token, or None. Notes when the token was last used."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > MAX_TOKEN_LENGTH:
        return None
    digest = _digest(token)
    found = session.execute(
        select(ApiToken, User)
        .join(User, User.id == ApiToken.user_id)
        .where(ApiToken.token_sha256 == digest, ApiToken.revoked_at.is_(None), User.active.is_(True))
    ).first()
    if found is None:
        return None
    row, user = found
    if not hmac.compare_digest(row.token_sha256, digest):
        return None
    now = now or utcnow()
    last = row.last_used_at
    if last is not None and last.tzinfo is None:
        last = last.replace(tzinfo=now.tzinfo)
    if last is None or now - last >= LAST_USED_RESOLUTION:
        row.last_used_at = now
        session.flush()
    user_row: User = user
    return user_row


def list_tokens(session: Session, username: str | None = None) -> list[TokenInfo]:
    query = select(ApiToken, User.username).join(User, User.id == ApiToken.user_id).order_by(ApiToken.id)
    if username is not None:
        query = query.where(User.username == normalise_username(username))
    return [_info(row, name) for row, name in session.execute(query)]


def revoke_token(session: Session, token_id: int) -> TokenInfo:
    """Revoke a token by its id (``fptrack users tokens`` lists them); LookupError if there is none."""
    found = session.execute(
        select(ApiToken, User.username).join(User, User.id == ApiToken.user_id).where(ApiToken.id == token_id)
    ).first()
    if found is None:
        raise LookupError(f"there is no API token with id {token_id}")
    row, username = found
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        session.flush()
    return _info(row, username)
