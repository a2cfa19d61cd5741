"""The SQS query protocol translator: form fields to JSON-shaped request dicts, result dicts to
XML answers. The forms and XML answers are those of the query examples in the Amazon SQS API
Reference (each action's "Examples" section), trimmed of their signing fields or extended where
a case needs it; the expected dicts use the JSON protocol's member names (botocore's SQS model).
"""

from __future__ import annotations

import gzip
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest

from app.sqs.query_protocol import (
    ACTIONS,
    NAMESPACE,
    ListOf,
    MapOf,
    QueryProtocolError,
    Scalar,
    Shape,
    Struct,
    read_request,
    render_error,
    render_result,
)

QUEUE = "https://sqs.us-east-2.amazonaws.com/123456789012/MyQueue"
HANDLE_1 = (
    "gfk0T0R0waama4fVFffkjPQrrvzMrOg0fTFk2LxT33EuB8wR0ZCFgKWyXGWFoqqpCIiprQUEhir/5LeGPpYTLzjqLQxyQ"
    "YaQALeSNHb0us3uE84uujxpBhsDkZUQkjFFkNqBXn48xlMcVhTcI3YLH+d+IqetIOHgBCZAPx6r+09dWaBXei6nbK5Ca+YZY"
    "bkKx/MKc5CCYtZCKWP4bdOIWdJMO36g=="
)
RECEIPT = "MbZj6wDWli+JvwwJaBV+3dcjk2YW2vA3+STFFljTM8tJJg6HRG6PYSasuWXPJB+Cw"
HANDLE_2 = (
    "gfk0T0R0waama4fVFffkjKzmhMCymjQvfTFk2LxT33FUgBz3+nougdeLKWSscPU1/Xgx+xcNnjnQQ3U30qOumIE6AdA"
)


def form(*fields: str) -> list[tuple[str, str]]:
    """The fields of a query request written as the API Reference writes them (``&``-joined,
    percent-encoded), decoded as a server decodes a form body."""
    return parse_qsl("&".join(fields), keep_blank_values=True, strict_parsing=True)


# --- requests: one case per action (and a few spellings) --------------------------------------

