"""SigV4 verification (app/sqs/signing.py): requests signed by botocore's own signer, the client
every boto3 user has, and the vectors of AWS's published SigV4 test suite. Pure and fast: no
server, no database, the clock passed in."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSPreparedRequest, AWSRequest
from botocore.credentials import Credentials

from app.sqs.signing import SignatureClaim, SignedRequest, SigningError, read_claim, verify

KEY_ID = "AKIASUNDIALEXAMPLE01"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiSUNDIALKEY"
ENDPOINT = "http://127.0.0.1:8000/sqs/"
SIGNED_AT = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)
QUEUE_URL = "http://127.0.0.1:8000/sqs/123456789012/orders"


@contextmanager
def clock(at: datetime) -> Iterator[None]:
    """botocore's SigV4 signers read the time from ``botocore.auth.get_current_datetime``."""
    naive = at.astimezone(UTC).replace(tzinfo=None)
    with mock.patch("botocore.auth.get_current_datetime", return_value=naive):
        yield


def text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def on_the_wire(prepared: AWSPreparedRequest) -> SignedRequest:
    """What the server receives for a prepared botocore request (the HTTP client adds ``Host``)."""
    url = urlsplit(prepared.url)
    body = prepared.body or b""
    if isinstance(body, str):
        body = body.encode()
    headers = [("Host", url.netloc), *((text(k), text(v)) for k, v in prepared.headers.items())]
    return SignedRequest(prepared.method, url.path, url.query, headers, body)


def signed(
    method: str = "POST",
    url: str = ENDPOINT,
    *,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
    region: str = "us-east-1",
    at: datetime = SIGNED_AT,
    presign_expires: int | None = None,
) -> SignedRequest:
    """A request signed by botocore (``SigV4QueryAuth`` when ``presign_expires`` is given)."""
    request = AWSRequest(
        method=method, url=url, data=body, headers=dict(headers or {}), params=dict(params or {})
    )
    credentials = Credentials(KEY_ID, SECRET)
    signer = (
        SigV4Auth(credentials, "sqs", region)
        if presign_expires is None
        else SigV4QueryAuth(credentials, "sqs", region, expires=presign_expires)
    )
    with clock(at):
        signer.add_auth(request)
    return on_the_wire(request.prepare())


def check(request: SignedRequest, *, now: datetime = SIGNED_AT, secret: str = SECRET) -> None:
    verify(request, read_claim(request), secret, now)


def refusal(
    request: SignedRequest, *, now: datetime = SIGNED_AT, secret: str = SECRET
) -> SigningError:
    with pytest.raises(SigningError) as caught:
        check(request, now=now, secret=secret)
    return caught.value


def with_header(request: SignedRequest, name: str, value: str) -> SignedRequest:
    """The request with every ``name`` header replaced by one with ``value``."""
    kept = [(k, v) for k, v in request.headers if k.lower() != name.lower()]
    return replace(request, headers=[*kept, (name, value)])


def json_request(target: str, payload: Mapping[str, Any], **kwargs: Any) -> SignedRequest:
    return signed(
        body=json.dumps(payload).encode(),
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": target},
        **kwargs,
    )


SEND = {"QueueUrl": QUEUE_URL, "MessageBody": "hello, wörld ✓"}
FORM = (
    b"Action=SendMessage&Version=2012-11-05&QueueUrl=http%3A%2F%2F127.0.0.1%3A8000%2Fsqs%2F"
    b"123456789012%2Forders&MessageBody=hello+w%C3%B6rld%20%2B%26%3D"
)
FORM_HEADERS = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}


# -- requests botocore signs verify --------------------------------------------------------


def test_a_json_protocol_request_verifies_and_its_claim_is_read() -> None:
    request = json_request("AmazonSQS.SendMessage", SEND)
    claim = read_claim(request)
    assert claim == SignatureClaim(
        access_key_id=KEY_ID,
        date="20261127",
        region="us-east-1",
        service="sqs",
        signed_headers=("content-type", "host", "x-amz-date", "x-amz-target"),
        signature=claim.signature,
        timestamp=SIGNED_AT,
        expires_seconds=None,
    )
    assert len(claim.signature) == 64
    verify(request, claim, SECRET, SIGNED_AT)


