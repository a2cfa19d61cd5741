"""``sundial pools``: the pools that hold namespaces, and moving a namespace between them
(docs/scaling.md).

    sundial pools list                 # each pool: number, whether it answers, namespaces, load
    sundial pools move NS --to POOL    # move NS while it keeps serving; run again to resume
    sundial pools moves                # moves under way (a mover that died leaves one)
    sundial pools abort NS             # undo a move that has not flipped yet

Argument parsing and printing only; the mover is :class:`app.store.moves.NamespaceMover`,
handed out by the composition root.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict
from typing import Any, TypeVar

import click

from app.bootstrap import database
from app.config import get_settings
from app.core.errors import SundialError

T = TypeVar("T")


def _run(work: Callable[[str], Coroutine[Any, Any, T]]) -> T:
    """Run ``work`` with the catalogue's URL (the embedded default started and migrated if it
    is the one)."""
    settings = get_settings()
    with database.open_database(settings, migrate_schema=settings.database_url is None) as url:
        try:
            return asyncio.run(work(url))
        except SundialError as error:
            raise click.ClickException(f"{error.code}: {error.message}") from error


def _print(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


@click.group("pools")
def pools() -> None:
    """The pools (databases) that hold namespaces, and moves between them."""


@pools.command("list")
def pools_list() -> None:
    """Each pool: its number, whether it answers, its namespaces and waiting messages."""
    settings = get_settings()
    found = _run(lambda url: database.describe_pools(settings, url))
    _print([asdict(pool) for pool in found])


@pools.command("move")
@click.argument("namespace")
@click.option("--to", "target", required=True, help="The pool to move the namespace to.")
def pools_move(namespace: str, target: str) -> None:
    """Move NAMESPACE to pool TO while it keeps serving.

    Its messages, queues and tokens are copied while producers and consumers go on, then the
    namespace is frozen for the last changes (its requests wait) and the catalogue points at
    the new pool. Run it again to finish a move whose mover died.
    """
    settings = get_settings()
    started = time.monotonic()

    async def progress(phase: str) -> None:
        click.echo(f"{time.monotonic() - started:8.3f} s  {phase}", err=True)

    async def move(url: str) -> database.MoveReport | None:
        return await database.namespace_mover(settings, url, progress).move(namespace, target)

    report = _run(move)
    if report is None:
        click.echo(f"namespace {namespace} is on pool {target} already", err=True)
        return
    _print(asdict(report))


@pools.command("moves")
def pools_moves() -> None:
    """Moves under way (started and not finished: a mover that died leaves one)."""
    settings = get_settings()
    under_way = _run(lambda url: database.namespace_mover(settings, url).under_way())
    _print([asdict(move) for move in under_way])


@pools.command("abort")
@click.argument("namespace")
def pools_abort(namespace: str) -> None:
    """Undo the move of NAMESPACE that has not flipped yet: it is served where it was."""
    settings = get_settings()
    undone = _run(lambda url: database.namespace_mover(settings, url).abort(namespace))
    if undone is None:
        raise click.ClickException(f"no move of namespace {namespace} is under way")
    click.echo(f"move of {namespace} to {undone.target} undone; it stays on {undone.source}")
