"""FIFO queues through boto3 against a real server: what a send must carry, deduplication, order
and exclusivity within a message group (one message of a group in flight at a time, the next
only once it is deleted; other groups never blocked), checked under real concurrent consumers,
and a stale receipt handle refused."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import AccessKey, counts, error_code, sqs_client

_queues = itertools.count()


# --- helpers ------------------------------------------------------------------------------------


def fifo_queue(sqs: Any, **attributes: str) -> str:
    """The URL of a new FIFO queue with ``attributes``."""
    name = f"fifo-{next(_queues)}.fifo"
    given = {"FifoQueue": "true", **attributes}
    return str(sqs.create_queue(QueueName=name, Attributes=given)["QueueUrl"])


def send(sqs: Any, url: str, body: str, group: str, dedup: str | None = None) -> str:
    """Send ``body`` in ``group`` (deduplicated by ``dedup``, else by the body); its MessageId."""
    request = {"QueueUrl": url, "MessageBody": body, "MessageGroupId": group}
    if dedup is not None:
        request["MessageDeduplicationId"] = dedup
    return str(sqs.send_message(**request)["MessageId"])


def receive(sqs: Any, url: str, wait: int = 0, **request: Any) -> list[dict[str, Any]]:
    """The messages one ReceiveMessage answers, with their system attributes."""
    answer = sqs.receive_message(
        QueueUrl=url, WaitTimeSeconds=wait, MessageSystemAttributeNames=["All"], **request
    )
    return list(answer.get("Messages", []))


def bodies(messages: list[dict[str, Any]]) -> list[str]:
    return [m["Body"] for m in messages]


# --- what a send must carry ---------------------------------------------------------------------


def test_a_send_without_message_group_id_is_missing_parameter(sqs: Any) -> None:
    """Every message of a FIFO queue belongs to a group."""
    url = fifo_queue(sqs)
    with pytest.raises(ClientError) as raised:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="d")
    assert error_code(raised) == "MissingParameter"
    assert "MessageGroupId" in str(raised.value)
    assert receive(sqs, url) == []


def test_a_send_without_deduplication_id_needs_content_based_deduplication(sqs: Any) -> None:
    """Without ContentBasedDeduplication a send names its deduplication id."""
    url = fifo_queue(sqs)
    with pytest.raises(ClientError) as raised:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
    assert error_code(raised) == "InvalidParameterValue"
    assert "MessageDeduplicationId" in str(raised.value)
    assert receive(sqs, url) == []


def test_a_per_message_delay_is_refused_on_a_fifo_queue(sqs: Any) -> None:
    """A FIFO queue has only its own delay: DelaySeconds on a message is refused, alone or in a
    batch entry (where the other entries are still sent)."""
    url = fifo_queue(sqs)
    with pytest.raises(ClientError) as raised:
        sqs.send_message(
            QueueUrl=url,
            MessageBody="x",
            MessageGroupId="g",
            MessageDeduplicationId="d",
            DelaySeconds=5,
        )
    assert error_code(raised) == "InvalidParameterValue"
    assert "DelaySeconds" in str(raised.value)
    answer = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "late", "MessageBody": "late", "MessageGroupId": "g",
             "MessageDeduplicationId": "late", "DelaySeconds": 1},
            {"Id": "nogroup", "MessageBody": "nogroup", "MessageDeduplicationId": "ng"},
            {"Id": "fine", "MessageBody": "fine", "MessageGroupId": "g",
             "MessageDeduplicationId": "fine"},
        ],
    )  # fmt: skip
    assert [s["Id"] for s in answer["Successful"]] == ["fine"]
    failed = {f["Id"]: f["Code"] for f in answer["Failed"]}
    assert failed == {"late": "InvalidParameterValue", "nogroup": "MissingParameter"}
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["fine"]


# --- deduplication ------------------------------------------------------------------------------


def test_the_same_deduplication_id_is_delivered_once(sqs: Any) -> None:
    """A second send with the same MessageDeduplicationId is accepted, answered with the first
    message's MessageId, and not delivered: neither while the first waits nor after it was
    deleted (within the deduplication interval)."""
    url = fifo_queue(sqs)
    first = send(sqs, url, "once", "g", dedup="order-1")
    assert send(sqs, url, "once again", "g", dedup="order-1") == first
    got = receive(sqs, url, MaxNumberOfMessages=10)
    assert [(m["MessageId"], m["Body"]) for m in got] == [(first, "once")]
    assert got[0]["Attributes"]["MessageDeduplicationId"] == "order-1"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])

    assert send(sqs, url, "once more", "g", dedup="order-1") == first
    other = send(sqs, url, "other", "g", dedup="order-2")
    assert other != first
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["other"]


def test_sequence_numbers_grow_with_each_send_and_come_with_the_message(sqs: Any) -> None:
    """A FIFO send answers a SequenceNumber (20 digits) that grows with each message, a
    duplicate send answers its first message's, and the receive carries the same number."""
    url = fifo_queue(sqs)
    numbers = []
    for n in range(3):
        answer = sqs.send_message(
            QueueUrl=url,
            MessageBody=f"m{n}",
            MessageGroupId=f"g{n}",
            MessageDeduplicationId=f"d{n}",
        )
        numbers.append(answer["SequenceNumber"])
    assert all(len(number) == 20 and number.isdigit() for number in numbers)
    assert numbers == sorted(numbers, key=int)
    assert len(set(numbers)) == 3
    again = sqs.send_message(
        QueueUrl=url, MessageBody="m0", MessageGroupId="g0", MessageDeduplicationId="d0"
    )
    assert again["SequenceNumber"] == numbers[0]
    got = receive(sqs, url, MaxNumberOfMessages=10)
    assert {m["Body"]: m["Attributes"]["SequenceNumber"] for m in got} == {
        f"m{n}": numbers[n] for n in range(3)
    }


