"""Queue attributes: what SQS calls a queue's settings, read into Sundial's queue configuration
and read back out of it.

Most attributes are Sundial settings under another name (``VisibilityTimeout`` is
``lease_seconds``); the redrive policy is ``max_attempts`` and ``dead_letter_queue``; a FIFO
queue is an exclusive queue whose exclusive key holds the message group. The rest Sundial's
behaviour does not read (``ReceiveMessageWaitTimeSeconds`` is the door's own default), and the
door keeps them with the queue (``Queue.sqs``). The table of docs/sqs.md lists each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from app.core import validation
from app.core.models import Queue, QueueConfig
from app.core.states import State
from app.sqs import names
from app.sqs.errors import INVALID_ATTRIBUTE_NAME, INVALID_ATTRIBUTE_VALUE, SqsError
from app.sqs.names import QueueRef

GROUP_KEY: Final = "sqs:group"
"""The metadata key of a message's group (the exclusive key of a FIFO queue made through SQS).
SQS names no attribute with a ``:``, so no message attribute can take a ``sqs:`` key."""

DEDUPLICATION_WINDOW_SECONDS: Final = 300
"""SQS's deduplication window. A queue made through the door keeps finished messages this long
(``retention_seconds``), so a message's id stays taken from its sending until this long after
it finishes: a duplicate sent within that time is recognised."""

NO_REDRIVE_MAX_ATTEMPTS: Final = validation.MAX_ATTEMPTS
"""Without a redrive policy SQS delivers a message again and again; Sundial's nearest is its
highest ``max_attempts``."""

# Attributes the door keeps as given (Sundial's behaviour reads none of them), with each one's
# default and check.
ZERO_VISIBILITY: Final = "sqs:zero-visibility"
"""Kept with the door's attributes: the queue's VisibilityTimeout was set to 0 (not an SQS
attribute: never listed, and no SQS attribute name has a ``:``)."""
DEFAULT_RETENTION: Final = 345_600
DEFAULT_MAXIMUM_MESSAGE_SIZE: Final = 262_144

_INTEGER_RANGES: Final = {
    "VisibilityTimeout": (0, validation.MAX_LEASE_SECONDS),
    "DelaySeconds": (0, 900),
    "MessageRetentionPeriod": (60, 1_209_600),
    "ReceiveMessageWaitTimeSeconds": (0, validation.MAX_WAIT_SECONDS),
    "MaximumMessageSize": (1024, 1_048_576),
    "KmsDataKeyReusePeriodSeconds": (60, 86_400),
}
_KEPT_DEFAULTS: Final = {
    "MessageRetentionPeriod": str(DEFAULT_RETENTION),
    "ReceiveMessageWaitTimeSeconds": "0",
    "MaximumMessageSize": str(DEFAULT_MAXIMUM_MESSAGE_SIZE),
    "SqsManagedSseEnabled": "false",
}
_KEPT_AS_GIVEN: Final = frozenset(
    {
        "Policy",
        "KmsMasterKeyId",
        "KmsDataKeyReusePeriodSeconds",
        "SqsManagedSseEnabled",
        "RedriveAllowPolicy",
    }
)
_FIFO_ONLY: Final = frozenset(
    {"ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"}
)
_KEPT: Final = frozenset(_KEPT_DEFAULTS) | _KEPT_AS_GIVEN | _FIFO_ONLY
_SETTABLE: Final = _KEPT | {"VisibilityTimeout", "DelaySeconds", "RedrivePolicy"}
_COUNTS: Final = {
    "ApproximateNumberOfMessages": State.PENDING,
    "ApproximateNumberOfMessagesNotVisible": State.RUNNING,
    "ApproximateNumberOfMessagesDelayed": State.INVISIBLE,
}
_READ_ONLY: Final = frozenset({*_COUNTS, "CreatedTimestamp", "LastModifiedTimestamp", "QueueArn"})
READABLE: Final = _SETTABLE | _READ_ONLY | {"FifoQueue"}


@dataclass(slots=True)
class Settings:
    """Attributes read into what Sundial keeps: queue configuration changes, the attributes the
    door keeps, and the dead-letter queue the redrive policy names (to check it exists)."""

    config: dict[str, Any] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    dead_letter: QueueRef | None = None


def is_fifo(queue: Queue) -> bool:
    """Whether SQS clients see the queue as FIFO: an exclusive queue is one."""
    return queue.config.kind == "exclusive"


def group_key(queue: Queue) -> str:
    """The metadata key that holds a message's group in this queue."""
    return queue.config.exclusive_key or GROUP_KEY


def new_queue_config(fifo: bool) -> QueueConfig:
    """The configuration of a queue made through the door, before its attributes apply."""
    return QueueConfig(
        kind="exclusive" if fifo else "simple",
        exclusive_key=GROUP_KEY if fifo else None,
        max_attempts=NO_REDRIVE_MAX_ATTEMPTS,
        retention_seconds=DEDUPLICATION_WINDOW_SECONDS,
    )


