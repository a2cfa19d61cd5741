"""Sealing the secrets the server must be able to read back: an SQS access key's secret, which
Signature Version 4 needs in full to check a signature (a hash would not do).

A secret is sealed with AES-256-GCM under a key derived from the server's sealing secret
(``SUNDIAL_SQS_SEALING_KEY``, else the admin token: docs/sqs.md), which the database never
holds. The access key id is the associated data, so a sealed secret cannot be moved to another
key's row.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_NONCE_BYTES = 12
_LABEL = b"sundial sqs access key secrets"


class Sealer:
    """Seals and opens secrets with one key."""

    def __init__(self, sealing_secret: str) -> None:
        key = hmac.new(sealing_secret.encode(), _LABEL, hashlib.sha256).digest()
        self._aead = AESGCM(key)

    def seal(self, access_key_id: str, secret: str) -> bytes:
        """The sealed form of ``secret`` (a fresh nonce, then the ciphertext and its tag)."""
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, secret.encode(), access_key_id.encode())

    def open(self, access_key_id: str, sealed: bytes) -> str | None:
        """The secret, or None when it was sealed under another key (or for another id)."""
        nonce, ciphertext = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
        try:
            return self._aead.decrypt(nonce, ciphertext, access_key_id.encode()).decode()
        except InvalidTag:
            return None