def test_a_standard_queue_answers_no_sequence_number(sqs: Any) -> None:
    """SequenceNumber is a FIFO queue's: a standard queue's send answers none."""
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    assert "SequenceNumber" not in sqs.send_message(QueueUrl=url, MessageBody="x")


def test_content_based_deduplication_delivers_a_body_once(sqs: Any) -> None:
    """With ContentBasedDeduplication the body is the deduplication id: the same body twice
    is one message, two bodies are two."""
    url = fifo_queue(sqs, ContentBasedDeduplication="true")
    first = send(sqs, url, "same", "g")
    assert send(sqs, url, "same", "g") == first
    second = send(sqs, url, "different", "g")
    assert second != first
    delivered = []
    for _ in range(3):
        got = receive(sqs, url, MaxNumberOfMessages=10)
        for message in got:
            delivered.append((message["MessageId"], message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert delivered == [(first, "same"), (second, "different")]


# --- order and exclusivity within a group -------------------------------------------------------


def test_a_group_is_received_in_order_one_at_a_time_without_blocking_others(sqs: Any) -> None:
    """A batch receive holds at most one message of a group; the group's next is received only
    once the one in flight is deleted, in send order; other groups go on meanwhile."""
    url = fifo_queue(sqs, ContentBasedDeduplication="true")
    for body in ("a1", "a2", "a3"):
        send(sqs, url, body, "a")
    send(sqs, url, "b1", "b")

    first = receive(sqs, url, MaxNumberOfMessages=10)
    assert bodies(first) == ["a1", "b1"]
    assert [m["Attributes"]["MessageGroupId"] for m in first] == ["a", "b"]
    # a2 waits behind a1 (in flight), even for a receive that asks for ten.
    assert receive(sqs, url, MaxNumberOfMessages=10) == []
    assert counts(sqs, url) == (2, 2, 0)
    # A new group is not blocked by a's message in flight.
    send(sqs, url, "c1", "c")
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["c1"]

    handles = {m["Body"]: m["ReceiptHandle"] for m in first}
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handles["a1"])
    second = receive(sqs, url, MaxNumberOfMessages=10)
    assert bodies(second) == ["a2"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second[0]["ReceiptHandle"])
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["a3"]


def test_a_group_whose_message_comes_back_resumes_with_it(sqs: Any) -> None:
    """A message given back (ChangeMessageVisibility 0) is its group's next again: the group
    does not skip ahead to the message after it."""
    url = fifo_queue(sqs, ContentBasedDeduplication="true")
    for body in ("m1", "m2"):
        send(sqs, url, body, "g")
    (held,) = receive(sqs, url, MaxNumberOfMessages=10)
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=held["ReceiptHandle"], VisibilityTimeout=0
    )
    (again,) = receive(sqs, url, MaxNumberOfMessages=10)
    assert again["Body"] == "m1"
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"


