"""Script commands that talk to a running server over HTTP, through :class:`app.client.Client`:
``sundial enqueue | dequeue | lease | ack | fail | cancel | messages``.

The server is ``--url`` (or ``$SUNDIAL_URL``), the token ``--token`` (or ``$SUNDIAL_TOKEN``).
Output is a readable table by default and JSON with ``--json`` (one document on stdout, for
scripts); progress and spinners go to stderr.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import IO, Any, TypeVar

import click
import httpx
import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from app.client import ApiError, Client, Leased, LeasedFrom, Message, NewMessage, SundialError
from app.client.http import DEFAULT_URL

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
BATCH = 1000
"""Messages per enqueue request when enqueueing a file."""

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True)


def server_options(command: F) -> F:
    """``--url`` and ``--token`` (from the environment by default)."""
    command = click.option(
        "--token",
        envvar="SUNDIAL_TOKEN",
        help="Namespace or admin token [env: SUNDIAL_TOKEN].",
    )(command)
    return click.option(
        "--url",
        envvar="SUNDIAL_URL",
        default=DEFAULT_URL,
        show_default=True,
        help="The server's root URL [env: SUNDIAL_URL].",
    )(command)


def json_option(command: F) -> F:
    """``--json``: print JSON instead of a table."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(command)


@contextmanager
def reported_errors(url: str) -> Iterator[None]:
    """API and network errors become a one-line error message and exit status 1."""
    try:
        yield
    except ApiError as error:
        field = f" (field: {error.field})" if error.field else ""
        raise click.ClickException(f"{error.code}: {error.message}{field}") from error
    except SundialError as error:
        raise click.ClickException(str(error)) from error
    except httpx.TransportError as error:
        raise click.ClickException(f"cannot reach {url}: {error}") from error


@contextmanager
def connect(url: str, token: str | None) -> Iterator[Client]:
    """A client, with :func:`reported_errors`."""
    with reported_errors(url), Client(url, token) as client:
        yield client


def parse_pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"use KEY=VALUE, got {value!r}", param_hint=option)
        pairs[key] = item
    return pairs


def filter_pairs(values: tuple[str, ...]) -> dict[str, str | list[str]] | None:
    """``--metadata`` of a dequeue: a key given more than once matches any of its values."""
    wanted: dict[str, list[str]] = {}
    for value in values:
        [(key, item)] = parse_pairs((value,), "--metadata").items()
        wanted.setdefault(key, []).append(item)
    return {k: v[0] if len(v) == 1 else v for k, v in wanted.items()} or None


def emit(value: T, as_json: bool, show: Callable[[T], None]) -> None:
    """``value`` as one JSON document with ``--json`` (for scripts), else as ``show`` prints it
    (a table, a line)."""
    if as_json:
        click.echo(msgspec.json.encode(value).decode())
    else:
        show(value)


def _table(columns: list[str], rows: list[list[Any]]) -> None:
    table = Table(*columns, header_style="bold")
    for row in rows:
        table.add_row(*("" if cell is None else str(cell) for cell in row))
    stdout.print(table)


def _short(value: Any, width: int = 48) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 1] + "…"


# --- enqueue -------------------------------------------------------------------------------------


_MESSAGE_OPTIONS = (
    click.option("--payload", help="The payload, a JSON value."),
    click.option("--id", "message_id", help="Your id for the message (makes retries safe)."),
    click.option("--priority", type=int, help="Lower is served first (default: enqueue time)."),
    click.option("--delay", type=int, help="Seconds before the message becomes visible."),
    click.option("--metadata", multiple=True, metavar="KEY=VALUE", help="Metadata pair (repeat)."),
)


def message_options(command: F) -> F:
    """``--payload``, ``--id``, ``--priority``, ``--delay`` and ``--metadata``: one message to
    send (:func:`new_message`)."""
    for option in reversed(_MESSAGE_OPTIONS):
        command = option(command)
    return command


def new_message(
    payload: str | None,
    message_id: str | None,
    priority: int | None,
    delay: int | None,
    metadata: tuple[str, ...],
) -> NewMessage:
    """The message that :func:`message_options` describe."""
    return NewMessage(
        id=message_id,
        payload=json_payload(payload),
        priority=priority,
        delay_seconds=delay,
        metadata=parse_pairs(metadata, "--metadata") or None,
    )


def json_payload(text: str | None) -> Any:
    """``--payload``, a JSON value; UNSET when it is not given."""
    return msgspec.UNSET if text is None else _json_argument(text, "--payload")