REQUESTS: list[tuple[str, list[tuple[str, str]], dict[str, Any]]] = [
    (
        # API_CreateQueue: tags written without an index, as in the reference's sample.
        "CreateQueue",
        form(
            "Action=CreateQueue",
            "QueueName=MyQueue",
            "Attribute.1.Name=VisibilityTimeout",
            "Attribute.1.Value=40",
            "Tag.Key=QueueType",
            "Tag.Value=Production",
            "Version=2012-11-05",
        ),
        {
            "QueueName": "MyQueue",
            "Attributes": {"VisibilityTimeout": "40"},
            "tags": {"QueueType": "Production"},
        },
    ),
    (
        "CreateQueue",
        form(
            "Action=CreateQueue",
            "QueueName=MyQueue.fifo",
            "Attribute.1.Name=FifoQueue",
            "Attribute.1.Value=true",
            "Attribute.2.Name=RedrivePolicy",
            "Attribute.2.Value=%7B%22maxReceiveCount%22%3A%225%22%7D",
            "Tag.1.Key=QueueType",
            "Tag.1.Value=Production",
            "Tag.2.Key=Owner",
            "Tag.2.Value=Developer123",
        ),
        {
            "QueueName": "MyQueue.fifo",
            "Attributes": {"FifoQueue": "true", "RedrivePolicy": '{"maxReceiveCount":"5"}'},
            "tags": {"QueueType": "Production", "Owner": "Developer123"},
        },
    ),
    (
        "GetQueueUrl",
        form(
            "Action=GetQueueUrl",
            "QueueName=MyQueue",
            "QueueOwnerAWSAccountId=123456789012",
            "Version=2012-11-05",
        ),
        {"QueueName": "MyQueue", "QueueOwnerAWSAccountId": "123456789012"},
    ),
    (
        "ListQueues",
        form("Action=ListQueues", "QueueNamePrefix=M", "MaxResults=10", "NextToken=abc%3D"),
        {"QueueNamePrefix": "M", "MaxResults": 10, "NextToken": "abc="},
    ),
    ("ListQueues", form("Action=ListQueues"), {}),
    ("DeleteQueue", form("Action=DeleteQueue", f"QueueUrl={QUEUE}"), {"QueueUrl": QUEUE}),
    (
        "GetQueueAttributes",
        form(
            "Action=GetQueueAttributes",
            f"QueueUrl={QUEUE}",
            "AttributeName.1=VisibilityTimeout",
            "AttributeName.2=DelaySeconds",
            "AttributeName.3=ReceiveMessageWaitTimeSeconds",
        ),
        {
            "QueueUrl": QUEUE,
            "AttributeNames": [
                "VisibilityTimeout",
                "DelaySeconds",
                "ReceiveMessageWaitTimeSeconds",
            ],
        },
    ),
    (
        "SetQueueAttributes",
        form(
            "Action=SetQueueAttributes",
            f"QueueUrl={QUEUE}",
            "Attribute.1.Name=DelaySeconds",
            "Attribute.1.Value=45",
            "Attribute.2.Name=ReceiveMessageWaitTimeSeconds",
            "Attribute.2.Value=20",
        ),
        {
            "QueueUrl": QUEUE,
            "Attributes": {"DelaySeconds": "45", "ReceiveMessageWaitTimeSeconds": "20"},
        },
    ),
    ("PurgeQueue", form("Action=PurgeQueue", f"QueueUrl={QUEUE}"), {"QueueUrl": QUEUE}),
    (
        # API_SendMessage, plus a binary attribute, a delay and the X-Ray system attribute.
        "SendMessage",
        form(
            "Action=SendMessage",
            f"QueueUrl={QUEUE}",
            "MessageBody=This+is+a+test+message",
            "DelaySeconds=45",
            "MessageAttribute.1.Name=my_attribute_name_1",
            "MessageAttribute.1.Value.StringValue=my_attribute_value_1",
            "MessageAttribute.1.Value.DataType=String",
            "MessageAttribute.2.Name=my_attribute_name_2",
            "MessageAttribute.2.Value.BinaryValue=AAH%2F%2Bw%3D%3D",
            "MessageAttribute.2.Value.DataType=Binary",
            "MessageSystemAttribute.1.Name=AWSTraceHeader",
            "MessageSystemAttribute.1.Value.StringValue=Root%3D1-5759e988-bd862e3fe1be46a994272793",
            "MessageSystemAttribute.1.Value.DataType=String",
            "Version=2012-11-05",
        ),
        {
            "QueueUrl": QUEUE,
            "MessageBody": "This is a test message",
            "DelaySeconds": 45,
            "MessageAttributes": {
                "my_attribute_name_1": {
                    "StringValue": "my_attribute_value_1",
                    "DataType": "String",
                },
                "my_attribute_name_2": {"BinaryValue": "AAH/+w==", "DataType": "Binary"},
            },
            "MessageSystemAttributes": {
                "AWSTraceHeader": {
                    "StringValue": "Root=1-5759e988-bd862e3fe1be46a994272793",
                    "DataType": "String",
                }
            },
        },
    ),
    (
        # API_SendMessageBatch, the second entry's attribute list extended.
        "SendMessageBatch",
        form(
            "Action=SendMessageBatch",
            f"QueueUrl={QUEUE}",
            "SendMessageBatchRequestEntry.1.Id=test_msg_001",
            "SendMessageBatchRequestEntry.1.MessageBody=test%20message%20body%201",
            "SendMessageBatchRequestEntry.2.Id=test_msg_002",
            "SendMessageBatchRequestEntry.2.MessageBody=test%20message%20body%202",
            "SendMessageBatchRequestEntry.2.DelaySeconds=60",
            "SendMessageBatchRequestEntry.2.MessageAttribute.1.Name=test_attribute_name_1",
            "SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.StringValue=test_attribute_value_1",
            "SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.DataType=String",
            "SendMessageBatchRequestEntry.2.MessageAttribute.2.Name=bytes",
            "SendMessageBatchRequestEntry.2.MessageAttribute.2.Value.BinaryValue=3q2%2B7w%3D%3D",
            "SendMessageBatchRequestEntry.2.MessageAttribute.2.Value.DataType=Binary.gzip",
            "SendMessageBatchRequestEntry.2.MessageGroupId=group-1",
            "SendMessageBatchRequestEntry.2.MessageDeduplicationId=dedup-1",
            "Expires=2020-05-05T22%3A52%3A43PST",
            "Version=2012-11-05",
        ),
        {
            "QueueUrl": QUEUE,
            "Entries": [
                {"Id": "test_msg_001", "MessageBody": "test message body 1"},
                {
                    "Id": "test_msg_002",
                    "MessageBody": "test message body 2",
                    "DelaySeconds": 60,
                    "MessageAttributes": {
                        "test_attribute_name_1": {
                            "StringValue": "test_attribute_value_1",
                            "DataType": "String",
                        },
                        "bytes": {"BinaryValue": "3q2+7w==", "DataType": "Binary.gzip"},
                    },
                    "MessageDeduplicationId": "dedup-1",
                    "MessageGroupId": "group-1",
                },
            ],
        },
    ),
    (
        # API_ReceiveMessage: the one-item list written without an index (AttributeName=All).
        "ReceiveMessage",
        form(
            "Action=ReceiveMessage",
            f"QueueUrl={QUEUE}",
            "MaxNumberOfMessages=5",
            "VisibilityTimeout=15",
            "AttributeName=All",
        ),
        {
            "QueueUrl": QUEUE,
            "MaxNumberOfMessages": 5,
            "VisibilityTimeout": 15,
            "AttributeNames": ["All"],
        },
    ),
    (
        "ReceiveMessage",
        form(
            "Action=ReceiveMessage",
            f"QueueUrl={QUEUE}",
            "WaitTimeSeconds=10",
            "MaxNumberOfMessages=10",
            "MessageAttributeName.1=All",
            "MessageSystemAttributeName.1=SentTimestamp",
            "MessageSystemAttributeName.2=SenderId",
            "ReceiveRequestAttemptId=attempt-1",
        ),
        {
            "QueueUrl": QUEUE,
            "MessageSystemAttributeNames": ["SentTimestamp", "SenderId"],
            "MessageAttributeNames": ["All"],
            "MaxNumberOfMessages": 10,
            "WaitTimeSeconds": 10,
            "ReceiveRequestAttemptId": "attempt-1",
        },
    ),
    (
        "DeleteMessage",
        form(
            "Action=DeleteMessage",
            f"QueueUrl={QUEUE}",
            "ReceiptHandle=MbZj6wDWli%2BJvwwJaBV%2B3dcjk2YW2vA3%2BSTFFljT",
        ),
        {"QueueUrl": QUEUE, "ReceiptHandle": "MbZj6wDWli+JvwwJaBV+3dcjk2YW2vA3+STFFljT"},
    ),
    (
        "DeleteMessageBatch",
        form(
            "Action=DeleteMessageBatch",
            f"QueueUrl={QUEUE}",
            "DeleteMessageBatchRequestEntry.1.Id=msg1",
            "DeleteMessageBatchRequestEntry.1.ReceiptHandle="
            + HANDLE_1.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D"),
            "DeleteMessageBatchRequestEntry.2.Id=msg2",
            "DeleteMessageBatchRequestEntry.2.ReceiptHandle=" + HANDLE_2.replace("+", "%2B"),
        ),
        {
            "QueueUrl": QUEUE,
            "Entries": [
                {"Id": "msg1", "ReceiptHandle": HANDLE_1},
                {"Id": "msg2", "ReceiptHandle": HANDLE_2},
            ],
        },
    ),
    (
        "ChangeMessageVisibility",
        form(
            "Action=ChangeMessageVisibility",
            f"QueueUrl={QUEUE}",
            "VisibilityTimeout=60",
            "ReceiptHandle=MbZj6wDWli%2BJvwwJaBV%2B3dcjk2YW2vA3%2BSTFFljT",
        ),
        {
            "QueueUrl": QUEUE,
            "ReceiptHandle": "MbZj6wDWli+JvwwJaBV+3dcjk2YW2vA3+STFFljT",
            "VisibilityTimeout": 60,
        },
    ),
    (
        "ChangeMessageVisibilityBatch",
        form(
            "Action=ChangeMessageVisibilityBatch",
            f"QueueUrl={QUEUE}",
            "ChangeMessageVisibilityBatchRequestEntry.1.Id=change_visibility_msg_2",
            "ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle="
            + HANDLE_2.replace("+", "%2B"),
            "ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout=45",
            "ChangeMessageVisibilityBatchRequestEntry.2.Id=change_visibility_msg_3",
            "ChangeMessageVisibilityBatchRequestEntry.2.ReceiptHandle=r3",
            "ChangeMessageVisibilityBatchRequestEntry.2.VisibilityTimeout=0",
        ),
        {
            "QueueUrl": QUEUE,
            "Entries": [
                {
                    "Id": "change_visibility_msg_2",
                    "ReceiptHandle": HANDLE_2,
                    "VisibilityTimeout": 45,
                },
                {"Id": "change_visibility_msg_3", "ReceiptHandle": "r3", "VisibilityTimeout": 0},
            ],
        },
    ),
    (
        "ListDeadLetterSourceQueues",
        form("Action=ListDeadLetterSourceQueues", f"QueueUrl={QUEUE}", "MaxResults=1000"),
        {"QueueUrl": QUEUE, "MaxResults": 1000},
    ),
    (
        # API_TagQueue: the sample's one tag, without an index.
        "TagQueue",
        form("Action=TagQueue", f"QueueUrl={QUEUE}", "Tag.Key=QueueType", "Tag.Value=Production"),
        {"QueueUrl": QUEUE, "Tags": {"QueueType": "Production"}},
    ),
    (
        "TagQueue",
        form(
            "Action=TagQueue",
            f"QueueUrl={QUEUE}",
            "Tag.2.Key=Owner",
            "Tag.2.Value=Developer123",
            "Tag.1.Key=QueueType",
            "Tag.1.Value=",
        ),
        {"QueueUrl": QUEUE, "Tags": {"QueueType": "", "Owner": "Developer123"}},
    ),
    (
        # API_UntagQueue: TagKey=QueueType, without an index.
        "UntagQueue",
        form("Action=UntagQueue", f"QueueUrl={QUEUE}", "TagKey=QueueType"),
        {"QueueUrl": QUEUE, "TagKeys": ["QueueType"]},
    ),
    (
        "UntagQueue",
        form("Action=UntagQueue", f"QueueUrl={QUEUE}", "TagKey.1=QueueType", "TagKey.2=Owner"),
        {"QueueUrl": QUEUE, "TagKeys": ["QueueType", "Owner"]},
    ),
    ("ListQueueTags", form("Action=ListQueueTags", f"QueueUrl={QUEUE}"), {"QueueUrl": QUEUE}),
]


