"""The SQS queue actions through boto3 against a real server: creating queues with their
attributes (and refusing what SQS refuses), finding, listing, deleting and purging them, reading
and changing their attributes, tags and dead-letter sources, and another namespace's queues
staying out of sight."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import REGION, AccessKey, counts, error_code, issue_key, sqs_client

NON_EXISTENT = "AWS.SimpleQueueService.NonExistentQueue"
_others = itertools.count()


def attributes_of(sqs: Any, url: str, *names: str) -> dict[str, str]:
    """The queue's attributes ``names`` (every one when none is named)."""
    answer = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(names) or ["All"])
    return dict(answer.get("Attributes", {}))


def arn(namespace: str, name: str) -> str:
    """The ARN SQS names a queue of ``namespace`` by."""
    return f"arn:aws:sqs:{REGION}:{namespace}:{name}"


def redrive(namespace: str, dead_letter: str, count: int) -> str:
    """A RedrivePolicy attribute sending dead letters to ``dead_letter`` after ``count``."""
    return json.dumps(
        {"deadLetterTargetArn": arn(namespace, dead_letter), "maxReceiveCount": count}
    )


def queue_names(sqs: Any, **request: Any) -> list[str]:
    """The names of the queues one ListQueues answers, sorted."""
    return sorted(url.rsplit("/", 1)[-1] for url in sqs.list_queues(**request).get("QueueUrls", []))


@pytest.fixture
def other(sqs_server: str, admin_http: httpx.Client) -> tuple[AccessKey, Any]:
    """Another namespace (another account) with an SQS key, and a client of it."""
    namespace = f"other-{next(_others)}"
    answer = admin_http.post("/v1/namespaces", json={"name": namespace})
    assert answer.status_code == 201, answer.text
    key = issue_key(admin_http, namespace)
    return key, sqs_client(sqs_server, key)


# --- CreateQueue ----------------------------------------------------------------------------------

SETTABLE = {
    "VisibilityTimeout": "45",
    "DelaySeconds": "7",
    "MessageRetentionPeriod": "86400",
    "ReceiveMessageWaitTimeSeconds": "3",
    "MaximumMessageSize": "2048",
}


def test_create_queue_with_every_settable_attribute(sqs: Any, access_key: AccessKey) -> None:
    """Each attribute given at creation reads back as given, the redrive policy included; the
    URL names the namespace and the queue."""
    sqs.create_queue(QueueName="dead")
    policy = redrive(access_key.namespace, "dead", 4)
    url = sqs.create_queue(QueueName="work", Attributes={**SETTABLE, "RedrivePolicy": policy})[
        "QueueUrl"
    ]
    assert url.endswith(f"/sqs/{access_key.namespace}/work")
    got = attributes_of(sqs, url)
    assert {name: got[name] for name in SETTABLE} == SETTABLE
    assert json.loads(got["RedrivePolicy"]) == {
        "deadLetterTargetArn": arn(access_key.namespace, "dead"),
        "maxReceiveCount": 4,
    }
    assert "FifoQueue" not in got


def test_create_queue_defaults(sqs: Any) -> None:
    """A queue made without attributes has SQS's defaults and no redrive policy."""
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    got = attributes_of(sqs, url)
    assert got["VisibilityTimeout"] == "30"
    assert got["DelaySeconds"] == "0"
    assert got["MessageRetentionPeriod"] == "345600"
    assert got["ReceiveMessageWaitTimeSeconds"] == "0"
    assert "RedrivePolicy" not in got
    assert "FifoQueue" not in got
    assert "ContentBasedDeduplication" not in got
    now = time.time()
    for stamp in ("CreatedTimestamp", "LastModifiedTimestamp"):
        assert now - 120 < int(got[stamp]) <= now + 1


def test_create_queue_again_answers_the_same_url(sqs: Any, access_key: AccessKey) -> None:
    """CreateQueue of an existing queue with the same attributes (or none, or a subset) answers
    its URL, the redrive policy written another way included, and changes nothing."""
    sqs.create_queue(QueueName="dead")
    given = {**SETTABLE, "RedrivePolicy": redrive(access_key.namespace, "dead", 4)}
    url = sqs.create_queue(QueueName="again", Attributes=given)["QueueUrl"]
    before = attributes_of(sqs, url)
    spelled = json.dumps(
        {"maxReceiveCount": "4", "deadLetterTargetArn": arn(access_key.namespace, "dead")},
        indent=1,
    )
    assert sqs.create_queue(QueueName="again", Attributes=given)["QueueUrl"] == url
    again = {**given, "RedrivePolicy": spelled}
    assert sqs.create_queue(QueueName="again", Attributes=again)["QueueUrl"] == url
    assert sqs.create_queue(QueueName="again")["QueueUrl"] == url
    assert sqs.create_queue(QueueName="again", Attributes={"DelaySeconds": "7"})["QueueUrl"] == url
    assert attributes_of(sqs, url) == before
    plain = sqs.create_queue(QueueName="plain")["QueueUrl"]
    no_policy = {"RedrivePolicy": ""}
    assert sqs.create_queue(QueueName="plain", Attributes=no_policy)["QueueUrl"] == plain
    assert queue_names(sqs) == ["again", "dead", "plain"]


