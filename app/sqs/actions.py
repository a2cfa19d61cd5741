"""The SQS actions, each over the queue service: a request in the JSON protocol's shape (the
query protocol's is read into it) in, the answer in the same shape out.

Every action acts on the caller's namespace (the account of its access key); a queue URL or ARN
naming another namespace names a queue that does not exist for the caller. docs/sqs.md says how
each action maps onto Sundial's operations and where the semantics differ.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from litestar.types import Receive

from app.core import validation
from app.core.errors import (
    ConflictError,
    LeaseMismatchError,
    NotFoundError,
    QueuePausedError,
    SundialError,
    UnavailableError,
)
from app.core.models import EnqueueOutcome, LeaseRef, NewMessage, Queue
from app.core.service import QueueService
from app.core.states import LIVE_STATES
from app.sqs import attributes, messages, names, receipts
from app.sqs.errors import (
    BATCH_IDS_NOT_DISTINCT,
    BATCH_TOO_LONG,
    EMPTY_BATCH,
    INVALID_ACTION,
    INVALID_ATTRIBUTE_NAME,
    INVALID_BATCH_ENTRY_ID,
    INVALID_PARAMETER_VALUE,
    MESSAGE_NOT_INFLIGHT,
    QUEUE_ALREADY_EXISTS,
    RECEIPT_HANDLE_IS_INVALID,
    REQUEST_THROTTLED,
    SERVICE_UNAVAILABLE,
    TOO_MANY_ENTRIES,
    SqsError,
    invalid_parameter,
    missing_parameter,
    non_existent_queue,
)
from app.sqs.names import QueueRef
from app.web import longpoll
from app.web.waiters import WaiterRegistry

MAX_TAGS: Final = 50
"""SQS's limit of tags per queue (checked against the tags as read: two TagQueue at once may
pass it together)."""
MAX_BATCH: Final = 10
MAX_RECEIVE: Final = 10
MAX_BATCH_BYTES: Final = 1_048_576
_BATCH_ENTRY_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,80}")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request, and how: the namespace of its access key, the endpoint it called
    (``http://host:port``, for the queue URLs it is answered with) and the region it signed
    for (for the ARNs)."""

    namespace: str
    endpoint: str
    region: str


@dataclass(frozen=True, slots=True)
class _Wait:
    """A ReceiveMessage as the long poll takes it."""

    count: int
    lease_seconds: int | None
    wait_seconds: int
    metadata: dict[str, str]


Handler = Callable[
    ["Actions", Mapping[str, Any], Caller, Receive | None], Awaitable[dict[str, Any]]
]