@pytest.mark.parametrize(("action", "fields", "expected"), REQUESTS)
def test_a_request_reads_as_its_json_shape(
    action: str, fields: list[tuple[str, str]], expected: dict[str, Any]
) -> None:
    assert read_request(fields) == (action, expected)
    assert read_request(fields[::-1]) == (action, expected)  # the order of fields is no matter


def test_every_action_has_a_request_case() -> None:
    assert {case[0] for case in REQUESTS} == set(ACTIONS)
    assert len(ACTIONS) == 18


def test_list_items_come_in_index_order_whatever_the_order_of_fields() -> None:
    fields = form("Action=UntagQueue", "QueueUrl=q", "TagKey.10=j", "TagKey.2=b", "TagKey.1=a")
    assert read_request(fields)[1]["TagKeys"] == ["a", "b", "j"]


def test_the_protocol_s_own_fields_are_dropped() -> None:
    fields = form(
        "Action=PurgeQueue",
        "QueueUrl=q",
        "Version=2012-11-05",
        "X-Amz-Algorithm=AWS4-HMAC-SHA256",
        "X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20200418%2Fus-east-2%2Fsqs%2Faws4_request",
        "X-Amz-Date=20200418T225243Z",
        "X-Amz-Expires=300",
        "X-Amz-SignedHeaders=host",
        "X-Amz-Security-Token=token",
        "X-Amz-Signature=abc",
        "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE",
        "SignatureVersion=2",
        "SignatureMethod=HmacSHA256",
        "Signature=Dqlp3Sd6ljTUA9Uf6SGtEExwUQEXAMPLE",
        "Expires=2020-04-18T22%3A52%3A43PST",
        "Timestamp=2020-04-18T22%3A52%3A43Z",
        "SecurityToken=token",
    )
    assert read_request(fields) == ("PurgeQueue", {"QueueUrl": "q"})


