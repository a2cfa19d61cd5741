"""What a request knows of the catalogue (namespaces, tokens, queues), and how it stays true.

The rule: a change to a token, namespace or queue (revoke, delete, recreate, configure, pause)
applies to every request sent after its answer, in every worker of every server on the database.

A server process keeps the tokens and queues it read in memory (:mod:`app.store.lookups`), so
that a request does not read them again. What keeps those lookups true is not a time to live
but the database: every change to the catalogue counts its *version* up (a trigger), and every
statement a request runs carries the version its lookups were read at. A statement whose
version is no longer current, or whose caller's token has expired by the database's clock,
applies nothing and fails with :class:`~app.core.errors.CatalogueChangedError`; the service
then has the caller authenticated again (:func:`renew`), looks the queue up again and runs the
operation again (:mod:`app.core.service.catalogue_retry`). The check is folded into the hot
statements themselves, so it costs no round trip (docs/adr/0011-catalogue-version.md).

A :class:`RequestView` is one request's record of that: the version its lookups share, when its
token expires, whether a statement of the request has checked them yet, and how to authenticate
the caller again. It lives in a context variable: every request runs in a task of its own, so
each has its own view. Only the HTTP API opens one (:func:`open_view`); outside a view (the
CLI, the dashboard, background tasks) nothing is served from memory, every lookup is read
afresh, and its version still guards the statements that use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime

from app.core.errors import CatalogueChangedError

ATTEMPTS = 3
"""How often an operation runs before a catalogue that keeps changing under it is the
client's to retry (a 503)."""


@dataclass(slots=True)
class RequestView:
    """The lookups one request relies on."""

    renew: Callable[[], Awaitable[None]] | None = None
    """Authenticates the caller again (the edge's rule), after the catalogue changed."""
    version: int | None = None
    """The catalogue version of every lookup this request used; None before the first."""
    valid_until: datetime | None = None
    """When the caller's token expires (None: never, or not a token)."""
    checked: bool = False
    """Whether the lookups are known current at some moment after the request arrived: read
    from the database during it, or confirmed by one of its statements."""

    def rely_on(self, version: int, *, fresh: bool, valid_until: datetime | None = None) -> None:
        """Record a lookup at ``version``: ``fresh`` when read from the database just now.

        Raises:
            CatalogueChangedError: the request already relies on another version.
        """
        if self.version is None:
            self.version = version
        elif self.version != version:
            raise CatalogueChangedError()
        # Read during this request at the same version: every lookup was current then.
        self.checked = self.checked or fresh
        if valid_until is not None and (self.valid_until is None or valid_until < self.valid_until):
            self.valid_until = valid_until


_view: ContextVar[RequestView | None] = ContextVar("sundial_request_view", default=None)


def open_view(renew: Callable[[], Awaitable[None]]) -> RequestView:
    """Start the current request's view (the HTTP API, before it authenticates the caller)."""
    view = RequestView(renew)
    _view.set(view)
    return view


def current_view() -> RequestView | None:
    """The current request's view, or None outside one."""
    return _view.get()


def guard(version: int | None) -> tuple[int | None, datetime | None]:
    """The ``(catalogue version, token valid until)`` that a statement about a lookup read at
    ``version`` must find current (None: unchecked), recorded in the request's view. Once a
    statement of the request has confirmed its lookups, later ones need not (see :func:`recheck`).

    Raises:
        CatalogueChangedError: the request's other lookups were read at another version.
    """
    view = _view.get()
    if view is None:
        return version, None
    if version is not None:
        view.rely_on(version, fresh=False)
    if view.checked:
        # Confirmed current after the request arrived: its answer may rest on them from then
        # on, and a request of several statements never trips over a change between them.
        return None, None
    return view.version, view.valid_until


def recheck() -> None:
    """The request's next statement is a new moment that its lookups must be current at (a long
    poll's claim after it waited)."""
    view = _view.get()
    if view is not None:
        view.checked = False


def unchecked_view() -> RequestView | None:
    """The current view if some lookup of it has not yet been confirmed current, else None."""
    view = _view.get()
    return view if view is not None and view.version is not None and not view.checked else None


async def renew() -> None:
    """Forget what the current request looked up and authenticate its caller again."""
    view = _view.get()
    if view is None:
        return
    view.version, view.valid_until, view.checked = None, None, False
    if view.renew is not None:
        await view.renew()
