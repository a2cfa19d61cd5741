"""Concurrent enqueues of one queue in one server process, written by one statement and one
commit (:class:`EnqueueCoalescer`).

A producer that sends one message per request pays a statement, a round trip and a durable
commit per message. When several such requests for the same queue arrive while one is being
written, they wait for it, then go together in the next statement: the first request of a quiet
queue is written at once (nothing waits on a timer), and a busy queue's requests share
statements and commits. Each request still gets its own answer, after the commit that wrote
its messages, exactly as if it had been written alone:

- requests are joined only when their statements would be the same: the same queue, the same
  catalogue guard (the same view of the catalogue, the same token expiry) and no message id in
  common (a repeated id must be reported ``created: false`` to the later request, which only a
  later statement can do); a joined statement holds at most :data:`MAX_JOINED_ROWS` messages;
- a joined statement that fails for a reason of its own rows (a value the database refuses)
  is written again request by request, so one request's bad value is no other's error; an
  error of the database or of the catalogue (unavailable, catalogue changed) is every joined
  request's, as it would have been alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core import catalogue
from app.core.errors import ValidationError
from app.core.models import EnqueueOutcome, Queue
from app.core.ports import NewRow

MAX_JOINED_ROWS = 1000
"""Most messages in one joined statement (the most one request may send)."""

Write = Callable[[Queue, Sequence[NewRow], dict[str, Any]], Awaitable[list[EnqueueOutcome]]]
"""Writes rows of a queue in one statement carrying a catalogue guard; their outcomes, in
order."""


@dataclass(slots=True, eq=False)
class _Request:
    queue: Queue
    rows: Sequence[NewRow]
    guard: dict[str, Any]
    done: asyncio.Future[list[EnqueueOutcome]]


@dataclass(slots=True)
class _Line:
    """The requests of one key: those waiting, and whether a writer is draining them."""

    waiting: list[_Request] = field(default_factory=list)
    writing: bool = False


class EnqueueCoalescer:
    """Joins the concurrent enqueues of a process that may share a statement (see module)."""

    def __init__(self, write: Write) -> None:
        self._write = write
        self._lines: dict[Hashable, _Line] = {}
        self._writers: set[asyncio.Task[None]] = set()
        self.statements = 0
        """Statements written so far (for tests and measurements)."""

    async def enqueue(
        self, queue: Queue, rows: Sequence[NewRow], guard: dict[str, Any]
    ) -> list[EnqueueOutcome]:
        """Write ``rows`` of ``queue`` (whose statement carries ``guard``), alone or with
        other requests'; their outcomes, once committed."""
        key = (queue.id, queue.catalogue_version, tuple(sorted(guard.items())))
        line = self._lines.setdefault(key, _Line())
        request = _Request(queue, rows, guard, asyncio.get_running_loop().create_future())
        line.waiting.append(request)
        if not line.writing:
            line.writing = True
            # The writer is a task of its own: a request that goes away (its client left)
            # must not stop the statement that also carries the others.
            writer = asyncio.create_task(self._drain(key, line))
            self._writers.add(writer)
            writer.add_done_callback(self._writers.discard)
        outcomes = await asyncio.shield(request.done)
        view = catalogue.current_view()
        if view is not None and view.version is not None:
            view.checked = True  # the statement that wrote them carried this request's guard
        return outcomes

    async def _drain(self, key: Hashable, line: _Line) -> None:
        try:
            while line.waiting:
                joined = _take_joinable(line.waiting)
                await self._write_joined(joined)
        except BaseException:
            for request in line.waiting:
                request.done.cancel()
            line.waiting.clear()
            raise
        finally:
            line.writing = False
            if not line.waiting:
                self._lines.pop(key, None)

    async def _write_joined(self, joined: list[_Request]) -> None:
        rows = [row for request in joined for row in request.rows]
        self.statements += 1
        try:
            outcomes = await self._write(joined[0].queue, rows, joined[0].guard)
        except ValidationError as refused:
            if len(joined) == 1:
                _fail(joined, refused)
                return
            for request in joined:  # one request's refused value is no other's error
                await self._write_joined([request])
            return
        except Exception as error:  # noqa: BLE001 - the database's or the catalogue's: every request's, raised to each
            _fail(joined, error)
            return
        except BaseException:  # the writer is cancelled (shutdown): so are its requests
            for request in joined:
                request.done.cancel()
            raise
        start = 0
        for request in joined:
            end = start + len(request.rows)
            if not request.done.done():
                request.done.set_result(outcomes[start:end])
            start = end


def _take_joinable(waiting: list[_Request]) -> list[_Request]:
    """The waiting requests the next statement can carry, in arrival order (removed from
    ``waiting``): as many as fit in :data:`MAX_JOINED_ROWS`, none with an id another has."""
    joined: list[_Request] = []
    ids: set[str] = set()
    size = 0
    for request in list(waiting):
        request_ids = {row.id for row in request.rows}
        if joined and (size + len(request.rows) > MAX_JOINED_ROWS or ids & request_ids):
            continue
        joined.append(request)
        waiting.remove(request)
        ids |= request_ids
        size += len(request.rows)
    return joined


def _fail(joined: list[_Request], error: BaseException) -> None:
    for request in joined:
        if not request.done.done():
            request.done.set_exception(error)
