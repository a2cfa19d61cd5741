"""``sundial db create-reader``: the read-only role for the reporting views (docs/reporting.md).

Argument parsing and printing only; the grants are :func:`app.store.reporting.create_reader`.
"""

from __future__ import annotations

import secrets
import sys

import click
import psycopg

from app.bootstrap.database import open_database
from app.config import get_settings
from app.store.reporting import READER_ROLE


@click.command("create-reader")
@click.option("--role", default=READER_ROLE, show_default=True, help="Name of the read-only role.")
@click.option(
    "--password",
    envvar="SUNDIAL_READER_PASSWORD",
    help="Set this password (or SUNDIAL_READER_PASSWORD; --password-stdin keeps it off the"
    " command line).",
)
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option(
    "--generate-password", is_flag=True, help="Set a new random password and print it once."
)
def create_reader(
    role: str, password: str | None, password_stdin: bool, generate_password: bool
) -> None:
    """Create the read-only role for the reporting views, or re-apply its grants.

    The role can read the views of the `reporting` schema and nothing else. Run it again after
    upgrades (it is idempotent). Without a password option an existing role keeps its password;
    a new one gets a generated password, printed once.
    """
    from app.store.reporting import create_reader as create

    chosen = [o for o, on in (("--password", password is not None),
                              ("--password-stdin", password_stdin),
                              ("--generate-password", generate_password)) if on]  # fmt: skip
    if len(chosen) > 1:
        raise click.UsageError(f"{' and '.join(chosen)} exclude each other")
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    generated = None
    if generate_password:
        password = generated = secrets.token_urlsafe(24)
    if password is not None and not password:
        raise click.BadParameter("must not be empty", param_hint="password")

    with open_database(get_settings()) as url:
        try:
            result = create(url, role, password)
            if result.created and password is None:
                generated = secrets.token_urlsafe(24)
                create(url, role, generated)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--role") from error
        except psycopg.Error as error:
            raise click.ClickException(f"could not create the reader role: {error}") from error
    click.echo(
        f"Role {result.role} {'created' if result.created else 'updated'} in database"
        f" {result.database}; it can read: {', '.join(result.views) or 'no views'}"
    )
    if generated is not None:
        click.echo(f"Password of {result.role} (shown only now): {generated}")
