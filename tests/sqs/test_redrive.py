"""Dead-letter queues through boto3 against a real server: a message received ``maxReceiveCount``
times without being deleted moves to the queue its source's RedrivePolicy names, as it was
(MessageId, body, attributes, group), whether its last lease runs out or is given back; the
dead-letter queue lists its sources; a dead-letter queue of the other type is refused."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import counts, error_code

_queues = itertools.count()
ARRIVAL_SECONDS = 10
"""How long a dead letter may take to arrive: its lease runs out, then the scheduler (a tick of
0.05 s in the tests) moves it."""


def create(sqs: Any, name: str, **attributes: str) -> str:
    """The URL of a new queue (FIFO when ``name`` ends with .fifo)."""
    if name.endswith(".fifo"):
        attributes["FifoQueue"] = "true"
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def arn(sqs: Any, url: str) -> str:
    """The queue's ARN, as GetQueueAttributes answers it."""
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return str(found["Attributes"]["QueueArn"])


def redrive(dead_letter_arn: str, max_receives: int = 2) -> str:
    return json.dumps({"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": max_receives})


def with_dead_letter_queue(sqs: Any, fifo: bool = False, **attributes: str) -> tuple[str, str]:
    """A new source queue whose RedrivePolicy (2 receives) names a new dead-letter queue of the
    same type; their URLs."""
    suffix = ".fifo" if fifo else ""
    number = next(_queues)
    dlq = create(sqs, f"dlq-{number}{suffix}")
    source = create(
        sqs, f"src-{number}{suffix}", RedrivePolicy=redrive(arn(sqs, dlq)), **attributes
    )
    return source, dlq


def receive(sqs: Any, url: str, wait: int = 0, **request: Any) -> list[dict[str, Any]]:
    """The messages one ReceiveMessage answers, with their system and message attributes."""
    answer = sqs.receive_message(
        QueueUrl=url,
        WaitTimeSeconds=wait,
        MessageSystemAttributeNames=["All"],
        MessageAttributeNames=["All"],
        **request,
    )
    return list(answer.get("Messages", []))


def arrival(sqs: Any, url: str) -> dict[str, Any]:
    """The one message that arrives in ``url`` within ``ARRIVAL_SECONDS`` (long polls)."""
    deadline = time.monotonic() + ARRIVAL_SECONDS
    while True:
        left = int(deadline - time.monotonic())
        got = receive(sqs, url, wait=max(1, min(left, 20)), MaxNumberOfMessages=10)
        if got:
            assert len(got) == 1, got
            return got[0]
        assert time.monotonic() < deadline, f"nothing arrived in {url}"


def test_a_message_received_max_receive_count_times_moves_to_the_dead_letter_queue(
    sqs: Any,
) -> None:
    """Received twice and never deleted, the message arrives in the dead-letter queue once its
    second lease runs out: same MessageId, body, attributes and sending time; the source no
    longer holds it."""
    source, dlq = with_dead_letter_queue(sqs, VisibilityTimeout="1")
    attributes = {"kind": {"DataType": "String", "StringValue": "invoice"}}
    sent = sqs.send_message(QueueUrl=source, MessageBody="poison", MessageAttributes=attributes)
    (first,) = receive(sqs, source)
    (second,) = receive(sqs, source, wait=10)  # after the first 1-second lease
    assert second["MessageId"] == first["MessageId"] == sent["MessageId"]
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"

    dead = arrival(sqs, dlq)
    assert (dead["MessageId"], dead["Body"]) == (sent["MessageId"], "poison")
    assert dead["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert dead["MessageAttributes"] == attributes
    assert dead["Attributes"]["SentTimestamp"] == first["Attributes"]["SentTimestamp"]
    assert counts(sqs, source) == (0, 0, 0)
    assert receive(sqs, source, MaxNumberOfMessages=10) == []
    # In the dead-letter queue it is an ordinary message: deleting it ends it.
    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=dead["ReceiptHandle"])
    assert counts(sqs, dlq) == (0, 0, 0)


