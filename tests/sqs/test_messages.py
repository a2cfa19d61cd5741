"""The SQS message actions on standard queues through boto3 against a real server: sending and
receiving (bodies and message attributes exactly as sent, their MD5 digests), system attributes,
delays, long polls, visibility (leases), deleting (fenced by receipt handles), the batch actions
with partial failures, and a paused queue refusing sends."""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import AccessKey, error_code, sqs_client

INVALID_PARAMETER = "InvalidParameterValue"
INVALID_HANDLE = "ReceiptHandleIsInvalid"
NOT_INFLIGHT = "AWS.SimpleQueueService.MessageNotInflight"
_queues = itertools.count()


# --- helpers ------------------------------------------------------------------------------------


def new_queue(sqs: Any, **attributes: int | str) -> str:
    """The URL of a new standard queue with ``attributes``."""
    name = f"messages-{next(_queues)}"
    given = {key: str(value) for key, value in attributes.items()}
    return str(sqs.create_queue(QueueName=name, Attributes=given)["QueueUrl"])


def receive(sqs: Any, url: str, **request: Any) -> list[dict[str, Any]]:
    """The messages one ReceiveMessage answers (no wait unless asked)."""
    request.setdefault("WaitTimeSeconds", 0)
    return list(sqs.receive_message(QueueUrl=url, **request).get("Messages", []))


def receive_one(sqs: Any, url: str, wait: int = 10, **request: Any) -> dict[str, Any]:
    """The one message a long poll of up to ``wait`` seconds receives."""
    got = receive(sqs, url, WaitTimeSeconds=wait, **request)
    assert len(got) == 1, got
    return got[0]


def md5(text: str) -> str:
    """The hex MD5 of the text's UTF-8 bytes."""
    return hashlib.md5(text.encode()).hexdigest()


