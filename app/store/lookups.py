"""Recently read tokens and queues, so that a request does not read them again.

Every API request authenticates a token and looks up its queue before it does its work: two
statements, each a round trip and most of a millisecond of CPU, in front of the one that matters.
This cache keeps what those lookups found for ``ttl`` seconds.

Coherence:

- A change made through this process (revoking a token, deleting a namespace, changing,
  pausing or deleting a queue) empties the cache at once: this process never serves a stale
  entry after its own change.
- A change made through another process (another worker, another server, the CLI) is seen here
  within ``ttl`` seconds, when the entry expires (``SUNDIAL_LOOKUP_CACHE_SECONDS``, default 1 s;
  0 turns the cache off).
- Only what was found is kept: an unknown token or queue is asked for every time, so a client
  guessing secrets cannot fill the cache, and a queue created elsewhere is usable at once.
- A token that expires within ``ttl`` is not kept, so it never outlives its expiry here.

Message state is never cached; every guarantee about messages rests on the statements of
:mod:`app.store.queries` alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from cachetools import TTLCache

from app.core.models import Queue, Token

MAX_ENTRIES = 10_000
"""Entries of each kind; the least recently used go first beyond this."""


class LookupCache:
    """Tokens by secret hash and queues by (namespace, name), each for ``ttl`` seconds."""

    def __init__(
        self,
        ttl: float,
        max_entries: int = MAX_ENTRIES,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self._tokens: TTLCache[bytes, Token] | None = None
        self._queues: TTLCache[tuple[str, str], Queue] | None = None
        if ttl > 0:
            self._tokens = TTLCache(max_entries, ttl, timer=timer)
            self._queues = TTLCache(max_entries, ttl, timer=timer)

    def token(self, secret_hash: bytes) -> Token | None:
        """The cached token with this secret hash, or None."""
        return self._tokens.get(secret_hash) if self._tokens is not None else None

    def remember_token(self, secret_hash: bytes, token: Token) -> None:
        """Keep a token just read, unless it expires before the entry would."""
        if self._tokens is None:
            return
        if token.expires_at is not None and token.expires_at <= datetime.now(UTC) + timedelta(
            seconds=self.ttl
        ):
            return
        self._tokens[secret_hash] = token

    def queue(self, namespace: str, name: str) -> Queue | None:
        """The cached queue, or None."""
        return self._queues.get((namespace, name)) if self._queues is not None else None

    def remember_queue(self, queue: Queue) -> None:
        """Keep a queue just read."""
        if self._queues is not None:
            self._queues[(queue.namespace, queue.name)] = queue

    def forget_all(self) -> None:
        """Drop every entry: something they may describe has changed."""
        if self._tokens is not None:
            self._tokens.clear()
        if self._queues is not None:
            self._queues.clear()
