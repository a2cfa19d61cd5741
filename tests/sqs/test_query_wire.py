"""The SQS query protocol over HTTP, as older SDKs speak it: form-encoded POSTs signed with
SigV4 (to ``/sqs/``, or to a queue's URL without a ``QueueUrl`` field, as the Java SDK v1 did),
and a GET with the fields in its query string; XML answers in SQS's namespace, errors as
``<ErrorResponse>``. A message crosses from one protocol to the other unchanged."""

from __future__ import annotations

import base64
import hashlib
import struct
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock
from urllib.parse import quote, urlencode

import httpx
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.sqs.conftest import REGION, AccessKey, counts, issue_key, sqs_client

NS = "http://queue.amazonaws.com/doc/2012-11-05/"
FORM_TYPE = "application/x-www-form-urlencoded; charset=utf-8"
Fields = Sequence[tuple[str, str]]


def encode(fields: Fields) -> str:
    """Form fields percent-encoded as SigV4 canonicalises them (only ``A-Za-z0-9-_.~`` bare)."""
    return urlencode(list(fields), quote_via=quote)


def call(
    server: str,
    key: AccessKey,
    fields: Fields,
    *,
    path: str = "/sqs/",
    method: str = "POST",
    secret: str | None = None,
    at: datetime | None = None,
    body: str | None = None,
) -> httpx.Response:
    """A query-protocol request signed by botocore's SigV4 signer: the fields as a form body
    (POST) or as the query string (GET). ``body`` replaces the body after signing."""
    form = encode([*fields, ("Version", "2012-11-05")])
    if method == "GET":
        request = AWSRequest(method="GET", url=f"{server}{path}?{form}")
    else:
        request = AWSRequest(
            method="POST", url=f"{server}{path}", data=form, headers={"Content-Type": FORM_TYPE}
        )
    credentials = Credentials(key.access_key_id, secret or key.secret_access_key)
    with clock(at):
        SigV4Auth(credentials, "sqs", REGION).add_auth(request)
    prepared = request.prepare()
    headers = {k: v for k, v in prepared.headers.items() if k.lower() != "content-length"}
    content = prepared.body if body is None else body.encode()
    return httpx.request(
        prepared.method, prepared.url, content=content, headers=headers, timeout=30
    )


@contextmanager
def clock(at: datetime | None) -> Iterator[None]:
    """botocore's signer reads the time from ``botocore.auth.get_current_datetime`` (naive UTC)."""
    naive = (at or datetime.now(UTC)).astimezone(UTC).replace(tzinfo=None)
    with mock.patch("botocore.auth.get_current_datetime", return_value=naive):
        yield


def tag(path: str) -> str:
    """An ElementTree path with every element in SQS's namespace."""
    return "/".join(f"{{{NS}}}{name}" for name in path.split("/"))


