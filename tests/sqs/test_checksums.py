"""The MD5 digests of app/sqs/checksums.py against published vectors: digests AWS returned in its
own documentation, and those pinned by the AWS SDKs' and SQS emulators' tests. Each vector says
where it comes from. The AWS CLI examples shorten a digest to its first and last eight hex
digits; those are checked as given (64 bits of a 128-bit digest)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from app.sqs.checksums import (
    md5_of_body,
    md5_of_message_attributes,
    md5_of_message_system_attributes,
)


def string(value: str, data_type: str = "String") -> dict[str, Any]:
    return {"DataType": data_type, "StringValue": value}


def number(value: str) -> dict[str, Any]:
    return string(value, "Number")


def binary(value: bytes) -> dict[str, Any]:
    return {"DataType": "Binary", "BinaryValue": value}


def matches(digest: str, published: str) -> bool:
    """A full published digest, or one shortened by the AWS docs to ``first8...last8``."""
    if "..." in published:
        head, tail = published.split("...")
        return len(digest) == 32 and digest.startswith(head) and digest.endswith(tail)
    return digest == published


# -- MD5OfMessageBody ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "published"),
    [
        # SQS Developer Guide, "Amazon SQS message attributes" (the SendMessage and
        # SendMessageBatch query examples and their responses).
        ("This is a test message", "fafb00f5732ab283681e124bf8747ed1"),
        ("test message body 1", "0e024d309850c78cba5eabbeff7cae71"),
        ("test message body 2", "7fb8146a82f95e0af155278f406862c2"),
        # AWS CLI examples, aws/aws-cli awscli/examples/sqs/send-message.rst and
        # send-message-batch.rst (output of real calls, digests shortened).
        ("Information about the largest city in Any Region.", "51b0a325...39163aa0"),
        ("Fuel report for account 0001 on 2015-09-16 at 02:07:31 PM.", "203c4a38...7943237e"),
        ("Fuel report for account 0002 on 2015-09-16 at 02:09:30 PM.", "2cf0159a...c1980595"),
        # AWS SDK for Java 2.x, services/sqs/src/test/.../MessageMD5ChecksumInterceptorTest.java.
        ("Body", "ac101b32dda4448cf13a93fe283dddd8"),
        # AWS SDK for Go v2, service/sqs/cust_checksum_validation_test.go.
        ("test", "098f6bcd4621d373cade4e832627b4f6"),
        # moto, tests/test_sqs/test_sqs.py: a SendMessage of "derp" with a "timestamp" attribute.
        ("derp", "58fd9edd83341c29f1aebba81c31e257"),
    ],
)
def test_md5_of_body_matches_published_vectors(body: str, published: str) -> None:
    assert matches(md5_of_body(body), published)


def test_md5_of_body_digests_the_utf8_bytes() -> None:
    # RFC 1321's own test vector for "abc", and a non-ASCII body hashed as its UTF-8 bytes.
    assert md5_of_body("abc") == "900150983cd24fb0d6963f7d28e17f72"
    assert md5_of_body("é") == md5_of_body("\u00e9") != md5_of_body("e\u0301")
    assert md5_of_body("") == "d41d8cd98f00b204e9800998ecf8427e"


# -- MD5OfMessageAttributes ----------------------------------------------------------------

PUBLISHED_ATTRIBUTES: list[tuple[dict[str, dict[str, Any]], str]] = [
    # AWS CLI, aws/aws-cli awscli/examples/sqs/send-message-batch.rst: String and Number.
    (
        {
            "SellerName": string("Example Store"),
            "City": string("Any City"),
            "Region": string("WA"),
            "PostalCode": string("99065"),
            "PricePerGallon": number("1.99"),
        },
        "10809b55...baf283ef",
    ),
    (
        {
            "SellerName": string("Example Fuels"),
            "City": string("North Town"),
            "Region": string("WA"),
            "PostalCode": string("99123"),
            "PricePerGallon": number("1.87"),
        },
        "55623928...ae354a25",
    ),
    # AWS CLI, awscli/examples/sqs/receive-message.rst: the same message received with all its
    # attributes, then with PostalCode only.
    ({"PostalCode": string("ABC123"), "City": string("Any City")}, "9424c491...26bc3ae7"),
    ({"PostalCode": string("ABC123")}, "b8e89563...e088e74f"),
    # AWS CLI, awscli/examples/sqs/send-message.rst: String, Binary and Number. The example's
    # file says "BinaryValue": "Hello, World!"; SQS digested the base64 text of it
    # ("SGVsbG8sIFdvcmxkIQ==", the CLI's blob encoding), which is what the published digest
    # matches.
    (
        {
            "City": string("Any City"),
            "Greeting": binary(base64.b64encode(b"Hello, World!")),
            "Population": number("1250800"),
        },
        "00484c68...59e48f06",
    ),
    # AWS SDK for Java 2.x, MessageMD5ChecksumInterceptorTest.java: a string, a binary, and the
    # reserved list values (transport bytes 3 and 4), under the SDK's own names.
    (
        {
            "String": {"DataType": "String", "StringValue": "Value"},
            "Binary": {"DataType": "Binary", "BinaryValue": bytes([5])},
            "StringList": {"DataType": "String", "StringListValues": ["ListValue"]},
            "ByteList": {"DataType": "Binary", "BinaryListValues": [bytes([3])]},
        },
        "4b6959cf7735fdade89bc099b85b3234",
    ),
    # moto, tests/test_sqs/test_sqs.py: the "timestamp" Number attribute of its SendMessage and
    # ReceiveMessage tests (also pinned by LocalStack's unit tests).
    ({"timestamp": number("1493147359900")}, "235c5c510d26fb653d073faed50ae77c"),
    ({"timestamp": number("1493147359901")}, "994258b45346a2cc3f9cbb611aa7af30"),
    # YDB's SQS (ydb/core/ymq/actor/attributes_md5_ut.cpp, "AmazonSampleWithString/Binary"): the
    # attributes of the SQS Developer Guide's SendMessage example, and a binary one.
    (
        {
            "test_attribute_name_2": string("test_attribute_value_2"),
            "test_attribute_name_1": string("test_attribute_value_1"),
        },
        "d53f3b558fe951154770f25cb63dbba9",
    ),
    ({"test_attribute_name": binary(b"test_attribute_value")}, "23f6bd27ea87aab7dfeadcc9aebee495"),
]


@pytest.mark.parametrize(("attributes", "published"), PUBLISHED_ATTRIBUTES)
def test_md5_of_message_attributes_matches_published_vectors(
    attributes: dict[str, dict[str, Any]], published: str
) -> None:
    assert matches(md5_of_message_attributes(attributes), published)


def test_the_order_attributes_come_in_does_not_matter() -> None:
    attributes, _ = PUBLISHED_ATTRIBUTES[0]
    assert md5_of_message_attributes(dict(reversed(attributes.items()))) == (
        md5_of_message_attributes(attributes)
    )


def test_a_binary_value_may_be_the_json_protocols_base64_text() -> None:
    raw = {"Greeting": binary(b"\x00\xffbytes")}
    text = {"Greeting": binary(b"")}
    text["Greeting"]["BinaryValue"] = base64.b64encode(b"\x00\xffbytes").decode()
    assert md5_of_message_attributes(text) == md5_of_message_attributes(raw)
    as_bytearray = {"Greeting": binary(b"")}
    as_bytearray["Greeting"]["BinaryValue"] = bytearray(b"\x00\xffbytes")
    assert md5_of_message_attributes(as_bytearray) == md5_of_message_attributes(raw)


def test_the_data_type_is_digested_as_given() -> None:
    # A custom type ("Number.float", "String.custom") is part of the digest, as SQS hashes it.
    assert md5_of_message_attributes({"n": number("1")}) != md5_of_message_attributes(
        {"n": string("1", "Number.float")}
    )
    assert md5_of_message_attributes({"n": string("1")}) != md5_of_message_attributes(
        {"n": number("1")}
    )


def test_string_and_binary_transport_differ_for_the_same_bytes() -> None:
    same = {"DataType": "String"}
    as_string = {"a": {**same, "StringValue": "xyz"}}
    as_binary = {"a": {**same, "BinaryValue": b"xyz"}}
    assert md5_of_message_attributes(as_string) != md5_of_message_attributes(as_binary)


@pytest.mark.parametrize(
    "attribute",
    [
        {"DataType": "String"},
        {"DataType": "Binary", "BinaryValue": "not base64!"},
    ],
)
def test_an_attribute_without_a_usable_value_is_a_value_error(attribute: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        md5_of_message_attributes({"a": attribute})


@pytest.mark.parametrize(
    "attribute",
    [
        {"DataType": "String", "StringValue": b"bytes"},
        {"DataType": "Binary", "BinaryValue": 5},
        {"DataType": "String", "StringListValues": "not a list"},
    ],
)
def test_a_value_of_the_wrong_type_is_a_type_error(attribute: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        md5_of_message_attributes({"a": attribute})


# -- MD5OfMessageSystemAttributes ----------------------------------------------------------


def test_md5_of_message_system_attributes_matches_published_vectors() -> None:
    # LocalStack, tests/aws/services/sqs/test_sqs.py
    # (test_system_attributes_have_no_effect_on_attr_md5), also pinned by wcharczuk/sqslite's
    # md5_test.go: an X-Ray AWSTraceHeader.
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    assert (
        md5_of_message_system_attributes({"AWSTraceHeader": string(trace)})
        == "5ae4d5d7636402d80f4eb6d213245a88"
    )