@dataclass(frozen=True)
class Hold:
    """One message held by a consumer: from the moment its receive returned to the moment just
    before its delete was sent (logical moments from one counter, taken under one lock)."""

    group: str
    index: int
    start: int
    end: int
    consumer: int


def violations(holds: list[Hold], groups: int, per_group: int) -> list[str]:
    """What the holds break of a FIFO queue's promise: two messages of one group held at once,
    a group's messages processed out of send order, a message processed twice or never.

    A hold starts after the server leased the message and ends before the server saw its
    delete, so it lies within the server's own in-flight span: if the server keeps a group's
    spans apart, the holds are apart too, and any overlap found here is one the server made."""
    found = []
    by_group: dict[str, list[Hold]] = {}
    for hold in holds:
        by_group.setdefault(hold.group, []).append(hold)
    for group, held in sorted(by_group.items()):
        held.sort(key=lambda h: h.start)
        for one, other in itertools.combinations(held, 2):
            if one.start < other.end and other.start < one.end:
                found.append(f"group {group}: {one.index} and {other.index} held at once")
        order = [h.index for h in held]
        if order != sorted(order):
            found.append(f"group {group}: processed in the order {order}")
    seen = Counter((h.group, h.index) for h in holds)
    expected = {(f"g{g}", i) for g in range(groups) for i in range(per_group)}
    found += [f"{key} processed {n} times" for key, n in seen.items() if n != 1]
    found += [f"{key} never processed" for key in sorted(expected - set(seen))]
    return found


GROUPS = 8
PER_GROUP = 10
CONSUMERS = 4