def md5_of_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> str:
    """MD5OfMessageAttributes computed as the SQS Developer Guide describes it ("Calculating the
    MD5 message digest for message attributes"), independently of the server's code: for each
    attribute in ascending order of name, its name, its data type, one transport byte (1 for a
    string value, 2 for a binary one) and its value, each string or value preceded by its length
    as a 4-byte big-endian integer; the MD5 of the whole."""

    def field(data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + data

    encoded = bytearray()
    for name in sorted(attributes):
        attribute = attributes[name]
        encoded += field(name.encode()) + field(attribute["DataType"].encode())
        if "StringValue" in attribute:
            encoded += b"\x01" + field(attribute["StringValue"].encode())
        else:
            encoded += b"\x02" + field(bytes(attribute["BinaryValue"]))
    return hashlib.md5(encoded).hexdigest()


def redelivered(sqs: Any, url: str) -> dict[str, Any]:
    """A message received and given back at once (ChangeMessageVisibility 0): its receipt
    handle is stale from then on."""
    message = receive_one(sqs, url, wait=0)
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    return message


def visible_and_in_flight(sqs: Any, url: str) -> tuple[int, int]:
    """The queue's visible and in-flight message counts."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(got[names[0]]), int(got[names[1]])


# --- bodies -------------------------------------------------------------------------------------

BODIES = {
    "json-with-whitespace": '{\n  "order": 17,\n  "items": [ "a", "b" ],\t"note": " x "\n}\n',
    "crlf-and-tabs": "line one\r\nline two\r\n\tindented\t\r\n",
    "emoji-and-non-bmp": "ok \U0001f600 \U0001d11e \u00e9\u4e2d \U0010fffd",
    "200kb-text": "".join(f"{i:07d} lorem ipsum dolor\n" for i in range(200 * 1024 // 26)),
    "only-quoted": '"quoted"',
    "json-null-text": "null",
    "leading-and-trailing-spaces": "   spaced   ",
}


@pytest.mark.parametrize("body", list(BODIES.values()), ids=list(BODIES))
def test_a_body_comes_back_exactly_as_sent_with_its_md5(sqs: Any, body: str) -> None:
    """The body received is the body sent, byte for byte, and MD5OfMessageBody on send and
    MD5OfBody on receive are the MD5 of its UTF-8 bytes."""
    url = new_queue(sqs)
    sent = sqs.send_message(QueueUrl=url, MessageBody=body)
    assert sent["MD5OfMessageBody"] == md5(body)
    assert "MD5OfMessageAttributes" not in sent
    message = receive_one(sqs, url)
    assert message["Body"] == body
    assert message["MD5OfBody"] == md5(body)
    assert message["MessageId"] == sent["MessageId"]
    assert "MessageAttributes" not in message
    assert "MD5OfMessageAttributes" not in message


@pytest.mark.parametrize("body", ["nul \x00 byte", "not a character \ufffe", "\uffff", "\x1b[0m"])
def test_a_body_with_a_character_sqs_refuses_is_invalid_message_contents(
    sqs: Any, body: str
) -> None:
    """A body with a character outside XML's (what SQS allows) is InvalidMessageContents, and
    nothing is enqueued."""
    url = new_queue(sqs)
    with pytest.raises(ClientError) as raised:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    assert error_code(raised) == "InvalidMessageContents"
    assert receive(sqs, url) == []


# --- message attributes -------------------------------------------------------------------------

ATTRIBUTES: dict[str, dict[str, Any]] = {
    "text": {"DataType": "String", "StringValue": "h\u00e9llo \u2713 \U0001f600 with  spaces"},
    "count": {"DataType": "Number", "StringValue": "-12.50e3"},
    "blob": {"DataType": "Binary", "BinaryValue": bytes([0, 1, 2, 254, 255]) + b"\n\r"},
    "kind": {"DataType": "String.x", "StringValue": "custom typed"},
    "order.id": {"DataType": "Number.int", "StringValue": "42"},
    "order.raw": {"DataType": "Binary.gz", "BinaryValue": b"\x1f\x8b\x08\x00"},
}


def shortened(digest: str) -> str:
    """A digest as the AWS CLI examples print it: its first and last eight hex digits."""
    assert len(digest) == 32
    return f"{digest[:8]}...{digest[-8:]}"


def test_the_md5_implementation_of_these_tests_matches_the_aws_docs() -> None:
    """The independent MD5OfMessageAttributes of this file gives the digests published in the
    AWS CLI Command Reference (sqs receive-message and send-message examples, digests shortened
    there to their first and last eight hex digits)."""
    city = {"DataType": "String", "StringValue": "Any City"}
    postal = {"DataType": "String", "StringValue": "ABC123"}
    both = md5_of_attributes({"PostalCode": postal, "City": city})
    assert shortened(both) == "9424c491...26bc3ae7"
    assert shortened(md5_of_attributes({"PostalCode": postal})) == "b8e89563...e088e74f"
    # The send-message example's Binary attribute: the CLI sent the base64 text of the value
    # given, and SQS digested those bytes with transport byte 2.
    three = md5_of_attributes(
        {
            "City": city,
            "Greeting": {"DataType": "Binary", "BinaryValue": b"SGVsbG8sIFdvcmxkIQ=="},
            "Population": {"DataType": "Number", "StringValue": "1250800"},
        }
    )
    assert shortened(three) == "00484c68...59e48f06"


def test_message_attributes_of_every_type_come_back_exactly(sqs: Any) -> None:
    """String, Number, Binary and custom-typed attributes come back as sent with All, and
    MD5OfMessageAttributes on send equals the one on receive and the independent digest."""
    url = new_queue(sqs)
    sent = sqs.send_message(
        QueueUrl=url, MessageBody="with attributes", MessageAttributes=ATTRIBUTES
    )
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(ATTRIBUTES)
    message = receive_one(sqs, url, MessageAttributeNames=["All"])
    assert message["MessageAttributes"] == ATTRIBUTES
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert message["Body"] == "with attributes"


def test_a_receive_gets_only_the_attributes_it_names(sqs: Any) -> None:
    """A name list, a ``prefix.*`` and no names choose which attributes come back; the digest
    on receive is that of the attributes returned."""
    url = new_queue(sqs)
    for _ in range(3):
        sqs.send_message(QueueUrl=url, MessageBody="pick", MessageAttributes=ATTRIBUTES)

    named = receive_one(sqs, url, MessageAttributeNames=["text", "blob", "absent"])
    expected = {name: ATTRIBUTES[name] for name in ("text", "blob")}
    assert named["MessageAttributes"] == expected
    assert named["MD5OfMessageAttributes"] == md5_of_attributes(expected)

    prefixed = receive_one(sqs, url, MessageAttributeNames=["order.*"])
    expected = {name: ATTRIBUTES[name] for name in ("order.id", "order.raw")}
    assert prefixed["MessageAttributes"] == expected
    assert prefixed["MD5OfMessageAttributes"] == md5_of_attributes(expected)

    bare = receive_one(sqs, url)
    assert "MessageAttributes" not in bare
    assert "MD5OfMessageAttributes" not in bare


def test_a_batch_send_answers_the_attribute_digest_of_each_entry(sqs: Any) -> None:
    """SendMessageBatch answers each entry's MD5OfMessageBody and MD5OfMessageAttributes."""
    url = new_queue(sqs)
    entries = [
        {"Id": "plain", "MessageBody": "one"},
        {"Id": "typed", "MessageBody": "two", "MessageAttributes": ATTRIBUTES},
    ]
    answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert answer.get("Failed", []) == []
    by_id = {entry["Id"]: entry for entry in answer["Successful"]}
    assert by_id["plain"]["MD5OfMessageBody"] == md5("one")
    assert "MD5OfMessageAttributes" not in by_id["plain"]
    assert by_id["typed"]["MD5OfMessageAttributes"] == md5_of_attributes(ATTRIBUTES)
    got = receive(sqs, url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    bodies = {m["Body"]: m.get("MessageAttributes") for m in got}
    assert bodies == {"one": None, "two": ATTRIBUTES}


INVALID_ATTRIBUTES: dict[str, dict[str, Any]] = {
    "aws-prefix": {"AWS.reserved": {"DataType": "String", "StringValue": "x"}},
    "amazon-prefix": {"amazon.reserved": {"DataType": "String", "StringValue": "x"}},
    "eleven": {f"a{i}": {"DataType": "String", "StringValue": "x"} for i in range(11)},
    "not-a-number": {"n": {"DataType": "Number", "StringValue": "twelve"}},
    "unknown-type": {"n": {"DataType": "Integer", "StringValue": "12"}},
    "bad-name-character": {"a b": {"DataType": "String", "StringValue": "x"}},
    "missing-data-type": {"n": {"StringValue": "12"}},
    "empty-data-type": {"n": {"DataType": "", "StringValue": "12"}},
    "empty-string-value": {"n": {"DataType": "String", "StringValue": ""}},
    "empty-binary-value": {"n": {"DataType": "Binary", "BinaryValue": b""}},
    "missing-value": {"n": {"DataType": "String"}},
    "binary-given-as-string": {"n": {"DataType": "Binary", "StringValue": "x"}},
    "control-character-value": {"n": {"DataType": "String", "StringValue": "a\x08b"}},
}


@pytest.mark.parametrize(
    "attributes", list(INVALID_ATTRIBUTES.values()), ids=list(INVALID_ATTRIBUTES)
)
def test_invalid_message_attributes_are_refused(
    sqs_server: str, access_key: AccessKey, attributes: dict[str, Any]
) -> None:
    """An attribute SQS refuses (reserved name prefix, more than 10, a Number that is no
    number, an unknown, missing or empty type, an empty or missing value, a character a body may
    not hold, a bad name) is InvalidParameterValue; nothing is enqueued. (boto3's own parameter
    validation is off, as some SDKs never validate.)"""
    sqs = sqs_client(sqs_server, access_key, parameter_validation=False)
    url = new_queue(sqs)
    with pytest.raises(ClientError) as raised:
        sqs.send_message(QueueUrl=url, MessageBody="body", MessageAttributes=attributes)
    assert error_code(raised) == INVALID_PARAMETER
    assert receive(sqs, url) == []


# --- system attributes --------------------------------------------------------------------------


def test_system_attributes_of_a_received_message(sqs: Any, access_key: AccessKey) -> None:
    """With All: SentTimestamp (when it was sent), ApproximateReceiveCount 1 then 2 after a
    redelivery, ApproximateFirstReceiveTimestamp the first receive's on both, SenderId the
    sender's account; MessageSystemAttributeNames chooses among them."""
    url = new_queue(sqs)
    before = int(time.time() * 1000)
    sqs.send_message(QueueUrl=url, MessageBody="stamped")
    after_send = int(time.time() * 1000)

    first = receive_one(sqs, url, AttributeNames=["All"])
    after_receive = int(time.time() * 1000)
    stamps = first["Attributes"]
    assert before - 1000 <= int(stamps["SentTimestamp"]) <= after_send + 1000
    assert stamps["ApproximateReceiveCount"] == "1"
    first_receive = int(stamps["ApproximateFirstReceiveTimestamp"])
    assert int(stamps["SentTimestamp"]) <= first_receive <= after_receive + 1000
    assert stamps["SenderId"] == access_key.namespace
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0
    )

    wanted = ["ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp"]
    second = receive_one(sqs, url, wait=0, MessageSystemAttributeNames=wanted)
    assert second["MessageId"] == first["MessageId"]
    assert second["Attributes"] == {
        "ApproximateReceiveCount": "2",
        "ApproximateFirstReceiveTimestamp": str(first_receive),
    }


def test_no_system_attributes_unless_asked(sqs: Any) -> None:
    """A receive naming no system attributes gets none."""
    url = new_queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="plain")
    assert "Attributes" not in receive_one(sqs, url)


