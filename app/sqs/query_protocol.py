"""The SQS query protocol (form fields in, XML out) translated to and from the request and result
dicts of the SQS JSON protocol, whose member names are those of botocore's SQS model.

One table, ``ACTIONS``, says for each action how the query names map to the JSON members; it
drives both directions. A binary value (``BinaryValue``, ``BinaryListValues``) stays the base64
text it is on the wire, as in the JSON protocol: ``read_request`` checks that it decodes and passes
the text on; ``render_result`` writes a ``str`` as it is and base64-encodes ``bytes``.
"""

from __future__ import annotations

import base64
import binascii
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"
"""The XML namespace of every answer (success or error)."""


class QueryProtocolError(Exception):
    """A request the query protocol cannot carry; ``code`` is the SQS error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


# --- the shapes -------------------------------------------------------------------------------


class Shape:
    """How a member is spelled in the query form and in the XML answer."""


@dataclass(frozen=True)
class Scalar(Shape):
    type: Literal["string", "integer", "boolean", "blob"]


@dataclass(frozen=True)
class ListOf(Shape):
    """A flattened list: ``Name.1``, ``Name.2``... in a form; ``<Name>`` repeated in XML."""

    member: Shape


@dataclass(frozen=True)
class MapOf(Shape):
    """A flattened map: ``Name.N.Name`` and ``Name.N.Value`` (or ``Key``/``Value``)."""

    value: Shape
    key_name: str = "Name"
    value_name: str = "Value"


@dataclass(frozen=True)
class Member:
    json: str
    query: str
    shape: Shape


@dataclass(frozen=True)
class Struct(Shape):
    members: tuple[Member, ...]


def struct(**members: Shape | tuple[str, Shape]) -> Struct:
    """A structure from JSON name=shape, or JSON name=(query name, shape) where they differ."""
    return Struct(
        tuple(
            Member(name, *spec) if isinstance(spec, tuple) else Member(name, name, spec)
            for name, spec in members.items()
        )
    )


class Action(NamedTuple):
    request: Struct
    result: Struct | None
    """None: the answer has no ``<{Action}Result>``, only ``<ResponseMetadata>``."""


STRING = Scalar("string")
INTEGER = Scalar("integer")
BOOLEAN = Scalar("boolean")
BLOB = Scalar("blob")

_ATTRIBUTE_VALUE = struct(
    StringValue=STRING,
    BinaryValue=BLOB,
    StringListValues=("StringListValue", ListOf(STRING)),
    BinaryListValues=("BinaryListValue", ListOf(BLOB)),
    DataType=STRING,
)
_QUEUE_ATTRIBUTES = ("Attribute", MapOf(STRING))
_TAGS = ("Tag", MapOf(STRING, "Key", "Value"))
_ATTRIBUTE_NAMES = ("AttributeName", ListOf(STRING))
_MESSAGE_ATTRIBUTES = ("MessageAttribute", MapOf(_ATTRIBUTE_VALUE))
_QUEUE_URLS = ("QueueUrl", ListOf(STRING))
_FAILED = (
    "BatchResultErrorEntry",
    ListOf(struct(Id=STRING, SenderFault=BOOLEAN, Code=STRING, Message=STRING)),
)
_DIGESTS: Mapping[str, Shape] = {
    "MD5OfMessageBody": STRING,
    "MD5OfMessageAttributes": STRING,
    "MD5OfMessageSystemAttributes": STRING,
}
_MESSAGE_TO_SEND: dict[str, Shape | tuple[str, Shape]] = {
    "MessageBody": STRING,
    "DelaySeconds": INTEGER,
    "MessageAttributes": _MESSAGE_ATTRIBUTES,
    "MessageSystemAttributes": ("MessageSystemAttribute", MapOf(_ATTRIBUTE_VALUE)),
    "MessageDeduplicationId": STRING,
    "MessageGroupId": STRING,
}


def _batch(
    action: str, successful: Mapping[str, Shape], **entry: Shape | tuple[str, Shape]
) -> Action:
    """A batch action: ``{action}RequestEntry.N.<member>`` in; ``<{action}ResultEntry>`` and
    ``<BatchResultErrorEntry>`` repeated out."""
    return Action(
        struct(
            QueueUrl=STRING, Entries=(f"{action}RequestEntry", ListOf(struct(Id=STRING, **entry)))
        ),
        struct(
            Successful=(f"{action}ResultEntry", ListOf(struct(Id=STRING, **successful))),
            Failed=_FAILED,
        ),
    )


ACTIONS: Mapping[str, Action] = {
    "CreateQueue": Action(
        struct(QueueName=STRING, Attributes=_QUEUE_ATTRIBUTES, tags=_TAGS),
        struct(QueueUrl=STRING),
    ),
    "GetQueueUrl": Action(
        struct(QueueName=STRING, QueueOwnerAWSAccountId=STRING), struct(QueueUrl=STRING)
    ),
    "ListQueues": Action(
        struct(QueueNamePrefix=STRING, NextToken=STRING, MaxResults=INTEGER),
        struct(QueueUrls=_QUEUE_URLS, NextToken=STRING),
    ),
    "DeleteQueue": Action(struct(QueueUrl=STRING), None),
    "GetQueueAttributes": Action(
        struct(QueueUrl=STRING, AttributeNames=_ATTRIBUTE_NAMES),
        struct(Attributes=_QUEUE_ATTRIBUTES),
    ),
    "SetQueueAttributes": Action(struct(QueueUrl=STRING, Attributes=_QUEUE_ATTRIBUTES), None),
    "PurgeQueue": Action(struct(QueueUrl=STRING), None),
    "SendMessage": Action(
        struct(QueueUrl=STRING, **_MESSAGE_TO_SEND),
        struct(**_DIGESTS, MessageId=STRING, SequenceNumber=STRING),
    ),
    "SendMessageBatch": _batch(
        "SendMessageBatch",
        {"MessageId": STRING, **_DIGESTS, "SequenceNumber": STRING},
        **_MESSAGE_TO_SEND,
    ),
    "ReceiveMessage": Action(
        struct(
            QueueUrl=STRING,
            AttributeNames=_ATTRIBUTE_NAMES,
            MessageSystemAttributeNames=("MessageSystemAttributeName", ListOf(STRING)),
            MessageAttributeNames=("MessageAttributeName", ListOf(STRING)),
            MaxNumberOfMessages=INTEGER,
            VisibilityTimeout=INTEGER,
            WaitTimeSeconds=INTEGER,
            ReceiveRequestAttemptId=STRING,
        ),
        struct(
            Messages=(
                "Message",
                ListOf(
                    struct(
                        MessageId=STRING,
                        ReceiptHandle=STRING,
                        MD5OfBody=STRING,
                        Body=STRING,
                        Attributes=_QUEUE_ATTRIBUTES,
                        MD5OfMessageAttributes=STRING,
                        MessageAttributes=_MESSAGE_ATTRIBUTES,
                    )
                ),
            )
        ),
    ),
    "DeleteMessage": Action(struct(QueueUrl=STRING, ReceiptHandle=STRING), None),
    "DeleteMessageBatch": _batch("DeleteMessageBatch", {}, ReceiptHandle=STRING),
    "ChangeMessageVisibility": Action(
        struct(QueueUrl=STRING, ReceiptHandle=STRING, VisibilityTimeout=INTEGER), None
    ),
    "ChangeMessageVisibilityBatch": _batch(
        "ChangeMessageVisibilityBatch", {}, ReceiptHandle=STRING, VisibilityTimeout=INTEGER
    ),
    "ListDeadLetterSourceQueues": Action(
        struct(QueueUrl=STRING, NextToken=STRING, MaxResults=INTEGER),
        struct(queueUrls=_QUEUE_URLS, NextToken=STRING),
    ),
    "TagQueue": Action(struct(QueueUrl=STRING, Tags=_TAGS), None),
    "UntagQueue": Action(struct(QueueUrl=STRING, TagKeys=("TagKey", ListOf(STRING))), None),
    "ListQueueTags": Action(struct(QueueUrl=STRING), struct(Tags=_TAGS)),
}
"""Every action: its request and result, JSON member names to query names and XML elements."""

# --- reading a request ------------------------------------------------------------------------

_PROTOCOL_FIELDS = frozenset(
    {
        "Action",
        "Version",
        "AWSAccessKeyId",
        "Expires",
        "Timestamp",
        "Signature",
        "SignatureMethod",
        "SignatureVersion",
        "SecurityToken",
    }
)
"""The protocol's own fields (besides ``X-Amz-*``): not members of any action."""

