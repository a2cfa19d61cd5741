"""The bodies of the token endpoints of a namespace (admin plane): issue, list."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from app.api.schemas.common import In, Out
from app.core.models import IssuedToken, Token


class TokenIssue(In):
    """``POST /v1/namespaces/{ns}/tokens``."""

    label: str = ""
    expires_at: datetime | None = None
    kind: Literal["bearer", "sqs"] = "bearer"
    """``bearer``: a token presented as ``Authorization: Bearer``; ``sqs``: an SQS access key
    that signs requests to the SQS door (docs/sqs.md)."""


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
        )


class TokenList(Out):
    """``GET /v1/namespaces/{ns}/tokens``."""

    tokens: list[TokenOut]