# --- delays -------------------------------------------------------------------------------------


def test_delays_hide_messages_until_they_end(sqs: Any) -> None:
    """The queue's DelaySeconds delays a message sent without one; a message's own DelaySeconds
    overrides it (0: at once). A delayed message is not received before its delay ends, and a
    long poll covering the delay receives it once it does."""
    url = new_queue(sqs, DelaySeconds=2)
    started = time.monotonic()
    sqs.send_message(QueueUrl=url, MessageBody="own delay", DelaySeconds=1)
    sqs.send_message(QueueUrl=url, MessageBody="queue delay")
    sqs.send_message(QueueUrl=url, MessageBody="no delay", DelaySeconds=0)
    assert [m["Body"] for m in receive(sqs, url, MaxNumberOfMessages=10)] == ["no delay"]
    received_after: dict[str, float] = {}
    while len(received_after) < 2:
        message = receive_one(sqs, url, wait=10)
        received_after[message["Body"]] = time.monotonic() - started
    assert received_after["own delay"] >= 0.9
    assert received_after["queue delay"] >= 1.9


@pytest.mark.parametrize("delay", [-1, 901])
def test_a_delay_out_of_range_is_refused(sqs: Any, delay: int) -> None:
    """DelaySeconds is 0 to 900."""
    url = new_queue(sqs)
    with pytest.raises(ClientError) as raised:
        sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=delay)
    assert error_code(raised) == INVALID_PARAMETER