def test_the_dead_letter_queue_lists_its_sources(sqs: Any) -> None:
    """ListDeadLetterSourceQueues on a dead-letter queue names the queues whose RedrivePolicy
    names it, and only those."""
    source, dlq = with_dead_letter_queue(sqs)
    another = create(sqs, f"src-b-{next(_queues)}", RedrivePolicy=redrive(arn(sqs, dlq), 5))
    create(sqs, f"unrelated-{next(_queues)}")
    listed = sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"]
    assert sorted(listed) == sorted([source, another])
    assert sqs.list_dead_letter_source_queues(QueueUrl=source)["queueUrls"] == []
    # Removing the policy removes the source from the list.
    sqs.set_queue_attributes(QueueUrl=another, Attributes={"RedrivePolicy": ""})
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [source]


def test_visibility_zero_on_the_last_allowed_receive_dead_letters_the_message(sqs: Any) -> None:
    """ChangeMessageVisibility 0 gives a message back at once, counting the receive: on the
    last allowed receive it sends the message to the dead-letter queue (long leases: nothing
    here runs out)."""
    source, dlq = with_dead_letter_queue(sqs, VisibilityTimeout="600")
    sent = sqs.send_message(QueueUrl=source, MessageBody="give back")
    for receive_count in ("1", "2"):
        (message,) = receive(sqs, source, wait=10)
        assert message["Attributes"]["ApproximateReceiveCount"] == receive_count
        sqs.change_message_visibility(
            QueueUrl=source, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    dead = arrival(sqs, dlq)
    assert (dead["MessageId"], dead["Body"]) == (sent["MessageId"], "give back")
    assert counts(sqs, source) == (0, 0, 0)


def test_a_deleted_message_never_reaches_the_dead_letter_queue(sqs: Any) -> None:
    """A message deleted on its last allowed receive is done: it does not move."""
    source, dlq = with_dead_letter_queue(sqs, VisibilityTimeout="1")
    sqs.send_message(QueueUrl=source, MessageBody="fine in the end")
    receive(sqs, source)
    (last,) = receive(sqs, source, wait=10)
    sqs.delete_message(QueueUrl=source, ReceiptHandle=last["ReceiptHandle"])
    # A message sent after it, dead-lettered, is the only one the dead-letter queue gets.
    sent = sqs.send_message(QueueUrl=source, MessageBody="poison")
    receive(sqs, source, wait=10)
    receive(sqs, source, wait=10)
    assert arrival(sqs, dlq)["MessageId"] == sent["MessageId"]
    assert counts(sqs, dlq) == (0, 1, 0)


def test_a_fifo_message_moves_to_a_fifo_dead_letter_queue_with_its_group(sqs: Any) -> None:
    """A FIFO source's dead letter arrives in its FIFO dead-letter queue with its MessageId,
    body and MessageGroupId; its group in the source goes on with the next message."""
    source, dlq = with_dead_letter_queue(
        sqs, fifo=True, VisibilityTimeout="1", ContentBasedDeduplication="true"
    )
    poison = sqs.send_message(QueueUrl=source, MessageBody="poison", MessageGroupId="orders")
    sqs.send_message(QueueUrl=source, MessageBody="next", MessageGroupId="orders")
    (first,) = receive(sqs, source, MaxNumberOfMessages=10)
    assert first["Body"] == "poison"
    (second,) = receive(sqs, source, wait=10, MaxNumberOfMessages=10)
    assert (second["Body"], second["Attributes"]["ApproximateReceiveCount"]) == ("poison", "2")

    dead = arrival(sqs, dlq)
    assert (dead["MessageId"], dead["Body"]) == (poison["MessageId"], "poison")
    assert dead["Attributes"]["MessageGroupId"] == "orders"
    # The group is no longer held by it: its next message is received from the source.
    (after,) = receive(sqs, source, wait=10, MaxNumberOfMessages=10, VisibilityTimeout=30)
    assert (after["Body"], after["Attributes"]["MessageGroupId"]) == ("next", "orders")
    # In the dead-letter queue the group is exclusive too: one in flight at a time.
    sqs.send_message(
        QueueUrl=dlq, MessageBody="later", MessageGroupId="orders", MessageDeduplicationId="l"
    )
    assert receive(sqs, dlq, MaxNumberOfMessages=10) == []


@pytest.mark.parametrize("source_fifo", [False, True], ids=["standard-source", "fifo-source"])
def test_a_dead_letter_queue_of_the_other_type_is_refused(sqs: Any, source_fifo: bool) -> None:
    """The dead-letter queue of a FIFO queue must be FIFO, and of a standard queue standard:
    CreateQueue and SetQueueAttributes refuse the other type and change nothing."""
    number = next(_queues)
    other = create(sqs, f"dlq-{number}" + ("" if source_fifo else ".fifo"))
    source = f"src-{number}" + (".fifo" if source_fifo else "")
    policy = redrive(arn(sqs, other))

    with pytest.raises(ClientError) as raised:
        create(sqs, source, RedrivePolicy=policy)
    assert error_code(raised) == "InvalidParameterValue"
    assert "RedrivePolicy" in str(raised.value)
    with pytest.raises(ClientError) as missing:
        sqs.get_queue_url(QueueName=source)
    assert error_code(missing) == "AWS.SimpleQueueService.NonExistentQueue"

    url = create(sqs, source)
    with pytest.raises(ClientError) as raised:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
    assert error_code(raised) == "InvalidParameterValue"
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "RedrivePolicy" not in found
    assert sqs.list_dead_letter_source_queues(QueueUrl=other)["queueUrls"] == []


def test_a_redrive_policy_naming_no_queue_is_refused(sqs: Any) -> None:
    """The dead-letter queue must exist when the policy is set."""
    number = next(_queues)
    dlq = create(sqs, f"dlq-{number}")
    missing = arn(sqs, dlq).rsplit(":", 1)[0] + ":no-such-queue"
    with pytest.raises(ClientError) as raised:
        create(sqs, f"src-{number}", RedrivePolicy=redrive(missing))
    assert error_code(raised) == "InvalidParameterValue"


def test_a_fifo_resend_after_the_move_is_deduplicated_against_the_dead_letter(sqs: Any) -> None:
    """A FIFO message moved to the dead-letter queue (maxReceiveCount 1) and sent again with the
    same MessageDeduplicationId within the deduplication interval is answered with its
    MessageId and sequence number and not delivered again from the source, neither while the
    dead-letter queue holds it (once) nor after it was deleted there."""
    number = next(_queues)
    dlq = create(sqs, f"dlq-{number}.fifo")
    source = create(
        sqs, f"src-{number}.fifo", RedrivePolicy=redrive(arn(sqs, dlq), 1), VisibilityTimeout="1"
    )
    request = {
        "QueueUrl": source,
        "MessageBody": "charge",
        "MessageGroupId": "orders",
        "MessageDeduplicationId": "charge-1",
    }
    sent = sqs.send_message(**request)
    (first,) = receive(sqs, source)  # its one allowed receive, never deleted
    assert first["MessageId"] == sent["MessageId"]
    dead = arrival(sqs, dlq)
    assert (dead["MessageId"], dead["Body"]) == (sent["MessageId"], "charge")

    again = sqs.send_message(**{**request, "MessageBody": "charge, sent again"})
    assert (again["MessageId"], again["SequenceNumber"]) == (
        sent["MessageId"],
        sent["SequenceNumber"],
    )
    assert receive(sqs, source, wait=1, MaxNumberOfMessages=10) == []
    assert counts(sqs, source) == (0, 0, 0)
    assert counts(sqs, dlq) == (0, 1, 0)  # once: the copy just received there

    # Deleted in the dead-letter queue, it is still deduplicated in its source.
    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=dead["ReceiptHandle"])
    batch = sqs.send_message_batch(
        QueueUrl=source,
        Entries=[
            {
                "Id": "again",
                "MessageBody": "charge, sent a third time",
                "MessageGroupId": "orders",
                "MessageDeduplicationId": "charge-1",
            }
        ],
    )
    assert [entry["MessageId"] for entry in batch["Successful"]] == [sent["MessageId"]]
    assert receive(sqs, source, wait=1, MaxNumberOfMessages=10) == []
    assert counts(sqs, source) == (0, 0, 0)
    assert counts(sqs, dlq) == (0, 0, 0)
    # The group goes on in the source with a message of another deduplication id.
    next_id = sqs.send_message(**{**request, "MessageDeduplicationId": "charge-2"})["MessageId"]
    (after,) = receive(sqs, source, wait=10, MaxNumberOfMessages=10, VisibilityTimeout=30)
    assert (after["MessageId"], after["Body"]) == (next_id, "charge")