_INTEGER = re.compile(r"-?[0-9]{1,10}")
_INDEX = re.compile(r"[1-9][0-9]{0,8}")


@dataclass
class _Node:
    """The fields under one dotted prefix: its own value and the next names after it."""

    value: str | None = None
    children: dict[str, _Node] = field(default_factory=dict)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _first_field(node: _Node, path: str) -> str:
    """The name of one form field at or under ``node``, for an error message."""
    while node.value is None:
        name, node = next(iter(node.children.items()))
        path = _join(path, name)
    return path


def _unknown(node: _Node, path: str) -> QueryProtocolError:
    return QueryProtocolError(
        "InvalidParameterValue", f"Unknown parameter: {_first_field(node, path)}."
    )


def _unknown_child(node: _Node, path: str) -> QueryProtocolError:
    name, child = next(iter(node.children.items()))
    return _unknown(child, _join(path, name))


def _malformed(message: str) -> QueryProtocolError:
    return QueryProtocolError("MalformedQueryString", message)


def _tree(params: Sequence[tuple[str, str]]) -> _Node:
    root = _Node()
    for key, value in params:
        names = key.split(".")
        if not all(names):
            raise _malformed(f"Malformed parameter name: {key}.")
        node = root
        for name in names:
            node = node.children.setdefault(name, _Node())
        if node.value is not None:
            raise _malformed(f"The parameter {key} appears more than once.")
        node.value = value
    return root