# --- receiving ----------------------------------------------------------------------------------


def test_max_number_of_messages_bounds_a_receive(sqs: Any) -> None:
    """A receive gets at most MaxNumberOfMessages (1 to 10) messages, each once."""
    url = new_queue(sqs)
    for start in (0, 10):
        entries = [{"Id": f"m{i}", "MessageBody": f"body {i}"} for i in range(start, start + 10)]
        assert len(sqs.send_message_batch(QueueUrl=url, Entries=entries)["Successful"]) == 10
    ten = receive(sqs, url, MaxNumberOfMessages=10)
    assert len(ten) == 10
    one = receive(sqs, url, MaxNumberOfMessages=1)
    assert len(one) == 1
    default = receive(sqs, url)
    assert len(default) == 1
    rest = receive(sqs, url, MaxNumberOfMessages=10)
    bodies = [m["Body"] for m in ten + one + default + rest]
    assert sorted(bodies) == sorted(f"body {i}" for i in range(20))


@pytest.mark.parametrize(
    ("field", "value"),
    [("MaxNumberOfMessages", 0), ("MaxNumberOfMessages", 11), ("WaitTimeSeconds", 21)],
)
def test_receive_parameters_out_of_range_are_refused(sqs: Any, field: str, value: int) -> None:
    """MaxNumberOfMessages is 1 to 10 and WaitTimeSeconds 0 to 20."""
    url = new_queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="untouched")
    with pytest.raises(ClientError) as raised:
        sqs.receive_message(QueueUrl=url, **{field: value})
    assert error_code(raised) == INVALID_PARAMETER
    assert visible_and_in_flight(sqs, url) == (1, 0)