@click.command()
@click.argument("queue", metavar="NAMESPACE/QUEUE")
@message_options
@click.option(
    "--file",
    "path",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path),
    help="Enqueue many: JSON lines, each a message object as in the API.",
)
@click.option(
    "--replace",
    is_flag=True,
    help="An id already there that still waits (invisible or pending) takes the new message.",
)
@click.option(
    "--create-queue",
    is_flag=True,
    help="Make the queue, with the default configuration, if it does not exist.",
)
@server_options
@json_option
def enqueue(
    queue: str,
    payload: str | None,
    message_id: str | None,
    priority: int | None,
    delay: int | None,
    metadata: tuple[str, ...],
    path: Path | None,
    replace: bool,
    create_queue: bool,
    url: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Enqueue one message, or every message of a JSON-lines --file (in batches, with progress).

    \b
    sundial enqueue shop/emails --payload '{"to": "ada@example.com"}' --id welcome-42
    sundial enqueue shop/emails --id welcome-42 --payload '"v2"' --replace --create-queue
    """
    options = _EnqueueOptions("replace" if replace else None, create_queue)
    if path is not None:
        if payload is not None or message_id is not None:
            raise click.UsageError("--file takes the messages from the file, not --payload/--id")
        with connect(url, token) as client:
            _enqueue_file(client, queue, path, as_json, options)
        return
    message = new_message(payload, message_id, priority, delay, metadata)
    with connect(url, token) as client:
        [outcome] = client.enqueue_many(queue, [message], **asdict(options))
    shown = msgspec.structs.asdict(outcome)
    if not replace:
        del shown["replaced"]  # said only of an enqueue that may replace
    emit(shown, as_json, lambda fields: _table(list(fields), [list(fields.values())]))


@dataclass(frozen=True)
class _EnqueueOptions:
    """What ``--replace`` and ``--create-queue`` ask of every enqueue request."""

    on_conflict: str | None
    create_queue: bool


def _json_argument(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise click.BadParameter(f"not JSON: {error}", param_hint=option) from error


def _read_messages(stream: IO[Any]) -> Iterator[NewMessage]:
    for number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            yield msgspec.json.decode(line, type=NewMessage)
        except msgspec.DecodeError as error:
            raise click.ClickException(f"line {number}: {error}") from error


def _enqueue_file(
    client: Client, queue: str, path: Path, as_json: bool, options: _EnqueueOptions
) -> None:
    created = existing = replaced = 0
    with click.open_file(str(path)) as stream, _progress() as progress:
        task = progress.add_task("enqueueing", total=None)
        messages = _read_messages(stream)
        while batch := list(islice(messages, BATCH)):
            outcomes = client.enqueue_many(queue, batch, **asdict(options))
            created += sum(o.created for o in outcomes)
            existing += sum(not o.created for o in outcomes)
            replaced += sum(o.replaced for o in outcomes)
            progress.advance(task, len(batch))
    counts = {"created": created, "existing": existing}
    line = f"{created} enqueued, {existing} already there"
    if options.on_conflict:
        counts["replaced"] = replaced
        line += f", {replaced} of them replaced"
    emit(counts, as_json, lambda _: stdout.print(line))


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    )


# --- consuming -----------------------------------------------------------------------------------


@click.command()
@click.argument("queues", metavar="NAMESPACE/QUEUE...", nargs=-1, required=True)
@click.option("--count", default=1, show_default=True, help="Most messages to lease (1-100).")
@click.option("--wait", default=0, show_default=True, help="Seconds to wait for one (0-20).")
@click.option("--lease", "lease_seconds", type=int, help="Lease seconds (default: the queue's).")
@click.option(
    "--metadata",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only with this pair (repeat; a key repeated matches any of its values).",
)
@server_options
@json_option
def dequeue(
    queues: tuple[str, ...],
    count: int,
    wait: int,
    lease_seconds: int | None,
    metadata: tuple[str, ...],
    url: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Lease messages; complete them with `sundial ack`, or `sundial fail` them.

    Several queues of one namespace are taken in their order: the first queue's messages
    first, the rest of --count from the next ones (each message shows its queue).

    sundial dequeue shop/orders --metadata tag=A --metadata tag=B   (tag A or tag B)
    sundial dequeue shop/urgent shop/bulk --wait 20
    """
    wanted = filter_pairs(metadata)
    with connect(url, token) as client, stderr.status(f"waiting up to {wait} s", spinner="dots"):
        if len(queues) == 1:
            leased: Sequence[Leased] = client.dequeue(
                queues[0], count, wait_seconds=wait, lease_seconds=lease_seconds, metadata=wanted
            )
        else:
            leased = client.dequeue_many(
                queues, count, wait_seconds=wait, lease_seconds=lease_seconds, metadata=wanted
            )
    emit(leased, as_json, _leased_table)


def _leased_table(messages: Sequence[Leased]) -> None:
    """Leased messages, each with its queue when they come from several (:class:`LeasedFrom`)."""
    columns = ["id", "lease_id", "attempt", "priority", "lease expires", "payload"]
    rows = [
        [m.id, m.lease_id, m.attempt, m.priority, m.lease_expires_at.isoformat(), _short(m.payload)]
        for m in messages
    ]
    queues = [m.queue for m in messages if isinstance(m, LeasedFrom)]
    if queues:
        columns.insert(0, "queue")
        rows = [[queue, *row] for queue, row in zip(queues, rows, strict=True)]
    _table(columns, rows)


@click.command()
@click.argument("queue", metavar="NAMESPACE/QUEUE")
@click.argument("message_id", metavar="ID")
@click.option("--lease", "lease_seconds", type=int, help="Lease seconds (default: the queue's).")
@server_options
@json_option
def lease(
    queue: str,
    message_id: str,
    lease_seconds: int | None,
    url: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Lease the message ID, if it is ready (as a dequeue would lease it); complete it with
    `sundial ack`, or `sundial fail` it.

    sundial lease shop/orders order-42 --lease 120
    """
    with connect(url, token) as client:
        leased = client.lease_message(queue, message_id, lease_seconds=lease_seconds)
    emit(leased, as_json, lambda message: _leased_table([message]))


def _message_table(message: Message) -> None:
    _table(
        ["id", "state", "attempts", "last_error"],
        [[message.id, message.state, message.attempts, message.last_error]],
    )


@click.command()
@click.argument("queue", metavar="NAMESPACE/QUEUE")
@click.argument("message_id", metavar="ID")
@click.argument("lease_id", metavar="LEASE_ID")
@server_options
@json_option
def ack(
    queue: str, message_id: str, lease_id: str, url: str, token: str | None, as_json: bool
) -> None:
    """Complete a leased message."""
    with connect(url, token) as client:
        emit(client.complete(queue, message_id, lease_id), as_json, _message_table)


@click.command()
@click.argument("queue", metavar="NAMESPACE/QUEUE")
@click.argument("message_id", metavar="ID")
@click.argument("lease_id", metavar="LEASE_ID")
@click.option("--error", help="Why it failed (kept as last_error).")
@click.option("--retry-delay", type=int, help="Seconds before the retry (default: the queue's).")
@server_options
@json_option
def fail(
    queue: str,
    message_id: str,
    lease_id: str,
    error: str | None,
    retry_delay: int | None,
    url: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Fail an attempt: retried while attempts remain, else a dead letter (errored)."""
    with connect(url, token) as client:
        failed = client.fail(queue, message_id, lease_id, error, retry_delay)
        emit(failed, as_json, _message_table)


@click.command()
@click.argument("queue", metavar="NAMESPACE/QUEUE")
@click.argument("message_id", metavar="ID")
@click.option("--lease-id", help="The lease, to cancel a running message you hold.")
@click.option("--force", is_flag=True, help="Cancel a running message without its lease.")
@click.option("--reason", help="Kept as last_error.")
@server_options
@json_option
def cancel(
    queue: str,
    message_id: str,
    lease_id: str | None,
    force: bool,
    reason: str | None,
    url: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Cancel a message that is not finished."""
    with connect(url, token) as client:
        canceled = client.cancel(queue, message_id, lease_id=lease_id, force=force, reason=reason)
        emit(canceled, as_json, _message_table)


# --- browsing ------------------------------------------------------------------------------------


@click.command()
@click.argument("queue", metavar="NAMESPACE/QUEUE")
@click.option("--state", "states", multiple=True, help="Only in this state (repeat).")
@click.option("--metadata", multiple=True, metavar="KEY=VALUE", help="Only with this pair.")
@click.option(
    "--order",
    type=click.Choice(["enqueued_at", "priority"]),
    default="enqueued_at",
    show_default=True,
    help="Newest first, or lowest priority first.",
)
@click.option("--limit", default=100, show_default=True, help="Most messages to show (0: all).")
@server_options
@json_option
def messages(
    queue: str,
    states: tuple[str, ...],
    metadata: tuple[str, ...],
    order: str,
    limit: int,
    url: str,
    token: str | None,
    as_json: bool,
) -> None:
    """List a queue's messages, fetched a page at a time."""
    with connect(url, token) as client, stderr.status("fetching", spinner="dots") as status:
        found: list[Message] = []
        pages = client.messages(
            queue, states=states, metadata=parse_pairs(metadata, "--metadata") or None, order=order
        )
        for message in islice(pages, limit or None):
            found.append(message)
            if len(found) % 1000 == 0:
                status.update(f"fetched {len(found)}")
    emit(found, as_json, _messages_table)


def _messages_table(messages: list[Message]) -> None:
    rows = [
        [m.id, m.state, m.priority, m.attempts, m.enqueued_at.isoformat(), _short(m.payload)]
        for m in messages
    ]
    _table(["id", "state", "priority", "attempts", "enqueued", "payload"], rows)


COMMANDS = (enqueue, dequeue, lease, ack, fail, cancel, messages)