def _indexed(node: _Node, path: str) -> list[tuple[str, _Node]]:
    """The ``.1``, ``.2``... children of a list or map, in order of their numbers."""
    for name in node.children:
        if not _INDEX.fullmatch(name):
            raise _malformed(f"{_join(path, name)}: a list index must be a number from 1.")
    return [(_join(path, name), node.children[name]) for name in sorted(node.children, key=int)]


def _scalar(shape: Scalar, value: str, path: str) -> Any:
    if shape.type == "integer":  # the model's integers have 32 bits
        if not _INTEGER.fullmatch(value) or not -(2**31) <= int(value) < 2**31:
            raise QueryProtocolError(
                "InvalidParameterValue", f"Value {value!r} for parameter {path} is not an integer."
            )
        return int(value)
    if shape.type == "boolean":
        if value not in ("true", "false"):
            raise QueryProtocolError(
                "InvalidParameterValue", f"Value {value!r} for parameter {path} is not a boolean."
            )
        return value == "true"
    if shape.type == "blob":
        try:
            base64.b64decode(value, validate=True)
        except binascii.Error:
            raise QueryProtocolError(
                "InvalidParameterValue", f"Value for parameter {path} is not valid base64."
            ) from None
    return value


def _read(shape: Shape, node: _Node, path: str) -> Any:
    if isinstance(shape, Scalar):
        if node.children or node.value is None:
            raise _unknown_child(node, path)
        return _scalar(shape, node.value, path)
    if isinstance(shape, ListOf):
        if node.value is not None:  # AttributeName=All is a list of one, AttributeName= empty
            if node.children or not isinstance(shape.member, Scalar):
                raise _malformed(f"{path} needs a list index, as in {path}.1.")
            return [_scalar(shape.member, node.value, path)] if node.value else []
        return [_read(shape.member, child, name) for name, child in _indexed(node, path)]
    if isinstance(shape, MapOf):
        if node.value is not None:
            raise _malformed(f"{path} needs a list index, as in {path}.1.{shape.key_name}.")
        return _read_map(shape, node, path)
    assert isinstance(shape, Struct)
    if node.value is not None:
        raise _unknown(node, path)
    return _read_struct(shape, node, path)


def _read_map(shape: MapOf, node: _Node, path: str) -> dict[str, Any]:
    # AWS's samples also write a one-entry map without its index: Tag.Key=...&Tag.Value=...
    unindexed = {shape.key_name, shape.value_name} & node.children.keys()
    entries: dict[str, Any] = {}
    for entry_path, entry in [(path, node)] if unindexed else _indexed(node, path):
        key_path, value_path = (_join(entry_path, n) for n in (shape.key_name, shape.value_name))
        key, value = entry.children.get(shape.key_name), entry.children.get(shape.value_name)
        if entry.value is not None:
            raise _unknown(entry, entry_path)
        for name, child in entry.children.items():
            if name not in (shape.key_name, shape.value_name):
                raise _unknown(child, _join(entry_path, name))
        if key is None or value is None:
            missing = key_path if key is None else value_path
            raise QueryProtocolError("MissingParameter", f"The parameter {missing} is missing.")
        name = _read(STRING, key, key_path)
        if name in entries:
            raise QueryProtocolError(
                "InvalidParameterValue", f"{key_path}: the name {name!r} appears more than once."
            )
        entries[name] = _read(shape.value, value, value_path)
    return entries