@pytest.mark.parametrize(
    "changed",
    [
        {"VisibilityTimeout": "46"},
        {"DelaySeconds": "0"},
        {"MaximumMessageSize": "4096"},
        {"ReceiveMessageWaitTimeSeconds": "0"},
        {"MessageRetentionPeriod": "60"},
    ],
)
def test_create_queue_with_other_attributes_is_refused(sqs: Any, changed: dict[str, str]) -> None:
    """CreateQueue of an existing name with a different value answers QueueNameExists (code
    QueueAlreadyExists) and leaves the queue as it was."""
    url = sqs.create_queue(QueueName="taken", Attributes=SETTABLE)["QueueUrl"]
    before = attributes_of(sqs, url)
    with pytest.raises(sqs.exceptions.QueueNameExists) as raised:
        sqs.create_queue(QueueName="taken", Attributes={**SETTABLE, **changed})
    assert error_code(raised) == "QueueAlreadyExists"
    assert attributes_of(sqs, url) == before


def test_create_queue_with_a_redrive_policy_other_than_the_queues(
    sqs: Any, access_key: AccessKey
) -> None:
    """An existing queue with a redrive policy is not the one asked for with another policy,
    nor with none where it has one."""
    sqs.create_queue(QueueName="dead")
    sqs.create_queue(QueueName="plain")
    policy = redrive(access_key.namespace, "dead", 4)
    sqs.create_queue(QueueName="src", Attributes={"RedrivePolicy": policy})
    with pytest.raises(sqs.exceptions.QueueNameExists):
        sqs.create_queue(
            QueueName="src", Attributes={"RedrivePolicy": redrive(access_key.namespace, "dead", 5)}
        )
    with pytest.raises(sqs.exceptions.QueueNameExists):
        sqs.create_queue(QueueName="plain", Attributes={"RedrivePolicy": policy})


def test_create_fifo_queue(sqs: Any) -> None:
    """A FIFO queue is made with FifoQueue=true and a .fifo name; it reads back FIFO, with
    ContentBasedDeduplication as given."""
    url = sqs.create_queue(
        QueueName="orders.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    assert url.endswith("/orders.fifo")
    got = attributes_of(sqs, url, "FifoQueue", "ContentBasedDeduplication")
    assert got == {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    plain = sqs.create_queue(QueueName="plain.fifo", Attributes={"FifoQueue": "true"})
    got = attributes_of(sqs, plain["QueueUrl"], "ContentBasedDeduplication")
    assert got == {"ContentBasedDeduplication": "false"}
    again = {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    assert sqs.create_queue(QueueName="orders.fifo", Attributes=again)["QueueUrl"] == url
    with pytest.raises(sqs.exceptions.QueueNameExists):
        sqs.create_queue(
            QueueName="orders.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"},
        )


@pytest.mark.parametrize(
    ("name", "given"),
    [
        ("nofifo", {"FifoQueue": "true"}),
        ("named.fifo", {}),
        ("named.fifo", {"FifoQueue": "false"}),
    ],
)
def test_fifo_attribute_and_fifo_name_go_together(
    sqs: Any, name: str, given: dict[str, str]
) -> None:
    """FifoQueue=true needs a .fifo name, and a .fifo name needs FifoQueue=true: otherwise
    InvalidParameterValue, and no queue is made."""
    with pytest.raises(ClientError) as raised:
        sqs.create_queue(QueueName=name, Attributes=given)
    assert error_code(raised) == "InvalidParameterValue"
    assert queue_names(sqs) == []


def test_content_based_deduplication_only_on_fifo(sqs: Any) -> None:
    """ContentBasedDeduplication is a FIFO queue's attribute: a standard queue refuses it at
    creation and later."""
    with pytest.raises(ClientError) as raised:
        sqs.create_queue(QueueName="std", Attributes={"ContentBasedDeduplication": "true"})
    assert error_code(raised) == "InvalidAttributeName"
    assert queue_names(sqs) == []
    url = sqs.create_queue(QueueName="std")["QueueUrl"]
    with pytest.raises(ClientError) as raised:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"ContentBasedDeduplication": "true"})
    assert error_code(raised) == "InvalidAttributeName"


