"""SQS door fixtures: one real server for the run (on a database of its own, with the scheduler
running), and for each test a namespace of its own with an SQS access key and a boto3 client
signing with it, as an SQS user's program would."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.api.conftest import ADMIN_TOKEN
from tests.client.server import running_server
from tests.conftest import TestDatabase

REGION = "eu-west-1"
_names = itertools.count()


@dataclass(frozen=True)
class AccessKey:
    """An SQS access key of a namespace."""

    namespace: str
    access_key_id: str
    secret_access_key: str
    token_id: str


@pytest.fixture(scope="session")
def sqs_database(postgres: TestDatabase) -> Iterator[str]:
    """The database the SQS tests' server serves."""
    database = postgres.create()
    try:
        yield database
    finally:
        postgres.drop(database)


@pytest.fixture(scope="session")
def sqs_dsn(postgres: TestDatabase, sqs_database: str) -> str:
    """The libpq DSN of that database."""
    return postgres.dsn(sqs_database)


@pytest.fixture(scope="session")
def sqs_server(postgres: TestDatabase, sqs_database: str) -> Iterator[str]:
    """The root URL of a server whose SQS door is at ``/sqs``."""
    limits = {"max_payload_bytes": 1 << 20, "max_body_bytes": 4 << 20}
    with running_server(postgres.url(sqs_database), **limits) as url:
        yield url


@pytest.fixture(scope="session")
def admin_http(sqs_server: str) -> Iterator[httpx.Client]:
    """The REST API with the admin token."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=sqs_server, headers=headers, timeout=30) as client:
        yield client


def issue_key(admin_http: httpx.Client, namespace: str) -> AccessKey:
    """A new SQS access key of ``namespace``, issued through the admin API."""
    answer = admin_http.post(f"/v1/namespaces/{namespace}/tokens", json={"kind": "sqs"})
    assert answer.status_code == 201, answer.text
    body = answer.json()
    return AccessKey(namespace, body["access_key_id"], body["token"], body["id"])


@pytest.fixture
def access_key(admin_http: httpx.Client) -> AccessKey:
    """A namespace of this test's own and an SQS access key of it."""
    namespace = f"acct-{next(_names)}"
    answer = admin_http.post("/v1/namespaces", json={"name": namespace})
    assert answer.status_code == 201, answer.text
    return issue_key(admin_http, namespace)


def sqs_client(server: str, key: AccessKey, **config: Any) -> Any:
    """A boto3 SQS client of ``key`` against the door."""
    return boto3.client(
        "sqs",
        endpoint_url=f"{server}/sqs",
        region_name=REGION,
        aws_access_key_id=key.access_key_id,
        aws_secret_access_key=key.secret_access_key,
        config=Config(**{"retries": {"max_attempts": 0, "mode": "standard"}, **config}),
    )


@pytest.fixture
def sqs(sqs_server: str, access_key: AccessKey) -> Any:
    """A boto3 SQS client of this test's namespace."""
    return sqs_client(sqs_server, access_key)


def error_code(raised: pytest.ExceptionInfo[ClientError]) -> str:
    """The SQS error code a call was refused with."""
    return str(raised.value.response["Error"]["Code"])


def counts(sqs: Any, url: str) -> tuple[int, int, int]:
    """The queue's visible, in-flight and delayed message counts."""
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    visible, in_flight, delayed = (int(found[name]) for name in names)
    return visible, in_flight, delayed