def test_a_query_protocol_form_body_verifies() -> None:
    check(signed(body=FORM, headers=FORM_HEADERS))


def test_a_get_with_a_query_string_verifies() -> None:
    # botocore signs %20 for a space but puts '+' on the wire (urlencode): read as a form.
    params = {
        "Action": "ListQueues",
        "QueueNamePrefix": "a b/c~d*e'f",
        "Tag": "café ✓",
        "Empty": "",
    }
    request = signed("GET", params=params)
    assert "+" in request.query_string
    check(request)


@pytest.mark.parametrize(
    "path",
    [
        "/sqs/123456789012/my%20queue",  # an encoded space: canonical %2520, as botocore signs it
        "/sqs/123456789012/caf%C3%A9-%E2%9C%93",
        "/sqs/a:b@c!d$e'(f)*g,h;i=j+k~l/",
        "/sqs/./123456789012/x/../orders",  # dot segments are removed before signing
        "/sqs//123456789012///orders",  # and so are empty segments
        "/",
    ],
)
def test_paths_needing_encoding_verify(path: str) -> None:
    check(
        json_request(
            "AmazonSQS.GetQueueUrl", {"QueueName": "q"}, url=f"http://127.0.0.1:8000{path}"
        )
    )


def test_boto3s_sqs_client_verifies_as_it_signs_on_the_wire() -> None:
    """The real client, end to end up to the socket: every header it adds (user agent,
    invocation id...) is signed or not exactly as boto3 decides."""
    captured: list[AWSPreparedRequest] = []

    class Sent(Exception):
        pass

    def capture(request: AWSPreparedRequest, **_: Any) -> None:
        captured.append(request)
        raise Sent

    client = boto3.client(
        "sqs",
        endpoint_url="http://127.0.0.1:8000/sqs",
        region_name="eu-west-3",
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )
    client.meta.events.register("before-send.sqs.SendMessage", capture)
    with clock(SIGNED_AT), pytest.raises(Sent):
        client.send_message(
            QueueUrl=QUEUE_URL,
            MessageBody="from boto3",
            MessageAttributes={"kind": {"DataType": "String", "StringValue": "order"}},
        )
    request = on_the_wire(captured[0])
    claim = read_claim(request)
    assert (claim.region, claim.service) == ("eu-west-3", "sqs")
    assert "x-amz-target" in claim.signed_headers
    verify(request, claim, SECRET, SIGNED_AT)


def test_header_names_are_matched_in_any_case() -> None:
    request = json_request("AmazonSQS.SendMessage", SEND)
    upper = replace(request, headers=[(k.upper(), v) for k, v in request.headers])
    check(upper)


def test_an_unsigned_header_added_on_the_way_does_not_matter() -> None:
    request = json_request("AmazonSQS.SendMessage", SEND)
    check(replace(request, headers=[*request.headers, ("X-Forwarded-For", "10.0.0.1")]))


def test_a_date_header_can_stand_for_x_amz_date() -> None:
    # botocore signs with the Date header (rewritten to the signing time) when one is present.
    request = signed(body=FORM, headers={**FORM_HEADERS, "Date": "Thu, 01 Jan 2026 00:00:00 GMT"})
    assert not any(k.lower() == "x-amz-date" for k, _ in request.headers)
    assert read_claim(request).timestamp == SIGNED_AT
    check(request)


def test_a_correct_body_hash_header_verifies() -> None:
    request = signed(
        body=FORM,
        headers={**FORM_HEADERS, "X-Amz-Content-SHA256": hashlib.sha256(FORM).hexdigest()},
    )
    check(request)


# -- tampering is refused ------------------------------------------------------------------


def assert_mismatch(error: SigningError) -> None:
    assert (error.code, error.status) == ("SignatureDoesNotMatch", 403)


def test_a_wrong_secret_is_refused() -> None:
    error = refusal(json_request("AmazonSQS.SendMessage", SEND), secret=SECRET + "x")
    assert_mismatch(error)
    assert error.message.startswith("The request signature we calculated does not match")


