"""The server's rate limit counts SQS requests per access key, as it counts REST requests per
token, and answers the one over it as SQS throttles: ``RequestThrottled``, which SDKs retry."""

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