def _read_struct(shape: Struct, node: _Node, path: str) -> dict[str, Any]:
    by_query = {member.query: member for member in shape.members}
    # botocore writes an empty list as its JSON name with an empty value (AttributeNames=).
    lists = {member.json: member for member in shape.members if isinstance(member.shape, ListOf)}
    read: dict[str, Any] = {}
    for name, child in node.children.items():
        where = _join(path, name)
        if name in by_query:
            member, value = by_query[name], _read(by_query[name].shape, child, where)
        elif name in lists and child.value == "" and not child.children:
            member, value = lists[name], []
        else:
            raise _unknown(child, where)
        if member.json in read:
            raise _malformed(f"{where}: {member.json} is given twice.")
        read[member.json] = value
    return {member.json: read[member.json] for member in shape.members if member.json in read}


def read_request(params: Sequence[tuple[str, str]]) -> tuple[str, dict[str, Any]]:
    """The action and its request dict (JSON member names and types) from the form fields of a
    query request, in order, as decoded from a POST body or a GET query string (blank values
    kept). The protocol's own fields are dropped; any other field no member of the action
    accounts for is refused. A queue URL given by the request's path is the caller's to add as
    a ``QueueUrl`` field."""
    actions = [value for key, value in params if key == "Action"]
    if not actions:
        raise QueryProtocolError("MissingAction", "The request has no Action parameter.")
    if len(actions) > 1:
        raise _malformed("The parameter Action appears more than once.")
    action = ACTIONS.get(actions[0])
    if action is None:
        raise QueryProtocolError("InvalidAction", f"The action {actions[0]} is not valid.")
    members = [
        (key, value)
        for key, value in params
        if key not in _PROTOCOL_FIELDS and not key.lower().startswith("x-amz-")
    ]
    return actions[0], _read_struct(action.request, _tree(members), "")


# --- writing an answer ------------------------------------------------------------------------

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""A character that XML 1.0 cannot carry, even as a character reference."""


def _text(value: Any, path: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    text = str(value)
    if _NOT_XML.search(text):
        raise ValueError(f"{path} holds a character that XML cannot carry")
    return text


def _write(parent: ET.Element, name: str, shape: Shape, value: Any, path: str) -> None:
    if isinstance(shape, Scalar):
        ET.SubElement(parent, name).text = _text(value, path)
    elif isinstance(shape, ListOf):
        for item in value:
            _write(parent, name, shape.member, item, path)
    elif isinstance(shape, MapOf):
        for key, item in value.items():
            entry = ET.SubElement(parent, name)
            ET.SubElement(entry, shape.key_name).text = _text(key, path)
            _write(entry, shape.value_name, shape.value, item, f"{path}.{key}")
    else:
        assert isinstance(shape, Struct)
        _write_struct(ET.SubElement(parent, name), shape, value, path)


def _write_struct(element: ET.Element, shape: Struct, value: Mapping[str, Any], path: str) -> None:
    unknown = set(value) - {member.json for member in shape.members}
    if unknown:
        raise ValueError(f"{path} has no member {sorted(unknown)[0]}")
    for member in shape.members:
        item = value.get(member.json)
        if item is not None:
            _write(element, member.query, member.shape, item, _join(path, member.json))


def _serialize(root: ET.Element) -> bytes:
    # ElementTree leaves a carriage return in text as it is, which a parser reads as a line feed;
    # written as a character reference it survives (nothing else in the output holds one).
    text = ET.tostring(root, encoding="unicode").replace("\r", "&#13;")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{text}'.encode()


def _answer(name: str) -> ET.Element:
    return ET.Element(name, xmlns=NAMESPACE)


def render_result(action: str, result: Mapping[str, Any], request_id: str) -> bytes:
    """The XML answer to a successful ``action``, from its result dict (JSON member names).

    Raises ValueError for an unknown action or member, or a text XML cannot carry."""
    spec = ACTIONS.get(action)
    if spec is None:
        raise ValueError(f"unknown action {action}")
    root = _answer(f"{action}Response")
    if spec.result is not None:
        _write_struct(ET.SubElement(root, f"{action}Result"), spec.result, result, action)
    elif result:
        raise ValueError(f"{action} has no result members, got {sorted(result)}")
    ET.SubElement(ET.SubElement(root, "ResponseMetadata"), "RequestId").text = request_id
    return _serialize(root)


def render_error(code: str, message: str, *, sender_fault: bool, request_id: str) -> bytes:
    """The XML answer to a failed request (``<ErrorResponse>``)."""
    root = _answer("ErrorResponse")
    error = ET.SubElement(root, "Error")
    for name, text in (("Type", "Sender" if sender_fault else "Receiver"), ("Code", code)):
        ET.SubElement(error, name).text = text
    ET.SubElement(error, "Message").text = _NOT_XML.sub("\ufffd", message)
    ET.SubElement(error, "Detail")
    ET.SubElement(root, "RequestId").text = request_id
    return _serialize(root)