@pytest.mark.parametrize(
    "name",
    [
        "q" * 65,
        "q" * 60 + ".fifo",
        "q" * 81,
        "has space",
        "has.dot",
        "slash/name",
        "star*",
        "ünïcode",
        "a.fifo.fifo",
    ],
)
def test_invalid_queue_names_are_refused(sqs: Any, name: str) -> None:
    """A name longer than Sundial's 64 characters or with characters SQS does not allow answers
    InvalidParameterValue."""
    attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
    with pytest.raises(ClientError) as raised:
        sqs.create_queue(QueueName=name, Attributes=attributes)
    assert error_code(raised) == "InvalidParameterValue"
    assert queue_names(sqs) == []


def test_longest_names_are_allowed(sqs: Any) -> None:
    """64 characters, .fifo counted, is a name Sundial takes; hyphens and underscores too."""
    for name, given in [
        ("q" * 64, {}),
        ("f" * 59 + ".fifo", {"FifoQueue": "true"}),
        ("a-b_C9", {}),
    ]:
        url = sqs.create_queue(QueueName=name, Attributes=given)["QueueUrl"]
        assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url


@pytest.mark.parametrize(
    "given",
    [
        {"VisibilityTimeout": "43201"},
        {"VisibilityTimeout": "-1"},
        {"VisibilityTimeout": "ten"},
        {"DelaySeconds": "901"},
        {"DelaySeconds": "1.5"},
        {"MessageRetentionPeriod": "59"},
        {"MessageRetentionPeriod": "1209601"},
        {"ReceiveMessageWaitTimeSeconds": "21"},
        {"MaximumMessageSize": "1023"},
        {"MaximumMessageSize": "1048577"},
        {"MaximumMessageSize": ""},
        {"RedrivePolicy": "not json"},
        {"RedrivePolicy": '{"maxReceiveCount": 3}'},
        {"VisibilityTimeout": "40", "DelaySeconds": "1000"},
    ],
)
def test_invalid_attribute_values_create_nothing(sqs: Any, given: dict[str, str]) -> None:
    """An attribute value out of range or not an integer answers InvalidAttributeValue, and no
    queue is made."""
    with pytest.raises(ClientError) as raised:
        sqs.create_queue(QueueName="bad", Attributes=given)
    assert error_code(raised) == "InvalidAttributeValue"
    assert queue_names(sqs) == []
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="bad")


def test_unknown_attribute_creates_nothing(sqs: Any) -> None:
    """An attribute SQS does not name (or a read-only one) answers InvalidAttributeName, and no
    queue is made."""
    for given in ({"Colour": "blue"}, {"VisibilityTimeout": "5", "QueueArn": "x"}):
        with pytest.raises(ClientError) as raised:
            sqs.create_queue(QueueName="bad", Attributes=given)
        assert error_code(raised) == "InvalidAttributeName"
    assert queue_names(sqs) == []


def test_redrive_policy_to_a_missing_queue_creates_nothing(sqs: Any, access_key: AccessKey) -> None:
    """A redrive policy naming a queue that does not exist, or one of the other type, answers
    InvalidParameterValue, and no queue is made."""
    policy = redrive(access_key.namespace, "nowhere", 3)
    with pytest.raises(ClientError) as raised:
        sqs.create_queue(QueueName="src", Attributes={"RedrivePolicy": policy})
    assert error_code(raised) == "InvalidParameterValue"
    sqs.create_queue(QueueName="dead")
    policy = redrive(access_key.namespace, "dead", 3)
    with pytest.raises(ClientError) as raised:
        sqs.create_queue(
            QueueName="src.fifo", Attributes={"FifoQueue": "true", "RedrivePolicy": policy}
        )
    assert error_code(raised) == "InvalidParameterValue"
    assert queue_names(sqs) == ["dead"]


def test_tags_given_at_creation(sqs: Any) -> None:
    """Tags given to CreateQueue are the queue's tags."""
    tags = {"team": "billing", "env": "prod"}
    url = sqs.create_queue(QueueName="tagged", tags=tags)["QueueUrl"]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == tags


# --- GetQueueUrl, ListQueues, DeleteQueue, PurgeQueue ---------------------------------------------