def answer_of(response: httpx.Response, action: str) -> ET.Element:
    """The ``<{action}Result>`` of a successful answer (checked to be well formed)."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/xml")
    root = ET.fromstring(response.content)
    assert root.tag == tag(f"{action}Response")
    request_id = root.findtext(tag("ResponseMetadata/RequestId"))
    assert request_id
    assert response.headers["x-amzn-RequestId"] == request_id
    result = root.find(tag(f"{action}Result"))
    return result if result is not None else root


def error_of(response: httpx.Response) -> tuple[int, str, str]:
    """Status, ``Type`` and ``Code`` of an ``<ErrorResponse>``."""
    assert response.headers["content-type"].startswith("text/xml"), response.text
    root = ET.fromstring(response.content)
    assert root.tag == tag("ErrorResponse")
    assert root.findtext(tag("RequestId"))
    assert root.findtext(tag("Error/Message"))
    return (
        response.status_code,
        root.findtext(tag("Error/Type")) or "",
        root.findtext(tag("Error/Code")) or "",
    )


def pairs(element: ET.Element, name: str) -> dict[str, str]:
    """A flattened ``<name><Name/><Value/></name>`` map of string values."""
    return {
        entry.findtext(tag("Name")) or "": entry.findtext(tag("Value")) or ""
        for entry in element.findall(tag(name))
    }


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def md5_of_attributes(attributes: Mapping[str, tuple[str, str | bytes]]) -> str:
    """MD5OfMessageAttributes as the SQS Developer Guide defines it: per name in order, the
    length-prefixed name, data type, transport byte (1 string, 2 binary) and value."""
    digest = hashlib.md5()
    for name in sorted(attributes):
        data_type, value = attributes[name]
        raw = value if isinstance(value, bytes) else value.encode()
        for part in (name.encode(), data_type.encode()):
            digest.update(struct.pack(">I", len(part)) + part)
        digest.update(b"\x02" if isinstance(value, bytes) else b"\x01")
        digest.update(struct.pack(">I", len(raw)) + raw)
    return digest.hexdigest()


ATTRIBUTE_FIELDS = [
    ("MessageAttribute.1.Name", "colour"),
    ("MessageAttribute.1.Value.DataType", "String"),
    ("MessageAttribute.1.Value.StringValue", "red & blue <ok>"),
    ("MessageAttribute.2.Name", "count"),
    ("MessageAttribute.2.Value.DataType", "Number"),
    ("MessageAttribute.2.Value.StringValue", "42"),
    ("MessageAttribute.3.Name", "blob"),
    ("MessageAttribute.3.Value.DataType", "Binary"),
    ("MessageAttribute.3.Value.BinaryValue", base64.b64encode(b"\x00\xffbin").decode()),
]
ATTRIBUTES: dict[str, tuple[str, str | bytes]] = {
    "colour": ("String", "red & blue <ok>"),
    "count": ("Number", "42"),
    "blob": ("Binary", b"\x00\xffbin"),
}
BODY = 'Hello, "world" & <friends> — ünïcode'


def create(server: str, key: AccessKey, name: str, *attributes: tuple[str, str]) -> str:
    fields = [("Action", "CreateQueue"), ("QueueName", name)]
    for index, (attribute, value) in enumerate(attributes, start=1):
        fields += [(f"Attribute.{index}.Name", attribute), (f"Attribute.{index}.Value", value)]
    url = answer_of(call(server, key, fields), "CreateQueue").findtext(tag("QueueUrl"))
    assert url
    return url


# --- each action over the wire ----------------------------------------------------------------


def test_create_queue_and_get_its_attributes(
    sqs_server: str, access_key: AccessKey, sqs: Any
) -> None:
    """CreateQueue with ``Attribute.N`` fields makes the queue so configured; GetQueueAttributes
    with ``AttributeName.N`` answers those attributes as ``<Attribute>`` entries."""
    url = create(
        sqs_server,
        access_key,
        "wire",
        ("VisibilityTimeout", "40"),
        ("MaximumMessageSize", "2048"),
    )
    assert url == f"{sqs_server}/sqs/{access_key.namespace}/wire"
    fields = [
        ("Action", "GetQueueAttributes"),
        ("QueueUrl", url),
        ("AttributeName.1", "VisibilityTimeout"),
        ("AttributeName.2", "MaximumMessageSize"),
        ("AttributeName.3", "QueueArn"),
    ]
    result = answer_of(call(sqs_server, access_key, fields), "GetQueueAttributes")
    assert pairs(result, "Attribute") == {
        "VisibilityTimeout": "40",
        "MaximumMessageSize": "2048",
        "QueueArn": f"arn:aws:sqs:{REGION}:{access_key.namespace}:wire",
    }
    seen = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
    assert seen["Attributes"] == {"VisibilityTimeout": "40"}


def test_send_receive_delete_with_message_attributes(
    sqs_server: str, access_key: AccessKey, sqs: Any
) -> None:
    """SendMessage with ``MessageAttribute.N`` fields answers the body's and attributes' MD5s;
    ReceiveMessage with ``AttributeName.1=All`` and ``MessageAttributeName.1=All`` gives back the
    body, its system attributes and every message attribute; DeleteMessage deletes it."""
    url = create(sqs_server, access_key, "wire")
    sent = answer_of(
        call(
            sqs_server,
            access_key,
            [
                ("Action", "SendMessage"),
                ("QueueUrl", url),
                ("MessageBody", BODY),
                *ATTRIBUTE_FIELDS,
            ],
        ),
        "SendMessage",
    )
    message_id = sent.findtext(tag("MessageId"))
    assert message_id
    assert sent.findtext(tag("MD5OfMessageBody")) == md5(BODY)
    assert sent.findtext(tag("MD5OfMessageAttributes")) == md5_of_attributes(ATTRIBUTES)

    fields = [
        ("Action", "ReceiveMessage"),
        ("QueueUrl", url),
        ("AttributeName.1", "All"),
        ("MessageAttributeName.1", "All"),
        ("WaitTimeSeconds", "1"),
        ("MaxNumberOfMessages", "10"),
    ]
    (message,) = answer_of(call(sqs_server, access_key, fields), "ReceiveMessage").findall(
        tag("Message")
    )
    assert message.findtext(tag("MessageId")) == message_id
    assert message.findtext(tag("Body")) == BODY
    assert message.findtext(tag("MD5OfBody")) == md5(BODY)
    assert message.findtext(tag("MD5OfMessageAttributes")) == md5_of_attributes(ATTRIBUTES)
    system = pairs(message, "Attribute")
    assert system["ApproximateReceiveCount"] == "1"
    assert abs(int(system["SentTimestamp"]) / 1000 - datetime.now(UTC).timestamp()) < 60
    assert {"SenderId", "ApproximateFirstReceiveTimestamp"} <= system.keys()
    received = {
        entry.findtext(tag("Name")): (
            entry.findtext(tag("Value/DataType")),
            entry.findtext(tag("Value/StringValue")),
            entry.findtext(tag("Value/BinaryValue")),
        )
        for entry in message.findall(tag("MessageAttribute"))
    }
    assert received == {
        "colour": ("String", "red & blue <ok>", None),
        "count": ("Number", "42", None),
        "blob": ("Binary", None, base64.b64encode(b"\x00\xffbin").decode()),
    }
    handle = message.findtext(tag("ReceiptHandle"))
    assert handle

    fields = [("Action", "DeleteMessage"), ("QueueUrl", url), ("ReceiptHandle", handle)]
    deleted = answer_of(call(sqs_server, access_key, fields), "DeleteMessage")
    assert deleted.tag == tag("DeleteMessageResponse")  # no result element, only metadata
    assert counts(sqs, url)[:2] == (0, 0)  # none visible, none in flight


def test_send_message_batch(sqs_server: str, access_key: AccessKey, sqs: Any) -> None:
    """SendMessageBatch with ``SendMessageBatchRequestEntry.N`` fields: a result entry per good
    entry with its MD5, a ``BatchResultErrorEntry`` for the bad one, only the good ones sent."""
    url = create(sqs_server, access_key, "wire")
    fields = [
        ("Action", "SendMessageBatch"),
        ("QueueUrl", url),
        ("SendMessageBatchRequestEntry.1.Id", "first"),
        ("SendMessageBatchRequestEntry.1.MessageBody", "one"),
        ("SendMessageBatchRequestEntry.2.Id", "second"),
        ("SendMessageBatchRequestEntry.2.MessageBody", "two"),
        ("SendMessageBatchRequestEntry.2.MessageAttribute.1.Name", "count"),
        ("SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.DataType", "Number"),
        ("SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.StringValue", "2"),
        ("SendMessageBatchRequestEntry.3.Id", "late"),
        ("SendMessageBatchRequestEntry.3.MessageBody", "three"),
        ("SendMessageBatchRequestEntry.3.DelaySeconds", "901"),
    ]
    result = answer_of(call(sqs_server, access_key, fields), "SendMessageBatch")
    successful = {
        entry.findtext(tag("Id")): entry
        for entry in result.findall(tag("SendMessageBatchResultEntry"))
    }
    assert successful.keys() == {"first", "second"}
    assert successful["first"].findtext(tag("MD5OfMessageBody")) == md5("one")
    assert successful["second"].findtext(tag("MD5OfMessageBody")) == md5("two")
    assert successful["second"].findtext(tag("MD5OfMessageAttributes")) == md5_of_attributes(
        {"count": ("Number", "2")}
    )
    (failed,) = result.findall(tag("BatchResultErrorEntry"))
    assert failed.findtext(tag("Id")) == "late"
    assert failed.findtext(tag("SenderFault")) == "true"
    assert failed.findtext(tag("Code")) == "InvalidParameterValue"

    bodies = {}
    for _ in range(10):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for message in got.get("Messages", []):
            bodies[message["MessageId"]] = message["Body"]
        if len(bodies) == 2:
            break
    assert bodies == {
        successful["first"].findtext(tag("MessageId")): "one",
        successful["second"].findtext(tag("MessageId")): "two",
    }


def test_list_queues(sqs_server: str, access_key: AccessKey) -> None:
    """ListQueues answers a ``<QueueUrl>`` per queue, filtered by ``QueueNamePrefix``."""
    urls = {name: create(sqs_server, access_key, name) for name in ("apple", "apricot", "banana")}
    listed = answer_of(call(sqs_server, access_key, [("Action", "ListQueues")]), "ListQueues")
    assert [e.text for e in listed.findall(tag("QueueUrl"))] == sorted(urls.values())
    fields = [("Action", "ListQueues"), ("QueueNamePrefix", "ap")]
    listed = answer_of(call(sqs_server, access_key, fields), "ListQueues")
    assert [e.text for e in listed.findall(tag("QueueUrl"))] == [urls["apple"], urls["apricot"]]


def test_a_request_sent_to_the_queue_url_acts_on_that_queue(
    sqs_server: str, access_key: AccessKey, sqs: Any
) -> None:
    """A POST to the queue's URL path without a ``QueueUrl`` field (the Java SDK v1's way) acts
    on the queue of the path."""
    url = create(sqs_server, access_key, "by-path")
    create(sqs_server, access_key, "other")
    path = f"/sqs/{access_key.namespace}/by-path"
    fields = [("Action", "SendMessage"), ("MessageBody", "via the path")]
    sent = answer_of(call(sqs_server, access_key, fields, path=path), "SendMessage")
    fields = [("Action", "GetQueueAttributes"), ("AttributeName.1", "QueueArn")]
    result = answer_of(call(sqs_server, access_key, fields, path=path), "GetQueueAttributes")
    assert pairs(result, "Attribute")["QueueArn"].endswith(f":{access_key.namespace}:by-path")
    (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert message["MessageId"] == sent.findtext(tag("MessageId"))
    assert message["Body"] == "via the path"


def test_a_get_with_the_fields_in_its_query_string(sqs_server: str, access_key: AccessKey) -> None:
    """A signed GET carries the action in its query string, and is answered like a POST."""
    url = create(sqs_server, access_key, "got")
    fields = [("Action", "GetQueueUrl"), ("QueueName", "got")]
    result = answer_of(call(sqs_server, access_key, fields, method="GET"), "GetQueueUrl")
    assert result.findtext(tag("QueueUrl")) == url


def test_a_presigned_get_is_good_until_it_expires(sqs_server: str, access_key: AccessKey) -> None:
    """A GET presigned with ``X-Amz-*`` query parameters is answered; one whose
    ``X-Amz-Expires`` has run out is 400 RequestExpired."""
    url = create(sqs_server, access_key, "presigned")
    credentials = Credentials(access_key.access_key_id, access_key.secret_access_key)

    def presign(at: datetime) -> str:
        query = encode([("Action", "GetQueueUrl"), ("QueueName", "presigned")])
        request = AWSRequest(method="GET", url=f"{sqs_server}/sqs/?{query}")
        with clock(at):
            SigV4QueryAuth(credentials, "sqs", REGION, expires=60).add_auth(request)
        return request.prepare().url

    fresh = httpx.get(presign(datetime.now(UTC)), timeout=30)
    assert answer_of(fresh, "GetQueueUrl").findtext(tag("QueueUrl")) == url
    stale = httpx.get(presign(datetime.now(UTC) - timedelta(minutes=2)), timeout=30)
    assert error_of(stale) == (400, "Sender", "RequestExpired")


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_an_unknown_queue_is_an_error_response(
    sqs_server: str, access_key: AccessKey, method: str
) -> None:
    """A queue that does not exist: 400 ``<ErrorResponse>`` with the query code
    ``AWS.SimpleQueueService.NonExistentQueue``, the sender at fault."""
    fields = [("Action", "GetQueueUrl"), ("QueueName", "nowhere")]
    assert error_of(call(sqs_server, access_key, fields, method=method)) == (
        400,
        "Sender",
        "AWS.SimpleQueueService.NonExistentQueue",
    )
    path = f"/sqs/{access_key.namespace}/nowhere"
    fields = [("Action", "SendMessage"), ("MessageBody", "lost")]
    assert error_of(call(sqs_server, access_key, fields, path=path, method=method)) == (
        400,
        "Sender",
        "AWS.SimpleQueueService.NonExistentQueue",
    )


def test_another_namespace_s_queue_url_path_does_not_exist(
    sqs_server: str, admin_http: httpx.Client, access_key: AccessKey
) -> None:
    """A request sent to the URL path of another namespace's queue: NonExistentQueue, and the
    queue is left alone."""
    other_namespace = f"{access_key.namespace}-other"
    assert admin_http.post("/v1/namespaces", json={"name": other_namespace}).status_code == 201
    other = sqs_client(sqs_server, issue_key(admin_http, other_namespace))
    theirs = other.create_queue(QueueName="theirs")["QueueUrl"]
    path = f"/sqs/{other_namespace}/theirs"
    fields = [("Action", "SendMessage"), ("MessageBody", "intruder")]
    assert error_of(call(sqs_server, access_key, fields, path=path)) == (
        400,
        "Sender",
        "AWS.SimpleQueueService.NonExistentQueue",
    )
    assert "Messages" not in other.receive_message(QueueUrl=theirs, WaitTimeSeconds=0)


def test_signature_failures_answer_in_xml(sqs_server: str, access_key: AccessKey) -> None:
    """Refused signatures come as ``<ErrorResponse>`` in the query protocol too: a wrong secret
    or a body changed after signing (403 SignatureDoesNotMatch), a request 20 minutes old
    (400 RequestExpired), no signature (403 MissingAuthenticationToken)."""
    fields = [("Action", "CreateQueue"), ("QueueName", "never")]
    wrong = call(sqs_server, access_key, fields, secret=access_key.secret_access_key + "x")
    assert error_of(wrong) == (403, "Sender", "SignatureDoesNotMatch")
    changed = call(
        sqs_server, access_key, fields, body=encode([*fields[:1], ("QueueName", "forged")])
    )
    assert error_of(changed) == (403, "Sender", "SignatureDoesNotMatch")
    old = call(sqs_server, access_key, fields, at=datetime.now(UTC) - timedelta(minutes=20))
    assert error_of(old) == (400, "Sender", "RequestExpired")
    unsigned = httpx.post(
        f"{sqs_server}/sqs/",
        content=encode(fields),
        headers={"Content-Type": FORM_TYPE},
        timeout=30,
    )
    assert error_of(unsigned) == (403, "Sender", "MissingAuthenticationToken")
    listed = answer_of(call(sqs_server, access_key, [("Action", "ListQueues")]), "ListQueues")
    assert listed.findall(tag("QueueUrl")) == []


# --- one message, two protocols ---------------------------------------------------------------


def test_a_message_sent_in_the_query_protocol_is_received_by_boto3(
    sqs_server: str, access_key: AccessKey, sqs: Any
) -> None:
    """boto3 (JSON protocol) receives a query-protocol message with the same body, attributes
    and MD5s the send answered."""
    url = create(sqs_server, access_key, "crossing")
    fields = [("Action", "SendMessage"), ("QueueUrl", url), ("MessageBody", BODY)]
    sent = answer_of(call(sqs_server, access_key, fields + ATTRIBUTE_FIELDS), "SendMessage")
    (message,) = sqs.receive_message(
        QueueUrl=url, MessageAttributeNames=["All"], WaitTimeSeconds=1
    )["Messages"]
    assert message["MessageId"] == sent.findtext(tag("MessageId"))
    assert message["Body"] == BODY
    assert message["MD5OfBody"] == sent.findtext(tag("MD5OfMessageBody"))
    assert message["MD5OfMessageAttributes"] == sent.findtext(tag("MD5OfMessageAttributes"))
    assert message["MessageAttributes"] == {
        "colour": {"DataType": "String", "StringValue": "red & blue <ok>"},
        "count": {"DataType": "Number", "StringValue": "42"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xffbin"},
    }


def test_a_message_sent_by_boto3_is_received_in_the_query_protocol(
    sqs_server: str, access_key: AccessKey, sqs: Any
) -> None:
    """A query-protocol ReceiveMessage gets a boto3 (JSON protocol) message with the same body,
    attributes and MD5s boto3's send was answered."""
    url = sqs.create_queue(QueueName="crossing")["QueueUrl"]
    sent = sqs.send_message(
        QueueUrl=url,
        MessageBody=BODY,
        MessageAttributes={
            "colour": {"DataType": "String", "StringValue": "red & blue <ok>"},
            "count": {"DataType": "Number", "StringValue": "42"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xffbin"},
        },
    )
    assert sent["MD5OfMessageBody"] == md5(BODY)
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(ATTRIBUTES)
    fields = [
        ("Action", "ReceiveMessage"),
        ("QueueUrl", url),
        ("MessageAttributeName.1", "All"),
        ("WaitTimeSeconds", "1"),
    ]
    (message,) = answer_of(call(sqs_server, access_key, fields), "ReceiveMessage").findall(
        tag("Message")
    )
    assert message.findtext(tag("MessageId")) == sent["MessageId"]
    assert message.findtext(tag("Body")) == BODY
    assert message.findtext(tag("MD5OfBody")) == sent["MD5OfMessageBody"]
    assert message.findtext(tag("MD5OfMessageAttributes")) == sent["MD5OfMessageAttributes"]
    assert {e.findtext(tag("Name")) for e in message.findall(tag("MessageAttribute"))} == {
        "colour",
        "count",
        "blob",
    }


def test_a_rest_message_xml_cannot_carry_comes_with_replacement_characters(
    sqs_server: str, access_key: AccessKey, sqs: Any, admin_http: httpx.Client
) -> None:
    """A payload or metadata a REST client set may hold characters XML 1.0 cannot carry (SQS's
    own messages never do): the query protocol delivers them as U+FFFD, with checksums of what
    it delivers, and the JSON protocol delivers them exactly."""
    url = create(sqs_server, access_key, "control-characters")
    base = f"/v1/namespaces/{access_key.namespace}/queues/control-characters/messages"
    message = {"id": "m", "payload": "a\u0001b", "metadata": {"k": "x\u0002y"}}
    assert admin_http.post(base, json={"messages": [message]}).status_code == 201

    fields = [("Action", "ReceiveMessage"), ("QueueUrl", url), ("MessageAttributeName.1", "All")]
    got = answer_of(call(sqs_server, access_key, fields), "ReceiveMessage").find(tag("Message"))
    assert got is not None
    assert got.findtext(tag("Body")) == "a\ufffdb"
    assert got.findtext(tag("MD5OfBody")) == md5("a\ufffdb")
    attribute = got.find(tag("MessageAttribute"))
    assert attribute is not None
    assert attribute.findtext(tag("Value/StringValue")) == "x\ufffdy"
    expected = md5_of_attributes({"k": ("String", "x\ufffdy")})
    assert got.findtext(tag("MD5OfMessageAttributes")) == expected

    handle = got.findtext(tag("ReceiptHandle"))
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    (exact,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], WaitTimeSeconds=5)[
        "Messages"
    ]
    assert exact["Body"] == "a\u0001b"
    assert exact["MessageAttributes"]["k"]["StringValue"] == "x\u0002y"
