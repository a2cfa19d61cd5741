"""``sundial db create-reader``: the read-only role for the reporting views (docs/reporting.md).

Argument parsing and printing only; the grants are :func:`app.store.reporting.create_reader`,
applied on every pool's database (docs/scaling.md): each pool is a database of its own, with
its own views, so the role must be allowed into each.
"""

from __future__ import annotations

import dataclasses
import secrets
import sys

import click
import psycopg

from app.bootstrap.database import open_database, pool_urls
from app.config import get_settings
from app.store.reporting import READER_ROLE, ReaderRole


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
    """Create the read-only role for the reporting views, or re-apply its grants, on every
    pool's database.

    The role can read the views of the `reporting` schema and nothing else. Run it again after
    upgrades (it is idempotent). Without a password option an existing role keeps its password;
    a new one gets a generated password, printed once (the same on every pool where the role is
    new).
    """
    chosen = [o for o, on in (("--password", password is not None),
                              ("--password-stdin", password_stdin),
                              ("--generate-password", generate_password)) if on]  # fmt: skip
    if len(chosen) > 1:
        raise click.UsageError(f"{' and '.join(chosen)} exclude each other")
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    if password is not None and not password:
        raise click.BadParameter("must not be empty", param_hint="password")
    # Shown once when it is set: the password asked for, or the one a role new on a pool gets
    # when no password is given (the same on every pool where the role is new).
    generated = secrets.token_urlsafe(24) if generate_password or password is None else None
    if generate_password:
        password = generated
    shown = False

    settings = get_settings()
    with open_database(settings) as url:
        for pool, pool_url in pool_urls(settings, url).items():
            result = _create_on_pool(pool, pool_url, role, password, generated)
            click.echo(
                f"Role {result.role} {'created' if result.created else 'updated'} in database"
                f" {result.database} (pool {pool}); it can read:"
                f" {', '.join(result.views) or 'no views'}"
            )
            if generated is not None and result.password_set and not shown:
                # As soon as it is set, so a pool that fails later cannot lose it.
                click.echo(f"Password of {result.role} (shown only now): {generated}")
                shown = True


def _create_on_pool(
    pool: str, url: str, role: str, password: str | None, for_new_role: str | None
) -> ReaderRole:
    """The role on one pool's database, with ``password`` (None: as it is), and a role new
    there without one given gets ``for_new_role``."""
    from app.store.reporting import create_reader as create

    try:
        result = create(url, role, password)
        if result.created and password is None and for_new_role is not None:
            result = dataclasses.replace(create(url, role, for_new_role), created=True)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--role") from error
    except psycopg.Error as error:
        raise click.ClickException(
            f"pool {pool}: could not create the reader role: {error}"
        ) from error
    return result