def test_get_queue_url(sqs: Any, access_key: AccessKey) -> None:
    """GetQueueUrl answers the URL CreateQueue answered, with or without the owner given; an
    unknown queue is QueueDoesNotExist (code AWS.SimpleQueueService.NonExistentQueue)."""
    url = sqs.create_queue(QueueName="known")["QueueUrl"]
    assert sqs.get_queue_url(QueueName="known")["QueueUrl"] == url
    owned = sqs.get_queue_url(QueueName="known", QueueOwnerAWSAccountId=access_key.namespace)
    assert owned["QueueUrl"] == url
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as raised:
        sqs.get_queue_url(QueueName="unknown")
    assert error_code(raised) == NON_EXISTENT
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="Known")  # names are case-sensitive


def test_list_queues_by_prefix(sqs: Any) -> None:
    """ListQueues answers every queue's URL, or those whose name starts with the prefix."""
    urls = {n: sqs.create_queue(QueueName=n)["QueueUrl"] for n in ("app-a", "app-b", "web-a")}
    assert sorted(sqs.list_queues()["QueueUrls"]) == sorted(urls.values())
    assert sorted(sqs.list_queues(QueueNamePrefix="app-")["QueueUrls"]) == [
        urls["app-a"],
        urls["app-b"],
    ]
    assert queue_names(sqs, QueueNamePrefix="web") == ["web-a"]
    assert queue_names(sqs, QueueNamePrefix="none") == []
    assert "NextToken" not in sqs.list_queues()


def test_list_queues_pages(sqs: Any) -> None:
    """With MaxResults, ListQueues answers pages linked by NextToken that together hold every
    matching queue exactly once; the last page has no token."""
    wanted = {f"page-{i:02d}" for i in range(7)}
    for name in [*sorted(wanted), "other-1", "other-2"]:
        sqs.create_queue(QueueName=name)
    seen: list[str] = []
    sizes = []
    request: dict[str, Any] = {"QueueNamePrefix": "page-", "MaxResults": 3}
    while True:
        answer = sqs.list_queues(**request)
        page = [url.rsplit("/", 1)[-1] for url in answer.get("QueueUrls", [])]
        seen += page
        sizes.append(len(page))
        if "NextToken" not in answer:
            break
        request["NextToken"] = answer["NextToken"]
    assert sizes == [3, 3, 1]
    assert sorted(seen) == sorted(wanted)  # each once: ``wanted`` is a set
    paginator = sqs.get_paginator("list_queues")
    pages = paginator.paginate(PaginationConfig={"PageSize": 4})
    everything = [url.rsplit("/", 1)[-1] for p in pages for url in p.get("QueueUrls", [])]
    assert sorted(everything) == sorted([*wanted, "other-1", "other-2"])
    assert len(everything) == len(set(everything))


@pytest.mark.parametrize("limit", [0, 1001])
def test_list_queues_max_results_range(sqs: Any, limit: int) -> None:
    """MaxResults is from 1 to 1000."""
    with pytest.raises(ClientError) as raised:
        sqs.list_queues(MaxResults=limit)
    assert error_code(raised) == "InvalidParameterValue"


def test_delete_queue(sqs: Any) -> None:
    """A deleted queue is gone: not found, not listed, and its URL names nothing; the name can
    be taken again."""
    url = sqs.create_queue(QueueName="doomed")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="doomed")
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.send_message(QueueUrl=url, MessageBody="x")
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.delete_queue(QueueUrl=url)
    assert queue_names(sqs) == []
    again = sqs.create_queue(QueueName="doomed")["QueueUrl"]
    assert again == url
    assert counts(sqs, again) == (0, 0, 0)


def test_purge_queue(sqs: Any) -> None:
    """PurgeQueue deletes the queue's messages, waiting, in flight and delayed: counts drop to
    0 and nothing is received; the queue stays and takes messages again."""
    url = sqs.create_queue(QueueName="full")["QueueUrl"]
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=600)
    assert sqs.receive_message(QueueUrl=url, VisibilityTimeout=600, WaitTimeSeconds=5)["Messages"]
    assert counts(sqs, url) == (2, 1, 1)  # exact at the moment read
    sqs.purge_queue(QueueUrl=url)
    assert counts(sqs, url) == (0, 0, 0)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    sqs.send_message(QueueUrl=url, MessageBody="fresh")
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in got] == ["fresh"]


def test_purge_unknown_queue(sqs: Any, access_key: AccessKey) -> None:
    """PurgeQueue of a queue that does not exist answers QueueDoesNotExist."""
    url = sqs.create_queue(QueueName="real")["QueueUrl"]
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.purge_queue(QueueUrl=url.replace("/real", "/ghost"))


