"""Who is calling, and the namespace tokens that say so: a token's shape and how its secret is
stored, authentication of a secret, and issuing, listing and revoking tokens.

Authorization of a caller for a namespace is the edge's job (:meth:`Principal.may_access`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Mapping
from datetime import datetime

from app.core import token_limits, validation
from app.core.errors import NotFoundError, UnavailableError
from app.core.models import IssuedToken, Principal, Token
from app.core.sealing import Sealer
from app.core.service.base import ServiceBase
from app.core.service.identifiers import could_exist, lease_uuid

TOKEN_PREFIX = "sdl_"  # noqa: S105 - a public prefix, not a secret
ACCESS_KEY_PREFIX = "SDLK"
"""How SQS access key ids begin (20 characters in all, like AWS's)."""
_ACCESS_KEY_ID = re.compile(r"SDLK[A-Z2-7]{16}")
_NAMESPACE_TOKEN = re.compile(r"sdl_[A-Za-z0-9_-]{43}")


def is_namespace_token(secret: str) -> bool:
    """Whether ``secret`` has the shape of a namespace token: the prefix and 256 random bits,
    which no one can guess (unlike an operator-chosen admin token)."""
    return _NAMESPACE_TOKEN.fullmatch(secret) is not None


def hash_secret(secret: str) -> bytes:
    """How token secrets are stored: SHA-256 (secrets carry 256 random bits)."""
    return hashlib.sha256(secret.encode()).digest()


def is_access_key_id(value: str) -> bool:
    """Whether ``value`` has the shape of an SQS access key id Sundial issues."""
    return _ACCESS_KEY_ID.fullmatch(value) is not None


def _principal(token: Token) -> Principal:
    """The caller a token makes, with its rate limits."""
    return Principal(
        is_admin=False,
        namespace=token.namespace,
        token_id=token.id,
        read_rate=token.read_rate,
        write_rate=token.write_rate,
    )


class Tokens(ServiceBase):
    """Authentication, and a namespace's tokens."""

    _admin_token: str | None
    sealer: Sealer | None
    """Seals SQS access keys' secrets; None when no sealing secret is configured."""

    async def authenticate(self, secret: str, namespace: str | None = None) -> Principal | None:
        """Who presents ``secret``: the admin, a namespace token, or nobody (``None``).
        ``namespace``: the one the request is about, where its token is looked for first (each
        pool keeps its own namespaces' tokens)."""
        if self._admin_token and hmac.compare_digest(secret.encode(), self._admin_token.encode()):
            return Principal(is_admin=True)
        if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
            return None
        token = await self.store.find_token(hash_secret(secret), namespace)
        if token is None:
            return None
        return _principal(token)

    async def issue_token(
        self,
        namespace: str,
        label: str = "",
        expires_at: datetime | None = None,
        *,
        read_rate: float | None = None,
        write_rate: float | None = None,
    ) -> IssuedToken:
        """Issue a namespace token, with its own rate limits if given (requests per second;
        :mod:`app.core.token_limits`); its secret is returned now and never again."""
        limits = token_limits.changes({"read_rate": read_rate, "write_rate": write_rate})
        await self._require_namespace(namespace)
        validation.text("label", label, 200)
        if expires_at is not None:
            validation.timestamp("expires_at", expires_at)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)  # is_namespace_token's shape
        token = await self.store.insert_token(
            namespace, str(uuid.uuid4()), label, hash_secret(secret), expires_at, limits=limits
        )
        return IssuedToken(token=token, secret=secret)

    async def set_token_limits(
        self, namespace: str, token_id: str, changes: Mapping[str, object]
    ) -> Token:
        """Change a token's rate limits (``read_rate``, ``write_rate``: requests per second, or
        None for no limit; a field left out stays). Applies to every request sent after this
        returns, in every server process."""
        limits = token_limits.changes(changes)
        token = None
        if lease_uuid(token_id) is not None and could_exist(validation.NAME_PATTERN, namespace):
            token = await self.store.update_token_limits(namespace, token_id, limits)
        if token is None:
            raise NotFoundError(f"token {token_id!r} does not exist", token_id=token_id)
        return token

    async def count_request(self, principal: Principal, kind: token_limits.Kind) -> float | None:
        """Count a request of ``kind`` of a token that has a limit of that kind, in every
        process at once: None when allowed, else the seconds until it may be retried."""
        if principal.namespace is None or principal.token_id is None:
            return None
        return await self.store.hit_token_rate(principal.namespace, principal.token_id, kind)

    async def issue_access_key(
        self,
        namespace: str,
        label: str = "",
        expires_at: datetime | None = None,
        *,
        read_rate: float | None = None,
        write_rate: float | None = None,
    ) -> IssuedToken:
        """Issue an SQS access key (a token that signs requests: docs/sqs.md), with its own rate
        limits if given; its secret access key is returned now and never again, and stored only
        sealed."""
        limits = token_limits.changes({"read_rate": read_rate, "write_rate": write_rate})
        if self.sealer is None:
            raise UnavailableError(
                "SQS access keys need a sealing secret: set SUNDIAL_SQS_SEALING_KEY (or an admin"
                " token) in the server's and this command's environment"
            )
        await self._require_namespace(namespace)
        validation.text("label", label, 200)
        if expires_at is not None:
            validation.timestamp("expires_at", expires_at)
        access_key_id = ACCESS_KEY_PREFIX + base64.b32encode(secrets.token_bytes(10)).decode()
        secret = secrets.token_urlsafe(30)  # 40 characters, as AWS's secret access keys
        token = await self.store.insert_token(
            namespace,
            str(uuid.uuid4()),
            label,
            hash_secret(secret),
            expires_at,
            (access_key_id, self.sealer.seal(access_key_id, secret)),
            limits=limits,
        )
        return IssuedToken(token=token, secret=secret)

    async def access_key_secret(self, access_key_id: str) -> tuple[Principal, str] | None:
        """Who an SQS access key is, and its secret (to check a request's signature); None for
        a key that does not exist, has expired or was revoked."""
        if self.sealer is None or not is_access_key_id(access_key_id):
            return None
        key = await self.store.find_access_key(access_key_id)
        if key is None:
            return None
        secret = self.sealer.open(access_key_id, key.sealed_secret)
        if secret is None:  # sealed under another sealing secret
            return None
        return _principal(key.token), secret

    async def list_tokens(self, namespace: str) -> list[Token]:
        """A namespace's tokens, without secrets."""
        await self._require_namespace(namespace)
        return await self.store.list_tokens(namespace)

    async def revoke_token(self, namespace: str, token_id: str) -> None:
        """Revoke a token; it stops working at once."""
        if (
            lease_uuid(token_id) is None
            or not could_exist(validation.NAME_PATTERN, namespace)
            or not await self.store.delete_token(namespace, token_id)
        ):
            raise NotFoundError(f"token {token_id!r} does not exist", token_id=token_id)