def test_a_tampered_body_is_refused() -> None:
    request = json_request("AmazonSQS.SendMessage", SEND)
    assert_mismatch(refusal(replace(request, body=request.body.replace(b"hello", b"HELLO"))))


def test_a_tampered_body_is_refused_even_with_its_own_hash_header() -> None:
    hashed = {**FORM_HEADERS, "X-Amz-Content-SHA256": hashlib.sha256(FORM).hexdigest()}
    tampered = replace(signed(body=FORM, headers=hashed), body=FORM.replace(b"hello", b"HELLO"))
    error = refusal(tampered)
    assert_mismatch(error)
    assert "x-amz-content-sha256" in error.message
    # ...and with the header rewritten to match the new body, the signature no longer does.
    rehashed = with_header(
        tampered, "X-Amz-Content-SHA256", hashlib.sha256(tampered.body).hexdigest()
    )
    assert_mismatch(refusal(rehashed))


def test_an_unsigned_payload_header_is_refused() -> None:
    request = signed(
        body=FORM, headers={**FORM_HEADERS, "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"}
    )
    assert_mismatch(refusal(request))


def test_a_tampered_signed_header_is_refused() -> None:
    request = json_request("AmazonSQS.ReceiveMessage", {"QueueUrl": QUEUE_URL})
    assert_mismatch(refusal(with_header(request, "X-Amz-Target", "AmazonSQS.DeleteQueue")))


def test_a_changed_path_is_refused() -> None:
    request = json_request("AmazonSQS.SendMessage", SEND, url=QUEUE_URL)
    assert_mismatch(refusal(replace(request, path=request.path + "-other")))


def test_a_changed_query_is_refused() -> None:
    request = signed("GET", params={"Action": "ListQueues", "QueueNamePrefix": "a"})
    assert_mismatch(refusal(replace(request, query_string=request.query_string + "b")))
    assert_mismatch(refusal(replace(request, query_string=request.query_string + "&Extra=1")))


def test_a_changed_method_is_refused() -> None:
    assert_mismatch(
        refusal(replace(signed("GET", params={"Action": "ListQueues"}), method="DELETE"))
    )


def test_a_changed_host_is_refused() -> None:
    request = json_request("AmazonSQS.SendMessage", SEND)
    assert_mismatch(refusal(with_header(request, "Host", "127.0.0.1:9000")))


# -- time ----------------------------------------------------------------------------------


def test_fifteen_minutes_either_way_is_the_window() -> None:
    request = json_request("AmazonSQS.SendMessage", SEND)
    for offset in (timedelta(minutes=15), -timedelta(minutes=15), timedelta(0)):
        check(request, now=SIGNED_AT + offset)


@pytest.mark.parametrize(
    ("offset", "says"),
    [
        (timedelta(minutes=16), "Signature expired: 20261127T120000Z is now earlier than"),
        (-timedelta(minutes=16), "Signature not yet current: 20261127T120000Z is still later"),
    ],
)
def test_a_timestamp_sixteen_minutes_off_is_refused(offset: timedelta, says: str) -> None:
    error = refusal(json_request("AmazonSQS.SendMessage", SEND), now=SIGNED_AT + offset)
    assert (error.code, error.status) == ("RequestExpired", 400)
    assert error.message.startswith(says)


def test_the_scope_date_must_be_the_date_of_the_timestamp() -> None:
    request = json_request("AmazonSQS.SendMessage", SEND)
    moved = with_header(request, "X-Amz-Date", "20261128T000100Z")
    error = refusal(moved, now=datetime(2026, 11, 28, 0, 1, tzinfo=UTC))
    assert_mismatch(error)
    assert error.message.startswith("Date in Credential scope does not match")


def test_now_must_be_aware() -> None:
    request = json_request("AmazonSQS.SendMessage", SEND)
    with pytest.raises(ValueError, match="aware"):
        verify(request, read_claim(request), SECRET, SIGNED_AT.replace(tzinfo=None))