# --- GetQueueAttributes ---------------------------------------------------------------------------


def test_get_all_attributes(sqs: Any, access_key: AccessKey) -> None:
    """``All`` answers every attribute of the queue, the ARN naming the region signed for and
    the namespace; single names answer just those."""
    url = sqs.create_queue(QueueName="attrs")["QueueUrl"]
    got = attributes_of(sqs, url)
    assert {
        "QueueArn",
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
        "CreatedTimestamp",
        "LastModifiedTimestamp",
        "VisibilityTimeout",
        "MaximumMessageSize",
        "MessageRetentionPeriod",
        "DelaySeconds",
        "ReceiveMessageWaitTimeSeconds",
    } <= set(got)
    assert got["QueueArn"] == f"arn:aws:sqs:{REGION}:{access_key.namespace}:attrs"
    assert attributes_of(sqs, url, "QueueArn") == {"QueueArn": got["QueueArn"]}
    assert attributes_of(sqs, url, "VisibilityTimeout", "DelaySeconds") == {
        "VisibilityTimeout": "30",
        "DelaySeconds": "0",
    }
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url)


def test_fifo_queue_arn(sqs: Any, access_key: AccessKey) -> None:
    """A FIFO queue's ARN ends with its .fifo name."""
    url = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    got = attributes_of(sqs, url, "QueueArn", "FifoQueue")
    assert got == {"QueueArn": arn(access_key.namespace, "q.fifo"), "FifoQueue": "true"}


def test_message_counts(sqs: Any) -> None:
    """After one message is sent delayed, one received and one left waiting, the counts are one
    of each."""
    url = sqs.create_queue(QueueName="counted")["QueueUrl"]
    assert counts(sqs, url) == (0, 0, 0)
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=600)
    sqs.send_message(QueueUrl=url, MessageBody="received")
    got = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600, WaitTimeSeconds=5)
    assert [m["Body"] for m in got["Messages"]] == ["received"]
    sqs.send_message(QueueUrl=url, MessageBody="waiting")
    assert counts(sqs, url) == (1, 1, 1)  # exact at the moment read
    whole = attributes_of(sqs, url)
    assert whole["ApproximateNumberOfMessages"] == "1"
    assert whole["ApproximateNumberOfMessagesNotVisible"] == "1"
    assert whole["ApproximateNumberOfMessagesDelayed"] == "1"


def test_unknown_attribute_name_is_refused(sqs: Any) -> None:
    """GetQueueAttributes of an attribute SQS does not name answers InvalidAttributeName."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    for wanted in (["Colour"], ["QueueArn", "Colour"]):
        with pytest.raises(ClientError) as raised:
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=wanted)
        assert error_code(raised) == "InvalidAttributeName"


def test_attributes_of_unknown_queue(sqs: Any) -> None:
    """GetQueueAttributes of a queue that does not exist answers QueueDoesNotExist."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_attributes(QueueUrl=f"{url}-gone", AttributeNames=["All"])


# --- SetQueueAttributes ---------------------------------------------------------------------------


def test_set_queue_attributes(sqs: Any, access_key: AccessKey) -> None:
    """Changed attributes read back changed; the others stay as they were."""
    url = sqs.create_queue(QueueName="q", Attributes={"DelaySeconds": "3"})["QueueUrl"]
    sqs.create_queue(QueueName="dead")
    policy = redrive(access_key.namespace, "dead", 2)
    changes = {
        "VisibilityTimeout": "120",
        "MessageRetentionPeriod": "600",
        "ReceiveMessageWaitTimeSeconds": "20",
        "MaximumMessageSize": "1024",
        "RedrivePolicy": policy,
    }
    sqs.set_queue_attributes(QueueUrl=url, Attributes=changes)
    got = attributes_of(sqs, url)
    assert {name: got[name] for name in changes if name != "RedrivePolicy"} == {
        name: value for name, value in changes.items() if name != "RedrivePolicy"
    }
    assert json.loads(got["RedrivePolicy"]) == json.loads(policy)
    assert got["DelaySeconds"] == "3"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0"})
    assert attributes_of(sqs, url, "DelaySeconds", "VisibilityTimeout") == {
        "DelaySeconds": "0",
        "VisibilityTimeout": "120",
    }


