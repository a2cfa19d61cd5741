"""The AWS CLI (``aws sqs …``, the venv's) against the SQS door, with nothing but its endpoint
changed: one queue's whole life in one test (each call starts a Python process, about a second),
and an error as the CLI reports it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.sqs.conftest import REGION, AccessKey, counts

AWS = Path(sys.executable).parent / "aws"


def aws(
    server: str, key: AccessKey, home: Path, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``aws sqs <args>`` with the key in its environment and no configuration of the machine's
    (no config or credentials files, no profile, no retries)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "AWS_ACCESS_KEY_ID": key.access_key_id,
        "AWS_SECRET_ACCESS_KEY": key.secret_access_key,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": str(home / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_MAX_ATTEMPTS": "1",
        "AWS_RETRY_MODE": "standard",
    }
    command = [str(AWS), "sqs", *args, "--endpoint-url", f"{server}/sqs", "--output", "json"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def output(done: subprocess.CompletedProcess[str]) -> Any:
    """The JSON the CLI printed (an action without a result prints nothing)."""
    return json.loads(done.stdout) if done.stdout.strip() else None


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def test_a_queue_s_life_through_the_cli(
    sqs_server: str, access_key: AccessKey, sqs: Any, tmp_path: Path
) -> None:
    """create-queue, get-queue-url, tag-queue/list-queue-tags, send-message with attributes,
    receive-message with all attributes, delete-message, send-message-batch,
    get-queue-attributes, list-queues, purge-queue and delete-queue each do what SQS's do."""

    def run(*args: str) -> Any:
        return output(aws(sqs_server, access_key, tmp_path, *args))

    created = run(
        "create-queue",
        "--queue-name",
        "cli",
        "--attributes",
        "VisibilityTimeout=45",
        "--tags",
        "team=core",
    )
    url = created["QueueUrl"]
    assert url == f"{sqs_server}/sqs/{access_key.namespace}/cli"
    assert run("get-queue-url", "--queue-name", "cli") == {"QueueUrl": url}

    assert run("tag-queue", "--queue-url", url, "--tags", "stage=test") is None
    assert run("list-queue-tags", "--queue-url", url) == {"Tags": {"team": "core", "stage": "test"}}

    attributes = {
        "colour": {"DataType": "String", "StringValue": "red"},
        "count": {"DataType": "Number", "StringValue": "3"},
    }
    sent = run(
        "send-message",
        "--queue-url",
        url,
        "--message-body",
        "hello from the CLI",
        "--message-attributes",
        json.dumps(attributes),
    )
    assert sent["MD5OfMessageBody"] == md5("hello from the CLI")
    assert sent["MD5OfMessageAttributes"]

    received = run(
        "receive-message",
        "--queue-url",
        url,
        "--attribute-names",
        "All",
        "--message-attribute-names",
        "All",
        "--wait-time-seconds",
        "1",
    )
    (message,) = received["Messages"]
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == "hello from the CLI"
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert message["MessageAttributes"] == attributes
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    handle = message["ReceiptHandle"]
    assert run("delete-message", "--queue-url", url, "--receipt-handle", handle) is None
    assert counts(sqs, url)[:2] == (0, 0)  # none visible, none in flight

    entries = [{"Id": "a", "MessageBody": "one"}, {"Id": "b", "MessageBody": "two"}]
    batch = run("send-message-batch", "--queue-url", url, "--entries", json.dumps(entries))
    assert sorted(e["Id"] for e in batch["Successful"]) == ["a", "b"]
    assert batch.get("Failed", []) == []

    queue = run("get-queue-attributes", "--queue-url", url, "--attribute-names", "All")
    assert queue["Attributes"]["VisibilityTimeout"] == "45"
    assert queue["Attributes"]["ApproximateNumberOfMessages"] == "2"
    assert queue["Attributes"]["QueueArn"] == f"arn:aws:sqs:{REGION}:{access_key.namespace}:cli"

    sqs.create_queue(QueueName="cli-other")
    listed = run("list-queues", "--queue-name-prefix", "cli")
    assert sorted(listed["QueueUrls"]) == [
        url,
        f"{sqs_server}/sqs/{access_key.namespace}/cli-other",
    ]

    assert run("purge-queue", "--queue-url", url) is None
    after = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert after["Attributes"]["ApproximateNumberOfMessages"] == "0"

    assert run("delete-queue", "--queue-url", url) is None
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="cli")


def test_an_error_exits_non_zero_with_the_sqs_code(
    sqs_server: str, access_key: AccessKey, tmp_path: Path
) -> None:
    """A queue that does not exist: the CLI exits non-zero and names SQS's error code."""
    done = aws(
        sqs_server, access_key, tmp_path, "get-queue-url", "--queue-name", "nowhere", check=False
    )
    assert done.returncode != 0
    assert done.stdout == ""
    assert "AWS.SimpleQueueService.NonExistentQueue" in done.stderr
    assert "GetQueueUrl" in done.stderr