# -- presigned requests --------------------------------------------------------------------


def presigned(expires: int = 300) -> SignedRequest:
    params = {"Action": "ListQueues", "QueueNamePrefix": "or ders", "Version": "2012-11-05"}
    return signed("GET", params=params, presign_expires=expires)


def test_a_presigned_request_verifies_until_it_expires() -> None:
    request = presigned(300)
    claim = read_claim(request)
    assert claim.expires_seconds == 300
    assert claim.signed_headers == ("host",)
    for offset in (timedelta(0), timedelta(seconds=300), -timedelta(minutes=15)):
        verify(request, claim, SECRET, SIGNED_AT + offset)


def test_an_expired_presigned_request_is_refused() -> None:
    error = refusal(presigned(300), now=SIGNED_AT + timedelta(seconds=301))
    assert (error.code, error.status) == ("RequestExpired", 400)


def test_a_presigned_request_from_the_future_is_refused() -> None:
    error = refusal(presigned(3600), now=SIGNED_AT - timedelta(minutes=16))
    assert (error.code, error.status) == ("RequestExpired", 400)


def test_a_presigned_request_with_a_changed_parameter_is_refused() -> None:
    request = presigned()
    assert "or%20ders" in request.query_string
    # A space on the wire as '+' (form encoding) is the same parameter...
    check(replace(request, query_string=request.query_string.replace("or%20ders", "or+ders")))
    # ...but another value is another request.
    changed = request.query_string.replace("or%20ders", "other")
    assert_mismatch(refusal(replace(request, query_string=changed)))
    longer = request.query_string.replace("X-Amz-Expires=300", "X-Amz-Expires=3600")
    assert_mismatch(refusal(replace(request, query_string=longer)))


def test_a_presigned_request_with_a_body_added_is_refused() -> None:
    # Outside S3 a presigned request signs its body's hash (empty here), not UNSIGNED-PAYLOAD.
    assert_mismatch(refusal(replace(presigned(), body=b"Action=DeleteQueue")))


# -- what the request says about itself ----------------------------------------------------


def bare(*headers: tuple[str, str], query: str = "") -> SignedRequest:
    base = [("Host", "127.0.0.1:8000"), ("X-Amz-Date", "20261127T120000Z")]
    return SignedRequest("POST", "/sqs/", query, [*base, *headers], b"{}")


def claim_error(request: SignedRequest) -> SigningError:
    with pytest.raises(SigningError) as caught:
        read_claim(request)
    return caught.value


def test_no_authentication_is_missing_authentication_token() -> None:
    error = claim_error(bare())
    assert (error.code, error.status) == ("MissingAuthenticationToken", 403)


SCOPE = "AKID/20261127/us-east-1/sqs/aws4_request"


@pytest.mark.parametrize(
    "authorization",
    [
        "garbage",
        "Bearer abc.def.ghi",
        "AWS AKID:c2lnbmF0dXJl",  # SigV2
        "AWS4-HMAC-SHA512 Credential=" + SCOPE + ", SignedHeaders=host, Signature=ab",
        "AWS4-HMAC-SHA256 Credential=" + SCOPE,
        "AWS4-HMAC-SHA256 Credential=" + SCOPE + ", SignedHeaders=host, Signature=",
        "AWS4-HMAC-SHA256 Credential=" + SCOPE + ", SignedHeaders=host;;x-amz-date, Signature=ab",
        "AWS4-HMAC-SHA256 Credential=AKID/20261127/us-east-1/sqs, SignedHeaders=host, Signature=ab",
        "AWS4-HMAC-SHA256 Credential=" + SCOPE + ", Credential=" + SCOPE + ", SignedHeaders=host",
        # AWS requires the host among the signed headers.
        "AWS4-HMAC-SHA256 Credential=" + SCOPE + ", SignedHeaders=x-amz-date, Signature=ab",
    ],
)
def test_a_malformed_authorization_is_incomplete_signature(authorization: str) -> None:
    error = claim_error(bare(("Authorization", authorization)))
    assert (error.code, error.status) == ("IncompleteSignature", 400)


