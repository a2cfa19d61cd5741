"""Signature Version 4 at the SQS door, through the real server: the refusals SQS answers with
(API Reference, "Common Errors"; IAM User Guide, "Troubleshoot signed requests"), for boto3 and
for requests signed by botocore's signer and then tampered with; access keys revoked or expired;
an access key's place beside the REST API's tokens; and one namespace's key against another's
queues."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import httpx
import pytest
from botocore import UNSIGNED
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSPreparedRequest, AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.sqs.conftest import REGION, AccessKey, issue_key, sqs_client

JSON_TYPE = "application/x-amz-json-1.0"


@contextmanager
def clock(at: datetime) -> Iterator[None]:
    """botocore's signer reads the time from ``botocore.auth.get_current_datetime`` (naive UTC)."""
    naive = at.astimezone(UTC).replace(tzinfo=None)
    with mock.patch("botocore.auth.get_current_datetime", return_value=naive):
        yield


def sign(
    server: str,
    key_id: str,
    secret: str,
    action: str,
    params: Mapping[str, Any],
    *,
    at: datetime | None = None,
) -> AWSPreparedRequest:
    """A JSON-protocol request to the door, signed by botocore's SigV4 signer as boto3 signs."""
    request = AWSRequest(
        method="POST",
        url=f"{server}/sqs/",
        data=json.dumps(params).encode(),
        headers={"Content-Type": JSON_TYPE, "X-Amz-Target": f"AmazonSQS.{action}"},
    )
    with clock(at or datetime.now(UTC)):
        SigV4Auth(Credentials(key_id, secret), "sqs", REGION).add_auth(request)
    return request.prepare()


