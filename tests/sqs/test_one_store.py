"""One store: a message sent through the SQS door is a Sundial message, seen by the REST API, the
SQL reporting views and the metrics, and a message enqueued through the REST API is received
through the door; a lease taken through one door fences the other."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import psycopg

from tests.sqs.conftest import AccessKey


def _rest(key: AccessKey, queue: str) -> str:
    return f"/v1/namespaces/{key.namespace}/queues/{queue}"


def test_a_message_sent_through_sqs_is_a_sundial_message(
    sqs: Any, access_key: AccessKey, admin_http: httpx.Client, sqs_dsn: str
) -> None:
    """The REST API shows the body as a JSON string payload and the attributes as metadata; the
    SQL views count and list it; completing it through SQS is seen everywhere."""
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    sent = sqs.send_message(
        QueueUrl=url,
        MessageBody='{"order": 7}',
        MessageAttributes={
            "tenant": {"DataType": "String", "StringValue": "acme"},
            "weight": {"DataType": "Number", "StringValue": "2.5"},
        },
    )
    base = _rest(access_key, "orders")

    message = admin_http.get(f"{base}/messages/{sent['MessageId']}").json()
    assert message["state"] == "pending"
    assert message["payload"] == '{"order": 7}'  # the body, exactly, as a JSON string
    assert message["metadata"]["tenant"] == "acme"
    assert message["metadata"]["weight"] == "2.5"
    assert json.loads(message["metadata"]["sqs:types"]) == {"weight": "Number"}

    with psycopg.connect(sqs_dsn) as conn:
        row = conn.execute(
            "SELECT state, metadata ->> 'tenant' FROM reporting.messages"
            " WHERE namespace = %s AND queue = 'orders' AND id = %s",
            (access_key.namespace, sent["MessageId"]),
        ).fetchone()
    assert row == ("pending", "acme")

    received = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"][0]
    running = admin_http.get(f"{base}/messages/{sent['MessageId']}").json()
    assert (running["state"], running["attempts"]) == ("running", 1)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received["ReceiptHandle"])
    done = admin_http.get(f"{base}/messages/{sent['MessageId']}").json()
    assert done["state"] == "completed"

    with psycopg.connect(sqs_dsn) as conn:
        (completed,) = conn.execute(
            "SELECT messages FROM reporting.queue_depth"
            " WHERE namespace = %s AND queue = 'orders' AND state = 'completed'",
            (access_key.namespace,),
        ).fetchone()
    assert completed == 1

    metrics = admin_http.get("/metrics").text
    enqueued = re.search(
        rf'sundial_messages_enqueued_total\{{[^}}]*namespace="{access_key.namespace}"'
        rf'[^}}]*queue="orders"[^}}]*\}} (\S+)',
        metrics,
    )
    assert enqueued is not None, metrics[:2000]
    assert float(enqueued.group(1)) == 1.0
    # The HTTP metrics label the door's requests per action.
    assert 'path="/sqs:SendMessage"' in metrics
    assert 'path="/sqs:DeleteMessage"' in metrics


def test_a_message_enqueued_through_rest_is_received_through_sqs(
    sqs: Any, access_key: AccessKey, admin_http: httpx.Client
) -> None:
    """A REST producer's payload arrives as its JSON text, its metadata as String attributes;
    an SQS consumer's delete completes it, and a REST consumer's stale lease is then refused."""
    url = sqs.create_queue(QueueName="mixed")["QueueUrl"]
    base = _rest(access_key, "mixed")
    answer = admin_http.post(
        f"{base}/messages",
        json={"messages": [{"id": "rest-1", "payload": {"a": [1, 2]}, "metadata": {"k": "v"}}]},
    )
    assert answer.status_code == 201, answer.text

    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], WaitTimeSeconds=5)
    (message,) = got["Messages"]
    assert message["MessageId"] == "rest-1"
    assert json.loads(message["Body"]) == {"a": [1, 2]}
    assert message["MessageAttributes"] == {"k": {"DataType": "String", "StringValue": "v"}}

    # The lease the SQS receive took is the message's: a REST complete without it is refused.
    stale = {"lease_id": "00000000-0000-4000-8000-000000000000"}
    refused = admin_http.post(f"{base}/messages/rest-1/complete", json=stale)
    assert refused.status_code == 409, refused.text
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert admin_http.get(f"{base}/messages/rest-1").json()["state"] == "completed"


def test_a_lease_taken_through_rest_fences_an_sqs_consumer(
    sqs: Any, access_key: AccessKey, admin_http: httpx.Client
) -> None:
    """A message leased through the REST API is not received through SQS while its lease runs,
    and an SQS queue's FIFO group is exclusive across both doors."""
    url = sqs.create_queue(
        QueueName="jobs.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="first", MessageGroupId="g")
    sqs.send_message(QueueUrl=url, MessageBody="second", MessageGroupId="g")
    base = _rest(access_key, "jobs.fifo")

    leased = admin_http.post(f"{base}/dequeue", json={"count": 10}).json()["messages"]
    assert [m["payload"] for m in leased] == ["first"]  # one per group, as through SQS
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages") is None

    done = admin_http.post(
        f"{base}/messages/{leased[0]['id']}/complete", json={"lease_id": leased[0]["lease_id"]}
    )
    assert done.status_code == 200, done.text
    (second,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert second["Body"] == "second"


def test_metadata_a_rest_client_typed_oddly_is_received_as_strings(
    sqs: Any, access_key: AccessKey, admin_http: httpx.Client
) -> None:
    """REST metadata under the door's own key that no SQS send would write (a types entry that
    is not JSON, names a type SQS lacks, or calls a non-base64 value Binary) is received as
    String attributes, with a digest that matches them."""
    url = sqs.create_queue(QueueName="odd")["QueueUrl"]
    base = _rest(access_key, "odd")
    for n, types in enumerate(['{"b": "Binary", "t": "Table"}', "[1, 2]", "not json"]):
        metadata = {"b": "not base64!", "t": "x", "sqs:types": types}
        answer = admin_http.post(
            f"{base}/messages", json={"messages": [{"id": f"m{n}", "metadata": metadata}]}
        )
        assert answer.status_code == 201, answer.text
        (got,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
        assert got["MessageAttributes"] == {
            "b": {"DataType": "String", "StringValue": "not base64!"},
            "t": {"DataType": "String", "StringValue": "x"},
        }
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"])