def test_no_date_or_a_malformed_one_is_incomplete_signature() -> None:
    authorization = f"AWS4-HMAC-SHA256 Credential={SCOPE}, SignedHeaders=host, Signature=ab"
    undated = SignedRequest("POST", "/sqs/", "", [("Authorization", authorization)], b"")
    assert claim_error(undated).code == "IncompleteSignature"
    for date in ("2026-11-27T12:00:00Z", "20261327T120000Z", "20261127T120000"):
        request = with_header(bare(("Authorization", authorization)), "X-Amz-Date", date)
        assert claim_error(request).code == "IncompleteSignature"


def test_a_credential_for_another_service_does_not_match() -> None:
    authorization = (
        "AWS4-HMAC-SHA256 Credential=AKID/20261127/us-east-1/s3/aws4_request,"
        " SignedHeaders=host;x-amz-date, Signature=ab"
    )
    error = claim_error(bare(("Authorization", authorization)))
    assert_mismatch(error)
    assert "Credential should be scoped to correct service: 'sqs'" in error.message


def test_both_an_authorization_header_and_presigned_parameters_are_refused() -> None:
    request = presigned()
    authorization = f"AWS4-HMAC-SHA256 Credential={SCOPE}, SignedHeaders=host, Signature=ab"
    both = replace(request, headers=[*request.headers, ("Authorization", authorization)])
    assert claim_error(both).code == "IncompleteSignature"


@pytest.mark.parametrize(
    ("find", "put"),
    [
        ("X-Amz-Algorithm=AWS4-HMAC-SHA256", "X-Amz-Algorithm=AWS4-HMAC-SHA1"),
        ("X-Amz-Expires=300", "X-Amz-Expires=604801"),
        ("X-Amz-Expires=300", "X-Amz-Expires=soon"),
        ("X-Amz-Expires=300&", ""),
        ("&X-Amz-Date=20261127T120000Z", ""),
    ],
)
def test_malformed_presigned_parameters_are_incomplete_signature(find: str, put: str) -> None:
    request = presigned()
    assert find in request.query_string
    broken = replace(request, query_string=request.query_string.replace(find, put))
    assert claim_error(broken).code == "IncompleteSignature"


# -- AWS's SigV4 test suite ----------------------------------------------------------------
# From AWS's published Signature Version 4 test suite (docs.aws.amazon.com/general/latest/gr/
# signature-v4-test-suite.html), as carried in awslabs/aws-c-auth at
# tests/aws-signing-test-suite/v4/<name>/ (request.txt, header-signed-request.txt,
# query-signed-request.txt): key AKIDEXAMPLE, region us-east-1, service "service", at
# 2015-08-30T12:36:00Z. The signatures are AWS's, computed by AWS, not by this code.

SUITE_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SUITE_NOW = datetime(2015, 8, 30, 12, 36, tzinfo=UTC)
SUITE_SCOPE = "AKIDEXAMPLE/20150830/us-east-1/service/aws4_request"
SUITE_HOST = ("Host", "example.amazonaws.com")
SUITE_DATE = ("X-Amz-Date", "20150830T123600Z")


def suite_header_auth(signed_headers: str, signature: str) -> tuple[str, str]:
    value = f"AWS4-HMAC-SHA256 Credential={SUITE_SCOPE}, SignedHeaders={signed_headers}"
    return ("Authorization", f"{value}, Signature={signature}")