def test_an_empty_list_as_botocore_writes_it() -> None:
    # botocore's query serializer writes an empty list as the member's own name, empty.
    fields = form("Action=GetQueueAttributes", "QueueUrl=q", "AttributeNames=")
    assert read_request(fields) == ("GetQueueAttributes", {"QueueUrl": "q", "AttributeNames": []})
    fields = form("Action=SendMessageBatch", "QueueUrl=q", "Entries=")
    assert read_request(fields) == ("SendMessageBatch", {"QueueUrl": "q", "Entries": []})
    fields = form("Action=UntagQueue", "QueueUrl=q", "TagKey=")
    assert read_request(fields) == ("UntagQueue", {"QueueUrl": "q", "TagKeys": []})


def test_values_keep_every_character() -> None:
    body = "<a href=\"x\">&amp;</a>\r\n\ttabs 'quotes' 日本語 😀 +%"
    fields = [("Action", "SendMessage"), ("QueueUrl", "q"), ("MessageBody", body)]
    assert read_request(fields)[1]["MessageBody"] == body


# --- requests that fail -----------------------------------------------------------------------

FAILURES: list[tuple[list[tuple[str, str]], str, str]] = [
    (form("QueueUrl=q"), "MissingAction", "Action"),
    (form("Action=Frobnicate"), "InvalidAction", "Frobnicate"),
    (form("Action=AddPermission", "QueueUrl=q"), "InvalidAction", "AddPermission"),
    (form("Action=ListQueues", "Action=ListQueues"), "MalformedQueryString", "Action"),
    (form("Action=SendMessage", "DelaySeconds=soon"), "InvalidParameterValue", "DelaySeconds"),
    (
        form("Action=ReceiveMessage", "WaitTimeSeconds=1.5"),
        "InvalidParameterValue",
        "WaitTimeSeconds",
    ),
    (
        form("Action=ReceiveMessage", "MaxNumberOfMessages="),
        "InvalidParameterValue",
        "MaxNumberOfMessages",
    ),
    (
        form("Action=ReceiveMessage", "VisibilityTimeout=+5"),
        "InvalidParameterValue",
        "VisibilityTimeout",
    ),
    (form("Action=ListQueues", "MaxResults=2147483648"), "InvalidParameterValue", "MaxResults"),
    (
        form("Action=SendMessageBatch", "SendMessageBatchRequestEntry.2.DelaySeconds=1e3"),
        "InvalidParameterValue",
        "SendMessageBatchRequestEntry.2.DelaySeconds",
    ),
    (
        form(
            "Action=ChangeMessageVisibilityBatch",
            "ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout=%D9%A3",  # an Arabic 3
        ),
        "InvalidParameterValue",
        "ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout",
    ),
    (
        form(
            "Action=SendMessage",
            "MessageAttribute.1.Name=a",
            "MessageAttribute.1.Value.BinaryValue=not%20base64!",
            "MessageAttribute.1.Value.DataType=Binary",
        ),
        "InvalidParameterValue",
        "MessageAttribute.1.Value.BinaryValue",
    ),
    (form("Action=PurgeQueue", "QueueUrl=q", "Foo=bar"), "InvalidParameterValue", "Foo"),
    (form("Action=PurgeQueue", "QueueUrl.1=q"), "InvalidParameterValue", "QueueUrl.1"),
    (
        form("Action=SendMessageBatch", "SendMessageBatchRequestEntry.1.Bogus=x"),
        "InvalidParameterValue",
        "SendMessageBatchRequestEntry.1.Bogus",
    ),
    (
        form("Action=SendMessage", "MessageAttribute.1.Name=a", "MessageAttribute.1.Value.Type=S"),
        "InvalidParameterValue",
        "MessageAttribute.1.Value.Type",
    ),
    (
        form(
            "Action=SetQueueAttributes",
            "Attribute.1.Name=a",
            "Attribute.1.Value=1",
            "Attribute.1.Key=b",
        ),
        "InvalidParameterValue",
        "Attribute.1.Key",
    ),
    (
        form("Action=SetQueueAttributes", "Attribute.1.Name=DelaySeconds"),
        "MissingParameter",
        "Attribute.1.Value",
    ),
    (
        form("Action=SendMessage", "MessageAttribute.1.Value.StringValue=v"),
        "MissingParameter",
        "MessageAttribute.1.Name",
    ),
    (
        form("Action=TagQueue", "Tag.1.Key=a", "Tag.1.Value=1", "Tag.2.Key=a", "Tag.2.Value=2"),
        "InvalidParameterValue",
        "Tag.2.Key",
    ),
    (form("Action=PurgeQueue", "QueueUrl=a", "QueueUrl=b"), "MalformedQueryString", "QueueUrl"),
    (form("Action=UntagQueue", "TagKey.0=a"), "MalformedQueryString", "TagKey.0"),
    (form("Action=UntagQueue", "TagKey.01=a"), "MalformedQueryString", "TagKey.01"),
    (form("Action=UntagQueue", "TagKey.one=a"), "MalformedQueryString", "TagKey.one"),
    (form("Action=UntagQueue", "TagKey=a", "TagKey.1=b"), "MalformedQueryString", "TagKey"),
    (
        form("Action=SetQueueAttributes", "Attribute..Name=a"),
        "MalformedQueryString",
        "Attribute..Name",
    ),
    (form("Action=SetQueueAttributes", "Attribute=a"), "MalformedQueryString", "Attribute"),
    (
        form("Action=SendMessageBatch", "SendMessageBatchRequestEntry=a"),
        "MalformedQueryString",
        "SendMessageBatchRequestEntry",
    ),
    (
        form("Action=GetQueueAttributes", "AttributeNames=", "AttributeName.1=All"),
        "MalformedQueryString",
        "AttributeNames",
    ),
]


