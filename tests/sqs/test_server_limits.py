"""The server's limits as the SQS door applies them: the rate limit counts SQS requests per
access key, as it counts REST requests per token, and answers the one over it as SQS throttles
(``RequestThrottled``, which SDKs retry); an SQS message is held to its queue's
MaximumMessageSize, not to the server's payload limit."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.api.conftest import ADMIN_TOKEN
from tests.client.server import running_server
from tests.sqs.conftest import issue_key, sqs_client

if TYPE_CHECKING:
    from tests.conftest import TestDatabase


def test_requests_over_the_rate_limit_are_throttled_per_key(postgres: TestDatabase) -> None:
    """Five requests a minute per key: the sixth of one key is RequestThrottled, while another
    key of the same namespace still has its own five."""
    database = postgres.create()
    try:
        with running_server(postgres.url(database), rate_limit="5/minute") as server:
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            with httpx.Client(base_url=server, headers=headers, timeout=30) as admin:
                assert admin.post("/v1/namespaces", json={"name": "acct"}).status_code == 201
                first = sqs_client(server, issue_key(admin, "acct"))
                second = sqs_client(server, issue_key(admin, "acct"))
            for _ in range(5):
                first.list_queues()
            with pytest.raises(ClientError) as refused:
                first.list_queues()
            assert refused.value.response["Error"]["Code"] == "RequestThrottled"
            assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
            second.list_queues()  # a key of its own: not throttled by the first's requests
    finally:
        postgres.drop(database)


def test_a_message_of_the_queues_maximum_size_fits_whatever_the_payload_limit(
    postgres: TestDatabase,
) -> None:
    """A body of exactly MaximumMessageSize (256 KiB by default) is accepted and comes back
    whole, though its JSON string is longer than the body and the server's payload limit is
    lower (64 KiB here): the queue's maximum is an SQS message's limit. One byte more is
    refused."""
    database = postgres.create()
    try:
        with running_server(postgres.url(database), max_payload_bytes=64 * 1024) as server:
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            with httpx.Client(base_url=server, headers=headers, timeout=30) as admin:
                assert admin.post("/v1/namespaces", json={"name": "acct"}).status_code == 201
                sqs = sqs_client(server, issue_key(admin, "acct"))
            url = sqs.create_queue(QueueName="big")["QueueUrl"]
            body = "\t" * 1024 + "x" * (262_144 - 1024)  # tabs: 2 bytes each in JSON
            sqs.send_message(QueueUrl=url, MessageBody=body)
            (got,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
            assert got["Body"] == body
            with pytest.raises(ClientError) as refused:
                sqs.send_message(QueueUrl=url, MessageBody=body + "x")
            assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
    finally:
        postgres.drop(database)