class Actions:
    """The SQS actions over a queue service and this process's long-poll waiters."""

    def __init__(
        self, service: QueueService, waiters_of: Callable[[Queue], WaiterRegistry]
    ) -> None:
        self.service = service
        self.waiters_of = waiters_of

    async def run(
        self,
        action: str,
        request: Mapping[str, Any],
        caller: Caller,
        receive: Receive | None = None,
    ) -> dict[str, Any]:
        """Run ``action``; Sundial's errors come out as the SQS errors they are."""
        handler = _HANDLERS.get(action)
        if handler is None:
            raise SqsError(INVALID_ACTION, f"The action {action} is not valid for this endpoint.")
        try:
            return await handler(self, request, caller, receive)
        except SundialError as error:
            raise _as_sqs_error(error) from error

    # --- queues --------------------------------------------------------------------------------

    async def create_queue(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        name = names.check_queue_name(_required_text(request, "QueueName"))
        given = _mapping(request, "Attributes")
        fifo = given.get("FifoQueue", "false") == "true"
        if given.get("FifoQueue", "false") not in ("true", "false"):
            raise invalid_parameter("FifoQueue", "must be true or false.")
        if fifo != name.endswith(names.FIFO_SUFFIX):
            raise invalid_parameter(
                "QueueName", "A FIFO queue's name ends with .fifo, and only a FIFO queue's does."
            )
        settings = attributes.read(given, fifo=fifo, creating=True)
        tags = _tags(_mapping(request, "tags"))
        ref = QueueRef(caller.namespace, name)
        existing = await self._queue_or_none(ref, answer=True)
        if existing is None:
            await self._check_dead_letter(settings, caller, fifo=fifo)
            config = replace(attributes.new_queue_config(fifo), **settings.config)
            created = await self.service.create_queue(
                caller.namespace, name, config, {"attributes": settings.kept, "tags": tags}
            )
            if created is not None:
                return {"QueueUrl": names.queue_url(caller.endpoint, ref)}
            existing = await self._queue(ref, answer=True)
        # SQS answers an existing queue's URL when every attribute given matches it.
        current = attributes.render(existing, given, region=caller.region, counts=None)
        for key, value in given.items():
            if key == "FifoQueue" and value == "false" and not attributes.is_fifo(existing):
                continue
            if key == "RedrivePolicy":
                # JSON may be written many ways (spacing, order, a count as a string): compare
                # what it reads as ("" is no policy).
                policy = ("max_attempts", "dead_letter_queue")
                target = settings.dead_letter
                if any(getattr(existing.config, k) != settings.config[k] for k in policy) or (
                    target is not None and target.namespace != caller.namespace
                ):
                    raise SqsError(
                        QUEUE_ALREADY_EXISTS,
                        "A queue already exists with the same name and a different value for"
                        " attribute RedrivePolicy.",
                    )
                continue
            if current.get(key) != value:
                raise SqsError(
                    QUEUE_ALREADY_EXISTS,
                    f"A queue already exists with the same name and a different value for"
                    f" attribute {key}.",
                )
        return {"QueueUrl": names.queue_url(caller.endpoint, ref)}

    async def get_queue_url(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        name = _required_text(request, "QueueName")
        owner = request.get("QueueOwnerAWSAccountId")
        ref = names.owned(QueueRef(owner or caller.namespace, name), caller.namespace)
        await self._queue(ref, answer=True)
        return {"QueueUrl": names.queue_url(caller.endpoint, ref)}

    async def list_queues(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        prefix = request.get("QueueNamePrefix") or ""
        if not isinstance(prefix, str):
            raise invalid_parameter("QueueNamePrefix", "must be a string.")
        found = [q.name for q, _ in await self.service.list_queues(caller.namespace)]
        chosen = [n for n in found if n.startswith(prefix)]
        return _url_page("QueueUrls", chosen, request, caller)

    async def delete_queue(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        ref = _queue_ref(request, caller)
        try:
            await self.service.delete_queue(ref.namespace, ref.name)
        except NotFoundError:
            raise non_existent_queue() from None
        return {}

    async def get_queue_attributes(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        ref = _queue_ref(request, caller)
        wanted = _texts(request, "AttributeNames")
        if attributes.needs_counts(wanted):
            detail = await self._detail(ref)
            queue, counts = detail.queue, detail.stats.counts
        else:
            queue, counts = await self._queue(ref, answer=True), None
        values = attributes.render(queue, wanted, region=caller.region, counts=counts)
        return {"Attributes": values} if values else {}

    async def set_queue_attributes(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        ref = _queue_ref(request, caller)
        queue = await self._queue(ref)
        given = _mapping(request, "Attributes")
        if "FifoQueue" in given:
            raise SqsError(INVALID_ATTRIBUTE_NAME, "FifoQueue is set when the queue is created.")
        settings = attributes.read(given, fifo=attributes.is_fifo(queue), creating=False)
        await self._check_dead_letter(settings, caller, fifo=attributes.is_fifo(queue))
        patch = {"attributes": settings.kept} if settings.kept else None
        await self._update(ref, settings.config, patch)
        return {}

    async def purge_queue(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        ref = _queue_ref(request, caller)
        live = [str(state) for state in sorted(LIVE_STATES)]
        try:
            await self.service.purge_queue(ref.namespace, ref.name, live)
        except NotFoundError:
            raise non_existent_queue() from None
        return {}

    async def list_dead_letter_source_queues(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        ref = _queue_ref(request, caller)
        await self._queue(ref)
        found = await self.service.list_queues(caller.namespace)
        sources = [q.name for q, _ in found if q.config.dead_letter_queue == ref.name]
        return _url_page("queueUrls", sources, request, caller)

    async def tag_queue(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        ref = _queue_ref(request, caller)
        given = _tags(_mapping(request, "Tags"))
        queue = await self._queue(ref)
        if len({**attributes.tags(queue), **given}) > MAX_TAGS:
            raise invalid_parameter("Tags", f"A queue has at most {MAX_TAGS} tags.")
        await self._update(ref, {}, {"tags": given})
        return {}

    async def untag_queue(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        ref = _queue_ref(request, caller)
        removed: dict[str, str | None] = dict.fromkeys(_texts(request, "TagKeys"))
        await self._update(ref, {}, {"tags": removed})
        return {}

    async def list_queue_tags(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        tags = attributes.tags(await self._queue(_queue_ref(request, caller), answer=True))
        return {"Tags": tags} if tags else {}

    # --- messages ------------------------------------------------------------------------------

    async def send_message(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        queue = await self._queue(_queue_ref(request, caller))
        message = messages.new_message(request, queue)
        outcomes = await self._enqueue(queue, [message])
        return messages.sent(outcomes[0], request, queue)

    async def send_message_batch(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        queue = await self._queue(_queue_ref(request, caller))
        entries = _entries(request)
        size = sum(len(str(e.get("MessageBody", "")).encode()) for e in entries)
        if size > MAX_BATCH_BYTES:
            raise SqsError(
                BATCH_TOO_LONG, f"The batch's bodies add up to more than {MAX_BATCH_BYTES} bytes."
            )
        failed: list[dict[str, Any]] = []
        accepted: list[tuple[Mapping[str, Any], NewMessage]] = []
        for index, entry in enumerate(entries):
            field = f"SendMessageBatchRequestEntry.{index + 1}."
            try:
                accepted.append((entry, messages.new_message(entry, queue, field)))
            except SqsError as error:
                failed.append(_failure(entry["Id"], error))
        successful = []
        if accepted:
            outcomes = await self._enqueue(queue, [message for _entry, message in accepted])
            for (entry, _message), outcome in zip(accepted, outcomes, strict=True):
                successful.append({"Id": entry["Id"], **messages.sent(outcome, entry, queue)})
        return {"Successful": successful, "Failed": failed}

    async def receive_message(
        self, request: Mapping[str, Any], caller: Caller, receive: Receive | None
    ) -> dict[str, Any]:
        queue = await self._queue(_queue_ref(request, caller))
        count = _integer(request, "MaxNumberOfMessages", 1, MAX_RECEIVE, default=1)
        kept = attributes.kept_attributes(queue)
        wait = _integer(
            request,
            "WaitTimeSeconds",
            0,
            validation.MAX_WAIT_SECONDS,
            default=int(kept["ReceiveMessageWaitTimeSeconds"]),
        )
        visibility = request.get("VisibilityTimeout")
        lease = None
        if visibility is not None:
            # A lease lasts at least a second: VisibilityTimeout 0 is a 1-second lease.
            lease = max(1, _integer(request, "VisibilityTimeout", 0, validation.MAX_LEASE_SECONDS))
        # Everything is checked before the lease: a refusal after it would strand the messages.
        system = messages.system_attribute_names(
            _texts(request, "AttributeNames") + _texts(request, "MessageSystemAttributeNames")
        )
        wanted = _texts(request, "MessageAttributeNames")
        leased = await longpoll.dequeue(
            self.service,
            self.waiters_of,
            queue.namespace,
            queue.name,
            _Wait(count, lease, wait, {}),
            receive,
        )
        delivered = [
            messages.delivered(
                message,
                queue,
                receipts.encode(receipts.Receipt(queue.id, message.id, message.lease_id)),
                system=system,
                wanted=wanted,
            )
            for message in leased
        ]
        return {"Messages": delivered} if delivered else {}

    async def delete_message(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        queue = await self._queue(_queue_ref(request, caller))
        receipt = _receipt(queue, _required_text(request, "ReceiptHandle"))
        try:
            await self.service.complete(
                queue.namespace, queue.name, receipt.message_id, receipt.lease_id
            )
        except (LeaseMismatchError, NotFoundError):
            # Not found: gone, and not deleted through this handle (repeating that answers
            # success): deleted through a later receive's, or moved to the dead-letter queue.
            _stale_delete(queue)
        return {}

    async def delete_message_batch(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        queue = await self._queue(_queue_ref(request, caller))
        entries = _entries(request)
        failed: list[dict[str, Any]] = []
        refs: list[tuple[str, LeaseRef]] = []
        for entry in entries:
            try:
                receipt = _receipt(queue, _required_text(entry, "ReceiptHandle"))
            except SqsError as error:
                failed.append(_failure(entry["Id"], error))
                continue
            refs.append((entry["Id"], LeaseRef(receipt.message_id, receipt.lease_id)))
        successful = []
        if refs:
            results = await self.service.ack(
                queue.namespace, queue.name, [ref for _id, ref in refs], []
            )
            for (entry_id, _ref), result in zip(refs, results, strict=True):
                if result.ok:
                    successful.append({"Id": entry_id})
                    continue
                try:
                    _stale_delete(queue)
                    successful.append({"Id": entry_id})
                except SqsError as error:
                    failed.append(_failure(entry_id, error))
        return {"Successful": successful, "Failed": failed}

    async def change_message_visibility(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        queue = await self._queue(_queue_ref(request, caller))
        receipt = _receipt(queue, _required_text(request, "ReceiptHandle"))
        timeout = _integer(request, "VisibilityTimeout", 0, validation.MAX_LEASE_SECONDS)
        await self._change_visibility(queue, receipt, timeout)
        return {}

    async def change_message_visibility_batch(
        self, request: Mapping[str, Any], caller: Caller, _: Receive | None
    ) -> dict[str, Any]:
        queue = await self._queue(_queue_ref(request, caller))
        successful, failed = [], []
        for entry in _entries(request):
            try:
                receipt = _receipt(queue, _required_text(entry, "ReceiptHandle"))
                timeout = _integer(entry, "VisibilityTimeout", 0, validation.MAX_LEASE_SECONDS)
                await self._change_visibility(queue, receipt, timeout)
            except SqsError as error:
                failed.append(_failure(entry["Id"], error))
                continue
            successful.append({"Id": entry["Id"]})
        return {"Successful": successful, "Failed": failed}

    async def _change_visibility(
        self, queue: Queue, receipt: receipts.Receipt, seconds: int
    ) -> None:
        """The lease now ends ``seconds`` from now; 0 gives the message back at once
        (a failed attempt without a retry delay: counted, as SQS counts the receive)."""
        try:
            if seconds == 0:
                await self.service.fail(
                    queue.namespace,
                    queue.name,
                    receipt.message_id,
                    receipt.lease_id,
                    retry_delay_seconds=0,
                )
            else:
                await self.service.extend(
                    queue.namespace, queue.name, receipt.message_id, receipt.lease_id, seconds
                )
        except (LeaseMismatchError, NotFoundError):
            raise SqsError(
                MESSAGE_NOT_INFLIGHT,
                "The message is not in flight under this receipt handle (a later receive holds"
                " it, or it was deleted).",
            ) from None

    async def _enqueue(self, queue: Queue, batch: list[NewMessage]) -> list[EnqueueOutcome]:
        """Enqueue messages the door has checked against their queue's MaximumMessageSize: that
        is their limit, not the server's payload limit (a body's JSON string is a few bytes
        longer than the body, so a message of exactly the maximum size would not fit it)."""
        largest = max(len(m.payload or b"") for m in batch)
        limit = max(self.service.limits.max_payload_bytes, largest)
        return await self.service.enqueue(queue.namespace, queue.name, batch, payload_limit=limit)

    # --- lookups -------------------------------------------------------------------------------

    async def _queue_or_none(self, ref: QueueRef, *, answer: bool = False) -> Queue | None:
        """The queue, or None. ``answer``: the action's answer is made of it alone, so its
        lookup (and the caller's key's) must be confirmed current, as a statement about it
        would confirm them (docs/adr/0011-catalogue-version.md)."""
        try:
            if answer:
                return await self.service.get_queue(ref.namespace, ref.name)
            return await self.service.get_queue_or_404(ref.namespace, ref.name)
        except NotFoundError:
            return None

    async def _queue(self, ref: QueueRef, *, answer: bool = False) -> Queue:
        queue = await self._queue_or_none(ref, answer=answer)
        if queue is None:
            raise non_existent_queue()
        return queue

    async def _detail(self, ref: QueueRef) -> Any:
        try:
            return await self.service.queue_detail(ref.namespace, ref.name)
        except NotFoundError:
            raise non_existent_queue() from None

    async def _update(
        self,
        ref: QueueRef,
        config: Mapping[str, Any],
        sqs_patch: Mapping[str, Mapping[str, str | None]] | None,
    ) -> None:
        """Change the queue's configuration and merge ``sqs_patch`` into what the door keeps
        for it, in one statement (two patches at once both apply)."""
        try:
            await self.service.update_queue(ref.namespace, ref.name, config, sqs_patch=sqs_patch)
        except NotFoundError:
            raise non_existent_queue() from None

    async def _check_dead_letter(
        self, settings: attributes.Settings, caller: Caller, *, fifo: bool
    ) -> None:
        """A redrive policy names an existing queue of the caller's, of the same type."""
        if settings.dead_letter is None:
            return
        target = None
        if settings.dead_letter.namespace == caller.namespace:  # another's does not exist for it
            target = await self._queue_or_none(settings.dead_letter)
        if target is None:
            raise invalid_parameter("RedrivePolicy", "Dead letter target does not exist.")
        if attributes.is_fifo(target) != fifo:
            raise invalid_parameter(
                "RedrivePolicy",
                "The dead-letter queue of a FIFO queue must be a FIFO queue, and of a standard"
                " queue a standard queue.",
            )


_HANDLERS: Final[dict[str, Handler]] = {
    "CreateQueue": Actions.create_queue,
    "GetQueueUrl": Actions.get_queue_url,
    "ListQueues": Actions.list_queues,
    "DeleteQueue": Actions.delete_queue,
    "GetQueueAttributes": Actions.get_queue_attributes,
    "SetQueueAttributes": Actions.set_queue_attributes,
    "PurgeQueue": Actions.purge_queue,
    "ListDeadLetterSourceQueues": Actions.list_dead_letter_source_queues,
    "TagQueue": Actions.tag_queue,
    "UntagQueue": Actions.untag_queue,
    "ListQueueTags": Actions.list_queue_tags,
    "SendMessage": Actions.send_message,
    "SendMessageBatch": Actions.send_message_batch,
    "ReceiveMessage": Actions.receive_message,
    "DeleteMessage": Actions.delete_message,
    "DeleteMessageBatch": Actions.delete_message_batch,
    "ChangeMessageVisibility": Actions.change_message_visibility,
    "ChangeMessageVisibilityBatch": Actions.change_message_visibility_batch,
}
ACTIONS: Final = frozenset(_HANDLERS)
"""Every action the door answers."""


def _stale_delete(queue: Queue) -> None:
    """A delete with a receipt handle from an earlier receive: SQS answers success on a standard
    queue and changes nothing (the message is delivered again), and refuses it on a FIFO
    queue."""
    if attributes.is_fifo(queue):
        raise SqsError(RECEIPT_HANDLE_IS_INVALID, "The receipt handle has expired.")


def _receipt(queue: Queue, handle: str) -> receipts.Receipt:
    receipt = receipts.decode(handle)
    if receipt.queue_id != queue.id:
        raise SqsError(RECEIPT_HANDLE_IS_INVALID, "The receipt handle is not one of this queue's.")
    return receipt


def _queue_ref(request: Mapping[str, Any], caller: Caller) -> QueueRef:
    url = _required_text(request, "QueueUrl")
    return names.owned(names.read_queue_url(url), caller.namespace)


def _required_text(request: Mapping[str, Any], name: str) -> str:
    value = request.get(name)
    if value is None or value == "":
        raise missing_parameter(name)
    if not isinstance(value, str):
        raise invalid_parameter(name, "must be a string.")
    return value


def _texts(request: Mapping[str, Any], name: str) -> list[str]:
    value = request.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid_parameter(name, "must be a list of strings.")
    return value


def _mapping(request: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = request.get(name) or {}
    if not isinstance(value, Mapping):
        raise invalid_parameter(name, "must be a map.")
    return dict(value)


def _tags(given: Mapping[str, Any]) -> dict[str, str]:
    for key, value in given.items():
        if not (isinstance(key, str) and 1 <= len(key) <= 128 and isinstance(value, str)):
            raise invalid_parameter("Tags", "Tag keys are 1 to 128 characters, values strings.")
        if len(value) > 256:
            raise invalid_parameter("Tags", "Tag values are at most 256 characters.")
    return dict(given)


def _integer(
    request: Mapping[str, Any], name: str, low: int, high: int, default: int | None = None
) -> int:
    value = request.get(name, default)
    if value is None:
        raise missing_parameter(name)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise invalid_parameter(name, f"Must be between {low} and {high}, if provided.")
    return value


def _entries(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    entries = request.get("Entries")
    if not entries:
        raise SqsError(EMPTY_BATCH, "There should be at least one entry in the request.")
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise invalid_parameter("Entries", "must be a list of entries.")
    if len(entries) > MAX_BATCH:
        raise SqsError(TOO_MANY_ENTRIES, f"Maximum number of entries per request are {MAX_BATCH}.")
    ids = [e.get("Id") for e in entries]
    for entry_id in ids:
        if not isinstance(entry_id, str) or not _BATCH_ENTRY_ID.fullmatch(entry_id):
            raise SqsError(
                INVALID_BATCH_ENTRY_ID,
                "A batch entry id is 1 to 80 letters, digits, hyphens and underscores.",
            )
    if len(set(ids)) != len(ids):
        raise SqsError(BATCH_IDS_NOT_DISTINCT, "Two or more batch entries have the same Id.")
    return entries


def _failure(entry_id: str, error: SqsError) -> dict[str, Any]:
    return {
        "Id": entry_id,
        "SenderFault": error.sender_fault,
        "Code": error.code,
        "Message": error.message,
    }


def _url_page(
    member: str, queue_names: Sequence[str], request: Mapping[str, Any], caller: Caller
) -> dict[str, Any]:
    """A listing's answer: a page of the queues' URLs under ``member``, and the next page's
    token if there is one."""
    page, token = _page(sorted(queue_names), request)
    answer: dict[str, Any] = {
        member: [names.queue_url(caller.endpoint, QueueRef(caller.namespace, n)) for n in page]
    }
    if token is not None:
        answer["NextToken"] = token
    return answer


def _page(names_: Sequence[str], request: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """A page of sorted names from the request's ``NextToken`` (the last name given, base64),
    ``MaxResults`` long (1 to 1000); without ``MaxResults``, up to 1000 and no token."""
    limit = request.get("MaxResults")
    if limit is not None:
        limit = _integer(request, "MaxResults", 1, 1000)
    after = ""
    token = request.get("NextToken")
    if token:
        try:
            after = base64.urlsafe_b64decode(str(token).encode()).decode()
        except ValueError:
            raise invalid_parameter("NextToken", "is not a token this endpoint gave.") from None
    rest = [n for n in names_ if n > after]
    if limit is None:
        return rest[:1000], None
    page = rest[:limit]
    more = len(rest) > limit
    next_token = base64.urlsafe_b64encode(page[-1].encode()).decode() if more else None
    return page, next_token


def _as_sqs_error(error: SundialError) -> SqsError:
    """Sundial's error as SQS's nearest."""
    if isinstance(error, NotFoundError):
        return non_existent_queue()
    if isinstance(error, QueuePausedError):
        # SDKs retry RequestThrottled with backoff: a paused queue is a wait, not a failure.
        return SqsError(REQUEST_THROTTLED, str(error))
    if isinstance(error, ConflictError):
        return SqsError(QUEUE_ALREADY_EXISTS, str(error))
    if isinstance(error, UnavailableError):
        return SqsError(SERVICE_UNAVAILABLE, str(error), status=503, sender_fault=False)
    return SqsError(INVALID_PARAMETER_VALUE, str(error))  # a validation error, too large a payload