def test_queue_visibility_timeout_applies(sqs: Any) -> None:
    """The queue's VisibilityTimeout, once changed, is how long a received message stays
    hidden: 1 second, then it is received again."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "1"})
    sqs.send_message(QueueUrl=url, MessageBody="x")
    first = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"][0]
    second = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10)["Messages"][0]
    assert second["MessageId"] == first["MessageId"]


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ({"DelaySeconds": "901"}, "InvalidAttributeValue"),
        ({"MaximumMessageSize": "big"}, "InvalidAttributeValue"),
        ({"Colour": "blue"}, "InvalidAttributeName"),
        ({"QueueArn": "arn:aws:sqs:eu-west-1:x:y"}, "InvalidAttributeName"),
    ],
)
def test_one_invalid_attribute_applies_none(sqs: Any, bad: dict[str, str], code: str) -> None:
    """One invalid attribute among valid ones refuses the request, and none of them applies."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    before = attributes_of(sqs, url)
    with pytest.raises(ClientError) as raised:
        sqs.set_queue_attributes(
            QueueUrl=url,
            Attributes={"VisibilityTimeout": "99", **bad, "ReceiveMessageWaitTimeSeconds": "5"},
        )
    assert error_code(raised) == code
    assert attributes_of(sqs, url) == before


def test_fifo_queue_attribute_cannot_be_set(sqs: Any) -> None:
    """A queue's type is chosen when it is made: SetQueueAttributes refuses FifoQueue."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    with pytest.raises(ClientError) as raised:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})
    assert error_code(raised) == "InvalidAttributeName"
    assert "FifoQueue" not in attributes_of(sqs, url)


def test_redrive_policy_to_missing_queue_is_refused(sqs: Any, access_key: AccessKey) -> None:
    """A RedrivePolicy naming a queue that does not exist (or the queue itself) answers
    InvalidParameterValue and the queue keeps no policy."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    for target in ("nowhere", "q"):
        with pytest.raises(ClientError) as raised:
            sqs.set_queue_attributes(
                QueueUrl=url, Attributes={"RedrivePolicy": redrive(access_key.namespace, target, 3)}
            )
        assert error_code(raised) == "InvalidParameterValue"
    assert "RedrivePolicy" not in attributes_of(sqs, url)


def test_empty_redrive_policy_removes_it(sqs: Any, access_key: AccessKey) -> None:
    """RedrivePolicy "" removes the queue's redrive policy."""
    sqs.create_queue(QueueName="dead")
    policy = redrive(access_key.namespace, "dead", 3)
    url = sqs.create_queue(QueueName="q", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    assert "RedrivePolicy" in attributes_of(sqs, url)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
    assert "RedrivePolicy" not in attributes_of(sqs, url)
    dead_url = sqs.get_queue_url(QueueName="dead")["QueueUrl"]
    assert sqs.list_dead_letter_source_queues(QueueUrl=dead_url).get("queueUrls", []) == []


# --- tags -----------------------------------------------------------------------------------------


def test_tag_untag_and_list_tags(sqs: Any) -> None:
    """TagQueue adds tags and replaces values of keys it names; UntagQueue removes the keys it
    names (unknown ones are no matter); ListQueueTags answers what is left."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)
    sqs.tag_queue(QueueUrl=url, Tags={"a": "1", "b": "2"})
    sqs.tag_queue(QueueUrl=url, Tags={"b": "two", "c": "3"})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"a": "1", "b": "two", "c": "3"}
    sqs.untag_queue(QueueUrl=url, TagKeys=["a", "c", "zz"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"b": "two"}
    sqs.untag_queue(QueueUrl=url, TagKeys=["b"])
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)


def test_tags_leave_attributes_alone(sqs: Any) -> None:
    """Tagging does not change the queue's attributes, nor setting attributes its tags."""
    url = sqs.create_queue(QueueName="q", Attributes={"MaximumMessageSize": "2048"})["QueueUrl"]
    sqs.tag_queue(QueueUrl=url, Tags={"a": "1"})
    assert attributes_of(sqs, url, "MaximumMessageSize") == {"MaximumMessageSize": "2048"}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "60"})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"a": "1"}


def test_too_many_tags_are_refused(sqs: Any) -> None:
    """A queue has at most 50 tags."""
    url = sqs.create_queue(QueueName="q", tags={f"k{i}": "v" for i in range(50)})["QueueUrl"]
    with pytest.raises(ClientError) as raised:
        sqs.tag_queue(QueueUrl=url, Tags={"one-more": "v"})
    assert error_code(raised) == "InvalidParameterValue"
    assert len(sqs.list_queue_tags(QueueUrl=url)["Tags"]) == 50


