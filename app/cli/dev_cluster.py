"""``sundial dev-cluster``: a replicated PostgreSQL with automatic failover on this machine
(:class:`app.embedded.formation.Formation`), to develop and test against what production runs.

    sundial dev-cluster up            # monitor + primary + synchronous standby; prints the URL
    SUNDIAL_DATABASE_URL="$(sundial dev-cluster url)" sundial serve
    sundial dev-cluster switchover    # planned: the standby takes over
    sundial dev-cluster kill-primary  # unplanned: SIGKILL the primary's keeper and PostgreSQL
    sundial dev-cluster start node1   # bring a killed or stopped node back (it rejoins)
    sundial dev-cluster down          # stop everything (destroy: and delete it)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from app.embedded.formation import NODE_NAMES, Formation, FormationError

T = TypeVar("T")

_NODE = click.Choice([*NODE_NAMES, "monitor"])


@click.group("dev-cluster")
@click.option(
    "--dir",
    "base_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".sundial/ha"),
    show_default=True,
    help="Where the formation lives.",
)
@click.pass_context
def dev_cluster(ctx: click.Context, base_dir: Path) -> None:
    """A local pg_auto_failover formation: a monitor, a primary and its synchronous standby
    on loopback ports (see docs/high-availability.md)."""
    ctx.obj = Formation(base_dir)


def _formation() -> Formation:
    formation = click.get_current_context().find_object(Formation)
    assert formation is not None  # the group made it
    return formation


def _do(action: Callable[[], T]) -> T:
    try:
        return action()
    except FormationError as error:
        raise click.ClickException(str(error)) from error


def _print_status(formation: Formation) -> None:
    for node in _do(formation.nodes):
        health = "up" if node.healthy else "DOWN"
        role = node.reported if node.settled else f"{node.reported} -> {node.assigned}"
        click.echo(f"{node.name:<6} port {node.port:<6} {health:<5} {role}")


@dev_cluster.command()
@click.option("--timeout", default=120.0, show_default=True, help="Seconds to wait for health.")
def up(timeout: float) -> None:
    """Create (first time) and start the formation; wait for a primary and its standby."""
    formation = _formation()
    _do(lambda: formation.up(timeout))
    _print_status(formation)
    click.echo(f'\nexport SUNDIAL_DATABASE_URL="{formation.sqlalchemy_url}"')


@dev_cluster.command()
def down() -> None:
    """Stop every keeper and PostgreSQL (the data stays)."""
    _do(_formation().down)


@dev_cluster.command()
def destroy() -> None:
    """Stop everything and delete the formation's directory."""
    _do(_formation().destroy)


@dev_cluster.command()
def status() -> None:
    """Each node's role and health, as the monitor sees them."""
    _print_status(_formation())


@dev_cluster.command()
def url() -> None:
    """Print the database URL to give Sundial (SUNDIAL_DATABASE_URL)."""
    click.echo(_do(lambda: _formation().sqlalchemy_url))


@dev_cluster.command()
def switchover() -> None:
    """Planned switchover: the standby becomes primary once caught up."""
    formation = _formation()
    started = time.monotonic()
    _do(formation.switchover)
    click.echo(f"switched over in {time.monotonic() - started:.1f} s")
    _print_status(formation)


@dev_cluster.command("kill-primary")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the failover.")
@click.option("--timeout", default=60.0, show_default=True, help="Seconds to wait for it.")
def kill_primary(wait: bool, timeout: float) -> None:
    """Unplanned loss: SIGKILL the primary's keeper, PostgreSQL and backends."""
    formation = _formation()
    primary = _do(formation.primary)
    if primary is None:
        raise click.ClickException("no node is primary now")
    started = time.monotonic()
    _do(lambda: formation.kill_node(primary.name))
    click.echo(f"killed {primary.name}")
    if wait:
        _do(
            lambda: formation.wait_until(
                lambda nodes: any(n.writable and n.name != primary.name for n in nodes),
                timeout,
                "a new primary",
            )
        )
        _do(lambda: formation.wait_writable(timeout))
        click.echo(f"a new primary accepts writes {time.monotonic() - started:.1f} s later")
        _print_status(formation)


@dev_cluster.command()
@click.argument("name", type=_NODE)
def kill(name: str) -> None:
    """SIGKILL one node's (or the monitor's) keeper and PostgreSQL."""
    _do(lambda: _formation().kill_node(name))


@dev_cluster.command()
@click.argument("name", type=_NODE)
def stop(name: str) -> None:
    """Stop one node (or the monitor) cleanly."""
    _do(lambda: _formation().stop_node(name))


@dev_cluster.command()
@click.argument("name", type=_NODE)
def start(name: str) -> None:
    """Start one node (or the monitor) again; a former primary rejoins as the standby."""
    _do(lambda: _formation().start_node(name))
