"""``/users``: the accounts, for admins: list, add, remove (the same services as ``fptrack users``)."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext, lazy_gettext
from flask_login import current_user
from flask_wtf import FlaskForm
from wtforms import PasswordField, SelectField, StringField
from wtforms.validators import DataRequired, Length

from fptrack.admin.security import requires_role
from fptrack.admin.views.context import db_session
from fptrack.admin.vocabulary import label
from fptrack.services.accounts.users import MAX_PASSWORD_LENGTH, ROLES, create_user, list_users, remove_user
from fptrack.storage.models import User

__all__ = ["NewUserForm", "blueprint"]

blueprint = Blueprint("users", __name__, url_prefix="/users")


class NewUserForm(FlaskForm):  # type: ignore[misc]  # Flask-WTF ships no type hints
    username = StringField(lazy_gettext("Username"), validators=[DataRequired(), Length(max=150)])
    role = SelectField(lazy_gettext("Role"), choices=list(ROLES), default="viewer")
    password = PasswordField(
        lazy_gettext("Password"), validators=[DataRequired(), Length(max=MAX_PASSWORD_LENGTH)]
    )


def _page(form: NewUserForm, error: str = "", status: int = 200) -> tuple[str, int]:
    form.password.data = ""
    return render_template("users.html", users=list_users(db_session()), form=form, error=error), status


@blueprint.get("")
@requires_role("admin")
def index() -> ResponseReturnValue:
    return _page(NewUserForm())


@blueprint.post("")
@requires_role("admin")
def add() -> ResponseReturnValue:
    form = NewUserForm()
    if not form.validate():
        return _page(form, "Enter a username, a role and a password.", 400)
    database = db_session()
    try:
        account = create_user(
            database, form.username.data or "", form.password.data or "", form.role.data or ""
        )
    except ValueError as error:
        database.rollback()
        return _page(form, str(error).capitalize() + ".", 400)
    database.commit()
    flash(gettext("Added %(name)s (%(role)s).", name=account.username, role=label(account.role)))
    return redirect(url_for("users.index"), code=303)


@blueprint.post("/<int:user_id>/remove")
@requires_role("admin")
def remove(user_id: int) -> ResponseReturnValue:
    database = db_session()
    user = database.get(User, user_id)
    if user is None:
        abort(404, description=gettext("There is no user with id %(id)s.", id=user_id))
    if user.username == current_user.username:
        abort(400, description="You cannot remove your own account here; use `fptrack users remove`.")
    try:
        account = remove_user(database, user.username)
    except ValueError as error:
        database.rollback()
        abort(400, description=str(error).capitalize() + ".")
    database.commit()
    flash(gettext("Removed %(name)s.", name=account.username))
    return redirect(url_for("users.index"), code=303)
