"""The MD5 digests SQS answers with, which the AWS SDKs check (docs/sqs.md).

``MD5OfMessageBody`` / ``MD5OfBody`` is the hex MD5 of the body's UTF-8 bytes.
``MD5OfMessageAttributes`` and ``MD5OfMessageSystemAttributes`` digest the attributes as the SQS
Developer Guide ("MD5 message-digest calculation") lays them out: sorted by name, each one as its
name, its data type, a transport byte and its value, every string and value prefixed with its
length as a 4-byte big-endian integer. The transport byte is 1 for a ``StringValue`` (the
``String`` and ``Number`` types), 2 for a ``BinaryValue``; 3 and 4 are the list values
(``StringListValues``, ``BinaryListValues``) that SQS reserves, encoded as the AWS SDK for Java
does. SQS leaves a digest out of its answer when there are no attributes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

_STRING, _BINARY, _STRING_LIST, _BINARY_LIST = 1, 2, 3, 4


def md5_of_body(body: str) -> str:
    """The hex MD5 of the body's UTF-8 bytes."""
    return hashlib.md5(body.encode(), usedforsecurity=False).hexdigest()


def md5_of_message_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> str:
    """The hex MD5 SQS gives for message attributes in the JSON protocol's shape.

    Each value is ``{"DataType": ..., "StringValue": str}`` or ``{"DataType": ...,
    "BinaryValue": bytes}``; a ``str`` ``BinaryValue`` is the base64 text of the JSON protocol and
    is decoded first. The transport byte follows the value given, as in the AWS SDKs.
    """
    digest = hashlib.md5(usedforsecurity=False)
    for name in sorted(attributes):
        attribute = attributes[name]
        transport, values = _transport(name, attribute)
        digest.update(_field(name.encode()))
        digest.update(_field(str(attribute["DataType"]).encode()))
        digest.update(bytes((transport,)))
        for value in values:
            digest.update(_field(value))
    return digest.hexdigest()


def md5_of_message_system_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> str:
    """The hex MD5 SQS gives for message system attributes (``AWSTraceHeader``): the same
    encoding as for message attributes."""
    return md5_of_message_attributes(attributes)


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _transport(name: str, attribute: Mapping[str, Any]) -> tuple[int, list[bytes]]:
    """The transport byte and the value bytes, from the first value present: string, binary,
    string list, binary list (the AWS SDK for Java's order)."""
    if attribute.get("StringValue") is not None:
        return _STRING, [_text(name, attribute["StringValue"])]
    if attribute.get("BinaryValue") is not None:
        return _BINARY, [_binary(name, attribute["BinaryValue"])]
    if attribute.get("StringListValues"):
        return _STRING_LIST, [_text(name, value) for value in _items(attribute["StringListValues"])]
    if attribute.get("BinaryListValues"):
        return _BINARY_LIST, [
            _binary(name, value) for value in _items(attribute["BinaryListValues"])
        ]
    raise ValueError(f"message attribute {name!r} has no value")


def _items(values: Any) -> Iterable[Any]:
    if isinstance(values, str | bytes):
        raise TypeError(f"a list of values, not {type(values).__name__}")
    return list(values)


def _text(name: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"message attribute {name!r}: a string value must be str")
    return value.encode()


def _binary(name: str, value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error:
            raise ValueError(f"message attribute {name!r}: BinaryValue is not base64") from None
    raise TypeError(f"message attribute {name!r}: a binary value must be bytes or base64 text")