def waiting_long_polls(admin_http: httpx.Client) -> float:
    """The long polls parked on the server (its ``sundial_longpoll_waiters`` gauge)."""
    text = admin_http.get("/metrics").text
    found = re.findall(r"^sundial_longpoll_waiters(?:\{[^}]*\})? (\S+)$", text, re.MULTILINE)
    return sum(float(value) for value in found)


def test_a_long_poll_returns_as_soon_as_a_message_is_sent(
    sqs_server: str, access_key: AccessKey, admin_http: httpx.Client
) -> None:
    """A receive waiting 10 s on an empty queue answers soon after another thread sends,
    long before its wait ends, with the message."""
    receiver = sqs_client(sqs_server, access_key)
    sender = sqs_client(sqs_server, access_key)
    url = new_queue(sender)
    outcome: dict[str, Any] = {}

    def long_poll() -> None:
        started = time.monotonic()
        try:
            outcome["messages"] = receive(receiver, url, WaitTimeSeconds=10)
        finally:
            outcome["returned"] = time.monotonic()
            outcome["took"] = outcome["returned"] - started

    deadline = time.monotonic() + 5
    while waiting_long_polls(admin_http) > 0:  # earlier tests' long polls, sampled late
        assert time.monotonic() < deadline, "a long poll is still parked"
        time.sleep(0.05)
    thread = threading.Thread(target=long_poll)
    thread.start()
    try:
        deadline = time.monotonic() + 8
        while waiting_long_polls(admin_http) < 1:  # the receive is parked on the server
            assert time.monotonic() < deadline, "the receive never parked"
            assert thread.is_alive(), outcome
            time.sleep(0.05)
        sent_at = time.monotonic()
        sender.send_message(QueueUrl=url, MessageBody="wake up")
    finally:
        thread.join(timeout=15)
    assert not thread.is_alive()
    assert [m["Body"] for m in outcome["messages"]] == ["wake up"]
    assert outcome["took"] < 9
    assert outcome["returned"] - sent_at < 3


def test_a_long_poll_on_an_empty_queue_answers_empty_when_its_wait_ends(sqs: Any) -> None:
    """WaitTimeSeconds 1 on an empty queue answers no messages after about a second."""
    url = new_queue(sqs)
    started = time.monotonic()
    assert receive(sqs, url, WaitTimeSeconds=1) == []
    assert 0.9 <= time.monotonic() - started < 5


def test_the_queues_receive_wait_is_the_default_wait(sqs: Any) -> None:
    """The queue's ReceiveMessageWaitTimeSeconds is the wait of a receive that names none; one
    naming WaitTimeSeconds 0 answers at once."""
    url = new_queue(sqs, ReceiveMessageWaitTimeSeconds=1)
    started = time.monotonic()
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []
    assert 0.9 <= time.monotonic() - started < 5
    started = time.monotonic()
    assert receive(sqs, url, WaitTimeSeconds=0) == []
    assert time.monotonic() - started < 0.9


# --- visibility ---------------------------------------------------------------------------------


def test_a_received_message_is_not_received_again_while_its_lease_runs(sqs: Any) -> None:
    """While a receive's visibility timeout runs the message is in flight and not received."""
    url = new_queue(sqs, VisibilityTimeout=30)
    sqs.send_message(QueueUrl=url, MessageBody="leased")
    receive_one(sqs, url)
    assert receive(sqs, url) == []
    assert visible_and_in_flight(sqs, url) == (0, 1)


def test_a_message_is_received_again_when_its_visibility_timeout_expires(sqs: Any) -> None:
    """With VisibilityTimeout 1 the message is received again after about a second, with
    ApproximateReceiveCount 2 and another receipt handle."""
    url = new_queue(sqs, VisibilityTimeout=30)
    sqs.send_message(QueueUrl=url, MessageBody="again")
    first = receive_one(sqs, url, VisibilityTimeout=1, AttributeNames=["ApproximateReceiveCount"])
    leased_at = time.monotonic()
    second = receive_one(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    assert time.monotonic() - leased_at >= 0.9
    assert second["MessageId"] == first["MessageId"]
    assert first["Attributes"]["ApproximateReceiveCount"] == "1"
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"
    assert second["ReceiptHandle"] != first["ReceiptHandle"]


def test_change_message_visibility_extends_the_lease(sqs: Any) -> None:
    """ChangeMessageVisibility makes the lease end that long from now: a long poll does not
    receive the message when its first 1 s timeout would have ended, only after the new one."""
    url = new_queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="extended")
    message = receive_one(sqs, url, VisibilityTimeout=1)
    changed_at = time.monotonic()
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=2
    )
    again = receive_one(sqs, url)
    assert again["MessageId"] == message["MessageId"]
    assert time.monotonic() - changed_at >= 1.9