def read(attributes: Mapping[str, Any], *, fifo: bool, creating: bool) -> Settings:
    """Check attributes given to CreateQueue or SetQueueAttributes and read them into
    :class:`Settings`; nothing applies if one is wrong."""
    settings = Settings()
    for name, raw in attributes.items():
        if name == "FifoQueue" and creating:
            continue  # read by the caller, with the queue's name
        if name not in _SETTABLE or (name in _FIFO_ONLY and not fifo):
            raise SqsError(INVALID_ATTRIBUTE_NAME, f"Unknown Attribute {name}.")
        if not isinstance(raw, str):
            raise _invalid(name, "must be a string")
        value = raw
        if name in _INTEGER_RANGES:
            value = str(_integer(name, raw))
        if name == "VisibilityTimeout":
            # A lease lasts at least a second: 0 is a 1-second lease, and reads back as 0.
            settings.config["lease_seconds"] = max(1, int(value))
            settings.kept[ZERO_VISIBILITY] = "true" if value == "0" else "false"
        elif name == "DelaySeconds":
            settings.config["delay_seconds"] = int(value)
        elif name == "RedrivePolicy":
            _read_redrive(value, settings)
        else:
            if name == "ContentBasedDeduplication" and value not in ("true", "false"):
                raise _invalid(name, "must be true or false")
            settings.kept[name] = value
    return settings


def _read_redrive(value: str, settings: Settings) -> None:
    """``RedrivePolicy``: max receives and the dead-letter queue; ``""`` removes it."""
    if value == "":
        settings.config["max_attempts"] = NO_REDRIVE_MAX_ATTEMPTS
        settings.config["dead_letter_queue"] = None
        return
    try:
        policy = json.loads(value)
        target = policy["deadLetterTargetArn"]
        count = int(policy["maxReceiveCount"])
    except (ValueError, TypeError, KeyError):
        raise _invalid(
            "RedrivePolicy", "must be JSON with deadLetterTargetArn and maxReceiveCount"
        ) from None
    if not isinstance(target, str):
        raise _invalid("RedrivePolicy", "deadLetterTargetArn must be a queue's ARN")
    if not 1 <= count <= validation.MAX_ATTEMPTS:
        raise _invalid(
            "RedrivePolicy", f"maxReceiveCount must be from 1 to {validation.MAX_ATTEMPTS}"
        )
    settings.dead_letter = names.read_queue_arn(target, "RedrivePolicy.deadLetterTargetArn")
    settings.config["max_attempts"] = count
    settings.config["dead_letter_queue"] = settings.dead_letter.name


def _zero_visibility(queue: Queue) -> dict[str, str]:
    """A VisibilityTimeout of 0 as it was set (its lease is a second long), while the queue's
    lease is still that second (a REST change of ``lease_seconds`` since wins)."""
    zero = queue.sqs.get("attributes", {}).get(ZERO_VISIBILITY) == "true"
    return {"VisibilityTimeout": "0"} if zero and queue.config.lease_seconds == 1 else {}


def _integer(name: str, raw: str) -> int:
    low, high = _INTEGER_RANGES[name]
    try:
        value = int(raw)
    except ValueError:
        raise _invalid(name, "must be an integer") from None
    if not low <= value <= high:
        raise _invalid(name, f"must be from {low} to {high}")
    return value


def _invalid(name: str, reason: str) -> SqsError:
    return SqsError(INVALID_ATTRIBUTE_VALUE, f"Invalid value for the parameter {name}: {reason}.")


def kept_attributes(queue: Queue) -> dict[str, str]:
    """The attributes the door keeps for the queue, defaults filled in."""
    kept = dict(_KEPT_DEFAULTS)
    if is_fifo(queue):
        kept["ContentBasedDeduplication"] = "false"
        kept["DeduplicationScope"] = "queue"
        kept["FifoThroughputLimit"] = "perQueue"
    kept.update(queue.sqs.get("attributes", {}))
    return kept


def tags(queue: Queue) -> dict[str, str]:
    """The queue's tags."""
    return dict(queue.sqs.get("tags", {}))


def render(
    queue: Queue,
    wanted: Iterable[str],
    *,
    region: str,
    counts: Mapping[State, int] | None,
) -> dict[str, str]:
    """The attributes ``wanted`` (``All`` for every one) as GetQueueAttributes answers them."""
    wanted = set(wanted)
    if "All" in wanted:
        wanted = set(READABLE)
    unknown = wanted - READABLE
    if unknown:
        raise SqsError(INVALID_ATTRIBUTE_NAME, f"Unknown Attribute {sorted(unknown)[0]}.")
    config = queue.config
    ref = QueueRef(queue.namespace, queue.name)
    values: dict[str, str] = {
        "VisibilityTimeout": str(config.lease_seconds),
        **_zero_visibility(queue),
        "DelaySeconds": str(config.delay_seconds),
        "CreatedTimestamp": str(int(queue.created_at.timestamp())),
        "LastModifiedTimestamp": str(int(queue.updated_at.timestamp())),
        "QueueArn": names.queue_arn(region, ref),
        **kept_attributes(queue),
    }
    if is_fifo(queue):
        values["FifoQueue"] = "true"
    if config.dead_letter_queue is not None:
        target = QueueRef(queue.namespace, config.dead_letter_queue)
        values["RedrivePolicy"] = json.dumps(
            {
                "deadLetterTargetArn": names.queue_arn(region, target),
                "maxReceiveCount": config.max_attempts,
            },
            separators=(",", ":"),
        )
    if counts is not None:
        for name, state in _COUNTS.items():
            values[name] = str(counts.get(state, 0))
    return {name: values[name] for name in sorted(wanted) if name in values}


def needs_counts(wanted: Iterable[str]) -> bool:
    """Whether answering ``wanted`` needs the queue's message counts."""
    return any(name == "All" or name in _COUNTS for name in wanted)
