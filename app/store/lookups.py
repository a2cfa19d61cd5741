"""Recently read tokens and queues, so that a request does not read them again.

Every API request authenticates a token and looks up its queue before it does its work: two
statements, each a round trip and most of a millisecond of CPU, in front of the one that matters.
This cache keeps what those lookups found, each with the catalogue version it was read at.

Coherence does not rest on the cache (see :mod:`app.core.catalogue`): a request that uses an
entry relies on its version, and its statements apply nothing once the catalogue has moved on.
The cache only keeps what may still be useful:

- all its entries share one version, the newest it has seen: a read that finds a newer one
  empties it, a read older than it is not kept;
- a change made through this process empties it at once, so this process's own next request
  does not trip over the change;
- an entry lives at most ``ttl`` seconds (``SUNDIAL_LOOKUP_CACHE_SECONDS``; 0 turns the cache
  off), so the memory of what nobody uses is returned;
- only what was found is kept: an unknown token or queue is asked for every time, so a client
  guessing secrets cannot fill the cache, and a queue created elsewhere is usable at once.

Message state is never cached; every guarantee about messages rests on the statements of
:mod:`app.store.sql` alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from cachetools import TTLCache

from app.core.models import AccessKey, Queue, Token

MAX_ENTRIES = 10_000
"""Entries of each kind; the least recently used go first beyond this."""


class LookupCache:
    """Tokens by secret hash and queues by (namespace, name), all of one catalogue version."""

    def __init__(
        self,
        ttl: float,
        max_entries: int = MAX_ENTRIES,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.version = 0
        """The catalogue version every entry was read at."""
        self._tokens: TTLCache[bytes, Token] | None = None
        self._queues: TTLCache[tuple[str, str], Queue] | None = None
        self._access_keys: TTLCache[str, AccessKey] | None = None
        if ttl > 0:
            self._tokens = TTLCache(max_entries, ttl, timer=timer)
            self._queues = TTLCache(max_entries, ttl, timer=timer)
            self._access_keys = TTLCache(max_entries, ttl, timer=timer)

    @property
    def enabled(self) -> bool:
        """Whether anything is kept at all."""
        return self._tokens is not None

    def token(self, secret_hash: bytes) -> Token | None:
        """The cached token with this secret hash, or None."""
        return self._tokens.get(secret_hash) if self._tokens is not None else None

    def remember_token(self, secret_hash: bytes, token: Token, version: int) -> None:
        """Keep a token read at catalogue ``version``."""
        if self._tokens is not None and self._adopt(version):
            self._tokens[secret_hash] = token

    def access_key(self, access_key_id: str) -> AccessKey | None:
        """The cached SQS access key with this id, or None."""
        keys = self._access_keys
        return keys.get(access_key_id) if keys is not None else None

    def remember_access_key(self, key: AccessKey, version: int) -> None:
        """Keep an SQS access key read at catalogue ``version``."""
        access_key_id = key.token.access_key_id
        if self._access_keys is not None and access_key_id and self._adopt(version):
            self._access_keys[access_key_id] = key

    def queue(self, namespace: str, name: str) -> Queue | None:
        """The cached queue, or None."""
        return self._queues.get((namespace, name)) if self._queues is not None else None

    def remember_queue(self, queue: Queue) -> None:
        """Keep a queue read at its ``catalogue_version``."""
        version = queue.catalogue_version
        if self._queues is not None and version is not None and self._adopt(version):
            self._queues[(queue.namespace, queue.name)] = queue

    def forget_all(self) -> None:
        """Drop every entry: something they may describe has changed."""
        if self._tokens is not None:
            self._tokens.clear()
        if self._queues is not None:
            self._queues.clear()
        if self._access_keys is not None:
            self._access_keys.clear()

    def _adopt(self, version: int) -> bool:
        """Whether an entry read at ``version`` may be kept; a newer version empties the cache."""
        if version > self.version:
            self.forget_all()
            self.version = version
        return version == self.version
