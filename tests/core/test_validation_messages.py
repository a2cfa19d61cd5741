"""The message rules of app/core/validation.py: the states a requeue names, a message of an
enqueue batch (with the batch's index in the field), and a change of a waiting message."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.core import validation as v
from app.core.errors import PayloadTooLargeError
from app.core.models import MessageChanges, NewMessage
from app.core.states import State
from tests.core.helpers import EXCLUSIVE, LIMITS, NAIVE, NOW, SIMPLE, refused

# --- states ----------------------------------------------------------------------------------


def test_states():
    assert v.states("states", ["errored", "canceled"]) == (State.ERRORED, State.CANCELED)
    assert v.states("states", []) == ()
    with refused("states[1]"):
        v.states("states", ["errored", "dead"])
    with refused("states[0]"):
        v.states("states", ["Errored"])


# --- a message of an enqueue batch -----------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (NewMessage(id="bad id"), "messages[2].id"),
        (NewMessage(id=""), "messages[2].id"),
        (NewMessage(priority=2**63), "messages[2].priority"),
        (NewMessage(payload=rb'"\u0000"'), "messages[2].payload"),
        (NewMessage(metadata={"k": "\x00"}), "messages[2].metadata.k"),
        (NewMessage(metadata={"": "x"}), "messages[2].metadata"),
        (NewMessage(delay_seconds=1, visible_at=NOW), "messages[2].visible_at"),
        (NewMessage(delay_seconds=-1), "messages[2].delay_seconds"),
        (NewMessage(delay_seconds=v.MAX_DELAY_SECONDS + 1), "messages[2].delay_seconds"),
        (NewMessage(visible_at=NAIVE), "messages[2].visible_at"),
        (NewMessage(ttl_seconds=1, expires_at=NOW), "messages[2].expires_at"),
        (NewMessage(ttl_seconds=0), "messages[2].ttl_seconds"),
        (NewMessage(ttl_seconds=v.MAX_RETENTION_SECONDS + 1), "messages[2].ttl_seconds"),
        (NewMessage(expires_at=NAIVE), "messages[2].expires_at"),
        (NewMessage(max_attempts=0), "messages[2].max_attempts"),
        (NewMessage(max_attempts=v.MAX_ATTEMPTS + 1), "messages[2].max_attempts"),
        (NewMessage(lease_seconds=0), "messages[2].lease_seconds"),
        (NewMessage(lease_seconds=v.MAX_LEASE_SECONDS + 1), "messages[2].lease_seconds"),
    ],
)
def test_new_message_refusals(message: NewMessage, field: str):
    with refused(field):
        v.new_message("messages[2]", message, SIMPLE, LIMITS)


def test_new_message_accepts_every_field_at_its_bounds():
    message = NewMessage(
        id="x" * 200,
        priority=v.INT64_MIN,
        payload=b'{"a": 1}',
        metadata={"k": "v"},
        delay_seconds=v.MAX_DELAY_SECONDS,
        max_attempts=v.MAX_ATTEMPTS,
        lease_seconds=v.MAX_LEASE_SECONDS,
        ttl_seconds=v.MAX_RETENTION_SECONDS,
    )
    assert v.new_message("m", message, SIMPLE, LIMITS) is message
    low = NewMessage(delay_seconds=0, max_attempts=1, lease_seconds=1, ttl_seconds=1)
    assert v.new_message("m", low, SIMPLE, LIMITS) is low
    dated = NewMessage(visible_at=NOW, expires_at=NOW + timedelta(days=1))
    assert v.new_message("m", dated, SIMPLE, LIMITS) is dated


def test_new_message_payload_too_large_names_the_field():
    with pytest.raises(PayloadTooLargeError) as info:
        v.new_message("messages[4]", NewMessage(payload=b"1" * 65), SIMPLE, LIMITS)
    assert info.value.details["field"] == "messages[4].payload"


def test_exclusive_queue_requires_the_key():
    with refused("messages[2].metadata.project"):
        v.new_message("messages[2]", NewMessage(), EXCLUSIVE, LIMITS)
    with refused("messages[2].metadata.project"):
        v.new_message("messages[2]", NewMessage(metadata={"other": "x"}), EXCLUSIVE, LIMITS)
    with refused("messages[2].metadata.project"):
        v.new_message("messages[2]", NewMessage(metadata={"project": ""}), EXCLUSIVE, LIMITS)
    ok = NewMessage(metadata={"project": "foo"})
    assert v.new_message("messages[2]", ok, EXCLUSIVE, LIMITS) is ok
    # A simple queue does not care about the key.
    assert v.new_message("messages[2]", NewMessage(), SIMPLE, LIMITS) is not None


def test_enqueue_batch_size():
    with refused("messages"):
        v.enqueue_batch([], SIMPLE, LIMITS)
    with refused("messages"):
        v.enqueue_batch([NewMessage()] * (v.MAX_BATCH_ENQUEUE + 1), SIMPLE, LIMITS)
    v.enqueue_batch([NewMessage()] * v.MAX_BATCH_ENQUEUE, SIMPLE, LIMITS)


def test_enqueue_batch_names_the_first_bad_message_by_index():
    batch = [
        NewMessage(metadata={"project": "a"}),
        NewMessage(metadata={"project": "b"}),
        NewMessage(metadata={"other": "c"}),
        NewMessage(id="bad id", metadata={"project": "d"}),
    ]
    with refused("messages[2].metadata.project"):
        v.enqueue_batch(batch, EXCLUSIVE, LIMITS)
    with refused("messages[3].id"):
        v.enqueue_batch(batch, SIMPLE, LIMITS)  # a simple queue does not need the key


# --- a change of a waiting message -----------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        (MessageChanges(priority=2**63), "priority"),
        (MessageChanges(priority=-(2**63) - 1), "priority"),
        (MessageChanges(payload=rb'"\u0000"'), "payload"),
        (MessageChanges(metadata={"k": "v" * 257}), "metadata.k"),
        (MessageChanges(metadata={f"k{i}": "v" for i in range(17)}), "metadata"),
        (MessageChanges(visible_at=NAIVE), "visible_at"),
    ],
)
def test_message_changes_refusals(changes: MessageChanges, field: str):
    with refused(field):
        v.message_changes(changes, LIMITS)


def test_message_changes_accepts():
    changes = MessageChanges(
        priority=v.INT64_MAX, payload=b"[]", metadata={"a": "b"}, visible_at=NOW
    )
    assert v.message_changes(changes, LIMITS) is changes
    assert v.message_changes(MessageChanges(), LIMITS) == MessageChanges()
    with pytest.raises(PayloadTooLargeError):
        v.message_changes(MessageChanges(payload=b"1" * 65), LIMITS)