def test_change_message_visibility_zero_gives_the_message_back_at_once(sqs: Any) -> None:
    """VisibilityTimeout 0 makes the message visible at once."""
    url = new_queue(sqs, VisibilityTimeout=600)
    sqs.send_message(QueueUrl=url, MessageBody="back")
    message = receive_one(sqs, url)
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    again = receive(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    assert [m["MessageId"] for m in again] == [message["MessageId"]]
    assert again[0]["Attributes"]["ApproximateReceiveCount"] == "2"


def test_change_message_visibility_with_a_stale_handle_is_message_not_inflight(sqs: Any) -> None:
    """A receipt handle from before a redelivery no longer holds the message: changing its
    visibility is MessageNotInflight, and the later receive's lease is untouched."""
    url = new_queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="moved on")
    stale = redelivered(sqs, url)
    current = receive_one(sqs, url, wait=0, VisibilityTimeout=600)
    assert current["MessageId"] == stale["MessageId"]
    for timeout in (0, 600):
        with pytest.raises(ClientError) as raised:
            sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=stale["ReceiptHandle"], VisibilityTimeout=timeout
            )
        assert error_code(raised) == NOT_INFLIGHT
    assert receive(sqs, url) == []
    assert visible_and_in_flight(sqs, url) == (0, 1)


def test_change_message_visibility_of_a_deleted_message_is_message_not_inflight(sqs: Any) -> None:
    """Once deleted, a message's receipt handle changes nothing: MessageNotInflight."""
    url = new_queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="gone")
    message = receive_one(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    with pytest.raises(ClientError) as raised:
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    assert error_code(raised) == NOT_INFLIGHT
    assert receive(sqs, url) == []


def test_change_message_visibility_batch_answers_each_entry(sqs: Any) -> None:
    """A batch with a good entry and a garbage handle changes the good one (Successful) and
    answers the other in Failed with its error."""
    url = new_queue(sqs, VisibilityTimeout=600)
    sqs.send_message(QueueUrl=url, MessageBody="batch visibility")
    message = receive_one(sqs, url)
    answer = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "good", "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 0},
            {"Id": "bad", "ReceiptHandle": "not-a-receipt-handle", "VisibilityTimeout": 0},
        ],
    )
    assert answer["Successful"] == [{"Id": "good"}]
    [failed] = answer["Failed"]
    assert failed["Id"] == "bad"
    assert failed["SenderFault"] is True
    assert failed["Code"] == INVALID_HANDLE
    assert [m["MessageId"] for m in receive(sqs, url)] == [message["MessageId"]]


# --- deleting -----------------------------------------------------------------------------------