@pytest.mark.parametrize(("fields", "code", "names"), FAILURES)
def test_a_request_that_fails_names_its_parameter(
    fields: list[tuple[str, str]], code: str, names: str
) -> None:
    with pytest.raises(QueryProtocolError) as raised:
        read_request(fields)
    assert raised.value.code == code
    assert names in raised.value.message


# --- results: one case per action -------------------------------------------------------------

RESULTS: list[tuple[str, dict[str, Any], str]] = [
    (
        "CreateQueue",
        {"QueueUrl": QUEUE},
        f"""<CreateQueueResponse>
              <CreateQueueResult><QueueUrl>{QUEUE}</QueueUrl></CreateQueueResult>
            </CreateQueueResponse>""",
    ),
    (
        "GetQueueUrl",
        {"QueueUrl": QUEUE},
        f"""<GetQueueUrlResponse>
              <GetQueueUrlResult><QueueUrl>{QUEUE}</QueueUrl></GetQueueUrlResult>
            </GetQueueUrlResponse>""",
    ),
    (
        "ListQueues",
        {"QueueUrls": [QUEUE, QUEUE + "2"], "NextToken": "token"},
        f"""<ListQueuesResponse>
              <ListQueuesResult>
                <QueueUrl>{QUEUE}</QueueUrl>
                <QueueUrl>{QUEUE}2</QueueUrl>
                <NextToken>token</NextToken>
              </ListQueuesResult>
            </ListQueuesResponse>""",
    ),
    (
        "ListQueues",
        {"QueueUrls": []},
        "<ListQueuesResponse><ListQueuesResult/></ListQueuesResponse>",
    ),
    ("DeleteQueue", {}, "<DeleteQueueResponse/>"),
    (
        "GetQueueAttributes",
        {
            "Attributes": {
                "ReceiveMessageWaitTimeSeconds": "2",
                "VisibilityTimeout": "30",
                "ApproximateNumberOfMessages": "0",
                "ApproximateNumberOfMessagesNotVisible": "0",
                "CreatedTimestamp": "1286771522",
                "LastModifiedTimestamp": "1286771522",
                "QueueArn": "arn:aws:sqs:us-east-2:123456789012:MyQueue",
                "MaximumMessageSize": "8192",
                "MessageRetentionPeriod": "345600",
            }
        },
        """<GetQueueAttributesResponse><GetQueueAttributesResult>
             <Attribute><Name>ReceiveMessageWaitTimeSeconds</Name><Value>2</Value></Attribute>
             <Attribute><Name>VisibilityTimeout</Name><Value>30</Value></Attribute>
             <Attribute><Name>ApproximateNumberOfMessages</Name><Value>0</Value></Attribute>
             <Attribute><Name>ApproximateNumberOfMessagesNotVisible</Name><Value>0</Value></Attribute>
             <Attribute><Name>CreatedTimestamp</Name><Value>1286771522</Value></Attribute>
             <Attribute><Name>LastModifiedTimestamp</Name><Value>1286771522</Value></Attribute>
             <Attribute>
               <Name>QueueArn</Name><Value>arn:aws:sqs:us-east-2:123456789012:MyQueue</Value>
             </Attribute>
             <Attribute><Name>MaximumMessageSize</Name><Value>8192</Value></Attribute>
             <Attribute><Name>MessageRetentionPeriod</Name><Value>345600</Value></Attribute>
           </GetQueueAttributesResult></GetQueueAttributesResponse>""",
    ),
    ("SetQueueAttributes", {}, "<SetQueueAttributesResponse/>"),
    ("PurgeQueue", {}, "<PurgeQueueResponse/>"),
    (
        "SendMessage",
        {
            "MessageId": "5fea7756-0ea4-451a-a703-a558b933e274",
            "MD5OfMessageBody": "fafb00f5732ab283681e124bf8747ed1",
            "MD5OfMessageAttributes": "3ae8f24a165a8cedc005670c81a27295",
        },
        """<SendMessageResponse><SendMessageResult>
             <MD5OfMessageBody>fafb00f5732ab283681e124bf8747ed1</MD5OfMessageBody>
             <MD5OfMessageAttributes>3ae8f24a165a8cedc005670c81a27295</MD5OfMessageAttributes>
             <MessageId>5fea7756-0ea4-451a-a703-a558b933e274</MessageId>
           </SendMessageResult></SendMessageResponse>""",
    ),
    (
        "SendMessage",
        {
            "MessageId": "m",
            "MD5OfMessageBody": "b",
            "MD5OfMessageSystemAttributes": "s",
            "SequenceNumber": "18849496460467696128",
        },
        """<SendMessageResponse><SendMessageResult>
             <MD5OfMessageBody>b</MD5OfMessageBody>
             <MD5OfMessageSystemAttributes>s</MD5OfMessageSystemAttributes>
             <MessageId>m</MessageId>
             <SequenceNumber>18849496460467696128</SequenceNumber>
           </SendMessageResult></SendMessageResponse>""",
    ),
    (
        "SendMessageBatch",
        {
            "Successful": [
                {
                    "Id": "test_msg_001",
                    "MessageId": "0a5231c7-8bff-4955-be2e-8dc7c50a25fa",
                    "MD5OfMessageBody": "0e024d309850c78cba5eabbeff7cae71",
                },
                {
                    "Id": "test_msg_002",
                    "MessageId": "15ee1ed3-87e7-40c1-bdaa-2e49968ea7e9",
                    "MD5OfMessageBody": "7fb8146a82f95e0af155278f406862c2",
                    "MD5OfMessageAttributes": "295c5fa15a51aae6884d1d7c1d99ca50",
                },
            ],
            "Failed": [
                {
                    "Id": "test_msg_003",
                    "SenderFault": True,
                    "Code": "InvalidParameterValue",
                    "Message": "Message must be shorter than 262144 bytes.",
                }
            ],
        },
        """<SendMessageBatchResponse><SendMessageBatchResult>
             <SendMessageBatchResultEntry>
               <Id>test_msg_001</Id>
               <MessageId>0a5231c7-8bff-4955-be2e-8dc7c50a25fa</MessageId>
               <MD5OfMessageBody>0e024d309850c78cba5eabbeff7cae71</MD5OfMessageBody>
             </SendMessageBatchResultEntry>
             <SendMessageBatchResultEntry>
               <Id>test_msg_002</Id>
               <MessageId>15ee1ed3-87e7-40c1-bdaa-2e49968ea7e9</MessageId>
               <MD5OfMessageBody>7fb8146a82f95e0af155278f406862c2</MD5OfMessageBody>
               <MD5OfMessageAttributes>295c5fa15a51aae6884d1d7c1d99ca50</MD5OfMessageAttributes>
             </SendMessageBatchResultEntry>
             <BatchResultErrorEntry>
               <Id>test_msg_003</Id>
               <SenderFault>true</SenderFault>
               <Code>InvalidParameterValue</Code>
               <Message>Message must be shorter than 262144 bytes.</Message>
             </BatchResultErrorEntry>
           </SendMessageBatchResult></SendMessageBatchResponse>""",
    ),
    (
        "ReceiveMessage",
        {
            "Messages": [
                {
                    "MessageId": "5fea7756-0ea4-451a-a703-a558b933e274",
                    "ReceiptHandle": RECEIPT,
                    "MD5OfBody": "fafb00f5732ab283681e124bf8747ed1",
                    "Body": "This is a test message",
                    "Attributes": {
                        "SenderId": "195004372649",
                        "SentTimestamp": "1238099229000",
                        "ApproximateReceiveCount": "5",
                        "ApproximateFirstReceiveTimestamp": "1250700979248",
                    },
                    "MD5OfMessageAttributes": "295c5fa15a51aae6884d1d7c1d99ca50",
                    "MessageAttributes": {
                        "test_attribute_name_1": {
                            "StringValue": "test_attribute_value_1",
                            "DataType": "String",
                        },
                        "bytes": {"BinaryValue": "AAH/+w==", "DataType": "Binary"},
                    },
                },
                {"MessageId": "m2", "ReceiptHandle": "r2", "MD5OfBody": "d", "Body": ""},
            ]
        },
        f"""<ReceiveMessageResponse><ReceiveMessageResult>
             <Message>
               <MessageId>5fea7756-0ea4-451a-a703-a558b933e274</MessageId>
               <ReceiptHandle>{RECEIPT}</ReceiptHandle>
               <MD5OfBody>fafb00f5732ab283681e124bf8747ed1</MD5OfBody>
               <Body>This is a test message</Body>
               <Attribute><Name>SenderId</Name><Value>195004372649</Value></Attribute>
               <Attribute><Name>SentTimestamp</Name><Value>1238099229000</Value></Attribute>
               <Attribute><Name>ApproximateReceiveCount</Name><Value>5</Value></Attribute>
               <Attribute>
                 <Name>ApproximateFirstReceiveTimestamp</Name><Value>1250700979248</Value>
               </Attribute>
               <MD5OfMessageAttributes>295c5fa15a51aae6884d1d7c1d99ca50</MD5OfMessageAttributes>
               <MessageAttribute>
                 <Name>test_attribute_name_1</Name>
                 <Value>
                   <StringValue>test_attribute_value_1</StringValue>
                   <DataType>String</DataType>
                 </Value>
               </MessageAttribute>
               <MessageAttribute>
                 <Name>bytes</Name>
                 <Value><BinaryValue>AAH/+w==</BinaryValue><DataType>Binary</DataType></Value>
               </MessageAttribute>
             </Message>
             <Message>
               <MessageId>m2</MessageId><ReceiptHandle>r2</ReceiptHandle><MD5OfBody>d</MD5OfBody>
               <Body></Body>
             </Message>
           </ReceiveMessageResult></ReceiveMessageResponse>""",
    ),
    (
        "ReceiveMessage",
        {"Messages": []},
        "<ReceiveMessageResponse><ReceiveMessageResult/></ReceiveMessageResponse>",
    ),
    ("DeleteMessage", {}, "<DeleteMessageResponse/>"),
    (
        "DeleteMessageBatch",
        {"Successful": [{"Id": "msg1"}, {"Id": "msg2"}], "Failed": []},
        """<DeleteMessageBatchResponse><DeleteMessageBatchResult>
             <DeleteMessageBatchResultEntry><Id>msg1</Id></DeleteMessageBatchResultEntry>
             <DeleteMessageBatchResultEntry><Id>msg2</Id></DeleteMessageBatchResultEntry>
           </DeleteMessageBatchResult></DeleteMessageBatchResponse>""",
    ),
    ("ChangeMessageVisibility", {}, "<ChangeMessageVisibilityResponse/>"),
    (
        "ChangeMessageVisibilityBatch",
        {
            "Successful": [{"Id": "change_visibility_msg_2"}],
            "Failed": [
                {
                    "Id": "change_visibility_msg_3",
                    "SenderFault": False,
                    "Code": "InternalError",
                    "Message": "try again",
                }
            ],
        },
        """<ChangeMessageVisibilityBatchResponse><ChangeMessageVisibilityBatchResult>
             <ChangeMessageVisibilityBatchResultEntry>
               <Id>change_visibility_msg_2</Id>
             </ChangeMessageVisibilityBatchResultEntry>
             <BatchResultErrorEntry>
               <Id>change_visibility_msg_3</Id><SenderFault>false</SenderFault>
               <Code>InternalError</Code><Message>try again</Message>
             </BatchResultErrorEntry>
           </ChangeMessageVisibilityBatchResult></ChangeMessageVisibilityBatchResponse>""",
    ),
    (
        "ListDeadLetterSourceQueues",
        {"queueUrls": [QUEUE + "Source"], "NextToken": "next"},
        f"""<ListDeadLetterSourceQueuesResponse><ListDeadLetterSourceQueuesResult>
              <QueueUrl>{QUEUE}Source</QueueUrl>
              <NextToken>next</NextToken>
            </ListDeadLetterSourceQueuesResult></ListDeadLetterSourceQueuesResponse>""",
    ),
    ("TagQueue", {}, "<TagQueueResponse/>"),
    ("UntagQueue", {}, "<UntagQueueResponse/>"),
    (
        "ListQueueTags",
        {"Tags": {"QueueType": "Production", "Owner": "Developer123"}},
        """<ListQueueTagsResponse><ListQueueTagsResult>
             <Tag><Key>QueueType</Key><Value>Production</Value></Tag>
             <Tag><Key>Owner</Key><Value>Developer123</Value></Tag>
           </ListQueueTagsResult></ListQueueTagsResponse>""",
    ),
]


