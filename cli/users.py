"""``fptrack users add|list|passwd|remove`` (accounts of the admin) and ``fptrack review`` (a decision on a
match from the command line). The services are :mod:`services.accounts.users`,
:mod:`services.accounts.tokens` and :mod:`services.review`; they signal a bad name or password with
``ValueError`` and an unknown one with ``LookupError``, which these commands show as the one-line ``error:``
(:func:`cli.common.friendly_errors_also`).
"""

from __future__ import annotations

import getpass
import sys

import click

from fptrack.cli.common import CliContext, friendly_errors_also, pass_context, print_table
from fptrack.services.accounts.users import (
    MAX_PASSWORD_LENGTH,
    ROLES,
    Account,
    change_password,
    create_user,
    get_account,
    has_role,
    list_users,
    remove_user,
)

__all__ = ["review", "users"]

DECISIONS = {"confirm": "confirmed", "dismiss": "dismissed", "reopen": "flagged"}


_one_line_errors = friendly_errors_also(LookupError, ValueError)
"""ValueError and LookupError from the services are the one-line ``error:`` and exit 1, like the errors every
command shows so."""


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        # bounded: `< /dev/zero` has no line end; a longer line is refused as too long a password
        line = sys.stdin.readline(MAX_PASSWORD_LENGTH + 3)
        if not line:
            raise ValueError("--password-stdin: nothing on standard input")
        return line.rstrip("\r\n")
    password: str = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    return password


def _describe(account: Account) -> str:
    return f"{account.username} ({account.role})"


@click.group()
def users() -> None:
    """Accounts of the admin web app.

    \b
    Roles: viewer reads everything; reviewer also confirms and dismisses matches;
    admin also manages accounts. The first admin is created here:
      fptrack users add alice --role admin
    """


_password_stdin = click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the password from the first line of standard input (no prompt).",
)


@users.command("add")
@click.argument("username")
@click.option("--role", type=click.Choice(ROLES), required=True, help="What the account may do.")
@_password_stdin
@pass_context
@_one_line_errors
def users_add(context: CliContext, username: str, role: str, password_stdin: bool) -> None:
    """Create an account. The password is asked twice (or read with --password-stdin)."""
    password = _read_password(password_stdin)
    with context.session() as session:
        account = create_user(session, username, password, role)
    click.echo(f"added {_describe(account)}")


@users.command("list")
@pass_context
@_one_line_errors
def users_list(context: CliContext) -> None:
    """List the accounts with their role and last login."""
    with context.session() as session:
        accounts = list_users(session)
    if not accounts:
        click.echo("no accounts yet: fptrack users add NAME --role admin")
        return
    print_table(
        ["username", "role", "active", "created", "last login"],
        [
            (
                a.username,
                a.role,
                "yes" if a.active else "no",
                a.created_at.strftime("%Y-%m-%d %H:%M"),
                a.last_login_at.strftime("%Y-%m-%d %H:%M") if a.last_login_at else "never",
            )
            for a in accounts
        ],
    )


@users.command("passwd")
@click.argument("username")
@_password_stdin
@pass_context
@_one_line_errors
def users_passwd(context: CliContext, username: str, password_stdin: bool) -> None:
    """Set a new password; the user's open sessions end."""
    with context.session() as session:
        get_account(session, username)  # an unknown user fails before the password is asked for
    password = _read_password(password_stdin)
    with context.session() as session:
        account = change_password(session, username, password)
    click.echo(f"password changed for {_describe(account)}; their open sessions have ended")


@users.command("remove")
@click.argument("username")
@pass_context
@_one_line_errors
def users_remove(context: CliContext, username: str) -> None:
    """Delete an account (its past review decisions keep its name). The last admin cannot be removed."""
    with context.session() as session:
        account = remove_user(session, username)
    click.echo(f"removed {_describe(account)}")


@users.command("token")
@click.argument("username")
@click.option("--name", default="", help="What the token is for (shown in `fptrack users tokens`).")
@pass_context
@_one_line_errors
def users_token(context: CliContext, username: str, name: str) -> None:
    """Create an API token for USERNAME (printed once: keep it). Clients send it to /api as
    `Authorization: Bearer TOKEN` and act with that user's role."""
    from fptrack.services.accounts.tokens import create_token

    with context.session() as session:
        created = create_token(session, username, name)
    click.echo(created.token)
    click.echo(
        f"token {created.info.id} ({created.info.prefix}...) for {created.info.username}: shown only now; "
        f"revoke it with `fptrack users revoke-token {created.info.id}`",
        err=True,
    )


