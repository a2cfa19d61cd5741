"""The bodies of the token endpoints of a namespace (admin plane): issue, list."""

from __future__ import annotations

from datetime import datetime

from app.api.schemas.common import In, Out
from app.core.models import IssuedToken, Token


class TokenIssue(In):
    """``POST /v1/namespaces/{ns}/tokens``."""

    label: str = ""
    expires_at: datetime | None = None


class TokenOut(Out):
    """A token as listed: never with its secret."""

    id: str
    label: str
    created_at: datetime
    expires_at: datetime | None

    @classmethod
    def of(cls, token: Token) -> TokenOut:
        """From the core model."""
        return cls(token.id, token.label, token.created_at, token.expires_at)


class IssuedTokenOut(Out):
    """A freshly issued token, with its secret (shown this once only)."""

    id: str
    token: str
    label: str
    created_at: datetime
    expires_at: datetime | None

    @classmethod
    def of(cls, issued: IssuedToken) -> IssuedTokenOut:
        """From the core model."""
        token = issued.token
        return cls(token.id, issued.secret, token.label, token.created_at, token.expires_at)


class TokenList(Out):
    """``GET /v1/namespaces/{ns}/tokens``."""

    tokens: list[TokenOut]
