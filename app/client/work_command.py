"""``sundial work``: run a :class:`app.client.Worker` on a queue with a handler named
``module:function`` (imported from the current directory or the Python path)."""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from typing import Any

import click

from app.client import Worker
from app.client.calls import MAX_WAIT_SECONDS
from app.client.commands import filter_pairs, reported_errors, server_options
from app.client.worker import DEFAULT_PREFETCH


def load_handler(spec: str) -> Any:
    """The callable named by ``module:attribute`` (the attribute may be dotted)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise click.BadParameter("use MODULE:FUNCTION", param_hint="--handler")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as error:
        raise click.BadParameter(f"cannot load {spec}: {error}", param_hint="--handler") from error
    if not callable(target):
        raise click.BadParameter(f"{spec} is not callable", param_hint="--handler")
    return target


@click.command()
@click.option(
    "--queue",
    "queues",
    required=True,
    multiple=True,
    metavar="NAMESPACE/QUEUE",
    help="The queue to consume (repeat for several of one namespace, first served first).",
)
@click.option("--handler", required=True, metavar="MODULE:FUNCTION", help="Called per message.")
@click.option("--concurrency", default=1, show_default=True, help="Handlers running at once.")
@click.option(
    "--prefetch",
    type=click.IntRange(min=0),
    help=f"Most messages leased ahead of free handlers (default: {DEFAULT_PREFETCH}).",
)
@click.option("--lease-seconds", type=int, help="Lease per message (default: the queue's).")
@click.option("--wait-seconds", default=MAX_WAIT_SECONDS, show_default=True, help="Long poll.")
@click.option(
    "--metadata",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only messages with this (repeat; a key repeated matches any of its values).",
)
@click.option(
    "--shutdown-timeout",
    default=30.0,
    show_default=True,
    help="Seconds running handlers get after SIGTERM before their messages are released.",
)
@click.option("--burst", is_flag=True, help="Exit once nothing is ready and nothing runs.")
@click.option("--log-level", default="INFO", show_default=True)
@server_options
def work(
    queues: tuple[str, ...],
    handler: str,
    concurrency: int,
    prefetch: int | None,
    lease_seconds: int | None,
    wait_seconds: int,
    metadata: tuple[str, ...],
    shutdown_timeout: float,
    burst: bool,
    log_level: str,
    url: str,
    token: str | None,
) -> None:
    """Consume the queues: lease, run the handler, heartbeat, complete or fail; stop on SIGTERM.

    The handler takes the leased message (``message.payload``, ``.metadata``, ``.attempt``);
    returning completes it, raising fails the attempt with the exception's text.
    """
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    function = load_handler(handler)
    worker = Worker(
        queues,
        function,
        url=url,
        token=token,
        concurrency=concurrency,
        prefetch=prefetch,
        lease_seconds=lease_seconds,
        wait_seconds=wait_seconds,
        metadata=filter_pairs(metadata),
        shutdown_timeout=shutdown_timeout,
        burst=burst,
    )
    with reported_errors(url):
        stats = worker.run()
    click.echo(
        f"stopped: {stats.completed} completed, {stats.failed} failed, "
        f"{stats.released} released, {stats.lost} lost",
        err=True,
    )