def test_a_deleted_message_never_comes_back(sqs: Any) -> None:
    """After DeleteMessage the message is not received again, not even after its visibility
    timeout would have ended, and deleting it again with the same handle succeeds."""
    url = new_queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="delete me")
    doomed = receive_one(sqs, url, VisibilityTimeout=1)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=doomed["ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=doomed["ReceiptHandle"])
    assert visible_and_in_flight(sqs, url) == (0, 0)
    started = time.monotonic()
    assert receive(sqs, url, WaitTimeSeconds=2) == []  # past the end of its 1 s lease
    assert time.monotonic() - started >= 1.9


def test_a_stale_delete_succeeds_and_the_message_is_still_delivered(sqs: Any) -> None:
    """On a standard queue a delete with a handle from before a redelivery succeeds but deletes
    nothing: the message is delivered again."""
    url = new_queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="fenced")
    stale = redelivered(sqs, url)
    current = receive_one(sqs, url, wait=0, VisibilityTimeout=1)
    assert current["MessageId"] == stale["MessageId"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=stale["ReceiptHandle"])
    third = receive_one(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    assert third["MessageId"] == stale["MessageId"]
    assert third["Attributes"]["ApproximateReceiveCount"] == "3"


def test_a_stale_delete_leaves_the_later_lease_intact(sqs: Any) -> None:
    """The stale delete does not end the later receive's lease: that receiver can still extend
    it, the message stays in flight, and its own delete deletes the message."""
    url = new_queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="fenced")
    stale = redelivered(sqs, url)
    current = receive_one(sqs, url, wait=0, VisibilityTimeout=600)
    assert current["MessageId"] == stale["MessageId"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=stale["ReceiptHandle"])
    handle = current["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=600)
    assert visible_and_in_flight(sqs, url) == (0, 1)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    with pytest.raises(ClientError) as raised:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    assert error_code(raised) == NOT_INFLIGHT
    assert visible_and_in_flight(sqs, url) == (0, 0)


@pytest.mark.parametrize(
    "handle",
    [
        "garbage",
        base64.urlsafe_b64encode(b"not a handle at all").decode(),
        "%%%not base64%%%",
    ],
)
def test_a_garbage_receipt_handle_is_invalid(sqs: Any, handle: str) -> None:
    """DeleteMessage and ChangeMessageVisibility with a handle the server never gave are
    ReceiptHandleIsInvalid."""
    url = new_queue(sqs)
    with pytest.raises(ClientError) as raised:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    assert error_code(raised) == INVALID_HANDLE
    with pytest.raises(ClientError) as raised:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=5)
    assert error_code(raised) == INVALID_HANDLE


def test_a_receipt_handle_of_another_queue_is_invalid(sqs: Any) -> None:
    """A handle of a message of one queue is ReceiptHandleIsInvalid on another, and the message
    stays in flight on its own queue."""
    url = new_queue(sqs, VisibilityTimeout=600)
    other = new_queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="mine")
    handle = receive_one(sqs, url)["ReceiptHandle"]
    with pytest.raises(ClientError) as raised:
        sqs.delete_message(QueueUrl=other, ReceiptHandle=handle)
    assert error_code(raised) == INVALID_HANDLE
    with pytest.raises(ClientError) as raised:
        sqs.change_message_visibility(QueueUrl=other, ReceiptHandle=handle, VisibilityTimeout=0)
    assert error_code(raised) == INVALID_HANDLE
    assert visible_and_in_flight(sqs, url) == (0, 1)


# --- batches ------------------------------------------------------------------------------------


def test_send_message_batch_with_a_failing_entry_sends_the_others(sqs: Any) -> None:
    """Entries SQS refuses are answered in Failed (SenderFault, their code); the others are
    sent, answered in Successful and received."""
    url = new_queue(sqs)
    answer = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "first", "MessageBody": "one"},
            {"Id": "bad-body", "MessageBody": "nul \x00"},
            {
                "Id": "bad-attribute",
                "MessageBody": "x",
                "MessageAttributes": {"AWS.x": {"DataType": "String", "StringValue": "x"}},
            },
            {"Id": "last", "MessageBody": "two", "DelaySeconds": 0},
        ],
    )
    failed = {entry["Id"]: entry for entry in answer["Failed"]}
    assert set(failed) == {"bad-body", "bad-attribute"}
    assert failed["bad-body"]["Code"] == "InvalidMessageContents"
    assert failed["bad-attribute"]["Code"] == INVALID_PARAMETER
    assert all(entry["SenderFault"] is True and entry["Message"] for entry in failed.values())
    successful = {entry["Id"]: entry for entry in answer["Successful"]}
    assert set(successful) == {"first", "last"}
    assert successful["first"]["MD5OfMessageBody"] == md5("one")
    got = receive(sqs, url, MaxNumberOfMessages=10)
    assert {m["MessageId"]: m["Body"] for m in got} == {
        successful["first"]["MessageId"]: "one",
        successful["last"]["MessageId"]: "two",
    }


@pytest.mark.parametrize(
    ("entries", "code"),
    [
        (
            [{"Id": "same", "MessageBody": "a"}, {"Id": "same", "MessageBody": "b"}],
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        ),
        (
            [{"Id": f"e{i}", "MessageBody": "a"} for i in range(11)],
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        ),
        ([], "AWS.SimpleQueueService.EmptyBatchRequest"),
        ([{"Id": "not valid!", "MessageBody": "a"}], "AWS.SimpleQueueService.InvalidBatchEntryId"),
    ],
    ids=["duplicate-ids", "eleven", "empty", "bad-id"],
)
def test_a_malformed_batch_is_refused_whole(
    sqs: Any, entries: list[dict[str, Any]], code: str
) -> None:
    """Duplicate entry ids, more than 10 entries, none, or a bad id refuse the whole batch;
    nothing is sent."""
    url = new_queue(sqs)
    with pytest.raises(ClientError) as raised:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert error_code(raised) == code
    assert receive(sqs, url, MaxNumberOfMessages=10) == []