def test_tags_of_unknown_queue(sqs: Any) -> None:
    """The tag actions on a queue that does not exist answer QueueDoesNotExist."""
    url = sqs.create_queue(QueueName="q")["QueueUrl"] + "-gone"
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.tag_queue(QueueUrl=url, Tags={"a": "1"})
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.untag_queue(QueueUrl=url, TagKeys=["a"])
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.list_queue_tags(QueueUrl=url)


# --- ListDeadLetterSourceQueues -------------------------------------------------------------------


def test_list_dead_letter_source_queues(sqs: Any, access_key: AccessKey) -> None:
    """The queues whose redrive policy names the dead-letter queue, all at once or a page at a
    time (each exactly once); a queue with no sources answers none."""
    dead = sqs.create_queue(QueueName="dead")["QueueUrl"]
    other = sqs.create_queue(QueueName="other-dead")["QueueUrl"]
    sources = {f"src-{i}" for i in range(5)}
    for name in sorted(sources):
        sqs.create_queue(
            QueueName=name, Attributes={"RedrivePolicy": redrive(access_key.namespace, "dead", 2)}
        )
    sqs.create_queue(
        QueueName="elsewhere",
        Attributes={"RedrivePolicy": redrive(access_key.namespace, "other-dead", 2)},
    )
    sqs.create_queue(QueueName="unrelated")
    everything = sqs.list_dead_letter_source_queues(QueueUrl=dead)
    assert sorted(u.rsplit("/", 1)[-1] for u in everything["queueUrls"]) == sorted(sources)
    assert "NextToken" not in everything
    seen: list[str] = []
    sizes = []
    request: dict[str, Any] = {"QueueUrl": dead, "MaxResults": 2}
    while True:
        answer = sqs.list_dead_letter_source_queues(**request)
        seen += [u.rsplit("/", 1)[-1] for u in answer["queueUrls"]]
        sizes.append(len(answer["queueUrls"]))
        if "NextToken" not in answer:
            break
        request["NextToken"] = answer["NextToken"]
    assert sizes == [2, 2, 1]
    assert sorted(seen) == sorted(sources)  # each once: ``sources`` is a set
    names = [
        u.rsplit("/", 1)[-1]
        for u in sqs.list_dead_letter_source_queues(QueueUrl=other)["queueUrls"]
    ]
    assert names == ["elsewhere"]
    lonely = sqs.get_queue_url(QueueName="unrelated")["QueueUrl"]
    assert sqs.list_dead_letter_source_queues(QueueUrl=lonely).get("queueUrls", []) == []
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.list_dead_letter_source_queues(QueueUrl=f"{dead}-gone")


# --- another namespace ----------------------------------------------------------------------------


def test_another_namespaces_queue_does_not_exist_for_the_caller(
    sqs: Any, other: tuple[AccessKey, Any]
) -> None:
    """A queue of another namespace is not listed, not found by name (owner given or not), and
    every action on its URL answers QueueDoesNotExist, changing nothing of it."""
    key, their = other
    their_url = their.create_queue(QueueName="shared", tags={"owner": "them"})["QueueUrl"]
    their.send_message(QueueUrl=their_url, MessageBody="theirs")
    mine = sqs.create_queue(QueueName="shared")["QueueUrl"]
    assert mine != their_url
    assert sqs.list_queues()["QueueUrls"] == [mine]
    assert sqs.get_queue_url(QueueName="shared")["QueueUrl"] == mine
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as raised:
        sqs.get_queue_url(QueueName="shared", QueueOwnerAWSAccountId=key.namespace)
    assert error_code(raised) == NON_EXISTENT
    calls: list[Callable[[], Any]] = [
        lambda: sqs.get_queue_attributes(QueueUrl=their_url, AttributeNames=["All"]),
        lambda: sqs.set_queue_attributes(QueueUrl=their_url, Attributes={"DelaySeconds": "9"}),
        lambda: sqs.send_message(QueueUrl=their_url, MessageBody="mine"),
        lambda: sqs.receive_message(QueueUrl=their_url),
        lambda: sqs.purge_queue(QueueUrl=their_url),
        lambda: sqs.tag_queue(QueueUrl=their_url, Tags={"owner": "me"}),
        lambda: sqs.untag_queue(QueueUrl=their_url, TagKeys=["owner"]),
        lambda: sqs.list_queue_tags(QueueUrl=their_url),
        lambda: sqs.list_dead_letter_source_queues(QueueUrl=their_url),
        lambda: sqs.delete_queue(QueueUrl=their_url),
    ]
    for call in calls:
        with pytest.raises(sqs.exceptions.QueueDoesNotExist) as raised:
            call()
        assert error_code(raised) == NON_EXISTENT
    assert attributes_of(their, their_url, "DelaySeconds") == {"DelaySeconds": "0"}
    assert their.list_queue_tags(QueueUrl=their_url)["Tags"] == {"owner": "them"}
    got = their.receive_message(QueueUrl=their_url, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in got] == ["theirs"]
    assert their.list_queues()["QueueUrls"] == [their_url]