def outline(element: ET.Element) -> tuple[str, str | None, list[Any]]:
    """An element as (name without namespace, text of a leaf, children), for comparing."""
    children = [outline(child) for child in element]
    text = None if children else (element.text or "")
    return element.tag.rpartition("}")[2], text, children


def expected_answer(xml: str, request_id: str) -> tuple[str, str | None, list[Any]]:
    """An answer from the reference, its ResponseMetadata added (the samples end with it)."""
    name, _, children = outline(ET.fromstring(xml))
    return name, None, [*children, ("ResponseMetadata", None, [("RequestId", request_id, [])])]


@pytest.mark.parametrize(("action", "result", "xml"), RESULTS)
def test_a_result_renders_as_the_reference_s_answer(
    action: str, result: dict[str, Any], xml: str
) -> None:
    answer = render_result(action, result, "7a62c49f-347e-4fc4-9331-6e8e7a96aa73")
    assert answer.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    root = ET.fromstring(answer)
    assert root.tag == f"{{{NAMESPACE}}}{action}Response"
    assert all(element.tag.startswith(f"{{{NAMESPACE}}}") for element in root.iter())
    assert outline(root) == expected_answer(xml, "7a62c49f-347e-4fc4-9331-6e8e7a96aa73")


def test_every_action_has_a_result_case() -> None:
    assert {case[0] for case in RESULTS} == set(ACTIONS)


