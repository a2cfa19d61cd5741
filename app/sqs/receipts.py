"""Receipt handles: an SQS receipt handle is a Sundial lease.

A handle carries the queue's id, the message's id and the lease id the receive granted, so
deleting or changing the visibility of a message with it is fenced as a lease is: a handle from
an earlier receive holds a lease that is no longer the message's, and changes nothing. The lease
id is 122 random bits, so a handle cannot be guessed; it is not secret from its holder, who may
decode it.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from app.sqs.errors import RECEIPT_HANDLE_IS_INVALID, SqsError

_VERSION = "1"


@dataclass(frozen=True, slots=True)
class Receipt:
    """What a receipt handle says: which message of which queue, under which lease."""

    queue_id: int
    message_id: str
    lease_id: str


def encode(receipt: Receipt) -> str:
    """The handle of a receipt."""
    text = f"{_VERSION} {receipt.queue_id} {receipt.lease_id} {receipt.message_id}"
    return base64.urlsafe_b64encode(text.encode()).decode()


def decode(handle: str, parameter: str = "ReceiptHandle") -> Receipt:
    """The receipt a handle carries, or ``ReceiptHandleIsInvalid``."""
    try:
        text = base64.urlsafe_b64decode(handle.encode("ascii")).decode()
        version, queue_id, lease_id, message_id = text.split(" ", 3)
        if version != _VERSION or not message_id:
            raise ValueError(handle)
        return Receipt(int(queue_id), message_id, lease_id)
    except (ValueError, UnicodeError, binascii.Error):
        raise SqsError(
            RECEIPT_HANDLE_IS_INVALID,
            f"The input receipt handle {handle!r} is not a valid receipt handle ({parameter}).",
        ) from None
