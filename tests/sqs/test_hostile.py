"""No request a client can send makes the SQS door answer 500: correctly signed requests of every
action with parameters of any shape and type (hypothesis), in both wire protocols, are answered
200 or with an SQS error of the request's protocol."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.sqs.actions import ACTIONS
from tests.sqs.conftest import REGION, AccessKey

# Members the actions read, and a few they do not: the generator's vocabulary.
MEMBERS = [
    "QueueUrl",
    "QueueName",
    "Attributes",
    "AttributeNames",
    "MessageAttributeNames",
    "MessageSystemAttributeNames",
    "MessageBody",
    "MessageAttributes",
    "MessageSystemAttributes",
    "MessageGroupId",
    "MessageDeduplicationId",
    "DelaySeconds",
    "MaxNumberOfMessages",
    "WaitTimeSeconds",
    "VisibilityTimeout",
    "ReceiptHandle",
    "Entries",
    "Id",
    "Tags",
    "tags",
    "TagKeys",
    "QueueNamePrefix",
    "NextToken",
    "MaxResults",
    "QueueOwnerAWSAccountId",
    "Unknown",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.sampled_from(["", "All", ".*", "true", "-1", "0", "21", "1e309", "\x00", "\ud7ff"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(MEMBERS) | st.text(max_size=8), inner, max_size=4),
    ),
    max_leaves=12,
)


def _signed(server: str, key: AccessKey, body: bytes, headers: dict[str, str]) -> AWSRequest:
    request = AWSRequest(method="POST", url=f"{server}/sqs/", data=body, headers=headers)
    credentials = Credentials(key.access_key_id, key.secret_access_key)
    SigV4Auth(credentials, "sqs", REGION).add_auth(request)
    return request


def _send(http: httpx.Client, request: AWSRequest) -> httpx.Response:
    prepared = request.prepare()
    return http.post(prepared.url, content=prepared.body, headers=dict(prepared.headers))


@pytest.fixture
def http() -> Any:
    with httpx.Client(timeout=30) as client:
        yield client


@pytest.fixture
def fuzz_key(sqs: Any, access_key: AccessKey) -> AccessKey:
    """The test's key, with a queue ``fuzz`` the generated requests often name: so that the
    actions get past the lookup of the queue."""
    sqs.create_queue(QueueName="fuzz")
    return access_key


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    action=st.sampled_from(sorted(ACTIONS)),
    params=st.dictionaries(st.sampled_from(MEMBERS), values, max_size=6),
    queue_url=st.booleans(),
)
def test_json_requests_of_any_shape_are_answered_as_sqs_answers(
    sqs_server: str,
    fuzz_key: AccessKey,
    http: httpx.Client,
    action: str,
    params: dict[str, Any],
    queue_url: bool,
) -> None:
    """Any JSON body (signed) is answered 200, or 4xx with an SQS error naming its type."""
    if queue_url:  # often a real queue, so the actions get past the queue lookup
        params["QueueUrl"] = f"{sqs_server}/sqs/{fuzz_key.namespace}/fuzz"
    body = json.dumps(params).encode()
    headers = {
        "X-Amz-Target": f"AmazonSQS.{action}",
        "Content-Type": "application/x-amz-json-1.0",
    }
    answer = _send(http, _signed(sqs_server, fuzz_key, body, headers))
    assert answer.status_code < 500, answer.text
    if answer.status_code != 200:
        error = answer.json()
        assert error["__type"].startswith("com.amazonaws.sqs#"), answer.text
        assert error["message"]
        assert ";" in answer.headers["x-amzn-query-error"]


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    action=st.sampled_from([*sorted(ACTIONS), "Nope", ""]),
    fields=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "QueueName",
                    "QueueUrl",
                    "MessageBody",
                    "Attribute.1.Name",
                    "Attribute.1.Value",
                    "MessageAttribute.1.Name",
                    "MessageAttribute.1.Value.DataType",
                    "MessageAttribute.1.Value.StringValue",
                    "MessageAttribute.1.Value.BinaryValue",
                    "SendMessageBatchRequestEntry.1.Id",
                    "SendMessageBatchRequestEntry.1.MessageBody",
                    "DeleteMessageBatchRequestEntry.2.ReceiptHandle",
                    "AttributeName.1",
                    "MaxNumberOfMessages",
                    "WaitTimeSeconds",
                    "ReceiptHandle",
                    "Tag.1.Key",
                    "TagKey.x",
                    "Attribute..Name",
                ]
            ),
            st.text(max_size=20),
        ),
        max_size=6,
    ),
)
def test_query_requests_of_any_shape_are_answered_as_sqs_answers(
    sqs_server: str,
    fuzz_key: AccessKey,
    http: httpx.Client,
    action: str,
    fields: list[tuple[str, str]],
) -> None:
    """Any form (signed) is answered 200 with XML, or 4xx with an XML ``<ErrorResponse>``."""
    body = urlencode([("Action", action), ("Version", "2012-11-05"), *fields]).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    answer = _send(http, _signed(sqs_server, fuzz_key, body, headers))
    assert answer.status_code < 500, answer.text
    root = ET.fromstring(answer.content)
    if answer.status_code != 200:
        assert root.tag.endswith("ErrorResponse"), answer.text
        assert root.find(".//{*}Code") is not None, answer.text
