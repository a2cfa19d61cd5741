"""AWS Signature Version 4, checked the way AWS checks it on SQS requests (docs/sqs.md).

A client signs either with an ``Authorization`` header or with ``X-Amz-*`` query parameters (a
presigned URL). ``read_claim`` parses what the request says about itself, without any secret;
the caller looks the access key id up (an unknown one is ``InvalidClientTokenId``, 403) and then
``verify`` recomputes the signature from the request as received.

The canonical request is built as botocore's ``SigV4Auth`` builds it for a service other than S3:
the path has its dot segments and empty segments removed and is then percent-encoded again (so an
encoded ``%20`` on the wire signs as ``%2520``); query parameters are decoded, re-encoded with only
``A-Za-z0-9-_.~`` left bare, and sorted by name then value; each signed header is its values, in
the order received, with runs of whitespace squeezed to one space, joined with ``,``.

The error codes and statuses are those of the SQS API Reference, "Common Errors":
``MissingAuthenticationToken`` 403, ``IncompleteSignature`` 400, ``RequestExpired`` 400; and of
the IAM User Guide, "Troubleshoot signed requests for AWS APIs": ``SignatureDoesNotMatch`` 403,
whose messages (credential scope, ``Signature expired``) this module follows. (SQS itself has been
seen answering an expired signature as ``SignatureDoesNotMatch`` 403; the SDKs treat both alike.)
An ``X-Amz-Security-Token`` is signed like any header but not checked here.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote_to_bytes

ALGORITHM = "AWS4-HMAC-SHA256"
"""The only signing algorithm SigV4 has."""

SERVICE = "sqs"
"""The service name a credential scope must carry."""

TERMINATOR = "aws4_request"
"""The last element of every credential scope."""

MAX_SKEW = timedelta(minutes=15)
"""How far a request's time may be from the server's, either way (AWS's window for SQS)."""

MAX_EXPIRES_SECONDS = 7 * 24 * 3600
"""The longest ``X-Amz-Expires`` AWS accepts on a presigned request: seven days."""

_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_AMZ_DATE_SHAPE = re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})([0-9]{2})Z")
_UNRESERVED = "-_.~"
_PRESIGN_PARAMETERS = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature")
_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your"
    " AWS Secret Access Key and signing method. Consult the service documentation for details."
)