def test_redrive_policy_cannot_name_another_namespaces_queue(
    sqs: Any, access_key: AccessKey, other: tuple[AccessKey, Any]
) -> None:
    """A redrive policy naming another namespace's queue names a dead-letter target that does
    not exist for the caller (InvalidParameterValue), even where the caller has a queue of the
    same name; nor is it the policy of an existing queue whose target has that name."""
    key, their = other
    their.create_queue(QueueName="dead")
    sqs.create_queue(QueueName="dead")
    policy = redrive(key.namespace, "dead", 3)
    with pytest.raises(ClientError) as raised:
        sqs.create_queue(QueueName="src", Attributes={"RedrivePolicy": policy})
    assert error_code(raised) == "InvalidParameterValue"
    url = sqs.create_queue(QueueName="src2")["QueueUrl"]
    with pytest.raises(ClientError) as raised:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
    assert error_code(raised) == "InvalidParameterValue"
    assert "RedrivePolicy" not in attributes_of(sqs, url)
    own = {"RedrivePolicy": redrive(access_key.namespace, "dead", 3)}
    sqs.create_queue(QueueName="src3", Attributes=own)
    with pytest.raises(sqs.exceptions.QueueNameExists):
        sqs.create_queue(QueueName="src3", Attributes={"RedrivePolicy": policy})
    assert queue_names(sqs) == ["dead", "src2", "src3"]


def test_concurrent_tag_and_attribute_changes_all_apply(
    sqs_server: str, access_key: AccessKey
) -> None:
    """TagQueue and SetQueueAttributes merge into what the queue keeps in one statement each:
    many at once, from real concurrent clients, lose none of each other's changes. (Each change
    is a change of the catalogue that the others' requests may have to look up again: past a
    few, a request answers ServiceUnavailable, which SDKs retry, as these clients do.)"""
    retrying = {"max_attempts": 20, "mode": "standard"}
    clients = [sqs_client(sqs_server, access_key, retries=retrying) for _ in range(8)]
    url = clients[0].create_queue(QueueName="tagged-concurrently")["QueueUrl"]

    def change(n: int) -> None:
        client = clients[n % len(clients)]
        client.tag_queue(QueueUrl=url, Tags={f"t{n}": str(n)})
        if n % 2:
            client.set_queue_attributes(
                QueueUrl=url, Attributes={"ReceiveMessageWaitTimeSeconds": str(n % 20)}
            )
        else:
            client.set_queue_attributes(
                QueueUrl=url, Attributes={"MaximumMessageSize": str(1024 + n)}
            )

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(change, range(40)))
    assert clients[0].list_queue_tags(QueueUrl=url)["Tags"] == {f"t{n}": str(n) for n in range(40)}
    clients[0].untag_queue(QueueUrl=url, TagKeys=[f"t{n}" for n in range(0, 40, 2)])
    left = clients[0].list_queue_tags(QueueUrl=url)["Tags"]
    assert left == {f"t{n}": str(n) for n in range(1, 40, 2)}


def test_a_queue_visibility_timeout_of_zero_is_a_one_second_lease(sqs: Any) -> None:
    """VisibilityTimeout 0 (which SQS allows) is accepted and reads back as 0; a lease lasts at
    least a second in Sundial, so a received message comes back within about a second, and a
    CreateQueue repeating the 0 answers the same queue."""
    given = {"VisibilityTimeout": "0"}
    url = sqs.create_queue(QueueName="zero-visibility", Attributes=given)["QueueUrl"]
    read = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
    assert read["Attributes"] == {"VisibilityTimeout": "0"}
    assert sqs.create_queue(QueueName="zero-visibility", Attributes=given)["QueueUrl"] == url
    sqs.send_message(QueueUrl=url, MessageBody="again and again")
    first = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"][0]
    started = time.monotonic()
    again = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10, AttributeNames=["All"])
    (message,) = again["Messages"]
    assert message["MessageId"] == first["MessageId"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "2"
    assert time.monotonic() - started < 5
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "30"})
    read = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
    assert read["Attributes"] == {"VisibilityTimeout": "30"}
