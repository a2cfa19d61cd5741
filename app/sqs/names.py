"""How SQS names a Sundial queue: its URL, its ARN, and the queue names SQS allows.

The namespace plays the AWS account: a queue ``orders`` of namespace ``shop`` is
``{endpoint}/sqs/shop/orders`` and ``arn:aws:sqs:{region}:shop:orders``, where the endpoint is
the one the client called and the region the one it signed for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote, urlsplit

from app.core import validation
from app.sqs.errors import SqsError, invalid_parameter, non_existent_queue

PATH_PREFIX: Final = "/sqs"
"""Where the door is served: every SQS request is a POST (or GET) under this path."""

FIFO_SUFFIX: Final = ".fifo"

# What SQS allows (up to 80 characters of letters, digits, - and _, and .fifo for a FIFO
# queue), within what Sundial allows (a name starts with a letter or digit: NAME_PATTERN).
_SQS_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,80}")


@dataclass(frozen=True, slots=True)
class QueueRef:
    """A queue as a request names it: its namespace (the account) and its name."""

    namespace: str
    name: str


def check_queue_name(name: str) -> str:
    """``name`` if SQS and Sundial both allow it, else ``InvalidParameterValue``."""
    stem = name.removesuffix(FIFO_SUFFIX)
    if not _SQS_NAME.fullmatch(stem) or not validation.NAME_PATTERN.fullmatch(name):
        raise invalid_parameter(
            "QueueName",
            "Queue names are 1 to 64 characters: letters, digits, hyphens and underscores, first"
            " a letter or digit, and .fifo at the end of a FIFO queue's name.",
        )
    return name


def queue_url(endpoint: str, ref: QueueRef) -> str:
    """The URL SQS clients name the queue by."""
    return f"{endpoint}{PATH_PREFIX}/{ref.namespace}/{ref.name}"


def read_queue_url(url: str) -> QueueRef:
    """The queue a ``QueueUrl`` names: its path's last two segments (the host is the client's
    business: a client may reach the server by several names)."""
    segments = [unquote(s) for s in urlsplit(url).path.split("/") if s]
    if len(segments) < 2:
        raise SqsError("InvalidAddress", f"The address {url} is not valid for this endpoint.")
    return QueueRef(segments[-2], segments[-1])


def queue_arn(region: str, ref: QueueRef) -> str:
    """The queue's ARN."""
    return f"arn:aws:sqs:{region}:{ref.namespace}:{ref.name}"


def read_queue_arn(arn: str, parameter: str) -> QueueRef:
    """The queue an SQS ARN names (``arn:aws:sqs:<region>:<namespace>:<queue>``)."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not all(parts[4:]):
        raise invalid_parameter(parameter, f"{arn!r} is not the ARN of a queue.")
    return QueueRef(parts[4], parts[5])


def owned(ref: QueueRef, namespace: str) -> QueueRef:
    """``ref`` when it is a queue of the caller's namespace; another account's queue does not
    exist for the caller."""
    if ref.namespace != namespace:
        raise non_existent_queue()
    return ref