class SigningError(Exception):
    """A request AWS would refuse: ``code`` and ``status`` are what SQS answers with."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


def _missing(message: str) -> SigningError:
    return SigningError("MissingAuthenticationToken", message, 403)


def _incomplete(message: str) -> SigningError:
    return SigningError("IncompleteSignature", message, 400)


def _mismatch(message: str) -> SigningError:
    return SigningError("SignatureDoesNotMatch", message, 403)


def _expired(message: str) -> SigningError:
    return SigningError("RequestExpired", message, 400)


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """An HTTP request as received: the path and query still percent-encoded as on the wire
    (the path as ``str``, a raw non-ASCII byte decoded as UTF-8), header names in any case."""

    method: str
    path: str
    query_string: str
    headers: Sequence[tuple[str, str]]
    body: bytes


@dataclass(frozen=True, slots=True)
class SignatureClaim:
    """What a request says about its signature. ``timestamp`` is aware UTC (from ``X-Amz-Date``,
    or the ``Date`` header); ``expires_seconds`` is set exactly when the request is presigned."""

    access_key_id: str
    date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str
    timestamp: datetime
    expires_seconds: int | None = None


def read_claim(request: SignedRequest, *, service: str = SERVICE) -> SignatureClaim:
    """Parse the ``Authorization`` header, or else the presigned ``X-Amz-*`` query parameters.

    No authentication at all is ``MissingAuthenticationToken``; a malformed one, another
    algorithm, both kinds at once, no date, or ``host`` not among the signed headers is
    ``IncompleteSignature``; a credential scoped to another service or with another terminator
    is ``SignatureDoesNotMatch``, as on AWS.
    """
    authorizations = _header_values(request.headers, "authorization")
    query = _query_pairs(request.query_string)
    presigned = any(name.decode("utf-8", "replace") in _PRESIGN_PARAMETERS for name, _ in query)
    if authorizations and presigned:
        raise _incomplete(
            "Only one authentication method is allowed: the Authorization header or the"
            " X-Amz-* query parameters."
        )
    expires: int | None = None
    if authorizations:
        credential, signed, signature = _read_authorization(authorizations)
        timestamp = _header_timestamp(request.headers)
    elif presigned:
        parameters = _presign_parameters(query)
        algorithm = parameters.get("X-Amz-Algorithm")
        if algorithm != ALGORITHM:
            raise _incomplete(f"Unsupported AWS 'algorithm': '{algorithm}'.")
        credential = parameters.get("X-Amz-Credential", "")
        signed = parameters.get("X-Amz-SignedHeaders", "")
        signature = parameters.get("X-Amz-Signature", "")
        if "X-Amz-Date" not in parameters:
            raise _incomplete("A presigned request requires the 'X-Amz-Date' parameter.")
        timestamp = _parse_amz_date(parameters["X-Amz-Date"])
        expires = _parse_expires(parameters.get("X-Amz-Expires"))
    else:
        raise _missing("Request is missing Authentication Token")

    access_key_id, date, region, scope_service, terminator = _split_credential(credential)
    scope_errors = []
    if scope_service != service:
        scope_errors.append(f"Credential should be scoped to correct service: '{service}'.")
    if terminator != TERMINATOR:
        scope_errors.append(
            f"Credential should be scoped with a valid terminator: '{TERMINATOR}', not"
            f" '{terminator}'."
        )
    if scope_errors:
        raise _mismatch(" ".join(scope_errors))
    signed_headers = tuple(signed.split(";"))
    if not signed or not all(signed_headers):
        raise _incomplete(f"SignedHeaders must be ';'-separated header names, got '{signed}'.")
    if "host" not in (name.lower() for name in signed_headers):
        raise _incomplete(
            "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization."
        )
    if not signature:
        raise _incomplete("The signature is empty.")
    return SignatureClaim(
        access_key_id=access_key_id,
        date=date,
        region=region,
        service=scope_service,
        signed_headers=signed_headers,
        signature=signature,
        timestamp=timestamp,
        expires_seconds=expires,
    )


def verify(
    request: SignedRequest, claim: SignatureClaim, secret_access_key: str, now: datetime
) -> None:
    """Recompute the signature with the secret and raise ``SigningError`` unless it matches.

    The scope date must be the date of the request's time, and that time within 15 minutes of
    ``now`` (an aware datetime) either way; a presigned request is good from its time until
    ``X-Amz-Expires`` seconds after it. A body hash in ``x-amz-content-sha256`` must be the
    body's SHA-256: a presigned SigV4 request for a service other than S3 signs the body's hash
    too (``UNSIGNED-PAYLOAD`` is S3's), so no request escapes the body check.
    """
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    now = now.astimezone(UTC)
    timestamp = claim.timestamp.astimezone(UTC)
    amz_date = timestamp.strftime(_AMZ_DATE)
    if claim.date != amz_date[:8]:
        raise _mismatch(
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from"
            f" HTTP: '{claim.date}' != '{amz_date[:8]}', from '{amz_date}'."
        )
    _check_time(timestamp, claim.expires_seconds, now)

    payload_hash = hashlib.sha256(request.body).hexdigest()
    declared = _header_values(request.headers, "x-amz-content-sha256")
    if declared and [value.strip() for value in declared] != [payload_hash]:
        raise _mismatch(
            "The provided 'x-amz-content-sha256' header does not match what was computed."
        )

    canonical_request = "\n".join(
        (
            request.method.upper(),
            _canonical_uri(request.path),
            _canonical_query(request.query_string, presigned=claim.expires_seconds is not None),
            "".join(
                f"{name.lower()}:{_header_value(request.headers, name)}\n"
                for name in claim.signed_headers
            ),
            ";".join(claim.signed_headers),
            payload_hash,
        )
    )
    scope = f"{claim.date}/{claim.region}/{claim.service}/{TERMINATOR}"
    string_to_sign = "\n".join(
        (ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest())
    )
    key = f"AWS4{secret_access_key}".encode()
    for part in (claim.date, claim.region, claim.service, TERMINATOR):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), claim.signature.encode()):
        raise _mismatch(_MISMATCH)


def _check_time(timestamp: datetime, expires_seconds: int | None, now: datetime) -> None:
    """AWS's window: ``Signature expired`` / ``Signature not yet current`` around ``now``."""
    if timestamp > now + MAX_SKEW:
        raise _expired(
            f"Signature not yet current: {_format(timestamp)} is still later than"
            f" {_format(now + MAX_SKEW)} ({_format(now)} + 15 min.)"
        )
    if expires_seconds is None:
        if timestamp < now - MAX_SKEW:
            raise _expired(
                f"Signature expired: {_format(timestamp)} is now earlier than"
                f" {_format(now - MAX_SKEW)} ({_format(now)} - 15 min.)"
            )
    elif now > timestamp + timedelta(seconds=expires_seconds):
        raise _expired(
            f"Signature expired: {_format(timestamp)} + {expires_seconds} s is now earlier"
            f" than {_format(now)}."
        )


def _format(moment: datetime) -> str:
    return moment.strftime(_AMZ_DATE)


def _header_values(headers: Sequence[tuple[str, str]], name: str) -> list[str]:
    """Every value of a header, in the order received; ``name`` is lower case."""
    return [value for key, value in headers if key.strip().lower() == name]


def _header_value(headers: Sequence[tuple[str, str]], name: str) -> str:
    """A signed header's canonical value: each value trimmed and squeezed, joined with ``,``."""
    return ",".join(" ".join(value.split()) for value in _header_values(headers, name.lower()))


def _read_authorization(values: list[str]) -> tuple[str, str, str]:
    """``Credential``, ``SignedHeaders`` and ``Signature`` of an ``Authorization`` header."""
    if len(values) != 1:
        raise _incomplete("The request has more than one Authorization header.")
    algorithm, _, rest = values[0].strip().partition(" ")
    if algorithm != ALGORITHM:
        raise _incomplete(f"Unsupported AWS 'algorithm': '{algorithm}'.")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        key, equals, value = part.strip().partition("=")
        if not equals or key in fields:
            raise _incomplete(f"Authorization header is malformed: '{values[0]}'.")
        fields[key] = value
    wanted = ("Credential", "SignedHeaders", "Signature")
    absent = [key for key in wanted if key not in fields]
    if absent:
        raise _incomplete(
            " ".join(f"Authorization header requires '{key}' parameter." for key in absent)
        )
    return fields["Credential"], fields["SignedHeaders"], fields["Signature"]


def _header_timestamp(headers: Sequence[tuple[str, str]]) -> datetime:
    """The time from ``X-Amz-Date``, or else from ``Date`` (an RFC 1123 date), in UTC."""
    amz_dates = _header_values(headers, "x-amz-date")
    if amz_dates:
        if len(amz_dates) != 1:
            raise _incomplete("The request has more than one X-Amz-Date header.")
        return _parse_amz_date(amz_dates[0].strip())
    dates = _header_values(headers, "date")
    if len(dates) != 1:
        raise _incomplete(
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
        )
    try:
        moment = parsedate_to_datetime(dates[0])
    except (TypeError, ValueError):
        raise _incomplete(f"The Date header is not an HTTP date: '{dates[0]}'.") from None
    if moment.tzinfo is None:  # "-0000": UTC by RFC 2822
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _parse_amz_date(value: str) -> datetime:
    """An ISO 8601 basic-format UTC time, ``YYYYMMDD'T'HHMMSS'Z'``."""
    shape = _AMZ_DATE_SHAPE.fullmatch(value)
    try:
        if shape is None:
            raise ValueError(value)
        year, month, day, hour, minute, second = (int(group) for group in shape.groups())
        return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        raise _incomplete(
            f"Date must be in ISO-8601 'basic format'. Got '{value}'."
            " See http://en.wikipedia.org/wiki/ISO_8601"
        ) from None


def _parse_expires(value: str | None) -> int:
    if value is None:
        raise _incomplete("A presigned request requires the 'X-Amz-Expires' parameter.")
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= MAX_EXPIRES_SECONDS:
        raise _incomplete(
            f"X-Amz-Expires must be a number of seconds from 1 to {MAX_EXPIRES_SECONDS},"
            f" got '{value}'."
        )
    return int(value)


def _split_credential(credential: str) -> tuple[str, str, str, str, str]:
    """``AKID/YYYYMMDD/region/service/aws4_request`` in its five parts."""
    parts = credential.split("/")
    if len(parts) != 5 or not all(parts):
        raise _incomplete(
            "Credential must have exactly 5 slash-delimited elements, e.g."
            f" keyid/date/region/service/term, got '{credential}'."
        )
    return parts[0], parts[1], parts[2], parts[3], parts[4]


def _presign_parameters(query: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """The ``X-Amz-*`` parameters of a presigned request, each present at most once."""
    parameters: dict[str, str] = {}
    for raw_name, raw_value in query:
        name = raw_name.decode("utf-8", "replace")
        if not name.startswith("X-Amz-"):
            continue
        if name in parameters:
            raise _incomplete(f"The query parameter '{name}' appears more than once.")
        parameters[name] = raw_value.decode("utf-8", "replace")
    return parameters


def _query_pairs(query_string: str) -> list[tuple[bytes, bytes]]:
    """The query's name/value pairs, decoded to bytes (``+`` is a space, as in a form)."""
    pairs = []
    for segment in query_string.split("&"):
        if segment:
            name, _, value = segment.partition("=")
            pairs.append((_form_decode(name), _form_decode(value)))
    return pairs


def _form_decode(text: str) -> bytes:
    return unquote_to_bytes(text.replace("+", " "))


def _canonical_query(query_string: str, *, presigned: bool) -> str:
    """Re-encoded pairs sorted by name then value; a presigned request leaves out its signature."""
    pairs = sorted(
        (quote(name, safe=_UNRESERVED), quote(value, safe=_UNRESERVED))
        for name, value in _query_pairs(query_string)
        if not (presigned and name == b"X-Amz-Signature")
    )
    return "&".join(f"{name}={value}" for name, value in pairs)


def _canonical_uri(path: str) -> str:
    """The path without dot segments or empty segments, encoded once more (AWS, not S3)."""
    segments: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if segments:
                segments.pop()
        elif segment and segment != ".":
            segments.append(segment)
    normalized = "/" + "/".join(segments)
    if segments and path.endswith("/"):
        normalized += "/"
    return quote(normalized, safe="/~")
