"""``sundial topic set | list | show | subscribe | unsubscribe | publish | delete``: a
namespace's fan-out topics over HTTP through :class:`app.client.Client` (docs/api.md,
"Topics"). A topic is named ``NAMESPACE/NAME``; its subscriptions are queues of that namespace.
"""

from __future__ import annotations

import click

from app.client.commands import (
    _table,
    connect,
    emit,
    json_option,
    message_options,
    new_message,
    server_options,
)
from app.client.topics import Published, SubscriptionSpec, Topic


def _rows(topics: list[Topic]) -> None:
    rows = []
    for topic in topics:
        if not topic.subscriptions:
            rows.append([topic.name, "", ""])
        for subscription in topic.subscriptions:
            tags = subscription.tags
            shown = f"{subscription.tag_key} in {' || '.join(tags)}" if tags else ""
            rows.append([topic.name, subscription.queue, shown])
    _table(["topic", "queue", "filter"], rows)


def _show(topic: Topic, as_json: bool) -> None:
    emit(topic, as_json, lambda shown: _rows([shown]))


def _spec(text: str) -> SubscriptionSpec:
    """``QUEUE`` or ``QUEUE:KEY=A||B`` (a filtered subscription)."""
    queue, colon, rule = text.partition(":")
    if not colon:
        return queue
    return queue, *_tags(rule, "QUEUE")


def _filter(tag: str | None) -> tuple[str | None, list[str] | None]:
    return (None, None) if tag is None else _tags(tag, "--tags")


def _tags(rule: str, hint: str) -> tuple[str, list[str]]:
    """``KEY=A||B`` as its key and its values."""
    key, equals, values = rule.partition("=")
    if not equals or not key or not values:
        raise click.BadParameter(f"{rule!r}: expected KEY=A||B", param_hint=hint)
    return key, [v.strip() for v in values.split("||")]


@click.group("topic")
def topic() -> None:
    """Fan-out topics: one publish into every subscribed queue, all or nothing."""


@topic.command("set")
@click.argument("name", metavar="NAMESPACE/TOPIC")
@click.argument("queues", metavar="QUEUE[:KEY=A||B]...", nargs=-1)
@server_options
@json_option
def set_topic(
    name: str, queues: tuple[str, ...], url: str, token: str | None, as_json: bool
) -> None:
    """Create the topic, or bring it to exactly these subscriptions (a queue not listed is
    unsubscribed). ``QUEUE:KEY=A||B`` takes only messages whose metadata KEY is A or B.

    \b
    sundial topic set shop/orders billing audit:kind=refund||chargeback
    """
    with connect(url, token) as client:
        _show(client.put_topic(name, [_spec(q) for q in queues]), as_json)


@topic.command("list")
@click.argument("namespace")
@server_options
@json_option
def list_topics(namespace: str, url: str, token: str | None, as_json: bool) -> None:
    """A namespace's topics and their subscriptions."""
    with connect(url, token) as client:
        found = client.list_topics(namespace)
    emit(found, as_json, _rows)


@topic.command("show")
@click.argument("name", metavar="NAMESPACE/TOPIC")
@server_options
@json_option
def show(name: str, url: str, token: str | None, as_json: bool) -> None:
    """One topic and its subscriptions."""
    with connect(url, token) as client:
        _show(client.get_topic(name), as_json)


@topic.command("subscribe")
@click.argument("name", metavar="NAMESPACE/TOPIC")
@click.argument("queue")
@click.option("--tags", metavar="KEY=A||B", help="Take only messages whose metadata KEY is A or B.")
@server_options
@json_option
def subscribe(
    name: str, queue: str, tags: str | None, url: str, token: str | None, as_json: bool
) -> None:
    """Subscribe a queue of the namespace (the topic is made if need be), or set its filter."""
    tag_key, values = _filter(tags)
    with connect(url, token) as client:
        _show(client.subscribe(name, queue, tag_key=tag_key, tags=values), as_json)


@topic.command("unsubscribe")
@click.argument("name", metavar="NAMESPACE/TOPIC")
@click.argument("queue")
@server_options
def unsubscribe(name: str, queue: str, url: str, token: str | None) -> None:
    """Unsubscribe a queue: publishes answered after this no longer reach it."""
    with connect(url, token) as client:
        client.unsubscribe(name, queue)
    click.echo(f"unsubscribed {queue} from {name}")


@topic.command("publish")
@click.argument("name", metavar="NAMESPACE/TOPIC")
@message_options
@server_options
@json_option
def publish(
    name: str,
    payload: str | None,
    message_id: str | None,
    priority: int | None,
    delay: int | None,
    metadata: tuple[str, ...],
    url: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Publish one message into every subscribed queue that accepts it, all or nothing.

    \b
    sundial topic publish shop/orders --payload '{"order": 42}' --id order-42
    """
    message = new_message(payload, message_id, priority, delay, metadata)
    with connect(url, token) as client:
        [outcome] = client.publish(name, [message])
    emit(outcome, as_json, _deliveries)


def _deliveries(published: Published) -> None:
    rows = [[published.id, d.queue, d.state, d.created] for d in published.queues]
    _table(["id", "queue", "state", "created"], rows or [[published.id, "(no queue)", "", ""]])


@topic.command("delete")
@click.argument("name", metavar="NAMESPACE/TOPIC")
@server_options
def delete(name: str, url: str, token: str | None) -> None:
    """Delete the topic and its subscriptions (the queues and their messages stay)."""
    with connect(url, token) as client:
        client.delete_topic(name)
    click.echo(f"deleted {name}")
