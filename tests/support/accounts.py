"""Accounts for tests of the admin: created through the account service, logged in through the real form."""

from __future__ import annotations

import re

from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.services.accounts.users import create_user
from fptrack.storage.db import create_engine_for, session_factory, session_scope

PASSWORD = "correct horse battery staple"


def add_account(settings: Settings, username: str, role: str, password: str = PASSWORD) -> int:
    engine = create_engine_for(settings)
    try:
        with session_scope(session_factory(engine)) as session:
            return create_user(session, username, password, role).id
    finally:
        engine.dispose()


def add_account_in(session: Session, username: str, role: str, password: str = PASSWORD) -> int:
    account_id = create_user(session, username, password, role).id
    session.commit()
    return account_id


def csrf_token_in(html: str) -> str:
    found = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', html) or re.search(
        r'value="([^"]+)"[^>]*name="csrf_token"', html
    )
    assert found, "the page carries no CSRF token"
    return found.group(1)


def log_in(client: FlaskClient, username: str, password: str = PASSWORD) -> None:
    token = csrf_token_in(client.get("/login").get_data(as_text=True))
    response = client.post("/login", data={"username": username, "password": password, "csrf_token": token})
    assert response.status_code == 303, response.get_data(as_text=True)
