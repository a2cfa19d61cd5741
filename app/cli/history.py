"""``sundial history prune``: history retention by SQL alone, at once (the scheduler's leader does
the same by itself when ``SUNDIAL_HISTORY_RETENTION_DAYS`` is set; docs/operations.md, "History
retention"). Needs neither Spark nor pyarrow."""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from app.bootstrap.database import history_lock, history_prune, open_database, pool_urls
from app.config import get_settings


@click.group()
def history() -> None:
    """Finished messages' history (message_history)."""


@history.command("prune")
@click.option(
    "--older-than-days",
    type=click.IntRange(min=1),
    help="Retention in days (default: SUNDIAL_HISTORY_RETENTION_DAYS).",
)
def prune(older_than_days: int | None) -> None:
    """Drop every pool's history partitions of days past retention (once the pipeline has
    exported anything from a pool, only those whose rows are all exported)."""
    settings = get_settings()
    days = older_than_days or settings.history_retention_days
    if days is None:
        raise click.UsageError("give --older-than-days or set SUNDIAL_HISTORY_RETENTION_DAYS")
    # An embedded database is this command's own: bring it to the newest schema on first use.
    with open_database(settings, migrate_schema=settings.database_url is None) as url:
        try:
            result = history_prune.prune_pools(pool_urls(settings, url), days)
        except (history_lock.ExportBusyError, history_lock.PoolMismatchError) as error:
            raise click.ClickException(str(error)) from error
    click.echo(json.dumps(asdict(result), indent=2, sort_keys=True))
