"""The errors the SQS door answers with, as SQS names them.

An SQS error has two names: the query protocol's code (``AWS.SimpleQueueService.NonExistentQueue``)
and, in the JSON protocol, the shape of the SQS model (``QueueDoesNotExist``), which the answer
carries as ``__type`` and the header ``x-amzn-query-error`` carries with the query code (SDKs map
the pair back to the code older SDKs saw). Errors the model does not name use the query code for
both.
"""

from __future__ import annotations

from typing import Final

# Query code -> the SQS model's error shape, where they differ.
_SHAPES: Final = {
    "AWS.SimpleQueueService.NonExistentQueue": "QueueDoesNotExist",
    "QueueAlreadyExists": "QueueNameExists",
    "AWS.SimpleQueueService.QueueDeletedRecently": "QueueDeletedRecently",
    "AWS.SimpleQueueService.PurgeQueueInProgress": "PurgeQueueInProgress",
    "AWS.SimpleQueueService.BatchEntryIdsNotDistinct": "BatchEntryIdsNotDistinct",
    "AWS.SimpleQueueService.EmptyBatchRequest": "EmptyBatchRequest",
    "AWS.SimpleQueueService.TooManyEntriesInBatchRequest": "TooManyEntriesInBatchRequest",
    "AWS.SimpleQueueService.InvalidBatchEntryId": "InvalidBatchEntryId",
    "AWS.SimpleQueueService.BatchRequestTooLong": "BatchRequestTooLong",
    "AWS.SimpleQueueService.MessageNotInflight": "MessageNotInflight",
    "AWS.SimpleQueueService.UnsupportedOperation": "UnsupportedOperation",
}

NON_EXISTENT_QUEUE: Final = "AWS.SimpleQueueService.NonExistentQueue"
QUEUE_ALREADY_EXISTS: Final = "QueueAlreadyExists"
INVALID_PARAMETER_VALUE: Final = "InvalidParameterValue"
MISSING_PARAMETER: Final = "MissingParameter"
INVALID_ATTRIBUTE_NAME: Final = "InvalidAttributeName"
INVALID_ATTRIBUTE_VALUE: Final = "InvalidAttributeValue"
INVALID_MESSAGE_CONTENTS: Final = "InvalidMessageContents"
RECEIPT_HANDLE_IS_INVALID: Final = "ReceiptHandleIsInvalid"
MESSAGE_NOT_INFLIGHT: Final = "AWS.SimpleQueueService.MessageNotInflight"
EMPTY_BATCH: Final = "AWS.SimpleQueueService.EmptyBatchRequest"
TOO_MANY_ENTRIES: Final = "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
BATCH_IDS_NOT_DISTINCT: Final = "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
INVALID_BATCH_ENTRY_ID: Final = "AWS.SimpleQueueService.InvalidBatchEntryId"
BATCH_TOO_LONG: Final = "AWS.SimpleQueueService.BatchRequestTooLong"
INVALID_ACTION: Final = "InvalidAction"
INVALID_CLIENT_TOKEN_ID: Final = "InvalidClientTokenId"  # noqa: S105 - an error code
REQUEST_THROTTLED: Final = "RequestThrottled"
SERVICE_UNAVAILABLE: Final = "ServiceUnavailable"
INTERNAL_FAILURE: Final = "InternalFailure"


class SqsError(Exception):
    """An answer of SQS's: its query ``code``, a ``message`` for people, the HTTP ``status``,
    and whether the sender is at fault (``Sender``) or the server (``Receiver``)."""

    def __init__(
        self, code: str, message: str, *, status: int = 400, sender_fault: bool = True
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.sender_fault = sender_fault

    @property
    def shape(self) -> str:
        """The error's name in the SQS model (the JSON protocol's ``__type``)."""
        return _SHAPES.get(self.code, self.code)


def invalid_parameter(name: str, reason: str) -> SqsError:
    """``InvalidParameterValue`` naming the parameter."""
    return SqsError(INVALID_PARAMETER_VALUE, f"Value for parameter {name} is invalid. {reason}")


def missing_parameter(name: str) -> SqsError:
    """``MissingParameter`` naming the parameter."""
    return SqsError(MISSING_PARAMETER, f"The request must contain the parameter {name}.")


def non_existent_queue() -> SqsError:
    """The queue of the request does not exist (or is not the caller's)."""
    return SqsError(NON_EXISTENT_QUEUE, "The specified queue does not exist.")