def send(
    prepared: AWSPreparedRequest,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> httpx.Response:
    """Send a prepared request as it is, or with its body or some headers replaced."""
    sent_headers = {k: v for k, v in prepared.headers.items() if k.lower() != "content-length"}
    sent_headers.update(headers or {})  # httpx counts the body it sends
    content = prepared.body if body is None else body
    return httpx.post(prepared.url, content=content, headers=sent_headers, timeout=30)


def refusal(answer: httpx.Response) -> tuple[int, str, str]:
    """Status, ``__type`` (after its ``#``) and ``x-amzn-query-error`` (what the SDKs read the
    code from) of a JSON-protocol error answer."""
    assert answer.headers["content-type"].startswith(JSON_TYPE), answer.text
    shape = answer.json()["__type"].rpartition("#")[2]
    return answer.status_code, shape, answer.headers["x-amzn-query-error"]


def error_of(raised: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    """HTTP status and SQS error code of a boto3 ClientError."""
    response = raised.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def new_namespace(admin_http: httpx.Client, name: str) -> AccessKey:
    """A namespace of its own and an SQS key of it."""
    answer = admin_http.post("/v1/namespaces", json={"name": name})
    assert answer.status_code == 201, answer.text
    return issue_key(admin_http, name)


# --- refusals through boto3 -------------------------------------------------------------------


def test_a_wrong_secret_is_signature_does_not_match(
    sqs_server: str, access_key: AccessKey, sqs: Any
) -> None:
    """The right key id with another secret: 403 SignatureDoesNotMatch, nothing done."""
    wrong = replace(access_key, secret_access_key=access_key.secret_access_key + "x")
    with pytest.raises(ClientError) as raised:
        sqs_client(sqs_server, wrong).create_queue(QueueName="never")
    assert error_of(raised) == (403, "SignatureDoesNotMatch")
    assert sqs.list_queues().get("QueueUrls", []) == []


@pytest.mark.parametrize("key_id", ["SDLKAAAAAAAAAAAAAAAA", "AKIAIOSFODNN7EXAMPLE"])
def test_an_unknown_access_key_id_is_invalid_client_token_id(
    sqs_server: str, access_key: AccessKey, key_id: str
) -> None:
    """A key id never issued (shaped like Sundial's or like AWS's): 403 InvalidClientTokenId."""
    unknown = replace(access_key, access_key_id=key_id)
    with pytest.raises(ClientError) as raised:
        sqs_client(sqs_server, unknown).list_queues()
    assert error_of(raised) == (403, "InvalidClientTokenId")


def test_an_unsigned_request_is_missing_authentication_token(sqs_server: str) -> None:
    """boto3 with signing off sends no Authorization: 403 MissingAuthenticationToken."""
    client = sqs_client(
        sqs_server,
        AccessKey("-", "-", "-", "-"),
        signature_version=UNSIGNED,
    )
    with pytest.raises(ClientError) as raised:
        client.list_queues()
    assert error_of(raised) == (403, "MissingAuthenticationToken")


# --- hand-signed requests, tampered with ------------------------------------------------------


def test_a_hand_signed_request_is_accepted_as_signed(
    sqs_server: str, access_key: AccessKey, sqs: Any
) -> None:
    """The signing the tampering tests start from works untouched (so their refusals are the
    tampering's)."""
    prepared = sign(
        sqs_server,
        access_key.access_key_id,
        access_key.secret_access_key,
        "CreateQueue",
        {"QueueName": "signed"},
    )
    answer = send(prepared)
    assert answer.status_code == 200, answer.text
    assert answer.json()["QueueUrl"].endswith(f"/sqs/{access_key.namespace}/signed")
    assert sqs.get_queue_url(QueueName="signed")["QueueUrl"] == answer.json()["QueueUrl"]


def test_no_authorization_header_is_missing_authentication_token(
    sqs_server: str, access_key: AccessKey
) -> None:
    """A signed request with its Authorization header dropped: 403 MissingAuthenticationToken."""
    prepared = sign(
        sqs_server, access_key.access_key_id, access_key.secret_access_key, "ListQueues", {}
    )
    prepared.headers.pop("Authorization")
    assert refusal(send(prepared)) == (
        403,
        "MissingAuthenticationToken",
        "MissingAuthenticationToken;Sender",
    )


def test_a_body_changed_after_signing_is_refused(
    sqs_server: str, access_key: AccessKey, sqs: Any
) -> None:
    """A body other than the one signed: 403 SignatureDoesNotMatch, and its action not run."""
    prepared = sign(
        sqs_server,
        access_key.access_key_id,
        access_key.secret_access_key,
        "CreateQueue",
        {"QueueName": "signed"},
    )
    answer = send(prepared, body=json.dumps({"QueueName": "forged-and-longer"}).encode())
    assert refusal(answer) == (
        403,
        "SignatureDoesNotMatch",
        "SignatureDoesNotMatch;Sender",
    )
    assert sqs.list_queues().get("QueueUrls", []) == []


def test_a_signed_header_changed_after_signing_is_refused(
    sqs_server: str, access_key: AccessKey, sqs: Any
) -> None:
    """A signed GetQueueAttributes turned into a DeleteQueue through its X-Amz-Target header:
    403 SignatureDoesNotMatch, and the queue is still there."""
    url = sqs.create_queue(QueueName="kept")["QueueUrl"]
    prepared = sign(
        sqs_server,
        access_key.access_key_id,
        access_key.secret_access_key,
        "GetQueueAttributes",
        {"QueueUrl": url},
    )
    answer = send(prepared, headers={"X-Amz-Target": "AmazonSQS.DeleteQueue"})
    assert refusal(answer)[:2] == (403, "SignatureDoesNotMatch")
    assert sqs.list_queues()["QueueUrls"] == [url]


@pytest.mark.parametrize(
    ("offset", "status", "code"),
    [
        (timedelta(minutes=-20), 400, "RequestExpired"),
        (timedelta(minutes=20), 400, "RequestExpired"),
        (timedelta(minutes=-10), 200, None),
    ],
    ids=["20-min-old", "20-min-ahead", "10-min-old"],
)
def test_a_request_signed_more_than_15_minutes_away_has_expired(
    sqs_server: str, access_key: AccessKey, offset: timedelta, status: int, code: str | None
) -> None:
    """X-Amz-Date over 15 minutes from the server's time either way: 400 RequestExpired; within
    them, the request is good."""
    prepared = sign(
        sqs_server,
        access_key.access_key_id,
        access_key.secret_access_key,
        "ListQueues",
        {},
        at=datetime.now(UTC) + offset,
    )
    answer = send(prepared)
    assert answer.status_code == status, answer.text
    if code is not None:
        assert refusal(answer) == (status, code, f"{code};Sender")


def test_boto3_with_a_slow_clock_gets_request_expired(
    sqs_server: str, access_key: AccessKey
) -> None:
    """boto3 signing with a clock 20 minutes behind: ClientError RequestExpired, 400."""
    client = sqs_client(sqs_server, access_key)
    with clock(datetime.now(UTC) - timedelta(minutes=20)), pytest.raises(ClientError) as raised:
        client.list_queues()
    assert error_of(raised) == (400, "RequestExpired")


# --- keys revoked and expired -----------------------------------------------------------------


def test_a_revoked_key_is_refused_on_the_next_request(
    sqs_server: str, admin_http: httpx.Client, access_key: AccessKey, sqs: Any
) -> None:
    """A key that worked is refused (InvalidClientTokenId) on the request right after its
    revocation was answered; another key of the namespace goes on working."""
    other = sqs_client(sqs_server, issue_key(admin_http, access_key.namespace))
    url = sqs.create_queue(QueueName="before")["QueueUrl"]
    answer = admin_http.delete(
        f"/v1/namespaces/{access_key.namespace}/tokens/{access_key.token_id}"
    )
    assert answer.status_code == 204, answer.text
    with pytest.raises(ClientError) as raised:
        sqs.send_message(QueueUrl=url, MessageBody="after")
    assert error_of(raised) == (403, "InvalidClientTokenId")
    assert "Messages" not in other.receive_message(QueueUrl=url, WaitTimeSeconds=0)


def test_an_expired_key_is_refused(
    sqs_server: str, admin_http: httpx.Client, access_key: AccessKey
) -> None:
    """A key issued with ``expires_at`` works until then and is refused from then on."""
    namespace = access_key.namespace
    expires_at = datetime.now(UTC) + timedelta(seconds=3)
    answer = admin_http.post(
        f"/v1/namespaces/{namespace}/tokens",
        json={"kind": "sqs", "expires_at": expires_at.isoformat()},
    )
    assert answer.status_code == 201, answer.text
    issued = answer.json()
    assert issued["kind"] == "sqs"
    key = AccessKey(namespace, issued["access_key_id"], issued["token"], issued["id"])
    client = sqs_client(sqs_server, key)
    client.list_queues()  # good before it expires
    assert datetime.now(UTC) < expires_at, "the machine was too slow to see the key work"
    deadline = time.monotonic() + 15
    code = None
    while code is None:
        assert time.monotonic() < deadline, "the expired key still works"
        time.sleep(0.1)
        try:
            client.list_queues()
        except ClientError as error:
            refused_at, code = datetime.now(UTC), error.response["Error"]["Code"]
    assert code == "InvalidClientTokenId"
    assert refused_at >= expires_at - timedelta(seconds=1)  # the database's clock is the judge


# --- an access key beside the REST API's tokens -----------------------------------------------


def test_the_secret_access_key_is_not_a_bearer_token(
    sqs_server: str, admin_http: httpx.Client, access_key: AccessKey
) -> None:
    """Neither the secret nor the key id opens the REST API (401), where a namespace token of
    the same namespace does."""
    path = f"/v1/namespaces/{access_key.namespace}/queues"
    for presented in (access_key.secret_access_key, access_key.access_key_id):
        answer = httpx.get(
            f"{sqs_server}{path}", headers={"Authorization": f"Bearer {presented}"}, timeout=30
        )
        assert answer.status_code == 401, answer.text
    issued = admin_http.post(f"/v1/namespaces/{access_key.namespace}/tokens", json={})
    assert issued.status_code == 201, issued.text
    bearer = issued.json()["token"]
    answer = httpx.get(
        f"{sqs_server}{path}", headers={"Authorization": f"Bearer {bearer}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text


def test_a_listed_key_shows_its_id_and_never_its_secret(
    admin_http: httpx.Client, access_key: AccessKey
) -> None:
    """Listing a namespace's tokens shows the key as ``kind: sqs`` with its access key id, and
    its secret nowhere."""
    answer = admin_http.get(f"/v1/namespaces/{access_key.namespace}/tokens")
    assert answer.status_code == 200, answer.text
    assert access_key.secret_access_key not in answer.text
    (listed,) = [t for t in answer.json()["tokens"] if t["id"] == access_key.token_id]
    assert listed["kind"] == "sqs"
    assert listed["access_key_id"] == access_key.access_key_id
    assert "token" not in listed


def test_a_secret_shaped_like_a_namespace_token_is_still_not_a_bearer_token(
    sqs_server: str, admin_http: httpx.Client, access_key: AccessKey
) -> None:
    """An SQS secret that happens to begin with ``sdl_`` opens no REST endpoint either."""
    drawn = "sdl_" + "x" * 36
    with mock.patch("app.core.service.tokens.secrets.token_urlsafe", return_value=drawn):
        key = issue_key(admin_http, access_key.namespace)
    assert key.secret_access_key == drawn
    answer = httpx.get(
        f"{sqs_server}/v1/namespaces/{access_key.namespace}/queues",
        headers={"Authorization": f"Bearer {drawn}"},
        timeout=30,
    )
    assert answer.status_code == 401, answer.text


# --- namespaces are accounts ------------------------------------------------------------------


def test_a_key_sees_and_touches_only_its_own_namespace(
    sqs_server: str, admin_http: httpx.Client, access_key: AccessKey, sqs: Any
) -> None:
    """A's key: B's queue does not exist for it, by name, by owner or by URL, for reading and
    writing alike; A's ListQueues shows A's only; B's queue and message are left as they were."""
    other_key = new_namespace(admin_http, f"{access_key.namespace}-b")
    other = sqs_client(sqs_server, other_key)
    theirs = other.create_queue(QueueName="shared")["QueueUrl"]
    other.send_message(QueueUrl=theirs, MessageBody="B's")
    mine = sqs.create_queue(QueueName="mine")["QueueUrl"]

    missing = sqs.exceptions.QueueDoesNotExist
    with pytest.raises(missing):
        sqs.get_queue_url(QueueName="shared")
    with pytest.raises(missing):
        sqs.get_queue_url(QueueName="shared", QueueOwnerAWSAccountId=other_key.namespace)
    calls = [
        lambda: sqs.receive_message(QueueUrl=theirs, WaitTimeSeconds=0),
        lambda: sqs.send_message(QueueUrl=theirs, MessageBody="A's"),
        lambda: sqs.get_queue_attributes(QueueUrl=theirs, AttributeNames=["All"]),
        lambda: sqs.set_queue_attributes(QueueUrl=theirs, Attributes={"DelaySeconds": "5"}),
        lambda: sqs.purge_queue(QueueUrl=theirs),
        lambda: sqs.delete_queue(QueueUrl=theirs),
    ]
    for call in calls:
        with pytest.raises(missing):
            call()
    assert sqs.list_queues()["QueueUrls"] == [mine]
    assert other.list_queues()["QueueUrls"] == [theirs]

    attributes = other.get_queue_attributes(QueueUrl=theirs, AttributeNames=["All"])["Attributes"]
    assert attributes["DelaySeconds"] == "0"
    (message,) = other.receive_message(QueueUrl=theirs, WaitTimeSeconds=1)["Messages"]
    assert message["Body"] == "B's"

    # The same name in A is A's own queue, apart from B's.
    same_name = sqs.create_queue(QueueName="shared")["QueueUrl"]
    assert same_name != theirs
    assert same_name.endswith(f"/sqs/{access_key.namespace}/shared")
    assert "Messages" not in sqs.receive_message(QueueUrl=same_name, WaitTimeSeconds=0)