def test_delete_message_batch_with_a_garbage_handle_deletes_the_others(sqs: Any) -> None:
    """DeleteMessageBatch deletes the entries with good handles (Successful) and answers a
    garbage handle in Failed with ReceiptHandleIsInvalid."""
    url = new_queue(sqs, VisibilityTimeout=1)
    sqs.send_message_batch(
        QueueUrl=url,
        Entries=[{"Id": f"m{i}", "MessageBody": f"body {i}"} for i in range(3)],
    )
    got = receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=600)
    assert len(got) == 3
    entries = [{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
    entries.insert(1, {"Id": "garbage", "ReceiptHandle": "garbage"})
    answer = sqs.delete_message_batch(QueueUrl=url, Entries=entries)
    assert sorted(entry["Id"] for entry in answer["Successful"]) == ["d0", "d1", "d2"]
    [failed] = answer["Failed"]
    assert failed["Id"] == "garbage"
    assert failed["SenderFault"] is True
    assert failed["Code"] == INVALID_HANDLE
    assert visible_and_in_flight(sqs, url) == (0, 0)


# --- a paused queue -----------------------------------------------------------------------------


def test_a_queue_paused_for_enqueue_throttles_sends(
    sqs: Any, access_key: AccessKey, admin_http: httpx.Client
) -> None:
    """While the queue's enqueue is paused (REST API), SendMessage is RequestThrottled and
    nothing is enqueued; sends succeed again once it is resumed."""
    url = new_queue(sqs)
    path = f"/v1/namespaces/{access_key.namespace}/queues/{url.rsplit('/', 1)[-1]}"
    answer = admin_http.patch(path, json={"enqueue_paused": True})
    assert answer.status_code == 200, answer.text
    with pytest.raises(ClientError) as raised:
        sqs.send_message(QueueUrl=url, MessageBody="refused")
    assert error_code(raised) == "RequestThrottled"
    with pytest.raises(ClientError) as raised:
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "refused"}])
    assert error_code(raised) == "RequestThrottled"
    assert receive(sqs, url) == []

    answer = admin_http.patch(path, json={"enqueue_paused": False})
    assert answer.status_code == 200, answer.text
    sqs.send_message(QueueUrl=url, MessageBody="accepted")
    assert receive_one(sqs, url)["Body"] == "accepted"


def test_an_aws_trace_header_travels_with_the_message(sqs: Any) -> None:
    """MessageSystemAttributes' AWSTraceHeader (a String attribute, as X-Ray sends it) is
    accepted with its digest and comes back as the AWSTraceHeader system attribute."""
    url = new_queue(sqs)
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
    system = {"AWSTraceHeader": {"DataType": "String", "StringValue": trace}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="traced", MessageSystemAttributes=system)
    assert sent["MD5OfMessageSystemAttributes"] == md5_of_attributes(system)
    (got,) = receive(sqs, url, MessageSystemAttributeNames=["AWSTraceHeader"], WaitTimeSeconds=5)
    assert got["Attributes"] == {"AWSTraceHeader": trace}


def test_a_receive_with_a_malformed_parameter_leases_nothing(
    sqs: Any, sqs_server: str, access_key: AccessKey
) -> None:
    """A receive refused for a malformed parameter is refused before anything is leased: the
    message is received at once afterwards, on its first receive."""
    url = new_queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="waiting")
    unchecked = sqs_client(sqs_server, access_key, parameter_validation=False)
    for bad in ({"AttributeNames": [1]}, {"MessageAttributeNames": [1]}):
        with pytest.raises(ClientError) as refused:
            unchecked.receive_message(QueueUrl=url, **bad)
        assert error_code(refused) == "InvalidParameterValue"
    (got,) = receive(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    assert got["Attributes"]["ApproximateReceiveCount"] == "1"