def test_text_comes_back_exactly() -> None:
    body = "<a href=\"x\">&amp;</a> ]]> \r\n\r \t 'quotes' 日本語 😀"
    answer = render_result("ReceiveMessage", {"Messages": [{"Body": body}]}, "r")
    assert b"&#13;" in answer  # a bare carriage return would read back as a line feed
    found = ET.fromstring(answer).find(
        f"{{{NAMESPACE}}}ReceiveMessageResult/{{{NAMESPACE}}}Message"
    )
    assert found is not None
    assert found.findtext(f"{{{NAMESPACE}}}Body") == body


def test_binary_values_render_as_base64_from_text_or_bytes() -> None:
    attributes = {
        "text": {"BinaryValue": "3q2+7w==", "DataType": "Binary"},
        "bytes": {"BinaryValue": b"\xde\xad\xbe\xef", "DataType": "Binary"},
        "lists": {"BinaryListValues": [b"\x00", "AQ=="], "DataType": "Binary"},
    }
    answer = render_result("ReceiveMessage", {"Messages": [{"MessageAttributes": attributes}]}, "r")
    ns = f"{{{NAMESPACE}}}"
    values = ET.fromstring(answer).iter(f"{ns}Value")
    assert [[(child.tag.removeprefix(ns), child.text) for child in value] for value in values] == [
        [("BinaryValue", "3q2+7w=="), ("DataType", "Binary")],
        [("BinaryValue", "3q2+7w=="), ("DataType", "Binary")],
        [("BinaryListValue", "AA=="), ("BinaryListValue", "AQ=="), ("DataType", "Binary")],
    ]


