"""Concurrent one-request operations of one queue in one server process, written by one
statement and one commit (:class:`StatementJoiner`): enqueues, completes and claims.

A producer that sends one message per request, or a consumer that leases or completes one
message per request, pays a statement, a round trip and a durable commit per message. When
several such requests for the same queue arrive while one is being written, they wait for it,
then go together in the next statement: the first request of a quiet queue is written at once
(nothing waits on a timer), and a busy queue's requests share statements and commits. Each
request still gets its own answer, after the commit that wrote it, exactly as if it had been
written alone:

- requests are joined only when their statements would be the same: the same queue, the same
  catalogue guard (the same view of the catalogue, the same token expiry), the same variant
  (a claim's lease and metadata filter) and no message id in common (a repeated id must be
  reported ``created: false`` to the later request, and a repeated complete answered as such,
  which only a later statement can do); a joined statement holds at most
  :data:`MAX_JOINED_ITEMS` items (a claim: 100 messages);
- a joined claim hands the best messages to the request that asked first;
- a joined statement that fails for a reason of its own rows (a value the database refuses)
  is written again request by request, so one request's bad value is no other's error; an
  error of the database or of the catalogue (unavailable, catalogue changed) is every joined
  request's, as it would have been alone;
- the statement is written by a task of its own: a request whose client goes away does not
  stop the statement that also carries the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from app.core import catalogue
from app.core.errors import ValidationError
from app.core.models import Queue

MAX_JOINED_ITEMS = 1000
"""Most items (messages) in one joined statement (the most one request may send)."""

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(slots=True, eq=False)
class _Request(Generic[Item, Result]):
    queue: Queue
    items: Sequence[Item]
    guard: dict[str, Any]
    done: asyncio.Future[list[Result]]


@dataclass(slots=True)
class _Line(Generic[Item, Result]):
    """The requests of one key: those waiting, and whether a writer is draining them."""

    waiting: list[_Request[Item, Result]] = field(default_factory=list)
    writing: bool = False


class StatementJoiner(Generic[Item, Result]):
    """Joins the concurrent requests of a process that may share a statement (see module).

    Args:
        write: writes a queue's items in one statement carrying a catalogue guard; a result
            per item, in order.
        item_id: the message id an item is about (requests sharing one are not joined); None
            when items name no message (a claim's).
        max_items: most items in one statement.
    """

    def __init__(
        self,
        write: Callable[[Queue, Sequence[Item], dict[str, Any]], Awaitable[list[Result]]],
        item_id: Callable[[Item], str] | None = None,
        max_items: int = MAX_JOINED_ITEMS,
    ) -> None:
        self._write = write
        self._item_id = item_id
        self._max_items = max_items
        self._lines: dict[Hashable, _Line[Item, Result]] = {}
        self._writers: set[asyncio.Task[None]] = set()
        self.statements = 0
        """Statements written so far (for tests and measurements)."""

    async def run(
        self,
        queue: Queue,
        items: Sequence[Item],
        guard: dict[str, Any],
        variant: Hashable = None,
    ) -> list[Result]:
        """Write ``items`` of ``queue`` (whose statement carries ``guard``; ``variant``: what
        else its statement depends on), alone or with other requests'; their results, once
        committed."""
        key = (queue.id, queue.catalogue_version, tuple(sorted(guard.items())), variant)
        line = self._lines.setdefault(key, _Line())
        request: _Request[Item, Result] = _Request(
            queue, items, guard, asyncio.get_running_loop().create_future()
        )
        line.waiting.append(request)
        if not line.writing:
            line.writing = True
            writer = asyncio.create_task(self._drain(key, line))
            self._writers.add(writer)
            writer.add_done_callback(self._writers.discard)
        results = await asyncio.shield(request.done)
        view = catalogue.current_view()
        if view is not None and view.version is not None:
            view.checked = True  # the statement that wrote them carried this request's guard
        return results

    async def _drain(self, key: Hashable, line: _Line[Item, Result]) -> None:
        try:
            while line.waiting:
                await self._write_joined(self._take_joinable(line.waiting))
        except BaseException:
            for request in line.waiting:
                request.done.cancel()
            line.waiting.clear()
            raise
        finally:
            line.writing = False
            if not line.waiting:
                self._lines.pop(key, None)

    def _take_joinable(self, waiting: list[_Request[Item, Result]]) -> list[_Request[Item, Result]]:
        """The waiting requests the next statement can carry, in arrival order (removed from
        ``waiting``): as many as fit in ``max_items``, none with an id another has."""
        joined: list[_Request[Item, Result]] = []
        ids: set[str] = set()
        size = 0
        for request in list(waiting):
            request_ids = (
                {self._item_id(item) for item in request.items} if self._item_id else set()
            )
            if joined and (size + len(request.items) > self._max_items or ids & request_ids):
                continue
            joined.append(request)
            waiting.remove(request)
            ids |= request_ids
            size += len(request.items)
        return joined

    async def _write_joined(self, joined: list[_Request[Item, Result]]) -> None:
        items = [item for request in joined for item in request.items]
        self.statements += 1
        try:
            results = await self._write(joined[0].queue, items, joined[0].guard)
        except ValidationError as refused:
            if len(joined) == 1:
                _fail(joined, refused)
                return
            for request in joined:  # one request's refused value is no other's error
                await self._write_joined([request])
            return
        except Exception as error:  # noqa: BLE001 - the database's or the catalogue's: each request's
            _fail(joined, error)
            return
        except BaseException:  # the writer is cancelled (shutdown): so are its requests
            for request in joined:
                request.done.cancel()
            raise
        start = 0
        for request in joined:
            end = start + len(request.items)
            if not request.done.done():
                request.done.set_result(results[start:end])
            start = end


def _fail(joined: Sequence[_Request[Any, Any]], error: BaseException) -> None:
    for request in joined:
        if not request.done.done():
            request.done.set_exception(error)
