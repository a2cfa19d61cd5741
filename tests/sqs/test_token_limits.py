"""An SQS access key is a token: its own read and write rate limits hold at the SQS door too
(reads: ReceiveMessage and the actions that only read; writes: every other action), refused as
SQS refuses a throttled request."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import AccessKey, error_code

SLOW = 0.01  # one request per 100 s


def limit(admin_http: httpx.Client, key: AccessKey, **limits: float | None) -> None:
    path = f"/v1/namespaces/{key.namespace}/tokens/{key.token_id}"
    answer = admin_http.patch(path, json=limits)
    assert answer.status_code == 200, answer.text


def test_an_access_key_is_held_to_its_limits(
    sqs: Any, admin_http: httpx.Client, access_key: AccessKey
) -> None:
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    limit(admin_http, access_key, read_rate=SLOW)
    sqs.receive_message(QueueUrl=url)
    with pytest.raises(ClientError) as refused:
        sqs.get_queue_attributes(QueueUrl=url)
    assert error_code(refused) == "RequestThrottled"
    sqs.send_message(QueueUrl=url, MessageBody="writes are not limited")

    limit(admin_http, access_key, read_rate=None, write_rate=SLOW)
    sqs.get_queue_attributes(QueueUrl=url)  # lifted at once
    sqs.send_message(QueueUrl=url, MessageBody="the one write")
    with pytest.raises(ClientError) as refused:
        sqs.delete_queue(QueueUrl=url)
    assert error_code(refused) == "RequestThrottled"
