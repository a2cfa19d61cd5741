"""The bodies of the token endpoints of a namespace (admin plane): issue, list, set limits."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from msgspec import UNSET, UnsetType

from app.api.schemas.common import In, Out, Patch
from app.core.models import IssuedToken, Token


class TokenIssue(In):
    """``POST /v1/namespaces/{ns}/tokens``."""

    label: str = ""
    expires_at: datetime | None = None
    kind: Literal["bearer", "sqs"] = "bearer"
    """``bearer``: a token presented as ``Authorization: Bearer``; ``sqs``: an SQS access key
    that signs requests to the SQS door (docs/sqs.md)."""
    read_rate: float | None = None
    """Read requests per second the token may make, across every server (null: no limit of its
    own). Reads: dequeue, and every GET."""
    write_rate: float | None = None
    """Write requests per second the token may make, across every server (null: no limit of its
    own). Writes: enqueue, ack, complete, fail, … every request that is not a read."""


class TokenLimitsPatch(Patch):
    """``PATCH /v1/namespaces/{ns}/tokens/{token_id}``: the limits given change (null: no limit),
    the others stay."""

    read_rate: float | UnsetType | None = UNSET
    write_rate: float | UnsetType | None = UNSET


def _kind(token: Token) -> str:
    return "bearer" if token.access_key_id is None else "sqs"


class TokenOut(Out):
    """A token as listed: never with its secret."""

    id: str
    label: str
    created_at: datetime
    expires_at: datetime | None
    kind: str
    access_key_id: str | None
    read_rate: float | None
    """Read requests per second the token may make (null: no limit of its own)."""
    write_rate: float | None
    """Write requests per second the token may make (null: no limit of its own)."""

    @classmethod
    def of(cls, token: Token) -> TokenOut:
        """From the core model."""
        return cls(
            token.id,
            token.label,
            token.created_at,
            token.expires_at,
            _kind(token),
            token.access_key_id,
            token.read_rate,
            token.write_rate,
        )


class IssuedTokenOut(Out):
    """A freshly issued token, with its secret (shown this once only): the bearer token, or an
    SQS access key's secret access key (with its ``access_key_id``)."""

    id: str
    token: str
    label: str
    created_at: datetime
    expires_at: datetime | None
    kind: str
    access_key_id: str | None
    read_rate: float | None
    write_rate: float | None

    @classmethod
    def of(cls, issued: IssuedToken) -> IssuedTokenOut:
        """From the core model."""
        token = issued.token
        return cls(
            token.id,
            issued.secret,
            token.label,
            token.created_at,
            token.expires_at,
            _kind(token),
            token.access_key_id,
            token.read_rate,
            token.write_rate,
        )


class TokenList(Out):
    """``GET /v1/namespaces/{ns}/tokens``."""

    tokens: list[TokenOut]