SUITE_HEADER_SIGNED = {
    "get-vanilla": SignedRequest(
        "GET",
        "/",
        "",
        [
            SUITE_HOST,
            SUITE_DATE,
            suite_header_auth(
                "host;x-amz-date",
                "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
            ),
        ],
        b"",
    ),
    "get-vanilla-query-order-key-case": SignedRequest(
        "GET",
        "/",
        "Param2=value2&Param1=value1",
        [
            SUITE_HOST,
            SUITE_DATE,
            suite_header_auth(
                "host;x-amz-date",
                "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
            ),
        ],
        b"",
    ),
    "get-vanilla-query-order-encoded": SignedRequest(
        "GET",
        "/",
        "Param-3=Value3&Param=Value2&%E1%88%B4=Value1",
        [
            SUITE_HOST,
            SUITE_DATE,
            suite_header_auth(
                "host;x-amz-date",
                "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac",
            ),
        ],
        b"",
    ),
    "get-relative-relative-normalized": SignedRequest(
        "GET",
        "/example1/example2/../..",
        "",
        [
            SUITE_HOST,
            SUITE_DATE,
            suite_header_auth(
                "host;x-amz-date",
                "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
            ),
        ],
        b"",
    ),
    "get-header-key-duplicate": SignedRequest(
        "GET",
        "/",
        "",
        [
            SUITE_HOST,
            ("My-Header1", "value2"),
            ("My-Header1", "value2"),
            ("My-Header1", "value1"),
            SUITE_DATE,
            suite_header_auth(
                "host;my-header1;x-amz-date",
                "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea",
            ),
        ],
        b"",
    ),
    "get-header-value-order": SignedRequest(
        "GET",
        "/",
        "",
        [
            SUITE_HOST,
            ("My-Header1", "value4"),
            ("My-Header1", "value1"),
            ("My-Header1", "value3"),
            ("My-Header1", "value2"),
            SUITE_DATE,
            suite_header_auth(
                "host;my-header1;x-amz-date",
                "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01",
            ),
        ],
        b"",
    ),
    "get-header-value-trim": SignedRequest(
        "GET",
        "/",
        "",
        [
            SUITE_HOST,
            ("My-Header1", "value1"),
            ("My-Header2", '"a   b   c"'),
            SUITE_DATE,
            suite_header_auth(
                "host;my-header1;my-header2;x-amz-date",
                "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
            ),
        ],
        b"",
    ),
    "post-x-www-form-urlencoded": SignedRequest(
        "POST",
        "/",
        "",
        [
            ("Content-Type", "application/x-www-form-urlencoded"),
            SUITE_HOST,
            ("Content-Length", "13"),
            SUITE_DATE,
            (
                "x-amz-content-sha256",
                "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
            ),
            suite_header_auth(
                "content-length;content-type;host;x-amz-content-sha256;x-amz-date",
                "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b",
            ),
        ],
        b"Param1=value1",
    ),
}

SUITE_PRESIGNED = {
    "get-vanilla": SignedRequest(
        "GET",
        "/",
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%2F"
        "service%2Faws4_request&X-Amz-Date=20150830T123600Z&X-Amz-SignedHeaders=host"
        "&X-Amz-Expires=3600"
        "&X-Amz-Signature=e93c787ed7f371d5c6b165c1b38ede9550f4dce4144713e844b25b7192d3865d",
        [SUITE_HOST],
        b"",
    ),
    "post-x-www-form-urlencoded": SignedRequest(
        "POST",
        "/",
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%2F"
        "service%2Faws4_request&X-Amz-Date=20150830T123600Z"
        "&X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost&X-Amz-Expires=3600"
        "&X-Amz-Signature=89a40deed0f26f9461242825a082d2222717248abc7ab41f552ad84a94ad46e9",
        [
            ("Content-Type", "application/x-www-form-urlencoded"),
            SUITE_HOST,
            ("Content-Length", "13"),
        ],
        b"Param1=value1",
    ),
}


@pytest.mark.parametrize(
    "request_",
    [*SUITE_HEADER_SIGNED.values(), *SUITE_PRESIGNED.values()],
    ids=[*SUITE_HEADER_SIGNED, *(f"presigned-{name}" for name in SUITE_PRESIGNED)],
)
def test_aws_sigv4_test_suite(request_: SignedRequest) -> None:
    claim = read_claim(request_, service="service")
    verify(request_, claim, SUITE_SECRET, SUITE_NOW)
    with pytest.raises(SigningError):
        verify(request_, claim, SUITE_SECRET.lower(), SUITE_NOW)


def test_the_suite_is_refused_when_the_service_must_be_sqs() -> None:
    assert_mismatch(claim_error(SUITE_HEADER_SIGNED["get-vanilla"]))
