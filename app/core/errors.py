"""Errors the queue core raises. Edges map them to their own vocabulary (HTTP codes live in
``app/web/errors.py``; the CLI prints them).

::

    SundialError
    ├── ValidationError        bad input; names the field
    ├── NotFoundError          namespace, queue, token or message does not exist
    ├── ConflictError          already exists, or an immutable field would change
    ├── LeaseMismatchError     the lease_id is not the current lease, or the lease expired
    ├── InvalidStateError      the message's state does not allow the operation
    ├── QueuePausedError       enqueue while enqueue_paused
    ├── PayloadTooLargeError   a payload over the configured limit
    ├── UnavailableError       the database cannot be reached
    └── CatalogueChangedError  a token or queue the request looked up changed before its
                               statement ran (nothing applied: look up again and retry)
"""

from __future__ import annotations

from typing import Any


class SundialError(Exception):
    """Base of every error the core raises on purpose."""

    code = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details


class ValidationError(SundialError):
    """A request field is invalid. ``details['field']`` names it (e.g. ``messages[3].id``)."""

    code = "validation_error"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", field=field)
        self.field = field


class NotFoundError(SundialError):
    """The named thing does not exist (or is not visible to the caller)."""

    code = "not_found"


class ConflictError(SundialError):
    """The request conflicts with existing state."""

    code = "conflict"


class LeaseMismatchError(SundialError):
    """The lease_id is not the message's current lease, or the lease has expired."""

    code = "lease_mismatch"


class InvalidStateError(SundialError):
    """The message's state does not allow the operation."""

    code = "invalid_state"


class QueuePausedError(SundialError):
    """The queue refuses enqueues while ``enqueue_paused`` is set."""

    code = "queue_paused"


class PayloadTooLargeError(SundialError):
    """A payload is larger than the configured limit."""

    code = "payload_too_large"


class UnavailableError(SundialError):
    """The database cannot be reached; the client should retry later."""

    code = "unavailable"


class NamespaceMovingError(UnavailableError):
    """The namespace is moving to another pool and this pool no longer (or not yet) serves it
    (docs/scaling.md); the request is retried on the pool that holds it once the move is done,
    and a client sees this only when the move takes too long: a 503 to retry."""

    def __init__(self, namespace: str) -> None:
        super().__init__(
            f"namespace {namespace!r} is moving to another pool; retry", namespace=namespace
        )
        self.namespace = namespace


class CatalogueChangedError(UnavailableError):
    """A namespace, token or queue that the request looked up changed (or the caller's token
    expired) before the request's statement ran; the statement applied nothing.

    The service looks up again and runs the operation again (:mod:`app.core.catalogue`); only
    when that keeps failing does a client see it, as a 503 to retry.
    """

    def __init__(self) -> None:
        super().__init__("the server's configuration changed during this request; retry")