def consume_concurrently(make_client: Callable[[], Any], url: str, total: int) -> list[Hold]:
    """``CONSUMERS`` threads, each with its own client, receive up to ten messages at a time,
    process each briefly and delete it, until ``total`` messages were processed; every hold."""
    lock = threading.Lock()
    clock = itertools.count()
    holds: list[Hold] = []
    failures: list[BaseException] = []
    done = threading.Event()
    deadline = time.monotonic() + 60

    def consumer(number: int) -> None:
        client = make_client()
        try:
            while not done.is_set() and time.monotonic() < deadline:
                got = client.receive_message(
                    QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1
                ).get("Messages", [])
                with lock:
                    start = next(clock)
                for message in got:
                    body = json.loads(message["Body"])
                    time.sleep(0.005)  # the work: long enough for a broken queue to overlap
                    with lock:
                        end = next(clock)
                        holds.append(Hold(body["group"], body["index"], start, end, number))
                        if len(holds) >= total:
                            done.set()
                    client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        except Exception as error:  # noqa: BLE001 - reported by the test, not lost in the thread
            failures.append(error)
            done.set()

    threads = [threading.Thread(target=consumer, args=(n,)) for n in range(CONSUMERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    return holds


def send_groups(sqs: Any, url: str, fifo: bool) -> None:
    """``PER_GROUP`` messages of each of ``GROUPS`` groups, sent interleaved: batch ``i`` holds
    message ``i`` of every group, in group order."""
    for index in range(PER_GROUP):
        entries = []
        for group in range(GROUPS):
            body = json.dumps({"group": f"g{group}", "index": index})
            entry = {"Id": f"g{group}-{index}", "MessageBody": body}
            if fifo:
                entry.update(MessageGroupId=f"g{group}", MessageDeduplicationId=entry["Id"])
            entries.append(entry)
        answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert answer.get("Failed", []) == []


def test_concurrent_consumers_never_hold_two_messages_of_a_group(
    sqs: Any, sqs_server: str, access_key: AccessKey
) -> None:
    """Consumers on threads of their own, each receiving up to ten messages at a time, never
    hold two messages of one group at once, process each group in send order, and process
    every message exactly once."""
    url = fifo_queue(sqs)
    send_groups(sqs, url, fifo=True)
    holds = consume_concurrently(lambda: sqs_client(sqs_server, access_key), url, 80)
    assert violations(holds, GROUPS, PER_GROUP) == []
    assert len(holds) == GROUPS * PER_GROUP
    assert len({h.consumer for h in holds}) > 1  # the consumers did share the work
    assert receive(sqs, url, MaxNumberOfMessages=10) == []
    assert counts(sqs, url) == (0, 0, 0)


def test_the_exclusivity_checker_finds_the_overlaps_of_a_standard_queue(
    sqs: Any, sqs_server: str, access_key: AccessKey
) -> None:
    """The same consumers on a standard queue, which promises no order: the checker of the test
    above must report overlaps, or that test could not fail. (It must here: the first receive
    of the 80 waiting messages takes ten of them, from only eight groups, so two of one group
    are held together.)"""
    url = str(sqs.create_queue(QueueName=f"standard-{next(_queues)}")["QueueUrl"])
    send_groups(sqs, url, fifo=False)
    holds = consume_concurrently(lambda: sqs_client(sqs_server, access_key), url, 80)
    found = violations(holds, GROUPS, PER_GROUP)
    assert any("held at once" in problem for problem in found), found
    # Each was still processed exactly once: only exclusivity (and so order) is broken.
    assert [p for p in found if "times" in p or "never" in p] == []


# --- stale receipt handles ----------------------------------------------------------------------


def test_a_stale_receipt_handle_is_refused_and_the_message_comes_back(sqs: Any) -> None:
    """A delete with the handle of an earlier receive, after the message was received again,
    is ReceiptHandleIsInvalid on a FIFO queue and deletes nothing: the message is delivered
    again."""
    url = fifo_queue(sqs, ContentBasedDeduplication="true")
    message_id = send(sqs, url, "job", "g")
    (first,) = receive(sqs, url, VisibilityTimeout=1)
    # Its 1-second lease ends; a long poll receives it again.
    (second,) = receive(sqs, url, wait=10, VisibilityTimeout=1)
    assert second["MessageId"] == message_id
    assert second["ReceiptHandle"] != first["ReceiptHandle"]

    with pytest.raises(ClientError) as raised:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert error_code(raised) == "ReceiptHandleIsInvalid"

    (third,) = receive(sqs, url, wait=10)
    assert (third["MessageId"], third["Body"]) == (message_id, "job")
    assert third["Attributes"]["ApproximateReceiveCount"] == "3"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=third["ReceiptHandle"])
    assert counts(sqs, url) == (0, 0, 0)


def test_a_delete_batch_with_a_stale_handle_fails_that_entry(sqs: Any) -> None:
    """DeleteMessageBatch refuses the stale entry alone: the current handle's entry deletes."""
    url = fifo_queue(sqs, ContentBasedDeduplication="true")
    send(sqs, url, "stale", "a")
    send(sqs, url, "fresh", "b")
    (old,) = receive(sqs, url, VisibilityTimeout=1, MaxNumberOfMessages=1)
    got = receive(sqs, url, wait=10, MaxNumberOfMessages=10, VisibilityTimeout=30)
    if len(got) < 2:  # "stale" comes back once its 1-second lease ends
        got += receive(sqs, url, wait=10, MaxNumberOfMessages=10, VisibilityTimeout=30)
    handles = {m["Body"]: m["ReceiptHandle"] for m in got}
    assert sorted(handles) == ["fresh", "stale"]
    answer = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "old", "ReceiptHandle": old["ReceiptHandle"]},
            {"Id": "fresh", "ReceiptHandle": handles["fresh"]},
        ],
    )
    assert [s["Id"] for s in answer["Successful"]] == ["fresh"]
    assert [(f["Id"], f["Code"]) for f in answer["Failed"]] == [("old", "ReceiptHandleIsInvalid")]
    assert counts(sqs, url) == (0, 1, 0)  # "stale" is still held, by its current handle


def test_one_deduplication_id_in_two_queues_names_two_messages(sqs: Any) -> None:
    """A deduplication id is a queue's: the same one sent to two FIFO queues makes two
    messages, with MessageIds of their own (as SQS's are unique)."""
    first, second = fifo_queue(sqs), fifo_queue(sqs)
    ids = {send(sqs, url, "same", "g", dedup="order-7") for url in (first, second)}
    assert len(ids) == 2
    for url in (first, second):
        assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["same"]
