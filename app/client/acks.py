"""The worker's completions, coalesced into batch acknowledgements (``POST …/ack``).

One acknowledgement is in flight at a time, and it carries every completion that arrived while
the previous one was on its way: a busy worker sends one request for many messages, an idle one
sends each completion at once. Nothing waits on a timer, so coalescing adds no latency; it only
takes what queued up anyway.

At-least-once is unchanged: a message is offered here only after its handler returned, and its
caller learns the outcome of its own item (completed, or refused because the lease was lost)
only once the server has answered. If the worker dies before the answer, the lease expires and
the message is delivered again. A batch that only completes is safe to send again, so the
client's retries apply to it as to a single complete.
"""

from __future__ import annotations

import asyncio

from app.client.async_client import AsyncClient
from app.client.models import AckResult

_Pending = tuple[str, str, "asyncio.Future[AckResult]"]

MAX_ACK_BATCH = 100
"""Most completions in one acknowledgement (the server takes up to 1,000)."""


class Completions:
    """Completes messages of ``queue`` through ``client``, many per request when they pile up."""

    def __init__(self, client: AsyncClient, queue: str, max_batch: int = MAX_ACK_BATCH) -> None:
        self._client = client
        self._queue = queue
        self._max_batch = max_batch
        self._pending: list[_Pending] = []
        self._sender: asyncio.Task[None] | None = None
        self.requests = 0
        """Acknowledgements sent so far (for tests and stats)."""

    async def complete(self, message_id: str, lease_id: str) -> AckResult:
        """Complete one message; its own item's outcome, once the server has answered.

        Raises:
            Whatever the acknowledgement request raised (a transport error, an API error): the
            outcome of the item is then unknown, as with a single complete.
        """
        done: asyncio.Future[AckResult] = asyncio.get_running_loop().create_future()
        self._pending.append((message_id, lease_id, done))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_all(), name="sundial-acks")
        return await done

    async def _send_all(self) -> None:
        """Send what is pending, a batch at a time, until nothing is."""
        while self._pending:
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
            self.requests += 1
            try:
                results = await self._client.ack(
                    self._queue, complete=[(i, lease) for i, lease, _ in batch]
                )
            except Exception as error:  # noqa: BLE001 - handed to every waiter of the batch
                for *_, done in batch:
                    if not done.done():
                        done.set_exception(error)
                continue
            for (*_, done), result in zip(batch, results, strict=True):
                if not done.done():
                    done.set_result(result)