@users.command("tokens")
@click.argument("username", required=False)
@pass_context
@_one_line_errors
def users_tokens(context: CliContext, username: str | None) -> None:
    """List API tokens (of USERNAME, or of everyone): id, user, name, prefix, created, last used, revoked."""
    from fptrack.services.accounts.tokens import list_tokens

    with context.session() as session:
        tokens = list_tokens(session, username)
    if not tokens:
        click.echo("no API tokens")
        return
    print_table(
        ["id", "user", "name", "prefix", "created", "last used", "revoked"],
        [
            (
                t.id,
                t.username,
                t.name,
                t.prefix + "...",
                t.created_at.strftime("%Y-%m-%d %H:%M"),
                t.last_used_at.strftime("%Y-%m-%d %H:%M") if t.last_used_at else "never",
                "yes" if t.revoked else "no",
            )
            for t in tokens
        ],
    )


@users.command("revoke-token")
@click.argument("token_id", type=click.IntRange(1, 2**63 - 1))
@pass_context
@_one_line_errors
def users_revoke_token(context: CliContext, token_id: int) -> None:
    """Revoke an API token by its id; clients using it get 401 from then on."""
    from fptrack.services.accounts.tokens import revoke_token

    with context.session() as session:
        info = revoke_token(session, token_id)
    click.echo(f"revoked token {info.id} ({info.prefix}...) of {info.username}")


@click.command()
@click.argument("match_id", type=click.IntRange(1, 2**63 - 1))
@click.argument("decision", type=click.Choice(list(DECISIONS)))
@click.option("--reason", default="", help="Why (kept with the decision).")
@click.option(
    "--copy-kind",
    type=click.Choice(["whole_chapter", "substantial_part", "excerpt"]),
    help="confirm: what the copy is (the reviewer's basis).",
)
@click.option(
    "--fair-use-considered",
    is_flag=True,
    help="confirm: fair use, quotation and licences were considered (the reviewer's basis).",
)
@click.option("--basis", default="", help="confirm: a short note on the basis.")
@click.option(
    "--as",
    "as_user",
    metavar="USERNAME",
    help="Record the decision as this account (a reviewer or admin). Default: cli:<your login name>.",
)
@pass_context
@_one_line_errors
def review(
    context: CliContext,
    match_id: int,
    decision: str,
    reason: str,
    copy_kind: str | None,
    fair_use_considered: bool,
    basis: str,
    as_user: str | None,
) -> None:
    """Confirm or dismiss a match (or reopen it), as the admin's buttons do.

    The decision is kept in the match's review history with who, when and why (--reason). Confirming an
    excerpt, or a match whose score (the share of its chapter copied) is below FPTRACK_REVIEW_BASIS_BELOW,
    needs the reviewer's basis: --copy-kind, --fair-use-considered and --basis "..."."""
    from fptrack.services.accounts.users import find_active_user
    from fptrack.services.review import Basis, record_decision

    with context.session() as session:
        if as_user is not None:
            user = find_active_user(session, username=as_user)
            if user is None:
                raise LookupError(f"there is no active user {as_user!r}")
            if not has_role(user.role, "reviewer"):
                raise ValueError(f"{user.username!r} is a {user.role}; reviewing needs the reviewer role")
            reviewer = user.username
        else:
            reviewer = f"cli:{getpass.getuser()}"
        given = Basis(copy_kind or "", True if fair_use_considered else None, basis)
        outcome = record_decision(
            session,
            match_id,
            DECISIONS[decision],
            reviewer,
            reason,
            basis=given if given.stated else None,
            basis_below=context.settings.review_basis_below,
        )
    if outcome.recorded:
        click.echo(f"match {match_id}: {outcome.previous_status} -> {outcome.status} (by {reviewer})")
    else:
        click.echo(f"match {match_id} is already {outcome.status}; nothing recorded")
