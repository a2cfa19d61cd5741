"""Messages: an SQS message read into a Sundial message, and a leased Sundial message written
out as SQS delivers one.

- The body is the payload as a JSON string, so it comes back exactly as sent. A payload that is
  not a JSON string (a message a REST client sent) is delivered as its JSON text.
- Message attributes are metadata: a ``String`` attribute is a metadata pair as it is, another
  type keeps its type under ``sqs:types`` (a ``Binary`` value as base64 text). Metadata a REST
  client set is delivered as ``String`` attributes.
- ``MessageGroupId`` is the queue's group key (:func:`attributes.group_key`),
  ``MessageDeduplicationId`` ``sqs:dedup``, an ``AWSTraceHeader`` ``sqs:trace``. On a FIFO queue
  the deduplication id names the message: its id is a UUID derived from it and the queue, so a
  second send with the same id finds the first message and is not enqueued again.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final

import msgspec

from app.core import validation
from app.core.models import EnqueueOutcome, LeasedMessage, NewMessage, Queue
from app.sqs import attributes, checksums
from app.sqs.errors import (
    INVALID_MESSAGE_CONTENTS,
    SqsError,
    invalid_parameter,
    missing_parameter,
)

RESERVED_PREFIX: Final = "sqs:"
DEDUPLICATION_KEY: Final = "sqs:dedup"
TYPES_KEY: Final = "sqs:types"
TRACE_KEY: Final = "sqs:trace"
MAX_ATTRIBUTES: Final = 10

_DEDUPLICATION_IDS: Final = uuid.UUID("7b0e1f9e-9c41-4f7e-9d55-3c1d1f3f5a11")
"""The UUID namespace of message ids derived from deduplication ids."""

# What SQS allows in a body: XML's characters.
NOT_XML: Final = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ATTRIBUTE_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,256}")
_DEDUPLICATION_ID: Final = re.compile(r"[!-~]{1,128}")
_NUMBER: Final = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_BASE_TYPES: Final = frozenset({"String", "Number", "Binary"})
_SYSTEM_NAMES: Final = frozenset(
    {
        "SenderId",
        "SentTimestamp",
        "ApproximateReceiveCount",
        "ApproximateFirstReceiveTimestamp",
        "SequenceNumber",
        "MessageDeduplicationId",
        "MessageGroupId",
        "AWSTraceHeader",
        "DeadLetterQueueSourceArn",
    }
)


def new_message(entry: Mapping[str, Any], queue: Queue, field: str = "") -> NewMessage:
    """A SendMessage request (or batch entry: ``field`` is its prefix in errors) as the message
    to enqueue, checked as SQS checks it."""
    fifo = attributes.is_fifo(queue)
    kept = attributes.kept_attributes(queue)
    body = entry.get("MessageBody")
    if not isinstance(body, str) or body == "":
        raise missing_parameter(f"{field}MessageBody")
    if NOT_XML.search(body):
        raise SqsError(
            INVALID_MESSAGE_CONTENTS,
            "Invalid binary character in the message body: SQS allows #x9, #xA, #xD and"
            " #x20 to #x10FFFF except surrogates, #xFFFE and #xFFFF.",
        )
    metadata, size = _metadata(entry.get("MessageAttributes") or {}, f"{field}MessageAttributes")
    size += len(body.encode())
    if size > int(kept["MaximumMessageSize"]):
        raise invalid_parameter(
            f"{field}MessageBody",
            f"Message must be shorter than {kept['MaximumMessageSize']} bytes.",
        )
    trace = _trace_header(entry.get("MessageSystemAttributes"), f"{field}MessageSystemAttributes")
    if trace is not None:
        metadata[TRACE_KEY] = trace
    group = entry.get("MessageGroupId")
    if group is not None:
        metadata[attributes.group_key(queue)] = _group(group, f"{field}MessageGroupId")
    elif fifo:
        raise missing_parameter(f"{field}MessageGroupId")
    message_id = None
    delay = entry.get("DelaySeconds")
    if fifo:
        if delay is not None:
            raise invalid_parameter(
                f"{field}DelaySeconds",
                "A FIFO queue has no per-message delay; set the queue's DelaySeconds instead.",
            )
        dedup = entry.get("MessageDeduplicationId")
        if dedup is None:
            if kept.get("ContentBasedDeduplication") != "true":
                raise invalid_parameter(
                    f"{field}MessageDeduplicationId",
                    "The queue should either have ContentBasedDeduplication enabled or"
                    " MessageDeduplicationId provided explicitly.",
                )
            dedup = hashlib.sha256(body.encode()).hexdigest()
        if not isinstance(dedup, str) or not _DEDUPLICATION_ID.fullmatch(dedup):
            raise invalid_parameter(
                f"{field}MessageDeduplicationId", "1 to 128 printable ASCII characters."
            )
        metadata[DEDUPLICATION_KEY] = dedup
        # Of the queue too: one deduplication id in two queues names two messages.
        message_id = str(uuid.uuid5(_DEDUPLICATION_IDS, f"{queue.id}:{dedup}"))
    elif entry.get("MessageDeduplicationId") is not None:
        raise invalid_parameter(
            f"{field}MessageDeduplicationId",
            "The request includes a parameter that is not valid for this queue type.",
        )
    if delay is not None and not (isinstance(delay, int) and 0 <= delay <= 900):
        raise invalid_parameter(f"{field}DelaySeconds", "must be from 0 to 900.")
    if len(metadata) > validation.MAX_METADATA_PAIRS:
        raise invalid_parameter(f"{field}MessageAttributes", "too many attributes.")
    return NewMessage(
        id=message_id,
        payload=msgspec.json.encode(body),
        metadata=metadata,
        delay_seconds=delay,
        ttl_seconds=int(kept["MessageRetentionPeriod"]),
    )


def _metadata(given: Mapping[str, Any], field: str) -> tuple[dict[str, str], int]:
    """Message attributes as metadata, and their size as SQS counts it."""
    if not isinstance(given, Mapping):
        raise invalid_parameter(field, "must be a map of attributes.")
    if len(given) > MAX_ATTRIBUTES:
        raise invalid_parameter(
            field,
            f"Number of message attributes [{len(given)}] exceeds the allowed maximum"
            f" [{MAX_ATTRIBUTES}].",
        )
    metadata: dict[str, str] = {}
    types: dict[str, str] = {}
    size = 0
    for name, attribute in given.items():
        where = f"{field}.{name}"
        _check_attribute_name(name, where)
        if not isinstance(attribute, Mapping):
            raise invalid_parameter(where, "must have a DataType and a value.")
        data_type = attribute.get("DataType")
        if not isinstance(data_type, str) or not data_type:
            # SQS answers InvalidParameterValue here, not MissingParameter.
            raise invalid_parameter(
                f"{where}.DataType",
                f"The message attribute '{name}' must contain non-empty message attribute type.",
            )
        base = data_type.split(".", 1)[0]
        if base not in ("String", "Number", "Binary") or len(data_type) > 256:
            raise invalid_parameter(
                f"{where}.DataType",
                "The type must be String, Number or Binary, with an optional"
                " custom suffix after a dot.",
            )
        kind = "BinaryValue" if base == "Binary" else "StringValue"
        if attribute.get(kind) in (None, "", b""):
            # SQS: "Name, type, value and the message body must not be empty or null."
            raise invalid_parameter(
                f"{where}.{kind}",
                f"Message (user) attribute '{name}' must contain a non-empty value of type"
                f" '{base}'.",
            )
        if base == "Binary":
            raw = attribute.get("BinaryValue")
            value = _binary_value(raw, f"{where}.BinaryValue")
            size += len(base64.b64decode(value))
        else:
            value = _string_value(attribute.get("StringValue"), f"{where}.StringValue")
            if base == "Number" and not _NUMBER.fullmatch(value):
                raise invalid_parameter(f"{where}.StringValue", "must be a number.")
            size += len(value.encode())
        size += len(name.encode()) + len(data_type.encode())
        if len(value) > validation.MAX_METADATA_VALUE:
            raise invalid_parameter(
                where,
                f"Sundial keeps message attribute values of up to"
                f" {validation.MAX_METADATA_VALUE} characters (a Binary value as base64).",
            )
        metadata[name] = value
        if data_type != "String":
            types[name] = data_type
    if types:
        encoded = json.dumps(types, separators=(",", ":"), sort_keys=True)
        if len(encoded) > validation.MAX_METADATA_VALUE:
            raise invalid_parameter(field, "the attributes' names and types are too long.")
        metadata[TYPES_KEY] = encoded
    return metadata, size


def _trace_header(given: Any, where: str) -> str | None:
    """The ``AWSTraceHeader`` of a send's system attributes (the only one SQS takes), if any:
    ``{"AWSTraceHeader": {"DataType": "String", "StringValue": …}}``."""
    if given is None:
        return None
    if not isinstance(given, Mapping) or set(given) - {"AWSTraceHeader"}:
        raise invalid_parameter(where, "The only message system attribute is AWSTraceHeader.")
    trace = given.get("AWSTraceHeader")
    if trace is None:
        return None
    if not isinstance(trace, Mapping) or trace.get("DataType") != "String":
        raise invalid_parameter(f"{where}.AWSTraceHeader", "must be of DataType String.")
    return _string_value(trace.get("StringValue"), f"{where}.AWSTraceHeader.StringValue")


def _check_attribute_name(name: Any, where: str) -> None:
    if (
        not isinstance(name, str)
        or not _ATTRIBUTE_NAME.fullmatch(name)
        or name.lower().startswith(("aws.", "amazon."))
        or name.startswith(".")
        or name.endswith(".")
        or ".." in name
    ):
        raise invalid_parameter(
            where,
            "Attribute names are letters, digits, _, - and . (not first, last or twice in a row),"
            " and do not begin with AWS. or Amazon.",
        )
    if len(name) > validation.MAX_METADATA_KEY:
        raise invalid_parameter(
            where,
            f"Sundial keeps attribute names of up to {validation.MAX_METADATA_KEY} characters.",
        )


def _string_value(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise missing_parameter(where)
    if NOT_XML.search(value):
        raise invalid_parameter(where, "contains a character SQS does not allow.")
    return value


def _binary_value(value: Any, where: str) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if not isinstance(value, str):
        raise missing_parameter(where)
    try:
        return base64.b64encode(base64.b64decode(value, validate=True)).decode()
    except (binascii.Error, ValueError):
        raise invalid_parameter(where, "must be base64.") from None


def _group(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _DEDUPLICATION_ID.fullmatch(value):
        raise invalid_parameter(where, "1 to 128 printable ASCII characters.")
    return value


def body_of(payload: bytes) -> str:
    """The SQS body of a payload: the string a JSON string holds, else the JSON text."""
    value = msgspec.json.decode(payload)
    return value if isinstance(value, str) else payload.decode()


def message_attributes(metadata: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """A message's attributes from its metadata (the door's own keys left out)."""
    types: Any = {}
    if TYPES_KEY in metadata:
        try:
            types = json.loads(metadata[TYPES_KEY])
        except ValueError:
            types = {}
    if not isinstance(types, dict):
        types = {}  # metadata a REST client set under the door's key
    found: dict[str, dict[str, str]] = {}
    for name, value in metadata.items():
        if name.startswith(RESERVED_PREFIX):
            continue
        data_type = types.get(name, "String")
        if not isinstance(data_type, str) or data_type.split(".", 1)[0] not in _BASE_TYPES:
            data_type = "String"
        if data_type.startswith("Binary") and not _is_base64(value):
            data_type = "String"  # metadata set through the REST API, typed as no SQS value can be
        kind = "BinaryValue" if data_type.startswith("Binary") else "StringValue"
        found[name] = {"DataType": data_type, kind: value}
    return found


def _is_base64(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def chosen_attributes(
    found: Mapping[str, dict[str, str]], wanted: Iterable[str]
) -> dict[str, dict[str, str]]:
    """The attributes a receive asked for: names, ``All``, ``.*``, or ``prefix.*``."""
    wanted = list(wanted)
    if "All" in wanted or ".*" in wanted:
        return dict(found)
    prefixes = tuple(w[:-1] for w in wanted if w.endswith(".*"))
    exact = set(wanted)
    return {
        name: value
        for name, value in found.items()
        if name in exact or (prefixes and name.startswith(prefixes))
    }


def system_attribute_names(asked: Iterable[str]) -> set[str]:
    """The system attributes a receive asked for (its ``AttributeNames`` and
    ``MessageSystemAttributeNames``, ``All`` for every one)."""
    wanted = set(asked)
    if "All" in wanted:
        return set(_SYSTEM_NAMES)
    return wanted & _SYSTEM_NAMES


def delivered(
    leased: LeasedMessage,
    queue: Queue,
    receipt_handle: str,
    *,
    system: set[str],
    wanted: Iterable[str],
) -> dict[str, Any]:
    """A leased message as ReceiveMessage delivers it."""
    body = body_of(leased.payload)
    metadata = leased.metadata
    message: dict[str, Any] = {
        "MessageId": leased.id,
        "ReceiptHandle": receipt_handle,
        "MD5OfBody": checksums.md5_of_body(body),
        "Body": body,
    }
    values = {
        "SenderId": queue.namespace,
        "SentTimestamp": _millis(leased.enqueued_at),
        "ApproximateReceiveCount": str(leased.attempt),
        "ApproximateFirstReceiveTimestamp": _millis(leased.first_leased_at or leased.enqueued_at),
    }
    if attributes.is_fifo(queue) and leased.seq is not None:
        values["SequenceNumber"] = sequence_number(leased.seq)
    group = metadata.get(attributes.group_key(queue))
    if group is not None:
        values["MessageGroupId"] = group
    if DEDUPLICATION_KEY in metadata:
        values["MessageDeduplicationId"] = metadata[DEDUPLICATION_KEY]
    if TRACE_KEY in metadata:
        values["AWSTraceHeader"] = metadata[TRACE_KEY]
    chosen = {name: values[name] for name in sorted(system) if name in values}
    if chosen:
        message["Attributes"] = chosen
    attrs = chosen_attributes(message_attributes(metadata), wanted)
    if attrs:
        message["MessageAttributes"] = attrs
        message["MD5OfMessageAttributes"] = checksums.md5_of_message_attributes(attrs)
    return message


def xml_safe(message: dict[str, Any]) -> dict[str, Any]:
    """A delivered message as the query protocol can carry it: a body or attribute value that
    holds a character XML cannot (a REST client's payload or metadata may; SQS's never do) has
    it replaced with U+FFFD, and its checksum is of what is delivered."""
    safe = dict(message)
    body = message["Body"]
    if NOT_XML.search(body):
        safe["Body"] = NOT_XML.sub("\ufffd", body)
        safe["MD5OfBody"] = checksums.md5_of_body(safe["Body"])
    given = message.get("MessageAttributes")
    if given and any(NOT_XML.search(v.get("StringValue") or "") for v in given.values()):
        attrs = {
            name: {
                key: NOT_XML.sub("\ufffd", value) if key == "StringValue" else value
                for key, value in attribute.items()
            }
            for name, attribute in given.items()
        }
        safe["MessageAttributes"] = attrs
        safe["MD5OfMessageAttributes"] = checksums.md5_of_message_attributes(attrs)
    return safe


def sent(outcome: EnqueueOutcome, entry: Mapping[str, Any], queue: Queue) -> dict[str, Any]:
    """What SendMessage answers for a message it enqueued (or found already there)."""
    answer: dict[str, Any] = {
        "MessageId": outcome.id,
        "MD5OfMessageBody": checksums.md5_of_body(entry["MessageBody"]),
    }
    if attributes.is_fifo(queue) and outcome.seq is not None:
        answer["SequenceNumber"] = sequence_number(outcome.seq)
    given = entry.get("MessageAttributes")
    if given:
        answer["MD5OfMessageAttributes"] = checksums.md5_of_message_attributes(given)
    system = entry.get("MessageSystemAttributes")
    if system:
        answer["MD5OfMessageSystemAttributes"] = checksums.md5_of_message_system_attributes(system)
    return answer


def sequence_number(seq: int) -> str:
    """A FIFO message's ``SequenceNumber``: its place in enqueue order, as SQS writes one (a
    string of digits that grows with each message of the queue, 20 of them here)."""
    return str(seq).zfill(20)


def _millis(moment: Any) -> str:
    return str(int(moment.timestamp() * 1000))
