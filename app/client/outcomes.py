"""What a worker tells the server about one message: its handler returned (the completion goes in
the worker's next acknowledgement, after a reply where the message asks for one), raised (fail,
with the handler's error and retry delay), or was stopped unfinished at shutdown (release). A
refusal because the lease is no longer the message's is counted as ``lost``; nothing here raises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from app.client import reply
from app.client.async_client import AsyncClient
from app.client.errors import ApiError, InvalidState, LeaseMismatch, NotFound
from app.client.held import QueueOf
from app.client.models import AckResult, Leased, Message

MAX_ERROR_CHARS = 4000
"""Longest error text sent with a fail (the server keeps up to 4096)."""
RELEASE_ERROR = "released: worker shut down"
LEASE_LOST = frozenset({"lease_mismatch", "invalid_state", "not_found"})
"""Error codes of an acknowledgement item whose lease is no longer the message's."""

log = logging.getLogger("sundial.worker")


class Retry(Exception):
    """Raise from a handler to fail this attempt with a given retry delay (seconds)."""

    def __init__(self, delay_seconds: int, message: str = "retry requested") -> None:
        super().__init__(message)
        self.delay_seconds = delay_seconds


class Outcomes:
    """Reports each message's outcome on its queue (``queue_of``) and counts it with ``count``
    (``completed``, ``failed``, ``released`` or ``lost``)."""

    def __init__(self, client: AsyncClient, queue_of: QueueOf, count: Callable[..., None]) -> None:
        self._client = client
        self._queue_of = queue_of
        self._count = count

    def wants_reply(self, message: Leased) -> bool:
        """Whether ``message`` asks for its handler's result (a :meth:`Client.call`)."""
        return reply.reply_address(self._queue_of(message), message) is not None

    async def send_reply(self, message: Leased, result: Any) -> bool:
        """Send the handler's ``result`` where ``message`` asks; whether it was sent (if not,
        the message is not completed: its lease expires and it runs again)."""
        address = reply.reply_address(self._queue_of(message), message)
        if address is None:
            return True
        try:
            await self._client.enqueue_many(
                address, [reply.reply_message(message.id, result=result)]
            )
        except (httpx.TransportError, ApiError, TypeError) as error:
            log.error("could not reply to %s: %s", message.id, error)
            return False
        return True

    def acknowledged(self, messages: Sequence[Leased], results: Sequence[AckResult]) -> None:
        """Count what the server answered for the completions of ``messages``."""
        completed = 0
        for message, outcome in zip(messages, results, strict=True):
            if outcome.ok:
                completed += 1
            elif outcome.error in LEASE_LOST:
                self._count(lost=1)
                log.warning("result of %s refused: %s", message.id, outcome.error)
            else:
                log.error("could not complete %s: %s", message.id, outcome.error)
        if completed:
            self._count(completed=completed)

    @staticmethod
    def unacknowledged(messages: Sequence[Leased], error: BaseException) -> None:
        """The completions of ``messages`` may not have reached the server: their leases
        expire and the messages run again."""
        for message in messages:
            log.error("could not complete %s: %s", message.id, error)

    async def fail(self, message: Leased, error: BaseException) -> None:
        """The handler raised ``error``: fail the attempt (and reply if it was the last)."""
        text = f"{type(error).__name__}: {error}"[:MAX_ERROR_CHARS]
        delay = error.delay_seconds if isinstance(error, Retry) else None
        log.info("handler failed on %s (attempt %d): %s", message.id, message.attempt, text)
        try:
            queue = self._queue_of(message)
            failed: Message = await self._client.fail(
                queue, message.id, message.lease_id, text, retry_delay_seconds=delay
            )
            self._count(failed=1)
            address = reply.reply_address(queue, message)
            if failed.state == "errored" and address is not None:
                reply_to = [reply.reply_message(message.id, error=text)]
                await self._client.enqueue_many(address, reply_to)
        except (LeaseMismatch, InvalidState, NotFound) as refused:
            self._count(lost=1)
            log.warning("failure of %s refused: %s", message.id, refused)
        except (httpx.TransportError, ApiError) as unsent:
            log.error("could not fail %s: %s", message.id, unsent)

    async def release(self, message: Leased) -> None:
        """Give an unfinished message back now rather than when its lease expires."""
        try:
            await self._client.fail(
                self._queue_of(message),
                message.id,
                message.lease_id,
                RELEASE_ERROR,
                retry_delay_seconds=0,
            )
            self._count(released=1)
        except (httpx.TransportError, ApiError) as error:
            log.warning("could not release %s (its lease will expire): %s", message.id, error)
