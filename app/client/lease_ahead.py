"""How many messages a worker asks for in its next turn (:class:`LeaseAhead`).

A worker holds at most ``concurrency + ahead`` messages: one per handler, and ``ahead`` leased
ahead of free handlers. ``ahead`` grows by the handlers that went idle for want of a message
since the last answer (up to ``prefetch``): handlers that finish faster than a request's round
trip would otherwise sit idle until the answer comes. It shrinks by the messages leased ahead
that are still waiting when an answer comes: slow handlers never need them, and a message that
waits holds its lease (and has counted its attempt) for nothing.
"""

from __future__ import annotations


class LeaseAhead:
    """The lease-ahead policy of one worker."""

    def __init__(self, concurrency: int, prefetch: int) -> None:
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.ahead = 0
        """Messages leased ahead of free handlers now (0 to ``prefetch``)."""
        self._went_idle = 0

    def wanted(self, *, running: int, waiting: int, asked: int) -> int:
        """How many messages to ask for now, given the handlers ``running``, the messages
        ``waiting`` for one and those ``asked`` for by requests on their way: none while those
        still cover more than half of the most the worker holds (a small refill would cost a
        request of its own), unless a handler is idle and nothing is on its way."""
        most = self.concurrency + self.ahead
        wanted = most - running - waiting - asked
        starving = not waiting and not asked and running < self.concurrency
        return wanted if starving or 2 * wanted >= most else 0

    def handler_idle(self) -> None:
        """A handler ended and no message was waiting for it."""
        self._went_idle += 1

    def answered(self, *, waiting: int, full: bool) -> None:
        """A leasing request was answered, with as many messages as it asked for (``full``)
        or fewer; ``waiting`` messages leased earlier still wait for a handler."""
        if waiting:
            self.ahead = max(0, self.ahead - waiting)
        elif full:  # a short answer means the queue ran dry, not that handlers were idle
            self.ahead = min(self.prefetch, self.ahead + self._went_idle)
        self._went_idle = 0