@pytest.mark.parametrize(
    ("action", "result"),
    [
        ("Frobnicate", {}),
        ("GetQueueUrl", {"QueueURL": "q"}),  # not a member
        ("DeleteQueue", {"QueueUrl": "q"}),  # DeleteQueue has no result
        ("ReceiveMessage", {"Messages": [{"Body": "nul \x00"}]}),  # XML cannot carry it
        ("ReceiveMessage", {"Messages": [{"Body": "\ud800"}]}),
    ],
)
def test_a_result_that_cannot_render_is_a_value_error(action: str, result: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        render_result(action, result, "r")


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("sender_fault", "kind"), [(True, "Sender"), (False, "Receiver")])
def test_an_error_renders_as_an_error_response(sender_fault: bool, kind: str) -> None:
    # As API_DeleteQueue's error sample, which has the namespace of every answer.
    answer = render_error(
        "InvalidParameterValue",
        "Value (quename_nonalpha) for parameter QueueName is invalid. <&> \x00",
        sender_fault=sender_fault,
        request_id="42d59b56-7407-4c4a-be0f-4c88daeea257",
    )
    root = ET.fromstring(answer)
    assert root.tag == f"{{{NAMESPACE}}}ErrorResponse"
    assert outline(root) == (
        "ErrorResponse",
        None,
        [
            (
                "Error",
                None,
                [
                    ("Type", kind, []),
                    ("Code", "InvalidParameterValue", []),
                    (
                        "Message",
                        "Value (quename_nonalpha) for parameter QueueName is invalid. <&> \ufffd",
                        [],
                    ),
                    ("Detail", "", []),
                ],
            ),
            ("RequestId", "42d59b56-7407-4c4a-be0f-4c88daeea257", []),
        ],
    )


# --- the table against botocore's JSON model --------------------------------------------------


def model_shape(model: dict[str, Any], name: str) -> Any:
    """A shape of the model written as the table writes it: JSON names and types only."""
    shape = model["shapes"][name]
    kind = shape["type"]
    if kind == "structure":
        return {
            member: model_shape(model, ref["shape"]) for member, ref in shape["members"].items()
        }
    if kind == "list":
        return [model_shape(model, shape["member"]["shape"])]
    if kind == "map":
        return {"*": model_shape(model, shape["value"]["shape"])}
    return kind


def table_shape(shape: Shape) -> Any:
    if isinstance(shape, Struct):
        return {member.json: table_shape(member.shape) for member in shape.members}
    if isinstance(shape, ListOf):
        return [table_shape(shape.member)]
    if isinstance(shape, MapOf):
        return {"*": table_shape(shape.value)}
    assert isinstance(shape, Scalar)
    return shape.type


def test_the_table_has_the_members_and_types_of_the_json_model() -> None:
    botocore = pytest.importorskip("botocore")
    path = Path(botocore.__file__).parent / "data/sqs/2012-11-05/service-2.json.gz"
    model = json.loads(gzip.decompress(path.read_bytes()))
    for action, spec in ACTIONS.items():
        operation = model["operations"][action]
        assert table_shape(spec.request) == model_shape(model, operation["input"]["shape"]), action
        output = operation.get("output")
        if output is None:
            assert spec.result is None, action
        else:
            assert spec.result is not None, action
            assert table_shape(spec.result) == model_shape(model, output["shape"]), action
